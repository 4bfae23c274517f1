"""Test-only, loaded by the processes a test starts with this directory on PYTHONPATH
(tests/kit/ebadf.py): with ELICITRON_TEST_EBADF_LOG set, an `os.close` of a descriptor that is
not open (EBADF) is said loudly on stderr and appended to that file, then raised as before. Such a
close is a descriptor closed twice: in a process with other threads (libzmq's I/O thread opens
descriptors of its own) the second close may as well have hit a number just handed to someone else.
"""

import errno
import os
import sys
import traceback

_LOG = os.environ.get("ELICITRON_TEST_EBADF_LOG")


def _install(log: str) -> None:
    close = os.close

    def checked_close(fd: int) -> None:
        try:
            close(fd)
        except OSError as exc:
            if exc.errno == errno.EBADF:
                _report(log, fd)
            raise

    os.close = checked_close


def _report(log: str, fd: int) -> None:
    report = (f"EBADF: os.close({fd}) of a descriptor not open, in pid {os.getpid()} ({' '.join(sys.argv)}):\n"
              + "".join(traceback.format_stack()[:-2]))
    sys.stderr.write(report)
    with open(log, "a") as out:  # (closed by its file object: not through os.close)
        out.write(report + "\n")


if _LOG:
    _install(_LOG)
