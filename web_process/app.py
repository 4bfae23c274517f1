"""The web window's Starlette app: the static page, pairing, and one event stream per page.

Pushes go to the page as server-sent events (`GET /events`, an EventSource): the installed uvicorn
has no WebSocket library, and a stream one way plus a POST per answer is all a card needs. Each
stream is one renderer peer of main (page_peer.py); its first event names the stream, and what the
page sends (`POST /api/answer`: answers, revocations of remembered answers, a pasted sign-in
address) names it back.

Checks, before anything is read or answered:
- Host must be one of ours (listen.py): a foreign name resolved to our address (DNS rebinding)
  gets 403.
- Every state-changing request (the pairing POST, answers) must carry one of our Origins; the
  event stream too when the browser sends one (a foreign Origin gets 403, none at all needs
  `Sec-Fetch-Site: same-origin`).
- Everything but the pairing page needs a paired device's cookie (devices.py): 401 without one.
- Every response: a Content-Security-Policy of `default-src 'self'` with `frame-ancestors 'none'`
  (no inline script anywhere), nosniff, no referrer, no caching.

Event streams: at most MAX_STREAMS_PER_DEVICE per paired device and MAX_STREAMS in all
(streams.py), more get 503; a stream's place is taken as it is registered and given back when its
response ends, so one device cannot take every stream (issue 33). The connections themselves are
bounded before the app sees them (connections.py).
"""

import asyncio
import json
import logging
import secrets
from collections.abc import AsyncIterator, Awaitable, Callable, MutableMapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import Route

from shared.errors import PageMessageError, PairingError
from shared.messages import DeviceRef
from web_process.devices import Device, WebDir
from web_process.listen import Listen
from web_process.page_peer import PagePeer, read_page_message
from web_process.streams import EventStream, StreamSlots

logger = logging.getLogger(__name__)

COOKIE = "elicitron_device"
COOKIE_MAX_AGE_S = 365 * 24 * 3600
KEEPALIVE_S = 15.0  # a comment line now and then: proxies close streams that say nothing
REVOKE_CHECK_S = 1.0  # how soon an open page of a revoked device is cut off (one stat of devices.json)
MAX_BODY_BYTES = 1_000_000  # an answer's content, with room; more is refused unread
RETRY_MS = 1000  # EventSource's wait before it opens a stream again (Chromium's default is 3 s)
MAX_STREAMS = 64  # pages open at once (each is a peer of main): more get 503
# One device's share: a second device's page opens while one holds all of its own. A browser opens
# at most 6 connections to a host over HTTP/1.1, so 16 leaves room for tabs behind an HTTP/2 proxy.
MAX_STREAMS_PER_DEVICE = 16
STATIC = Path(__file__).parent / "static"
CSP = ("default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; "
       "base-uri 'none'; form-action 'none'; frame-ancestors 'none'")
SECURITY_HEADERS = [
    (b"content-security-policy", CSP.encode()),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"no-referrer"),
    (b"cache-control", b"no-store"),
    (b"x-frame-options", b"DENY"),
]
_TYPES = {".html": "text/html; charset=utf-8", ".js": "text/javascript; charset=utf-8",
          ".css": "text/css; charset=utf-8", ".webmanifest": "application/manifest+json",
          ".svg": "image/svg+xml"}
# What a browser not yet paired may load; the manifest and icon too, since browsers fetch them
# without cookies, and the service worker, which holds nothing but its notification click.
PUBLIC_FILES = ("pair.html", "pair.js", "app.css", "manifest.webmanifest", "icon.svg", "sw.js")
PAIRED_FILES = ("index.html", "app.js", "dom.js", "elsewhere.js", "grant.js", "notify.js", "policy.js",
                "remembered.js", "sign_in.js", "time_left.js")

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
Asgi = Callable[[Scope, Receive, Send], Awaitable[None]]


@dataclass
class _Stream:
    device: Device
    page: PagePeer
    queue: "asyncio.Queue[dict[str, Any] | None]"  # None: the web window stops
    loop: asyncio.AbstractEventLoop
    attaching: "asyncio.Task[None] | None" = None


