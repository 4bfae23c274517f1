"""What every figure shares: its row in the table, time formats and summaries, the bench's form, and
a real main with the demo server."""

import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kit.demo import demo_stdio_entry
from kit.main import RunningMain, running_main
from kit.peer import WirePeer
from kit.stats import percentile

# The form every scripted answer fits: small, with the checks main runs on each accept.
BENCH_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "title": "Name", "minLength": 1},
        "party_size": {"type": "integer", "title": "Guests", "minimum": 1, "maximum": 12},
    },
    "required": ["name", "party_size"],
}
BENCH_CONTENT: dict[str, Any] = {"name": "Ada", "party_size": 2}  # valid for BENCH_SCHEMA and book_table's


def now_ns() -> int:
    return time.perf_counter_ns()


@dataclass
class Figure:
    """One row of the table."""

    name: str  # the --only name
    title: str
    value: str  # the headline, human-readable
    target: str  # "" when the row is only printed
    passed: bool | None  # None: no target
    absolute: str = ""  # the absolute times behind a ratio
    how: str = ""  # how it was measured (one line)
    data: dict[str, Any] = field(default_factory=dict)  # everything, for --json


def summarize_ns(samples_ns: list[int]) -> dict[str, float]:
    """p50/p90/p99/max/mean in microseconds."""
    ordered = sorted(samples_ns)
    mean = sum(ordered) / len(ordered) if ordered else float("nan")
    return {
        "n": len(ordered),
        "p50_us": percentile(ordered, 50) / 1e3,
        "p90_us": percentile(ordered, 90) / 1e3,
        "p99_us": percentile(ordered, 99) / 1e3,
        "max_us": (ordered[-1] / 1e3) if ordered else float("nan"),
        "mean_us": mean / 1e3,
    }


def fmt_us(us: float) -> str:
    if us >= 1e6:
        return f"{us / 1e6:.2f} s"
    if us >= 1e3:
        return f"{us / 1e3:.2f} ms"
    return f"{us:.1f} µs"


def rss_mb(pid: int) -> float:
    """VmRSS of a process, in MiB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024.0
    raise RuntimeError(f"no VmRSS for pid {pid}")


def demo_entry() -> dict[str, Any]:
    """The demo MCP server over stdio, as the test suite configures it, with the per-server burst
    limit (default 20 requests a minute, then `cancel`) lifted: the bench asks thousands of times a
    minute on purpose."""
    return demo_stdio_entry(elicitationBurst=10_000_000)


@contextmanager
def running_demo_main() -> Iterator[RunningMain]:
    """A real main with the demo server, ready; its dirs (audit log included) in a temp dir."""
    with running_main({"demo": demo_entry()}) as main:
        main.wait_server_ready("demo")
        yield main


def window_round_trips(window: WirePeer, count: int, label: str) -> list[int]:
    """`count` round trips of a window: it calls the demo's book_table, answers the card that call
    raises and gets the result; each in ns. `label` tells this run's restaurants apart."""
    samples = []
    for i in range(count):
        restaurant = f"{label}-{now_ns()}-{i}"
        t0 = now_ns()
        call = window.call_tool("demo", "book_table", {"restaurant": restaurant})
        _, invoke = window.expect(lambda t, b: t == "msgElicitationTransferInvoke"
                                  and restaurant in b["request"]["params"]["message"], 30)  # noqa: B023 - used at once
        window.answer(invoke, "accept", BENCH_CONTENT)
        window.expect_topic(call, 30)
        samples.append(now_ns() - t0)
    return samples
