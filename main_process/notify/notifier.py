"""main's webhooks: each new request the person must answer becomes a notice for the config's
`notify` receivers, so someone with no window open learns that something waits.

The pending table tells the Notifier of every request that opened for the windows, and whether
a window got it (`PendingRequests.opened`); a receiver with `"when": "no-window"` (the default)
only hears of those no window got, one with `"always"` of all. Requests a rule answered never
open, and those meant for a host alone (`elicitationRoute: "host"`) are not the person's to answer:
neither is notified. What a notice says: payload.py; how it is sent: sender.py;
the config: config.py; the link: link.py. A request unanswered for as long as an escalation
rule says goes to every receiver once more (escalation.py).
"""

import logging
import urllib.parse
from collections.abc import Callable

from main_process.clock import MONOTONIC, Clock
from main_process.consent.escalation_rules import Escalation
from main_process.consent.pending import PendingRequest
from main_process.notify.config import NotifyTarget
from main_process.notify.escalation import Escalator
from main_process.notify.link import running_web_url
from main_process.notify.payload import Notice, notice_for
from main_process.notify.sender import WebhookSender
from shared.addresses import is_loopback
from shared.messages import NotifyStatus

logger = logging.getLogger(__name__)


class Notifier:
    def __init__(self, targets: tuple[NotifyTarget, ...], *, still_open: Callable[[str], bool],
                 link: Callable[[], str | None] = running_web_url, clock: Clock = MONOTONIC,
                 escalations: tuple[Escalation, ...] = (), machine: str = "") -> None:
        self.targets = targets
        self._senders = [WebhookSender(target, still_open=still_open, link=link, clock=clock) for target in targets]
        self._escalator = Escalator(escalations, machine=machine, clock=clock, still_open=still_open,
                                    send=self._to_every_receiver)

    def start(self) -> None:
        for sender in self._senders:
            host = urllib.parse.urlsplit(sender.target.url).hostname or ""
            if sender.target.url.startswith("http://") and not is_loopback(host):
                logger.warning("notify %s: plain http to another machine; its headers (a token) cross the "
                               "network readable; prefer https", sender.target.label)
            sender.start()
        logger.info("notify: %s", ", ".join(s.target.label for s in self._senders))

    def opened(self, pending: PendingRequest, reached_window: bool) -> None:
        """PendingRequests.opened: queue a notice for every receiver that wants this request."""
        if not pending.for_windows:
            return
        self._escalator.opened(pending)
        wanted = [s for s in self._senders if s.target.when == "always" or not reached_window]
        if not wanted:
            return
        notice = notice_for(pending.invoke, pending.params.mode)
        for sender in wanted:
            sender.offer(notice)

    def _to_every_receiver(self, notice: Notice) -> None:
        for sender in self._senders:
            sender.offer(notice)

    def statuses(self) -> list[NotifyStatus]:
        return [sender.status() for sender in self._senders]

    async def close(self) -> None:
        self._escalator.close()
        for sender in self._senders:
            await sender.close()
