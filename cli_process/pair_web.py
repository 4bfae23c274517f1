"""`elicitron pair --web`: a one-time code for the running web window, as the link that redeems it
and, on a terminal (or with --qr), its QR code for a phone's camera. Without --name the browser is
named as it pairs, after whoever ran this and the browser itself (`ana's Chrome on Android`).

Right after `elicitron main --web ADDR`, main's own web window may still be starting (it has not
announced itself in its web dir yet). pair then waits for it, asking main's status, for as long as
main says that child is starting (at most WAIT_FOR_START_S), and fails with the usual "no web window
is running" line at once when no web window is coming: no main, a main without --web, a child that
failed.
"""

import argparse
import sys
import time
from pathlib import Path

from cli_process.command import connection_of
from cli_process.controller import Controller
from shared.errors import MainUnreachableError, WebWindowNotRunningError
from shared.messages import WebWindowStatus
from shared.person import person
from web_process.devices import CODE_LIFETIME_S, WebDir

WAIT_FOR_START_S = 20.0  # a child starts in a few seconds; on a loaded machine, more
POLL_S = 0.1
COMING = ("starting", "restarting")  # the child main supervises is on its way (again)


def pair_web(args: argparse.Namespace) -> int:
    web_dir = WebDir(args.web_dir)
    url = running_url(web_dir, connection_of(args))
    code = web_dir.new_code(args.name, person=person())  # no name: the browser's, as it pairs
    link = f"{url}/pair#{code}"
    print(link)
    if args.qr or sys.stdout.isatty():  # piped, stdout is the link alone
        from web_process.qr import terminal_qr

        print(terminal_qr(link), end="", flush=True)
    if sys.stdout.isatty():
        print(f"elicitron: open this link in the browser (or scan the code) to pair within "
              f"{CODE_LIFETIME_S / 60:.0f} minutes; it works once", file=sys.stderr)
    return 0


def running_url(web_dir: WebDir, connection: Path, timeout_s: float = WAIT_FOR_START_S) -> str:
    """The running web window's URL, waiting while main says its web window is starting;
    WebWindowNotRunningError when none runs and none is coming (or it did not start in time)."""
    try:
        return web_dir.running_url()
    except WebWindowNotRunningError as exc:
        none_now = exc
    deadline = time.monotonic() + timeout_s
    try:
        with Controller(connection, name="elicitron-pair") as controller:
            while True:
                child = controller.status().web_window
                try:
                    return web_dir.running_url()  # after the status: a child that is listening has announced
                except WebWindowNotRunningError:
                    pass
                if child is None or child.state not in COMING:
                    raise _not_coming(none_now, child) from None
                if time.monotonic() >= deadline:
                    raise WebWindowNotRunningError(
                        f"no web window is running: main's web window on {child.address} did not start within "
                        f"{timeout_s:.0f} s (it is {child.state}); see `elicitron status`") from None
                time.sleep(POLL_S)  # main pushes no event for it: ask again shortly
    except MainUnreachableError:  # no main (or it stopped meanwhile): no web window of its is coming
        raise none_now from None


def _not_coming(none_now: WebWindowNotRunningError, child: WebWindowStatus | None) -> WebWindowNotRunningError:
    """The error to give once main says no web window of its is on its way."""
    if child is not None and child.state == "failed":
        return WebWindowNotRunningError(f"no web window is running: main's web window on {child.address} failed"
                                        f"{': ' + child.error if child.error else ''}; see `elicitron status`")
    return none_now
