"""What a process holds, from /proc: its resident memory and its open descriptors, and its children."""

import os
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Held:
    rss_kib: int
    descriptors: int

    def __str__(self) -> str:
        return f"{self.rss_kib / 1024:.1f} MiB, {self.descriptors} descriptors"


def held(pid: int) -> Held:
    rss = 0
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            rss = int(line.split()[1])
    return Held(rss_kib=rss, descriptors=len(os.listdir(f"/proc/{pid}/fd")))


def children(pid: int) -> dict[int, str]:
    """The live children of `pid` (zombies left out), by pid: their command lines. Every process is
    looked at, since /proc/<pid>/task/<tid>/children lists only what each thread started."""
    found: dict[int, str] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            fields = Path(f"/proc/{entry}/stat").read_text().rpartition(")")[2].split()
            if int(fields[1]) != pid or fields[0] == "Z":
                continue
            command = Path(f"/proc/{entry}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except (OSError, IndexError, ValueError):
            continue  # it ended meanwhile
        found[int(entry)] = command
    return found


def alive(pid: int) -> bool:
    """A process that runs (not a zombie; not reaped is not running)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]
    except OSError:
        return False
    return state != "Z"
