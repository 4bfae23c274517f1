"""Figure `rules` (issue 11): what the consent layer adds to main's work when a rule decides.

Two real mains side by side, each with the demo server over stdio, started the same way
(`rules_main.py`: the MainApp `elicitron main` builds):
- baseline: main with no rule store (MainApp(rules=False));
- rules: main with its consent layer and `toolApproval: "ask"`, where a window first answered one
  approval "Always allow" (demo/echo) and one booking with "Remember always".
Then, in alternating blocks:
- auto-allowed call: a host peer calls demo/echo in its relayed session (PROTOCOL.md §14),
  CONCURRENCY in flight: the baseline sends it on straight away; the rules main looks the rule up,
  audits the approval, then sends it on;
- rule-answered elicitation: a controller calls demo/book_table: the baseline's request goes to a
  scripted window that answers at once; the rules main answers it from the remembered answer.
The figure is main's CPU per call (every thread, from /proc schedstat): each main's mean over its
best quarter of rounds, since other processes on the machine only ever add CPU time (cache and
core contention), never take it away; the target is at most 100 µs added per call. A printed row
times the consent layer's own code in-process (real Consent, pending requests, audit writer and
SQLite; a stub server), the part of the difference that is not noise.
"""

import asyncio
import json
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from functools import partial
from pathlib import Path
from statistics import mean
from typing import Any

import zmq
from kit.consent_parts import NoWindows, QuietConsentPorts
from kit.contract import INVOKE
from kit.env import child_env, short_tmp_dir
from kit.main import RunningMain
from kit.output import ChildOutput
from kit.paths import PYTHON, ROOT
from kit.peer import WirePeer
from kit.relay_host import RelayHost

from benchlib.common import BENCH_CONTENT, Figure, demo_entry, fmt_us
from benchlib.roundtrip import cpu_ns

MAIN = Path(__file__).with_name("rules_main.py")
CONCURRENCY = 8
TARGET_ADDED_US = 100.0
ECHO = ("demo", "echo", {"text": "bench"})
BOOKING = ("demo", "book_table", {"restaurant": "Bench"})


@contextmanager
def _main(with_rules: bool) -> Iterator[RunningMain]:
    with rules_main({"mcpServers": {"demo": {**demo_entry(), "toolApproval": "ask"}}}, with_rules) as main:
        yield main


@contextmanager
def rules_main(settings: dict[str, Any], with_rules: bool,
               files: dict[str, str] | None = None) -> Iterator[RunningMain]:
    """rules_main.py (the MainApp `elicitron main` builds) on `settings` as its config, with `files`
    (name -> text) beside it, its demo server ready; stopped and its runtime dir removed after."""
    runtime = short_tmp_dir()
    for name, text in (files or {}).items():
        (runtime / name).write_text(text, encoding="utf-8")
    config = runtime / "mcp.json"
    config.write_text(json.dumps(settings))
    connection = runtime / "connection.json"
    argv = [PYTHON, str(MAIN), str(config), str(connection), "with-rules" if with_rules else "no-rules"]
    proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            env=child_env(runtime), cwd=ROOT)
    assert proc.stderr is not None
    main = RunningMain(proc, connection, runtime, ChildOutput(proc.stderr))
    try:
        main.wait_up()
        main.wait_server_ready("demo")
        yield main
    finally:
        main.stop()
        subprocess.run(["rm", "-rf", str(runtime)], check=False)