class SecurityHeaders:
    """ASGI middleware: refuse a foreign Host; put the security headers on every response."""

    def __init__(self, app: Asgi, hosts: frozenset[str]) -> None:
        self.app, self.hosts = app, hosts

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        host = dict(scope["headers"]).get(b"host", b"").decode("latin-1").lower()

        async def with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = [*message.get("headers", []), *SECURITY_HEADERS]
            await send(message)

        if host not in self.hosts:
            await PlainTextResponse("unknown host", 403)(scope, receive, with_headers)
            return
        await self.app(scope, receive, with_headers)


class WebWindow:
    def __init__(self, connection_path: Path, web_dir: WebDir, listen: Listen) -> None:
        self.connection_path = connection_path
        self.web_dir = web_dir
        self.listen = listen
        self.origins = listen.origins()
        self.streams: dict[str, _Stream] = {}
        self.slots = StreamSlots(MAX_STREAMS_PER_DEVICE, MAX_STREAMS)
        self._files = {name: (STATIC / name).read_bytes() for name in (*PUBLIC_FILES, *PAIRED_FILES)}

    def close_streams(self) -> None:
        """End every page's stream now (the web window stops): each page peer says bye to main."""
        for stream in self.streams.values():
            # from a signal handler: between any two bytecodes of the loop, so through its wake-up
            stream.loop.call_soon_threadsafe(stream.queue.put_nowait, None)

    def asgi(self) -> Asgi:
        app = Starlette(routes=[
            Route("/", self.index),
            *[Route(f"/{name}", self.static_file) for name in (*PUBLIC_FILES, *PAIRED_FILES)
              if name not in ("index.html", "pair.html")],
            Route("/pair", self.pair_page),
            Route("/api/pair", self.pair, methods=["POST"]),
            Route("/api/answer", self.answer, methods=["POST"]),
            Route("/events", self.events),
        ])
        return SecurityHeaders(app, self.listen.hosts())

    # ---- checks ----------------------------------------------------------------------------

    def _device(self, request: Request) -> Device | None:
        return self.web_dir.device_for(request.cookies.get(COOKIE))

    def _paired_device(self, request: Request, *, origin_required: bool) -> Device | Response:
        """The paired device a request comes from, or the refusal to send: a foreign Origin (403)
        before the cookie is looked at, then no device credential (401)."""
        refused = self._origin_refused(request, required=origin_required)
        if refused is not None:
            return refused
        device = self._device(request)
        return PlainTextResponse("not paired", 401) if device is None else device

    def _origin_refused(self, request: Request, *, required: bool) -> Response | None:
        origin = request.headers.get("origin")
        if origin is None:
            if not required and request.headers.get("sec-fetch-site") == "same-origin":
                return None
            return PlainTextResponse("a request without an Origin header is refused", 403)
        if origin.lower() not in self.origins:
            return PlainTextResponse("foreign origin", 403)
        return None

    def _served_over_tls(self, request: Request) -> bool:
        """TLS here, or a TLS reverse proxy in front (the page's Origin, one of ours, is https):
        either way the browser holds the cookie as Secure."""
        return self.listen.tls is not None or request.headers.get("origin", "").lower().startswith("https://")

    def _file(self, name: str) -> Response:
        return Response(self._files[name], media_type=_TYPES[Path(name).suffix])

    # ---- routes ----------------------------------------------------------------------------

    async def index(self, request: Request) -> Response:
        if self._device(request) is None:
            return PlainTextResponse("This browser is not paired: run `elicitron pair --web` on the machine "
                                     "that runs Elicitron and open the link it prints.", 401)
        return self._file("index.html")

    async def static_file(self, request: Request) -> Response:
        name = request.url.path.lstrip("/")
        if name in PAIRED_FILES and self._device(request) is None:
            return PlainTextResponse("not paired", 401)
        return self._file(name)

    async def pair_page(self, request: Request) -> Response:
        return self._file("pair.html")

    async def pair(self, request: Request) -> Response:
        refused = self._origin_refused(request, required=True)
        if refused is not None:
            return refused
        body = await _json_body(request)
        code = body.get("code") if isinstance(body, dict) else None
        try:
            device, token = self.web_dir.redeem(code if isinstance(code, str) else "",
                                                request.headers.get("user-agent", ""))
        except PairingError as exc:
            logger.warning("refused a pairing: %s", exc)
            return JSONResponse({"error": f"{exc}: run `elicitron pair --web` again for a new link"}, 403)
        logger.info("paired device %s (%s)", device.id, device.name)
        response = JSONResponse({"name": device.name})
        response.set_cookie(COOKIE, token, max_age=COOKIE_MAX_AGE_S, path="/", httponly=True,
                            samesite="strict", secure=self._served_over_tls(request))
        return response

    async def answer(self, request: Request) -> Response:
        device = self._paired_device(request, origin_required=True)
        if isinstance(device, Response):
            return device
        stream = self.streams.get(request.query_params.get("stream", ""))
        if stream is None or stream.device.id != device.id:
            return JSONResponse({"error": "this page is no longer connected; reload it"}, 409)
        try:
            message = read_page_message(await _capped_body(request))
        except PageMessageError as exc:
            return JSONResponse({"error": str(exc)}, 400)
        self.web_dir.seen(device)
        stream.page.handle(message)
        return JSONResponse({"sent": True}, 202)

    async def events(self, request: Request) -> Response:
        device = self._paired_device(request, origin_required=False)
        if isinstance(device, Response):
            return device
        if not self.slots.take(device.id):  # the check and the count in one step: no await between
            if self.slots.refused % 100 == 1:  # the first, then one in a hundred: a device asking without end
                logger.warning("refused a page of %s (%s): %d pages open (%d refused so far)", device.id,
                               device.name, self.slots.open, self.slots.refused)
            return PlainTextResponse(f"this browser has {MAX_STREAMS_PER_DEVICE} pages open, or all browsers "
                                     f"together {MAX_STREAMS}: close one", 503)
        stream_id = self._register(device)
        return EventStream(self._stream(stream_id), lambda: self._end_stream(stream_id))

    def _register(self, device: Device) -> str:
        queue: asyncio.Queue[dict[str, Any] | None] = asyncio.Queue()
        stream_id = secrets.token_urlsafe(18)
        page = PagePeer(self.connection_path, f"{device.name} (web)", queue.put_nowait,
                        device=DeviceRef(id=device.id, name=device.name))
        self.streams[stream_id] = _Stream(device, page, queue, asyncio.get_running_loop())
        return stream_id

    def _end_stream(self, stream_id: str) -> None:
        stream = self.streams.pop(stream_id, None)
        if stream is None:
            return
        self.slots.give_back(stream.device.id)
        if stream.attaching is not None:
            stream.attaching.cancel()
        stream.page.close()

    async def _stream(self, stream_id: str) -> AsyncIterator[str]:
        stream = self.streams.get(stream_id)
        if stream is None:  # ended before its body started (the web window stops)
            return
        device, page, queue, loop = stream.device, stream.page, stream.queue, stream.loop
        stream.attaching = asyncio.create_task(page.run())
        self.web_dir.seen(device)
        try:
            # retry: a restarted web window (or a stream ended for a revoked device) is tried again after 1 s
            yield f"retry: {RETRY_MS}\n" + _event({"type": "hello", "stream": stream_id, "device": device.name})
            said_at = loop.time()
            while True:
                try:
                    message = await asyncio.wait_for(queue.get(), REVOKE_CHECK_S)
                except TimeoutError:
                    message = {}
                if message is None:
                    return
                if not self.web_dir.still_paired(device.id):
                    logger.info("device %s (%s) was revoked: its page gets nothing more", device.id, device.name)
                    return
                self.web_dir.seen(device)
                if message:
                    yield _event(message)
                elif loop.time() - said_at >= KEEPALIVE_S:
                    yield ": keepalive\n\n"
                else:
                    continue
                said_at = loop.time()
        finally:
            self._end_stream(stream_id)


def _event(message: dict[str, Any]) -> str:
    return f"data: {json.dumps(message, ensure_ascii=False)}\n\n"


async def _capped_body(request: Request) -> bytes:
    """The body, or PageMessageError once it passes MAX_BODY_BYTES (the rest is not read)."""
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > MAX_BODY_BYTES:
            raise PageMessageError(f"a request body over {MAX_BODY_BYTES} bytes")
        chunks.append(chunk)
    return b"".join(chunks)


async def _json_body(request: Request) -> object:
    try:
        return json.loads(await _capped_body(request))
    except (PageMessageError, ValueError):
        return None
