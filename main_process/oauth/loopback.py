"""main's listener for the authorization redirect (RFC 8252 §7.3): 127.0.0.1, a port the OS
picks, path /callback, one use.

A redirect whose `state` is not the one this sign-in sent is refused with 400 and the listener
keeps waiting for the real one (a stray or forged request must not end the sign-in). The same
check applies to an address a user pastes from a browser on another machine (`deliver`). The
first redirect with the right state ends it: its `code` (or the authorization server's `error`)
becomes the result, and the socket closes. Nothing here logs a code or a state.

The code counts only once the card was accepted (`accepted()`): that accept carries the hosts the
person allowed, which the token request needs. An authorization server that redirects at once (the
person is signed in there already) can send the browser back before a window's accept reaches main,
so a code that comes first is held, and so is the browser's request: it gets its page when the
card is answered, or an error page when the card is declined, refused, cancelled or expires
(`fail`). Whoever delivers a redirect passes how to answer it (`Reply`), at once or later.

Any local user can reach 127.0.0.1, so the listener is bounded: at most MAX_CONNECTIONS at once
and MAX_PER_SOURCE from one address (a connection over either is reset at once, before anything
is read), and a connection that has not sent its request head within HEADER_TIMEOUT_S is closed
(a browser sends it at once). That keeps a flood from taking main's descriptors (libzmq aborts
main when an accept of its own gets EMFILE). Refusals and forged redirects are counted
(`ListenerCounts`, in `elicitron auth status`) and logged at most once a minute.
"""

import asyncio
import html
import logging
import secrets
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final, cast
from urllib.parse import parse_qs, urlsplit

from mcp.shared.auth import AuthorizationCodeResult

from main_process.log_limiter import RateLimitedLog
from shared.errors import SignInDeclinedError, SignInError

logger = logging.getLogger(__name__)

CALLBACK_PATH: Final = "/callback"
MAX_CONNECTIONS: Final = 16  # a browser uses one or two (a speculative preconnect)
MAX_PER_SOURCE: Final = 8
HEADER_TIMEOUT_S: Final = 5.0
COMPLAINT_INTERVAL_S: Final = 60.0
_MAX_REQUEST_BYTES: Final = 16 * 1024
_REASONS: Final = {200: "OK", 400: "Bad Request", 403: "Forbidden", 404: "Not Found", 410: "Gone"}
SIGNED_IN_PAGE: Final = "Signed in. You can close this tab and go back to Elicitron."
ENDED_PAGE: Final = "This sign-in ended before its card was accepted in Elicitron; you can close this tab."
_complaints = RateLimitedLog(logger, COMPLAINT_INTERVAL_S)

Reply = Callable[[int, str], None]  # (HTTP status, text for the person): how a redirect is answered


@dataclass
class ListenerCounts:
    """What one server's redirect listeners turned away, over every sign-in since main started."""

    refused_connections: int = 0  # over a cap (reset at once), or silent past the header timeout
    forged_redirects: int = 0  # a redirect (or a pasted address) whose state does not match


