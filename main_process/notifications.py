"""The config's `notify` webhooks as main runs them: one Notifier at a time (a reload replaces it,
counts and all), told of every request that opened (`PendingRequests.opened`) and shown by
msgStatus; none when the config has no receivers."""

import logging

from main_process.consent.escalation_rules import Escalation
from main_process.consent.pending import PendingRequest, PendingRequests
from main_process.notify.config import NotifyTarget
from main_process.notify.notifier import Notifier
from shared.messages import NotifyStatus

logger = logging.getLogger(__name__)


class Notifications:
    def __init__(self, machine: str = "") -> None:
        self._notifier: Notifier | None = None  # the config has no receivers
        self._machine = machine  # this main's, named by escalations

    async def replace(self, targets: tuple[NotifyTarget, ...], pending: PendingRequests,
                      escalations: tuple[Escalation, ...] = ()) -> None:
        """The config's receivers and escalation rules now (replacing those of the config before it)."""
        if self._notifier is not None:
            await self._notifier.close()
        if escalations and not targets:  # else they would wait in silence
            logger.warning("%d escalation rule(s) (escalateAfterSeconds) do nothing: the config has no "
                           "`notify` webhooks to escalate to; add one under \"elicitron\": {\"notify\": [...]}",
                           len(escalations))
        self._notifier = Notifier(targets, still_open=lambda channel: pending.get(channel) is not None,
                                  escalations=escalations, machine=self._machine) if targets else None
        if self._notifier is not None:
            self._notifier.start()

    def opened(self, pending: PendingRequest, reached_window: bool) -> None:
        if self._notifier is not None:
            self._notifier.opened(pending, reached_window)

    def statuses(self) -> list[NotifyStatus]:
        return self._notifier.statuses() if self._notifier is not None else []

    async def close(self) -> None:
        if self._notifier is not None:
            await self._notifier.close()
