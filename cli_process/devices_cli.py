"""`elicitron devices [--json]` and `elicitron devices revoke NAME|ID`: the web window's paired devices.

They are files in the web window's directory on this machine (shared/web_devices.py reads them,
web_process/devices.py writes them), so no main needs to run. A revoke takes effect at once: the
web window checks the file within a second on every open page of the device, which then gets
nothing more, and the device's requests get 401 until it is paired again.
"""

import argparse
import json
import shlex
import sys
import time
from pathlib import Path

from shared.terminal_text import for_terminal, json_for_terminal, table_cell
from shared.web_devices import PairedDevice, read_paired_devices

NAME_WIDTH = 24


def add_devices_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("action", nargs="?", choices=["list", "revoke"], default="list")
    p.add_argument("device", nargs="?", metavar="NAME|ID", help="with revoke: the device's name (or its id)")
    p.add_argument("--json", action="store_true", help="machine-readable output (times in epoch seconds)")


def cmd_devices(args: argparse.Namespace) -> int:
    from cli_process.command import EXIT_USAGE

    if (args.action == "revoke") != (args.device is not None):
        print("elicitron: say which device: `elicitron devices revoke NAME` (`elicitron devices` lists them)"
              if args.action == "revoke" else "elicitron: a device name goes with `elicitron devices revoke NAME`",
              file=sys.stderr)
        return EXIT_USAGE
    if args.action == "revoke":
        return _revoke(args.web_dir, args.device)
    devices = read_paired_devices(args.web_dir)
    if args.json:
        print(json_for_terminal(json.dumps([{"id": d.id, "name": d.name, "pairedAt": d.paired_at,
                                             "lastSeen": d.last_seen} for d in devices])))
        return 0
    print("\n".join(device_lines(devices, with_ids=True)))
    return 0


def device_lines(devices: list[PairedDevice], *, with_ids: bool = False) -> list[str]:
    """`web devices (N):` and a line per device (name, paired, last seen), or one line saying none."""
    if not devices:
        return ["web devices: none paired (pair a browser: elicitron pair --web --name NAME)"]
    lines = [f"web devices ({len(devices)}):"]
    for device in devices:
        seen = _when(device.last_seen) if device.last_seen is not None else "never"
        line = f"  {table_cell(device.name, NAME_WIDTH):{NAME_WIDTH}} paired {_when(device.paired_at)}, last seen {seen}"
        lines.append(line + (f"  {for_terminal(device.id)}" if with_ids else ""))
    return lines


def _revoke(web_dir: Path | None, which: str) -> int:
    from web_process.devices import WebDir  # the writer, with its lock: only for this command

    for device in WebDir(web_dir).revoke(which):
        name = for_terminal(device.name)
        print(f"revoked {name} ({for_terminal(device.id)}): its open pages get nothing more; to use it again: "
              f"elicitron pair --web --name {shlex.quote(name)}")
    return 0


def _when(epoch_s: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M", time.localtime(epoch_s))

