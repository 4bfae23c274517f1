"""Imported by every Python process `scripts/hops` starts (it is on their PYTHONPATH): each call of
a function in the product's packages, and each resume of one of their coroutines, is kept with its
time (CLOCK_MONOTONIC, one clock for every process) and written to $HOPS_OUT/<pid>.tsv at exit.
The MCP servers main runs are left out: they are the far end of a call, not Elicitron."""

import atexit
import os
import sys
import threading
import time

_OUT = os.environ.get("HOPS_OUT")
if _OUT and not any("demo_server" in arg for arg in sys.argv):
    _ROOT = os.environ["HOPS_ROOT"].rstrip("/") + "/"
    _PACKAGES = tuple(_ROOT + name + "/" for name in os.environ["HOPS_PACKAGES"].split(","))
    _events: list[tuple[int, str, str, int]] = []
    _keep = _events.append
    _now = time.monotonic_ns

    def _profile(frame, event, arg):  # type: ignore[no-untyped-def]
        if event == "call":  # (a coroutine's resume is a call too)
            path = frame.f_code.co_filename
            if path.startswith(_PACKAGES):
                _keep((_now(), path[len(_ROOT):], frame.f_code.co_name, threading.get_ident()))

    def _write() -> None:
        sys.setprofile(None)
        with open(os.path.join(_OUT, f"{os.getpid()}.tsv"), "w", encoding="utf-8") as out:
            out.write(" ".join(sys.argv) + "\n")
            out.writelines(f"{t}\t{path}\t{name}\t{thread}\n" for t, path, name, thread in _events)

    sys.setprofile(_profile)
    threading.setprofile(_profile)
    atexit.register(_write)
