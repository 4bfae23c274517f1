"""`elicitron rules [--json]` and `elicitron rules revoke ID... | --all [--server S | --asker NAME]`.

Through the running main when there is one (it knows this session's rules and the config's, and a
revoke there takes effect before the next request and shows in every window at once). main owns
the rule store while it runs (main_process/store/owner.py): when this shell's connection file names no running
main but another main owns the store, the command goes through that one (and says so), or fails
with exit 1 and the connection file to use; it never changes the store behind a running main's
back, which would print "revoked" while that main went on applying the rule. With no main running
at all, the store is read and changed directly (it says so): only remembered rules live there,
and the next main starts from what is left. A PostgreSQL store (--store, ELICITRON_STORE or the
config's) is only listed so: mains on other machines may share it, so a revoke goes through a main.
"""

import argparse
import asyncio
import sys
import time
from pathlib import Path

import msgspec

from cli_process.command import EXIT_FAILED, EXIT_USAGE, connection_of, main_may_run
from cli_process.store_cli import store_of
from main_process.consent.rules import CONFIG_ID_PREFIX
from main_process.store.factory import default_audit_path, is_postgres, open_store
from main_process.store.interface import RuleTable
from main_process.store.owner import Owner, StoreLock, hold_or_owner
from main_process.store.sqlite_rules import path_beside
from main_process.store.url import redact
from shared.errors import ConnectionFileError, MainUnreachableError
from shared.messages import RevokeReport, RuleInfo
from shared.rule_text import describe, scope_text, when, who
from shared.terminal_text import for_terminal, json_for_terminal, table_cell


def cmd_rules(args: argparse.Namespace) -> int:
    if args.action == "list" and (args.ids or args.all or args.server or args.asker):
        print("elicitron: IDs, --all, --server and --asker go with `elicitron rules revoke`", file=sys.stderr)
        return EXIT_USAGE
    if args.action == "revoke":
        if bool(args.ids) == bool(args.all):
            print("elicitron: say which rules: `elicitron rules revoke ID...` or `--all [--server S | --asker NAME]`",
                  file=sys.stderr)
            return EXIT_USAGE
        if (args.server or args.asker) and not args.all:
            print("elicitron: --server and --asker go with --all", file=sys.stderr)
            return EXIT_USAGE
        if args.server and args.asker:
            print("elicitron: --server or --asker, not both (a server and a program are not the same)",
                  file=sys.stderr)
            return EXIT_USAGE
    connection = connection_of(args)
    if main_may_run(connection):  # then only main may change the store: it holds the rules in memory
        return _through_main(connection, args)
    url, _machine = store_of(args)
    if is_postgres(url):
        assert url is not None
        return asyncio.run(_in_shared_store(url, connection, args))
    store_path = path_beside(default_audit_path())
    lock = StoreLock(store_path)
    owner = hold_or_owner(lock)
    if owner is not None:
        return _through_owner(owner, connection, store_path, args)
    try:
        return asyncio.run(_in_store(store_path, args))
    finally:
        lock.release()


def _through_main(connection: Path, args: argparse.Namespace) -> int:
    from cli_process.controller import Controller

    with Controller(connection) as controller:
        if args.action == "list":
            return _print_rules(controller.rules(), args.json, note=None)
        return _print_revoked(controller.revoke_rules(args.ids, args.all, args.server, args.asker), args.json)


def _through_owner(owner: Owner, connection: Path, store_path: Path, args: argparse.Namespace) -> int:
    """No main for this shell's connection file, but one owns the rule store: go through it."""
    print(f"elicitron: no main runs for {connection}, but main (pid {owner.pid}) uses the rule store "
          f"{store_path}: going through it ({owner.connection})", file=sys.stderr)
    try:
        return _through_main(owner.connection, args)
    except (MainUnreachableError, ConnectionFileError) as exc:
        print(f"elicitron: nothing {'revoked' if args.action == 'revoke' else 'listed'}: main (pid {owner.pid}) "
              f"holds the rule store but does not answer ({exc}); try `elicitron rules --connection "
              f"{owner.connection}`", file=sys.stderr)
        return EXIT_FAILED


