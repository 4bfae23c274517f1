"""One webhook receiver: a bounded queue of notices and one task on main's loop that POSTs them,
rate-limited and retried.

Nothing here can slow main or grow without bound, whatever the receiver does: `offer` only
appends to a deque of at most QUEUE_SIZE notices (the oldest goes first when it is full, and is
counted); one POST is in flight at a time, cut off after the target's `timeoutSeconds` in all
(however slowly the receiver trickles its answer, whose body is never read); the link is read
off the loop (a file, link.py). A POST is retried after 1, 2, 4 … s (at most 60 s; a
`Retry-After` of a 429 or 503 is kept, up to 5 minutes) when the receiver was unreachable, timed
out or answered 5xx, 408, 425 or 429; any other answer (a 4xx, a redirect, which is not followed)
fails at once: the URL or token is wrong, and asking again will not help. A notice that failed is
not sent again; the failure stays in `status()` (`elicitron status`).

One POST per request while the rate limit allows: a sliding window of at most `burst` POSTs
within any `burstWindowSeconds`. What arrives while it is closed (or after the queue dropped some)
waits and goes as one POST once it opens ("3 requests wait"), leaving out requests answered
meanwhile. Waits run on a `Clock` (tests move a SettableClock).
"""

import asyncio
import logging
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final

import httpx2
import msgspec

from main_process.clock import MONOTONIC, Clock, wait_event
from main_process.notify.config import NotifyTarget
from main_process.notify.payload import Notice, Outgoing, render
from shared.messages import NotifyStatus

logger = logging.getLogger(__name__)

QUEUE_SIZE: Final = 100
RETRY_FIRST_S: Final = 1.0
RETRY_MOST_S: Final = 60.0
RETRY_AFTER_MOST_S: Final = 300.0
_RETRIED_STATUSES: Final = frozenset({408, 425, 429})
_SAID_CHARS: Final = 200


class _HideUrls(logging.Filter):
    """httpx2 logs each request's whole URL at INFO (main.log); a notify URL may be its own
    credential (a Slack webhook, an ntfy topic), so those lines name it by its label instead."""

    def __init__(self) -> None:
        super().__init__()
        self.labels: dict[str, str] = {}  # str(httpx2.URL) -> label; a URL once configured stays hidden

    def filter(self, record: logging.LogRecord) -> bool:
        if self.labels and isinstance(record.args, tuple):
            record.args = tuple(self.labels.get(str(arg), arg) if isinstance(arg, httpx2.URL) else arg
                                for arg in record.args)
        return True


_HIDDEN_URLS: Final = _HideUrls()
logging.getLogger("httpx2").addFilter(_HIDDEN_URLS)


@dataclass(frozen=True, slots=True)
class _Failure:
    text: str
    retry: bool
    retry_after_s: float | None = None