class Side:
    """One main with its three peers: a host, a controller and a window that answers at once."""

    def __init__(self, main: RunningMain) -> None:
        self.main = main
        self.host = RelayHost(main.peer("bench host", role="host"))
        self.controller = main.peer("bench cli", role="controller")
        self.window = main.peer("bench window")
        self.asked = 0  # requests a window had to answer during run()

    def seed(self) -> None:
        """A window answers one approval "Always allow" and one booking "Remember always"."""
        call = self.host.call_tool(*ECHO)
        invoke = self.window.expect(lambda t, b: t == INVOKE)[1]
        self.window.send(invoke["responseChannel"], {"action": "accept", "content": {"decision": "allow-always"}})
        self.host.reply(call)
        call = self.controller.call_tool(*BOOKING)
        invoke = self.window.expect(lambda t, b: t == INVOKE)[1]
        self.window.send(invoke["responseChannel"], {"action": "accept", "content": BENCH_CONTENT,
                                                      "remember": {"scope": "always"}})
        self.controller.expect(lambda t, b: t == call)

    def run(self, caller: WirePeer | RelayHost, call: tuple[str, str, dict[str, Any]], n: int) -> int:
        """Make `n` calls, CONCURRENCY in flight, answering any request at once; main's CPU ns."""
        relayed = caller if isinstance(caller, RelayHost) else None
        calling = relayed.peer if relayed is not None else caller
        assert isinstance(calling, WirePeer)
        poller = zmq.Poller()
        poller.register(calling.sock, zmq.POLLIN)
        poller.register(self.window.sock, zmq.POLLIN)
        peers = (calling, self.window)
        waiting: set[str] = set()
        started = done = 0
        before = cpu_ns(self.main.pid)
        deadline = time.monotonic() + 60 + n * 0.05
        while done < n:
            while started < n and len(waiting) < CONCURRENCY:
                waiting.add(caller.call_tool(*call))
                started += 1
            if time.monotonic() > deadline:
                raise TimeoutError(f"{done} of {n} calls done")
            for peer in peers:
                peer.heartbeat_if_due()
            for sock, _ in poller.poll(200):
                peer = calling if sock is calling.sock else self.window
                for topic, body in peer.receive():
                    answered = relayed.reply_of(topic, body) if relayed is not None and peer is calling else None
                    if answered is not None:
                        topic, body = answered
                    if topic == INVOKE:
                        self.asked += 1
                        peer.answer(body, "accept", BENCH_CONTENT)
                    elif topic in waiting:
                        if "result" not in body or body["result"].get("isError"):
                            raise RuntimeError(f"call failed: {body}")
                        waiting.discard(topic)
                        done += 1
        return cpu_ns(self.main.pid) - before

    def close(self) -> None:
        for peer in (self.host.peer, self.controller, self.window):
            peer.close()


def run(quick: bool) -> list[Figure]:
    rounds, block = (16, 40) if quick else (60, 50)
    added: dict[str, list[float]] = {"call": [], "ask": []}
    per_call: dict[tuple[str, str], list[float]] = {}
    with _main(with_rules=False) as plain_main, _main(with_rules=True) as rules_main:
        ruled = Side(rules_main)
        ruled.seed()
        plain = Side(plain_main)  # attached after the seeding, so none of its peers fell silent meanwhile
        try:
            for side in (plain, ruled):  # warm-up
                side.run(side.host, ECHO, block)
                side.run(side.controller, BOOKING, block)
            for index in range(rounds):
                for kind in ("call", "ask"):
                    # ABBA: which main goes first alternates, so drift within a round cancels out
                    order = (("plain", plain), ("rules", ruled)) if index % 2 == 0 else (("rules", ruled),
                                                                                         ("plain", plain))
                    took: dict[str, float] = {}
                    for label, side in order:
                        caller, call = (side.host, ECHO) if kind == "call" else (side.controller, BOOKING)
                        took[label] = side.run(caller, call, block) / block / 1e3
                        per_call.setdefault((label, kind), []).append(took[label])
                    added[kind].append(took["rules"] - took["plain"])
            if ruled.asked:
                raise RuntimeError(f"the rules main asked a window {ruled.asked} times")
        finally:
            plain.close()
            ruled.close()
    figures = []
    for kind, title, baseline in (
        ("call", "rules: auto-allowed call", "no rule store: the call runs straight away"),
        ("ask", "rules: rule-answered elicitation", "no rule store: a scripted window answers it"),
    ):
        plain_us, rules_us = best_quarter(per_call[("plain", kind)]), best_quarter(per_call[("rules", kind)])
        extra = rules_us - plain_us
        figures.append(Figure(
            name="rules", title=title, value=f"{extra:+.0f} µs ({rules_us / plain_us:.2f}x)",
            target=f"<= +{TARGET_ADDED_US:.0f} µs of main's CPU", passed=extra <= TARGET_ADDED_US,
            absolute=f"main CPU per call {fmt_us(rules_us)} vs {fmt_us(plain_us)} ({baseline})",
            how=(f"main's CPU (all threads, /proc schedstat) per call, mean of the best quarter of {rounds} rounds "
                 f"(ABBA order) of {block} calls on each main, {CONCURRENCY} in flight, demo server over stdio; " +
                 ("a host calls demo/echo, allowed by an 'Always allow' rule (lookup + batched audit row)"
                  if kind == "call" else
                  "the CLI role calls demo/book_table, its elicitation answered by a remembered answer "
                  "(lookup + schema check + audit row committed before the answer)")),
            data={"plain_us": per_call[("plain", kind)], "rules_us": per_call[("rules", kind)],
                  "added_us_per_round": added[kind], "rounds": rounds, "block": block},
        ))
    allow_us, answer_us = asyncio.run(_hook_alone(2_000 if quick else 20_000))
    figures.append(Figure(
        name="rules", title="rules: the consent code alone", value=f"{allow_us:.0f} µs / {answer_us:.0f} µs",
        target="", passed=None, absolute="per auto-allowed call / per rule-answered elicitation",
        how="in-process, one loop: ToolApproval.call_in_relay with an 'Always allow' rule (stub server, audit rows "
            "batched as in main), and ElicitationGate answering by a remembered answer (audit row committed); "
            "real SQLite in a temp dir",
    ))
    return figures


