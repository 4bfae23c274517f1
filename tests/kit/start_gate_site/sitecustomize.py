"""Test-only, loaded by the processes a test starts with this directory on PYTHONPATH
(tests/test_pair_web_wait.py): with ELICITRON_TEST_WEB_GATE naming a FIFO, a web window process
(`python -m web_process`) blocks before it runs until the test opens that FIFO for writing. So a
test holds main's web window child in "starting" for as long as it needs, with no sleep and no race.
Every other process (main itself, its servers) starts as usual.
"""

import os
import sys

_GATE = os.environ.get("ELICITRON_TEST_WEB_GATE")


def _is_web_window() -> bool:
    argv = sys.orig_argv
    return any(arg == "-m" and argv[i + 1:i + 2] == ["web_process"] for i, arg in enumerate(argv))


if _GATE and _is_web_window():
    with open(_GATE, "rb") as gate:  # blocks until the test opens the FIFO for writing
        gate.read()  # and until it closes it again