class WebhookSender:
    def __init__(self, target: NotifyTarget, *, still_open: Callable[[str], bool],
                 link: Callable[[], str | None], clock: Clock = MONOTONIC, queue_size: int = QUEUE_SIZE) -> None:
        self.target = target
        self._still_open = still_open  # is the request behind a notice still waiting?
        self._link = link  # the web window's URL (reads a file: run off the loop)
        self._clock = clock
        self._queue: deque[Notice] = deque()
        self._queue_size = queue_size
        self._dropped_since_sent = 0
        self._sent_at: deque[float] = deque(maxlen=target.burst)  # clock times of the last POSTs
        self._wake = asyncio.Event()
        self._closing = asyncio.Event()
        self._changed = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._client = httpx2.AsyncClient(timeout=target.timeout_s, follow_redirects=False,
                                          limits=httpx2.Limits(max_connections=1))
        self._status = NotifyStatus(target=target.label, state="idle")
        _HIDDEN_URLS.labels[str(httpx2.URL(target.url))] = target.label

    # ---- main's side -------------------------------------------------------------------------

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run(), name=f"notify {self.target.label}")

    def offer(self, notice: Notice) -> None:
        """Queue `notice` for the next POST; never waits."""
        if len(self._queue) >= self._queue_size:
            self._queue.popleft()
            self._dropped_since_sent += 1
            self._update(dropped=self._status.dropped + 1)
        self._queue.append(notice)
        self._update(held=len(self._queue))
        self._wake.set()

    def status(self) -> NotifyStatus:
        return self._status

    async def changed(self) -> None:
        """Until the status next changes (for whoever follows it, e.g. a test)."""
        await self._changed.wait()

    async def close(self) -> None:
        self._closing.set()
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except asyncio.CancelledError:
                pass
        await self._client.aclose()

    # ---- the worker --------------------------------------------------------------------------

    async def _run(self) -> None:
        held_back = False  # the rate limit kept notices waiting: they go together
        while not self._closing.is_set():
            await self._wake.wait()
            self._wake.clear()
            while self._queue and not self._closing.is_set():
                wait_s = self._closed_for()
                if wait_s > 0:
                    held_back = True
                    self._update(state="rate-limited")
                    await wait_event(self._clock, self._closing, wait_s)
                    continue
                waiting, count = self._take(together=held_back or self._dropped_since_sent > 0)
                held_back = False
                if waiting:
                    self._sent_at.append(self._clock.now())
                    await self._deliver(waiting, count)
            self._update(state="idle")

    def _take(self, *, together: bool) -> tuple[list[Notice], int]:
        """The next POST's notices (those whose request still waits) and how many requests it stands
        for: the oldest notice alone, or (`together`) every one queued and those dropped."""
        taken = list(self._queue) if together else [self._queue[0]]
        for _ in taken:
            self._queue.popleft()
        waiting = [notice for notice in taken if self._still_open(notice.channel)]
        count = len(waiting) + (self._dropped_since_sent if together else 0)
        if together:
            self._dropped_since_sent = 0
        self._update(held=len(self._queue))
        return waiting, count

    def _closed_for(self) -> float:
        """Seconds until the rate limit lets the next POST go (0: now)."""
        if len(self._sent_at) < self.target.burst:
            return 0.0
        return max(0.0, self._sent_at[0] + self.target.burst_window_s - self._clock.now())

    async def _deliver(self, notices: list[Notice], count: int) -> None:
        link = self.target.link or await asyncio.to_thread(self._link)
        outgoing = render(notices, count, link, self.target.format)
        attempts = 1 + self.target.retries
        attempt = 0
        while True:
            attempt += 1
            self._update(state="sending")
            failure = await self._post(outgoing)
            if failure is None:
                self._update(sent=self._status.sent + 1, last_sent_at=time.time_ns() // 1_000_000)
                return
            if not failure.retry or attempt == attempts:
                break
            delay = failure.retry_after_s if failure.retry_after_s is not None \
                else min(RETRY_FIRST_S * 2 ** (attempt - 1), RETRY_MOST_S)
            self._update(state="retrying")  # until the next attempt
            if await wait_event(self._clock, self._closing, delay):
                return
        tries = f"{attempt} attempt{'s' if attempt != 1 else ''}"
        error = f"{failure.text} ({tries}; {count} request{'s' if count != 1 else ''} not notified)"
        logger.warning("notify %s failed: %s", self.target.label, error)
        self._update(failed=self._status.failed + 1, last_error=error, last_error_at=time.time_ns() // 1_000_000)

    async def _post(self, outgoing: Outgoing) -> _Failure | None:
        """One POST; None when the receiver took it (2xx)."""
        headers = {**outgoing.headers, **dict(self.target.headers)}  # the config's own headers win
        try:
            async with asyncio.timeout(self.target.timeout_s):
                async with self._client.stream("POST", self.target.url, content=outgoing.body,
                                               headers=headers) as response:
                    code, reason = response.status_code, response.reason_phrase
                    retry_after = response.headers.get("retry-after")
        except (TimeoutError, httpx2.TimeoutException):  # ours (the whole POST) or httpx's (one phase)
            return _Failure(f"no answer within {self.target.timeout_s:g} s", retry=True)
        except httpx2.HTTPError as exc:  # unreachable, refused, TLS, a broken answer
            # The exception's text may repeat the URL, which may be the secret: never shown.
            text = _cut((str(exc) or type(exc).__name__).replace(self.target.url, self.target.label))
            return _Failure(f"could not reach it ({type(exc).__name__}: {text})", retry=True)
        if 200 <= code < 300:
            return None
        answered = f"HTTP {code} {_cut(reason)}".rstrip()
        if 300 <= code < 400:
            return _Failure(f"{answered}: redirects are not followed; put the address it redirects to in the "
                            "config", retry=False)
        retried = code >= 500 or code in _RETRIED_STATUSES
        return _Failure(answered, retry=retried,
                        retry_after_s=_retry_after(retry_after) if code in (429, 503) else None)

    def _update(self, **changes: Any) -> None:
        self._status = msgspec.structs.replace(self._status, **changes)
        self._changed.set()
        self._changed = asyncio.Event()


def _cut(text: str) -> str:
    """What a receiver said, short enough for one status line."""
    return text if len(text) <= _SAID_CHARS else text[: _SAID_CHARS - 1] + "…"


def _retry_after(value: str | None) -> float | None:
    """A Retry-After in seconds (its date form is left to the backoff), at most RETRY_AFTER_MOST_S."""
    if value is None or not value.strip().isdigit():
        return None
    return min(float(value.strip()), RETRY_AFTER_MOST_S)