def best_quarter(values: list[float]) -> float:
    ordered = sorted(values)
    return mean(ordered[:max(1, len(ordered) // 4)])


async def _hook_alone(n: int) -> tuple[float, float]:
    """µs per auto-allowed call and per rule-answered elicitation, the consent layer's code alone."""
    from main_process.config import StdioServerConfig
    from main_process.consent.audit_writer import AuditWriter
    from main_process.consent.consent import Consent
    from main_process.consent.elicitation_gate import Answered, ElicitationGate
    from main_process.consent.pending import Elicitation, PendingRequests, RequestOptions
    from main_process.consent.rules import Rule, question_key
    from main_process.consent.tool_approval import ToolApproval
    from main_process.servers.server_identity import server_identity
    from main_process.store.factory import open_store
    from main_process.wire.peers import Peer
    from shared.messages import ElicitationResult

    class StubServer:
        name = "demo"
        config = StdioServerConfig(name="demo", command="x", tool_approval="ask")
        ready = True

        def __init__(self) -> None:
            self.listed: dict[str, Any] = {}
            self.calls = 0

        def send_on(self) -> None:
            self.calls += 1

        def screen_elicitation(self, params: Any) -> None:
            return None  # (the rule answers first)

    from benchlib.common import BENCH_SCHEMA

    with tempfile.TemporaryDirectory() as tmp:
        store = open_store(None, audit_path=Path(tmp) / "audit.sqlite3")
        loop = asyncio.get_running_loop()
        writer = AuditWriter(store.audit, loop)
        pending = PendingRequests(NoWindows(), loop, audit=writer)
        program = server_identity(StubServer.config)  # user rules bind to the program they were given to
        consent = Consent(QuietConsentPorts(pending), None, [], [], loop, {"demo": program})  # type: ignore[arg-type]
        pending.rules = consent
        gate = ElicitationGate(pending, consent)
        approval = ToolApproval(consent, pending, QuietConsentPorts(pending))  # type: ignore[arg-type]
        params = {"mode": "form", "message": "Book a table?", "requestedSchema": BENCH_SCHEMA}
        consent.book.add(Rule(id="r-call", source="user", server="demo", created_at=0, created_by="bench",
                              tool="echo", decision="allow", identity=program))
        consent.book.add(Rule(id="r-answer", source="user", server="demo", created_at=0, created_by="bench",
                              question=question_key(Elicitation.read("demo", params).params),
                              answer=ElicitationResult(action="accept", content=BENCH_CONTENT), identity=program))
        server, host = StubServer(), Peer(b"h", "host-window", "bench host", "host", 0.0)
        request = Elicitation.read("demo", params)
        options = RequestOptions(timeout_s=60)
        try:
            started = time.perf_counter_ns()
            for index in range(n):
                approval.call_in_relay(server, "echo", {"text": "bench"}, host, server.send_on,  # type: ignore[arg-type]
                                      lambda reply: None)
                if index % 16 == 15:
                    writer.flush()  # about what 8 calls in flight batch within 20 ms
            writer.flush()
            allow_ns = (time.perf_counter_ns() - started) / n
            started = time.perf_counter_ns()
            for _ in range(n):
                decided = gate.decide(request, server)  # as main's own session: rules first, then the rest
                assert isinstance(decided, Answered)
                recorded: asyncio.Future[None] = loop.create_future()
                gate.record(request, decided, options, partial(recorded.set_result, None))
                await recorded
            answer_ns = (time.perf_counter_ns() - started) / n
            assert server.calls == n
        finally:
            await writer.close()
            await consent.close()
            await store.close()
    return allow_ns / 1e3, answer_ns / 1e3