class RedirectListener:
    def __init__(self, counts: ListenerCounts | None = None) -> None:
        self._server: asyncio.Server | None = None
        self._port = 0
        self._state: str | None = None
        self._result: asyncio.Future[AuthorizationCodeResult] = asyncio.get_running_loop().create_future()
        self.counts = counts if counts is not None else ListenerCounts()
        self._held: set[_Connection] = set()
        self._per_source: dict[str, int] = {}
        self._accepted = False  # the card's accept reached main
        self._early: AuthorizationCodeResult | None = None  # a code that came before the accept
        self._waiting: list[Reply] = []  # redirects answered once the card is

    async def start(self) -> str:
        loop = asyncio.get_running_loop()
        self._server = await loop.create_server(lambda: _Connection(self), "127.0.0.1", 0)
        self._port = self._server.sockets[0].getsockname()[1]
        return self.redirect_uri

    @property
    def redirect_uri(self) -> str:
        return f"http://127.0.0.1:{self._port}{CALLBACK_PATH}"

    @property
    def listening(self) -> bool:
        return self._server is not None

    @property
    def held(self) -> int:
        """Connections open now."""
        return len(self._held)

    def expect(self, state: str) -> None:
        """The `state` of the authorization request now in flight."""
        self._state = state

    @property
    def holding(self) -> bool:
        """A redirect came before the card's accept and waits for it."""
        return self._early is not None and not self._result.done()

    async def result(self, timeout_s: float) -> AuthorizationCodeResult:
        try:
            return await asyncio.wait_for(asyncio.shield(self._result), timeout_s)
        except TimeoutError:
            if self._result.done():  # settled in the same turn as the timeout (the card's expiry): that says why
                return self._result.result()
            error = SignInError(f"the sign-in card was not answered within {timeout_s:.0f} s (it expired)"
                                if self.holding else
                                f"no redirect from the authorization server within {timeout_s:.0f} s")
            self.fail(error)
            raise error from None

    def accepted(self) -> None:
        """The card was accepted (and what it allowed is in place): a held code becomes the result."""
        self._accepted = True
        if self._early is not None and not self._result.done():
            self._result.set_result(self._early)
            self._answer_waiting(200, SIGNED_IN_PAGE)
            self.close()

    def fail(self, error: SignInError) -> None:
        """End the wait with `error` (the card was declined, refused, cancelled or expired); a
        browser held until the card's answer is told why."""
        if not self._result.done():
            self._result.set_exception(error)
            self._result.exception()  # retrieved here: nobody may be awaiting it any more
        self._answer_waiting(403, f"Elicitron did not finish this sign-in: {error}. You can close this tab.")
        self.close()

    def close(self) -> None:
        """Stop listening, drop connections still waiting to send a request, and answer any
        redirect still held."""
        if self._server is not None:
            self._server.close()
            self._server = None
        self._answer_waiting(410, ENDED_PAGE)
        for connection in list(self._held):
            connection.drop_if_idle()

    def _answer_waiting(self, status: int, text: str) -> None:
        waiting, self._waiting = self._waiting, []
        for reply in waiting:
            reply(status, text)

    def deliver(self, url: str, reply: Reply) -> None:
        """Take one redirect (a request's target, or a pasted address) and answer it through
        `reply`: at once, or, for a code that came before the card's accept, once the card is
        answered. Raises nothing: a wrong redirect is refused and the wait goes on."""
        if self._result.done():
            reply(410, "This sign-in is already finished; you can close this tab.")
            return
        status, text = self._take(url)
        if status:
            reply(status, text)
        else:
            self._waiting.append(reply)

    def _take(self, url: str) -> tuple[int, str]:
        """What a redirect does to the sign-in; status 0: held until the card is answered."""
        try:
            parts = urlsplit(url)
        except ValueError:
            return 400, "That is not a web address."
        if parts.path != CALLBACK_PATH:
            return 404, "Not the sign-in address."
        query = parse_qs(parts.query)
        state = query.get("state", [""])[0]
        if self._state is None or not secrets.compare_digest(state.encode(), self._state.encode()):
            self.counts.forged_redirects += 1
            _complaints.warning(("sign-in redirect", "state"),
                                "refused a sign-in redirect whose state does not match (%d so far); still waiting",
                                self.counts.forged_redirects)
            return 400, ("This sign-in answer does not belong to the sign-in Elicitron is waiting for "
                         "(its state does not match). It was ignored.")
        error = query.get("error", [""])[0]
        if error:
            described = query.get("error_description", [error])[0]
            failure = SignInDeclinedError if error == "access_denied" else SignInError
            self.fail(failure(f"the authorization server answered {error}: {described}"))
            return 200, f"Sign-in did not complete: {described}. You can close this tab."
        code = query.get("code", [""])[0]
        if not code:
            return 400, "The answer has no authorization code."
        result = AuthorizationCodeResult(code=code, state=state, iss=query.get("iss", [None])[0])
        if not self._accepted:
            if self._early is None:  # a second one (a reload) waits with it; the first code counts
                self._early = result
                logger.info("a sign-in redirect came before its card was accepted; it waits for the card's answer")
            return 0, ""
        self._result.set_result(result)
        self.close()
        return 200, SIGNED_IN_PAGE

    # ---- connections ----------------------------------------------------------------------

    def _admit(self, connection: "_Connection") -> bool:
        source = connection.source
        if len(self._held) >= MAX_CONNECTIONS or self._per_source.get(source, 0) >= MAX_PER_SOURCE:
            self._refused("over its cap")
            return False
        self._held.add(connection)
        self._per_source[source] = self._per_source.get(source, 0) + 1
        return True

    def _release(self, connection: "_Connection") -> None:
        if connection not in self._held:
            return
        self._held.discard(connection)
        left = self._per_source.get(connection.source, 1) - 1
        if left > 0:
            self._per_source[connection.source] = left
        else:
            self._per_source.pop(connection.source, None)

    def _refused(self, why: str) -> None:
        self.counts.refused_connections += 1
        _complaints.warning(("sign-in listener", why),
                            "the sign-in listener closed a connection %s (at most %d at once, %d from one "
                            "address, %.0f s to send a request; %d closed so far)", why, MAX_CONNECTIONS,
                            MAX_PER_SOURCE, HEADER_TIMEOUT_S, self.counts.refused_connections)

    def _target_url(self, target: str) -> str:
        return f"http://127.0.0.1:{self._port}{target}"


