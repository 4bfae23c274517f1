"""`elicitron audit [--json] [--limit N] [--server S]`: the audit log, from the running main when
there is one, so the shell's own HOME, config or store never hide what main records (issue 37).

- A main runs for the connection file (--connection, ELICITRON_CONNECTION, the default): ask it
  (`msgAudit`); it reads its own store, SQLite or PostgreSQL alike.
- No main, or `--store` / `--config` named a store: read that store here. A SQLite audit log that
  does not exist is said so ("no audit log yet at PATH"), never created just to be read.

Both print the same rows the same way (`--json`: main_process/audit.py's to_json either way).
"""

import argparse
import sys

from cli_process.command import EXIT_USAGE, connection_of, main_may_run
from main_process.audit import format_entries, to_json
from shared.messages import MAX_AUDIT_ROWS, AuditEntry
from shared.terminal_text import for_terminal, json_for_terminal


def cmd_audit(args: argparse.Namespace) -> int:
    if not 1 <= args.limit <= MAX_AUDIT_ROWS:
        print(f"elicitron: --limit takes 1 to {MAX_AUDIT_ROWS}", file=sys.stderr)
        return EXIT_USAGE
    connection = connection_of(args)
    if not (args.store or args.config) and main_may_run(connection):
        from cli_process.controller import Controller

        with Controller(connection) as controller:
            return _print(controller.audit(args.limit, args.server), args.json)
    entries = _read_here(args)
    return 0 if entries is None else _print(entries, args.json)


def _read_here(args: argparse.Namespace) -> list[AuditEntry] | None:
    """The chosen store's rows, read here; None (and said so) when its SQLite file does not exist."""
    from cli_process.store_cli import read_audit, store_of
    from main_process.store.factory import default_audit_path, is_postgres

    url, _machine = store_of(args)
    if not is_postgres(url) and not (path := default_audit_path()).exists():
        note = f"no audit log yet at {for_terminal(str(path))}"
        if args.json:  # stdout stays JSON: an empty array, the reason on stderr
            print("[]")
            print(f"elicitron: {note}", file=sys.stderr)
        else:
            print(note)
        return None
    return read_audit(args)


def _print(entries: list[AuditEntry], as_json: bool) -> int:
    print(json_for_terminal(to_json(entries).decode()) if as_json else format_entries(entries))
    return 0
