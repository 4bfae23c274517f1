"""The store as the CLI sees it: `--store URL` (main, audit), `elicitron audit` reading the store the
config names, and the `store:` line of `elicitron status`.

Which store: `--store`, else ELICITRON_STORE, else the config's `"elicitron": {"store": …}`
(main_process/store/factory.py: chosen_store); none is the SQLite store in the user data dir. A URL
is shown redacted (main_process/store/url.py), never with its password.
"""

import argparse
import asyncio
import os
from pathlib import Path
from typing import TYPE_CHECKING

from shared.terminal_text import for_terminal

if TYPE_CHECKING:
    from main_process.store.records import AuditEntry
    from shared.messages import StoreState

STORE_HELP = ("where rules and the audit log live: \"sqlite:\" (the default) or postgresql://USER@HOST:PORT/DB "
              "(password from PGPASSWORD, ~/.pgpass or the keyring rather than here: a command line is "
              "visible to other users); default $ELICITRON_STORE, else the config's elicitron.store")


def add_store_arguments(p: argparse.ArgumentParser, *, config: bool) -> None:
    p.add_argument("--store", metavar="URL", help=STORE_HELP)
    if config:
        p.add_argument("--config", type=Path, help="the config whose elicitron.store to read (default: user config dir)")


def store_of(args: argparse.Namespace) -> tuple[str | None, str | None]:
    """(the store URL this command uses, the config's `machine`): --store, ELICITRON_STORE, the config."""
    from main_process.store.factory import STORE_ENV, chosen_store

    if args.store or os.environ.get(STORE_ENV, "").strip():
        return chosen_store(args.store, None), None
    from main_process.config import load_config

    config = load_config(args.config)
    return chosen_store(None, config.store), config.machine


def read_audit(args: argparse.Namespace) -> "list[AuditEntry]":
    """`elicitron audit`: the newest rows of the chosen store (raises AuditLogError with why not)."""
    from main_process.store.factory import open_store

    url, machine = store_of(args)

    async def read() -> "list[AuditEntry]":
        store = open_store(url, machine=machine)
        try:
            return await store.audit.entries(limit=args.limit, server=args.server)
        finally:
            await store.close()

    return asyncio.run(read())


def store_lines(store: "StoreState") -> list[str]:
    """`store: PostgreSQL postgresql://ana:***@db/x (machine laptop): reachable`, or why not; then
    the mains on a shared store, one a line."""
    machine = f" (machine {for_terminal(store.machine)})" if store.machine else ""
    line = f"store: {store.kind} {for_terminal(store.location)}{machine}"
    if store.reachable is True:
        line += ": reachable"
    elif store.reachable is False:
        line += f": unreachable ({for_terminal(store.problem or 'no reason given')})"
    if store.waiting:
        line += f"; {store.waiting} write(s) of what was decided here wait for it"
    if store.kind == "SQLite":
        return [line]
    mains = [f"{for_terminal(m.machine)} (pid {m.pid})" for m in store.mains]
    return [line, f"mains on it ({len(mains)}): {', '.join(mains)}" if mains else "mains on it: none known now"]
