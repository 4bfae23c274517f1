"""Consent: what the person is asked and what they answered. Every request a window answers, the
rules and remembered answers that answer before any window, hosts' tool calls, and the audit rows.

pending.py           PendingRequests: the life of every request a window answers (one close path)
shared_requests.py   on a store many mains share: publish, claim, other mains' requests as copies
shared_lease.py      and this main's lease there: the heartbeat that renews it and clears handed-on values
elicitation_gate.py  ElicitationGate: what becomes of every elicitation first (rules, route, screening)
questions.py         QuestionDesk: programs' msgAsk, checked, perhaps answered by a rule, then opened
consent.py           Consent: rules and remembered answers before any window
rule_expiry.py       RuleExpiry: rules whose time passed, dropped on a timer or when a lookup meets one
rules.py             rules and what they match (pure); consent_config.py: their config keys, parsed strictly
grants.py            grants: what an approval's allow covers (arguments, how long, single use), pure
approvals.py         tool-call approval: which calls are asked, the request
denial.py            Denial: every denied call's result (the sentence, SEP-2643's `_meta` and ours)
tool_approval.py     ToolApproval: a host's tools/call in its relayed session: policy files (policy/),
                     config rules, toolApproval, user rules, then a card
long_wait.py         LongWaits: a host's call whose card takes longer than the host waits: progress, or
                     "still pending, retry" and the decision kept for the retry
audit_writer.py      when the audit rows reach the store
row_ids.py           RowIds: the ids of audit rows no window answers (no reply channel minted for them)
"""