class _Connection(asyncio.Protocol):
    """One HTTP/1.1 request to the listener: its head, one answer, closed. Protocol callbacks,
    no task per connection, so one refused costs nothing but its accept."""

    def __init__(self, listener: RedirectListener) -> None:
        self._listener = listener
        self._transport: asyncio.Transport | None = None
        self._head = bytearray()
        self._timer: asyncio.TimerHandle | None = None
        self._answered = False
        self.source = "?"

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        transport = cast(asyncio.Transport, transport)  # uvloop's is not a subclass, only alike
        self._transport = transport
        peer = transport.get_extra_info("peername")
        self.source = str(peer[0]) if isinstance(peer, tuple) and peer else "?"
        if not self._listener._admit(self):
            transport.abort()  # a reset, at once: nothing read, nothing kept
            return
        self._timer = asyncio.get_running_loop().call_later(HEADER_TIMEOUT_S, self._timed_out)

    def data_received(self, data: bytes) -> None:
        if self._answered:
            return
        self._head += data
        end = self._head.find(b"\r\n\r\n")
        if end < 0:
            if len(self._head) > _MAX_REQUEST_BYTES:
                self._answer(400, "Bad request.")
            return
        self._answered = True  # before `deliver`: its request is in hand, so `close` does not drop it
        status, text = 400, "Bad request."
        if end <= _MAX_REQUEST_BYTES:
            line = bytes(self._head[:end]).split(b"\r\n", 1)[0].decode("latin-1")
            method, _, rest = line.partition(" ")
            target = rest.rpartition(" ")[0]
            if method == "GET" and target.startswith("/"):
                if self._timer is not None:  # a held redirect waits for the card, not for its head
                    self._timer.cancel()
                self._listener.deliver(self._listener._target_url(target), self._answer)
                return
        self._answer(status, text)

    def eof_received(self) -> bool:
        return False  # the peer is done sending: close (an answer already written still goes)

    def connection_lost(self, exc: Exception | None) -> None:
        if self._timer is not None:
            self._timer.cancel()
        self._listener._release(self)

    def drop_if_idle(self) -> None:
        if not self._answered and self._transport is not None:
            self._transport.abort()

    def _timed_out(self) -> None:
        if not self._answered and self._transport is not None:
            self._listener._refused("that sent no request in time")
            self._transport.abort()

    def _answer(self, status: int, text: str) -> None:
        self._answered = True
        if self._timer is not None:
            self._timer.cancel()
        assert self._transport is not None
        if self._transport.is_closing():  # the browser gave up while its redirect was held
            return
        body = (f"<!doctype html><meta charset=utf-8><title>Elicitron sign-in</title>"
                f"<p>{html.escape(text)}</p>").encode()
        self._transport.write(
            f"HTTP/1.1 {status} {_REASONS.get(status, 'Error')}\r\nContent-Type: text/html; charset=utf-8\r\n"
            f"Content-Length: {len(body)}\r\nCache-Control: no-store\r\nConnection: close\r\n\r\n".encode() + body)
        self._transport.close()  # after what was written is sent
