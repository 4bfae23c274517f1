"""What every command shares: its exit codes and the connection file its arguments name (cli.py's
commands and rules_cli.py's alike), and whether a main may run for that file."""

import argparse
from pathlib import Path

from shared.connection_file import main_is_gone, read_connection_file, resolve_connection_path

EXIT_FAILED = 1
EXIT_USAGE = 2  # argparse's own code, also used for a bad config
EXIT_NOT_RUNNING = 3


def connection_of(args: argparse.Namespace) -> Path:
    """--connection, else $ELICITRON_CONNECTION, else the default (or the running main the locator names)."""
    return resolve_connection_path(args.connection)


def main_may_run(connection: Path) -> bool:
    """False only when no main can be running for this connection file (none, or its pid is gone)."""
    if not connection.exists():
        return False
    info = read_connection_file(connection)  # a file we cannot trust is an error, not "no main"
    return not main_is_gone(info)
