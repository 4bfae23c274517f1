"""main's listener for the authorization redirect (RFC 8252 §7.3): 127.0.0.1, a port the OS
picks, path /callback, one use.

A redirect whose `state` is not the one this sign-in sent is refused with 400 and the listener
keeps waiting for the real one (a stray or forged request must not end the sign-in). The same
check applies to an address a user pastes from a browser on another machine (`deliver`). The
first redirect with the right state ends it: its `code` (or the authorization server's `error`)
becomes the result, and the socket closes. Nothing here logs a code or a state.
"""

import asyncio
import html
import logging
import secrets
from urllib.parse import parse_qs, urlsplit

from mcp.shared.auth import AuthorizationCodeResult

from shared.errors import SignInDeclinedError, SignInError

logger = logging.getLogger(__name__)

CALLBACK_PATH = "/callback"
_MAX_REQUEST_BYTES = 16 * 1024
_READ_TIMEOUT_S = 10.0


class RedirectListener:
    def __init__(self) -> None:
        self._server: asyncio.Server | None = None
        self._port = 0
        self._state: str | None = None
        self._result: asyncio.Future[AuthorizationCodeResult] = asyncio.get_running_loop().create_future()
        self.refused = 0  # redirects refused for a wrong state (for status and tests)

    async def start(self) -> str:
        self._server = await asyncio.start_server(self._on_connection, "127.0.0.1", 0)
        self._port = self._server.sockets[0].getsockname()[1]
        return self.redirect_uri

    @property
    def redirect_uri(self) -> str:
        return f"http://127.0.0.1:{self._port}{CALLBACK_PATH}"

    @property
    def listening(self) -> bool:
        return self._server is not None

    def expect(self, state: str) -> None:
        """The `state` of the authorization request now in flight."""
        self._state = state

    async def result(self, timeout_s: float) -> AuthorizationCodeResult:
        try:
            return await asyncio.wait_for(asyncio.shield(self._result), timeout_s)
        except TimeoutError:
            raise SignInError(f"no redirect from the authorization server within {timeout_s:.0f} s") from None

    def fail(self, error: SignInError) -> None:
        """End the wait with `error` (the card was declined, cancelled or expired)."""
        if not self._result.done():
            self._result.set_exception(error)
            self._result.exception()  # retrieved here: nobody may be awaiting it any more
        self.close()

    def close(self) -> None:
        if self._server is not None:
            self._server.close()
            self._server = None

    def deliver(self, url: str) -> tuple[int, str]:
        """Take one redirect (a request's target, or a pasted address); (HTTP status, text for
        the person). Raises nothing: a wrong redirect is refused and the wait goes on."""
        if self._result.done():
            return 410, "This sign-in is already finished; you can close this tab."
        try:
            parts = urlsplit(url)
        except ValueError:
            return 400, "That is not a web address."
        if parts.path != CALLBACK_PATH:
            return 404, "Not the sign-in address."
        query = parse_qs(parts.query)
        state = query.get("state", [""])[0]
        if self._state is None or not secrets.compare_digest(state.encode(), self._state.encode()):
            self.refused += 1
            logger.warning("refused a sign-in redirect whose state does not match (%d so far); still waiting",
                           self.refused)
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
        self._result.set_result(AuthorizationCodeResult(code=code, state=state, iss=query.get("iss", [None])[0]))
        self.close()
        return 200, "Signed in. You can close this tab and go back to Elicitron."

    async def _on_connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        status, text = 400, "Bad request."
        try:
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), _READ_TIMEOUT_S)
            if len(head) <= _MAX_REQUEST_BYTES:
                method, _, rest = head.split(b"\r\n", 1)[0].decode("latin-1").partition(" ")
                target = rest.rpartition(" ")[0]
                if method == "GET" and target.startswith("/"):
                    status, text = self.deliver(f"http://127.0.0.1:{self._port}{target}")
        except (TimeoutError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, ConnectionError):
            return
        finally:
            if not writer.is_closing():
                body = (f"<!doctype html><meta charset=utf-8><title>Elicitron sign-in</title>"
                        f"<p>{html.escape(text)}</p>").encode()
                reason = {200: "OK", 400: "Bad Request", 404: "Not Found", 410: "Gone"}.get(status, "Error")
                writer.write(f"HTTP/1.1 {status} {reason}\r\nContent-Type: text/html; charset=utf-8\r\n"
                             f"Content-Length: {len(body)}\r\nCache-Control: no-store\r\nConnection: close\r\n\r\n"
                             .encode() + body)
                try:
                    await writer.drain()
                except ConnectionError:
                    pass
                writer.close()