async def _in_store(store_path: Path, args: argparse.Namespace) -> int:
    """No main running at all: read and change the store itself (the CLI holds its lock meanwhile)."""
    store = open_store(None)  # the SQLite store (a PostgreSQL one: _in_shared_store)
    try:
        return await _change_rules(store.rules, store_path, args)
    finally:
        await store.close()


async def _in_shared_store(url: str, connection: Path, args: argparse.Namespace) -> int:
    """No main for this connection file, and the store is PostgreSQL: list its rules, but revoke
    only through a main. Other mains (other machines) may share the store, each holding its rules
    in memory: a rule deleted behind their backs would go on being applied while this said
    "revoked" (issue 35's later work: revoking anywhere revokes everywhere)."""
    if args.action == "revoke":
        print(f"elicitron: nothing revoked: no main runs for {connection}, and mains on other machines may "
              f"share the store {redact(url)}; revoke through a running main (`elicitron rules revoke "
              "--connection FILE`)", file=sys.stderr)
        return EXIT_FAILED
    store = open_store(url)
    try:
        return await _change_rules(store.rules, redact(url), args)
    finally:
        await store.close()


async def _change_rules(store: RuleTable, store_path: Path | str, args: argparse.Namespace) -> int:
    now = time.time_ns() // 1_000_000
    rules = await store.load(now)
    if args.action == "list":
        note = (f"main is not running: showing the remembered rules in {store_path} "
                "(config rules and this-session rules apply only while main runs)")
        return _print_rules([rule.info() for rule in rules], args.json, note=note)
    known = {rule.id: rule for rule in rules}
    if args.all:
        targets = [rule_id for rule_id, rule in known.items() if rule.of(args.server, args.asker)]
        refused = []
    else:
        targets = [rule_id for rule_id in args.ids if rule_id in known]
        refused = [f"{rule_id}: a config rule; edit the config file" if rule_id.startswith(CONFIG_ID_PREFIX)
                   else f"{rule_id}: no such rule" for rule_id in args.ids if rule_id not in known]
    if targets and not await store.remove(targets):
        refused.append(f"{', '.join(targets)}: the rule store {store_path} could not be changed")
        targets = []
    if targets:
        print(f"elicitron: main is not running: removed from the rule store {store_path}; the next main "
              "starts without them", file=sys.stderr)
    return _print_revoked(RevokeReport(revoked=targets, refused=refused), args.json)


def _print_rules(rules: list[RuleInfo], as_json: bool, note: str | None) -> int:
    if note is not None:
        print(f"elicitron: {note}", file=sys.stderr)
    if as_json:
        print(json_for_terminal(msgspec.json.encode(rules).decode()))
    else:
        print(format_rules(rules))
    return 0


def _print_revoked(report: RevokeReport, as_json: bool) -> int:
    if as_json:
        print(json_for_terminal(msgspec.json.encode(report).decode()))
    else:
        for rule_id in report.revoked:
            print(f"revoked {for_terminal(rule_id)}")
        if not report.revoked and not report.refused:
            print("no rules to revoke")
    for problem in report.refused:
        print(f"elicitron: not revoked: {for_terminal(problem)}", file=sys.stderr)
    return EXIT_FAILED if report.refused else 0


def format_rules(rules: list[RuleInfo]) -> str:
    """A plain-text table, one line per rule (text from servers made safe for a terminal)."""
    if not rules:
        return "no rules: every request is asked in a window"
    header = ("ID", "FROM", "RULE", "SCOPE", "MADE BY", "MADE")
    rows = [header]
    for rule in rules:
        rows.append((table_cell(rule.id, 40), table_cell(who(rule), 28), table_cell(describe(rule), 110),
                     table_cell(scope_text(rule), 40), table_cell(rule.created_by, 40), when(rule.created_at)))
    widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
    return "\n".join("  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip()
                     for row in rows)
