"""Figure `policy` (issue 36): what 200 Cedar policies cost a decision, and main per call.

- In-process: one decision of main's engine (main_process/policy/engine.py: the slice of the set
  that can match, decided in Python when its policies are plain, else by Cedar with only the
  context it reads) over 200 generated policies
  (tests/kit/policy_set.py) and a mix of calls that hit and miss them, p50/p90 of each decision's
  CPU time (thread clock: time the scheduler gives others does not count); beside it, cedarpy's
  plain `is_authorized` over the whole set with the whole request (what main did before), on the
  same calls, interleaved. Target: p50 <= 50 µs.
- Through real mains (`rules_main.py`: the MainApp `elicitron main` builds, consent layer on), each
  with the demo server over stdio: "none" has no policy file and `toolApproval: "allow"`;
  "policies" has the 200 and one that permits demo/echo (`toolApproval: "ask"`, so without it a
  card would open). A host calls demo/echo in its relayed session, CONCURRENCY in flight, in
  alternating blocks; main's CPU per call (every thread, /proc schedstat), best quarter of rounds
  as in `rules`. The difference is all a policy adds: the decision and its audit row. Target:
  <= +100 µs.
"""

import logging
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from statistics import quantiles
from typing import Any

from kit import policy_set
from kit.main import RunningMain

from benchlib.common import Figure, demo_entry, fmt_us
from benchlib.rules import CONCURRENCY, Side, best_quarter, rules_main

POLICIES = 200
TARGET_P50_US = 50.0
TARGET_ADDED_US = 100.0
ECHO = ("demo", "echo", {"text": "bench"})
PERMIT_ECHO = """
@id("bench-echo")
@reason("the bench's call")
permit(principal, action == Action::"callTool", resource == Tool::"demo/echo")
when { context.arguments has text && context.arguments.text like "bench*" };
"""


def run(quick: bool) -> list[Figure]:
    return [_in_process(2_000 if quick else 20_000), _through_main(quick)]


def _in_process(n: int) -> Figure:
    import cedarpy

    from main_process.policy import schema
    from main_process.policy.engine import Engine
    from main_process.policy.load import load

    logging.getLogger("main_process.policy.engine").setLevel(logging.ERROR)  # the generated errs are on purpose
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "team.cedar"
        path.write_text(policy_set.policies(POLICIES), encoding="utf-8")
        started = time.perf_counter()
        loaded = load([path])
        load_ms = (time.perf_counter() - started) * 1e3
    engine = Engine(loaded)
    calls = policy_set.calls(2_000, POLICIES)
    entities: dict[tuple[str, str, str], Any] = {}
    for call in calls:  # warm: every slice built, every entity set parsed (both kept across calls)
        engine.decide_call(call.host, call.server, call.tool, call.arguments, call.annotations)
        entities[(call.host, call.server, call.tool)] = cedarpy.Entities.from_json_str(
            schema.entities(call.host, call.server, call.tool))
    fast_ns: list[int] = []
    plain_ns: list[int] = []
    for index in range(n):
        call = calls[index % len(calls)]
        started_ns = time.thread_time_ns()
        engine.decide_call(call.host, call.server, call.tool, call.arguments, call.annotations)
        fast_ns.append(time.thread_time_ns() - started_ns)
        started_ns = time.thread_time_ns()
        cedarpy.is_authorized(schema.call_request(call.host, call.server, call.tool, call.arguments, call.annotations),
                              loaded.handle, entities[(call.host, call.server, call.tool)])
        plain_ns.append(time.thread_time_ns() - started_ns)
    fast, plain = _p50_p90(fast_ns), _p50_p90(plain_ns)
    return Figure(
        name="policy", title=f"policy: one decision, {POLICIES} policies", value=f"p50 {fast[0]:.0f} µs",
        target=f"p50 <= {TARGET_P50_US:.0f} µs", passed=fast[0] <= TARGET_P50_US,
        absolute=(f"p90 {fast[1]:.0f} µs; cedarpy's plain is_authorized (whole set, whole request) p50 "
                  f"{plain[0]:.0f} µs p90 {plain[1]:.0f} µs ({plain[0] / fast[0]:.1f}x); loading the file "
                  f"{load_ms:.0f} ms"),
        how=(f"in-process, CPU time (thread clock) of each of {n} decisions of main's engine over {POLICIES} "
             "generated policies (tests/kit/policy_set.py: per-tool and per-server permits and forbids on paths, "
             "counts and modes, host-wide ones, 10 on every tool that read the time and the hints), calls cycling "
             "through 2,000 that hit and miss them; interleaved with cedarpy.is_authorized on the whole set"),
        data={"fast_ns": _summary(fast_ns), "plain_ns": _summary(plain_ns), "load_ms": load_ms},
    )


def _p50_p90(samples_ns: list[int]) -> tuple[float, float]:
    cuts = quantiles(samples_ns, n=10)
    return cuts[4] / 1e3, cuts[8] / 1e3


def _summary(samples_ns: list[int]) -> dict[str, float]:
    p50, p90 = _p50_p90(samples_ns)
    return {"p50_us": p50, "p90_us": p90, "n": len(samples_ns)}


@contextmanager
def _main(with_policies: bool) -> Iterator[RunningMain]:
    entry: dict[str, Any] = {**demo_entry(), "toolApproval": "ask" if with_policies else "allow"}
    settings: dict[str, Any] = {"mcpServers": {"demo": entry}}
    files = {}
    if with_policies:
        files["team.cedar"] = policy_set.policies(POLICIES) + PERMIT_ECHO
        settings["elicitron"] = {"policies": ["team.cedar"]}
    with rules_main(settings, with_rules=True, files=files) as main:
        yield main


def _through_main(quick: bool) -> Figure:
    rounds, block = (16, 40) if quick else (60, 50)
    per_call: dict[str, list[float]] = {"none": [], "policies": []}
    with _main(with_policies=False) as plain_main, _main(with_policies=True) as policy_main:
        sides = {"none": Side(plain_main), "policies": Side(policy_main)}
        try:
            for side in sides.values():  # warm-up
                side.run(side.host, ECHO, block)
            for index in range(rounds):
                order = ("none", "policies") if index % 2 == 0 else ("policies", "none")  # ABBA
                for label in order:
                    side = sides[label]
                    per_call[label].append(side.run(side.host, ECHO, block) / block / 1e3)
            asked = sides["policies"].asked
            if asked:
                raise RuntimeError(f"the policies' main asked a window {asked} times: the permit did not decide")
        finally:
            for side in sides.values():
                side.close()
    plain_us, policy_us = best_quarter(per_call["none"]), best_quarter(per_call["policies"])
    extra = policy_us - plain_us
    return Figure(
        name="policy", title=f"policy: a call permitted by policy, {POLICIES} policies",
        value=f"{extra:+.0f} µs ({policy_us / plain_us:.2f}x)",
        target=f"<= +{TARGET_ADDED_US:.0f} µs of main's CPU", passed=extra <= TARGET_ADDED_US,
        absolute=f"main CPU per call {fmt_us(policy_us)} vs {fmt_us(plain_us)} (no policy, toolApproval allow)",
        how=(f"main's CPU (all threads, /proc schedstat) per call, mean of the best quarter of {rounds} rounds "
             f"(ABBA order) of {block} calls on each main, {CONCURRENCY} in flight, demo server over stdio; a host "
             f"calls demo/echo, permitted by one of {POLICIES + 1} policies (the decision + its batched audit row) "
             "vs a main with no policy file whose toolApproval lets it straight through"),
        data={"none_us": per_call["none"], "policies_us": per_call["policies"], "rounds": rounds, "block": block},
    )
