"""Escalation (the config's `escalateAfterSeconds` rules, consent/escalation_rules.py): a request this
main holds that nobody answered after N seconds goes to every `notify` receiver once more, whatever
its `when`, naming the request, this main's machine and the server.

Once per request: one timer, set when the request opens, cancelled when the notifier closes; when it
fires on a request that has closed since, nothing goes (the senders check again before each POST).
Another main's request shown here (a shared store) is escalated by its own main, not here.
"""

import dataclasses
from collections.abc import Callable

from main_process.clock import Clock, Timer
from main_process.consent.escalation_rules import Escalation
from main_process.consent.pending import PendingRequest
from main_process.notify.payload import Notice, name, notice_for


class Escalator:
    def __init__(self, rules: tuple[Escalation, ...], *, machine: str, clock: Clock,
                 still_open: Callable[[str], bool], send: Callable[[Notice], None]) -> None:
        self._rules = rules
        self._machine = machine
        self._clock = clock
        self._still_open = still_open
        self._send = send
        self._timers: dict[str, Timer] = {}

    def opened(self, pending: PendingRequest) -> None:
        """PendingRequests.opened: start the wait of the first rule this request matches."""
        if not self._rules or not pending.for_windows or pending.held_by is not None:
            return
        rule = next((r for r in self._rules if r.matches(pending.invoke, pending.params.message)), None)
        if rule is None or pending.channel in self._timers:
            return
        notice = notice_for(pending.invoke, pending.params.mode)
        self._timers[pending.channel] = self._clock.call_later(rule.after_s, self._escalate, notice, rule.after_s)

    def _escalate(self, notice: Notice, after_s: float) -> None:
        self._timers.pop(notice.channel, None)
        if not self._still_open(notice.channel):
            return
        title = f"Unanswered after {after_s:g} s on {name(self._machine)}: {notice.title}"
        self._send(dataclasses.replace(notice, title=title))

    def close(self) -> None:
        for timer in self._timers.values():
            timer.cancel()
        self._timers.clear()
