"""Policy as code: Cedar policy files named in the config (`"elicitron": {"policies": [...]}`)
decide hosts' tool calls before any rule or card (issue 36, item 1).

- **The request** (schema.py): the principal is who calls (`Host::"<the name in its clientInfo>"`,
  a claim and not a proof; `Asker::"<program>"`), the action `callTool` or `elicit`, the resource
  `Tool::"<server>/<tool>"` in `Server::"<server>"`, the context the call's `arguments`, the tool's
  `annotations` (MCP's defaults filled in) and the `time`.
- **Loading** (source.py, load.py): each file is split into its policies (for positions) and
  validated against the schema with cedarpy; an error names file, line and column. A policy's id
  is its `@id` annotation, else `<file>:<line>`; its reason its `@reason`.
- **Deciding** (engine.py): `forbid` wins (denied, naming the policy), then `permit` (allowed
  with no card), else no match (today's flow: config rules, toolApproval, user rules, card). Only
  the policies whose scope can match, and whose `has` tests the call passes, are looked at
  (scope.py); plain ones are evaluated in Python (direct.py), the rest by Cedar with only the
  context they read: the decision is Cedar's either way.
- **Live** (live.py): main's current set; a reload with a bad file keeps the last good set and
  says why (`status`, the reload report). hook.py is what consent.py calls: a host's call
  (`callTool`) and a server's form question in a host's session (`elicit`: only a forbid decides).

cedarpy is imported only when a config names policies: `import main_process.app` stays light.
"""
