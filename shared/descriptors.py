"""The process's open-file limit: raised at start from the soft limit (often 1,024) toward the hard
one, so listeners can be capped well below it and accept never hits EMFILE; and the reserve a
listener keeps for the process's own sockets (`DescriptorBudget.room`: asked before it takes a
connection, refused when the answer is no). libzmq aborts the whole process when one of its own
accepts gets EMFILE. Children inherit the raised limit."""

import os
import resource
import sys
from dataclasses import dataclass
from typing import Final

CEILING = 65_536  # enough for any cap of ours; a hard limit of "unlimited" is not taken literally
# The share of the limit kept for the process's own sockets, files and pipes (and at least this many).
RESERVE_SHARE: Final = 0.25
MIN_RESERVE: Final = 64
_FD_DIRS: Final = ("/proc/self/fd", "/dev/fd")


def raise_soft_limit(ceiling: int = CEILING) -> int:
    """Raise the soft RLIMIT_NOFILE toward the hard limit (at most `ceiling`); the soft limit now."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = ceiling if hard == resource.RLIM_INFINITY else min(hard, ceiling)
    if sys.platform == "darwin":  # macOS refuses more than OPEN_MAX (10,240) per process
        wanted = min(wanted, 10_240)
    if soft != resource.RLIM_INFINITY and soft < wanted:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (wanted, hard))
            soft = wanted
        except (ValueError, OSError):
            pass  # e.g. a sandbox that refuses: the caps below are sized from the limit we have
    return soft


def soft_limit() -> int:
    soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    return CEILING if soft == resource.RLIM_INFINITY else soft


def open_count() -> int | None:
    """How many descriptors this process has open now (None: the system does not say)."""
    for directory in _FD_DIRS:
        try:
            return len(os.listdir(directory)) - 1  # less the one listdir itself opened
        except OSError:
            continue
    return None


@dataclass
class DescriptorBudget:
    """`room(n)`: may the process open `n` more descriptors and still keep its reserve?"""

    limit: int
    reserve: int

    @classmethod
    def for_this_process(cls) -> "DescriptorBudget":
        limit = soft_limit()
        return cls(limit=limit, reserve=max(MIN_RESERVE, int(limit * RESERVE_SHARE)))

    @property
    def usable(self) -> int:
        """Descriptors beyond the reserve, all told."""
        return max(0, self.limit - self.reserve)

    def room(self, count: int = 1) -> bool:
        opened = open_count()
        return opened is None or opened + count <= self.usable
