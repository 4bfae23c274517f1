"""What `msgReload` tells the CLI it did: every change it applied, not only the servers it restarted.

A new `toolApproval` applies without restarting the server, so the server used to be listed as
`unchanged` though the change took effect (issue 37). Here a server is `changed` when it restarts,
`updated` when only its approval keys changed (applied in place), and the config-wide settings
that changed are named; a config file that replaces the embedded default says why the demo left.
"""

from main_process.config import Config, differs_beyond_approval
from shared.messages import ReloadReport

DEMO_LEFT = ("the embedded demo server runs only while there is no config file; {source} has none "
             "(`elicitron config import` keeps it in the file it writes unless --no-demo)")


def reload_report(before: Config, fresh: Config, policy_problem: str | None = None) -> ReloadReport:
    """`policy_problem`: why the policy files could not be used (the last good set stays in force)."""
    old = before.servers
    common = [name for name in fresh.servers if name in old]
    changed = [name for name in common if differs_beyond_approval(fresh.servers[name], old[name])]
    updated = [name for name in common if name not in changed and fresh.servers[name] != old[name]]
    settings = [what for what, differs in (("rules", fresh.rules != before.rules),
                                           ("notify", fresh.notify != before.notify),
                                           ("auditValues", fresh.audit_values != before.audit_values),
                                           # re-read at every reload: a file may have changed, not its name
                                           ("policies", bool(fresh.policies or before.policies)
                                            and policy_problem is None))
                if differs]
    notes = [f"policies: {policy_problem}"] if policy_problem else []
    if fresh.store != before.store:
        notes.append("the config's store changed: this main keeps the one it opened until it restarts")
    removed = [name for name in old if name not in fresh.servers]
    if before.path is None and "demo" in removed:  # the embedded default gave way to a file
        notes.append(f"demo: {DEMO_LEFT.format(source=fresh.source)}")
    return ReloadReport(added=[name for name in fresh.servers if name not in old], removed=removed, changed=changed,
                        unchanged=[name for name in common if name not in changed and name not in updated],
                        updated=updated, settings=settings, notes=notes)
