"""The windows of `scripts/soak --hosts`: two scripted renderer peers (tests/kit WirePeer) on one
thread. The first answers every `book` elicitation as `sessions.plan_of` says; the second only holds
what it is sent, so each answer is dismissed at a window that did not give it."""

import re
import threading
from collections import Counter
from typing import Any

import zmq
from kit.contract import DISMISS, INVOKE, WELCOME
from kit.peer import WirePeer

from soaklib.sessions import answer_for, plan_of

_WHO = re.compile(r"^Book a table for soak-(\d+)\?$")


class Windows:
    def __init__(self, endpoint: str, token: str, seed: int) -> None:
        self.seed = seed
        self.context: zmq.Context[Any] = zmq.Context()
        self.answerer = WirePeer(endpoint, token, name="soak-window", context=self.context)
        self.watcher = WirePeer(endpoint, token, name="soak-second-window", context=self.context)
        self.asked: dict[str, int] = {}  # responseChannel -> session number
        self.answered: dict[int, str] = {}  # session number -> the action sent
        self.dismissed: Counter[str] = Counter()  # reasons, at the second window
        self.problems: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="soak-windows", daemon=True)

    def start(self, timeout_s: float = 30.0) -> None:
        for peer in (self.answerer, self.watcher):
            if peer.hello(timeout_s=timeout_s)["topic"] != WELCOME:
                raise RuntimeError(f"{peer.name} was not welcomed")
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=10)
        self.answerer.close()
        self.watcher.close()
        self.context.term()

    def _run(self) -> None:
        poller = zmq.Poller()
        poller.register(self.answerer.sock, zmq.POLLIN)
        poller.register(self.watcher.sock, zmq.POLLIN)
        while not self._stop.is_set():
            poller.poll(200)
            for topic, body in self.answerer.receive():
                if topic == INVOKE:
                    self._answer(body)
            for topic, body in self.watcher.receive():
                if topic == DISMISS:
                    self.dismissed[str(body.get("reason"))] += 1
            self.answerer.heartbeat_if_due()
            self.watcher.heartbeat_if_due()

    def _answer(self, invoke: dict[str, Any]) -> None:
        match = _WHO.match(str(invoke["request"]["params"].get("message", "")))
        plan = plan_of(self.seed, int(match[1])) if match else None
        if match is None or plan is None:
            self.problems.append(f"an invoke no session asks for: {str(invoke)[:200]}")
            return
        number = int(match[1])
        self.asked[invoke["responseChannel"]] = number
        answer = answer_for(number, plan)
        self.answerer.answer(invoke, plan, answer["content"])
        self.answered[number] = plan
