"""What every command shares: its exit codes and the connection file its arguments name (cli.py's
commands and rules_cli.py's alike)."""

import argparse
from pathlib import Path

from shared.connection_file import resolve_connection_path

EXIT_FAILED = 1
EXIT_USAGE = 2  # argparse's own code, also used for a bad config
EXIT_NOT_RUNNING = 3


def connection_of(args: argparse.Namespace) -> Path:
    """--connection, else $ELICITRON_CONNECTION, else the default (or the running main the locator names)."""
    return resolve_connection_path(args.connection)
