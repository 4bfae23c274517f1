"""The web window behind a reverse proxy (docs/web.md: Caddy, Tailscale serve): `elicitron
web --origin URL` accepts the Host and Origin the proxy's address gives, and the pairing link names
that address, not the loopback one a phone cannot open. The proxy here is a byte-for-byte TCP
forwarder on another port (it keeps the browser's Host header, as Caddy does); Debian's chromium
pairs and answers through it. Skipped (with the reason) where /usr/bin/chromium is missing."""

import json
import socket
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from kit.main import RunningMain
from web_kit import chromium_missing, web_window

if TYPE_CHECKING:
    from playwright.sync_api import Browser

pytestmark = [pytest.mark.slow, pytest.mark.skipif(chromium_missing() is not None,
                                                   reason=chromium_missing() or "")]

TIMEOUT_MS = 15_000


class _Forwarder:
    """Accepts on 127.0.0.1:<port> and pipes each connection to `target` both ways."""

    def __init__(self) -> None:
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.target: tuple[str, int] | None = None
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return  # closed
            assert self.target is not None
            upstream = socket.create_connection(self.target)
            for source, sink in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pipe, args=(source, sink), daemon=True).start()

    @staticmethod
    def _pipe(source: socket.socket, sink: socket.socket) -> None:
        try:
            while data := source.recv(65536):
                sink.sendall(data)
        except OSError:
            pass
        finally:
            for end in (source, sink):
                try:
                    end.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def close(self) -> None:
        self.listener.close()


@pytest.fixture
def proxy() -> Iterator[_Forwarder]:
    forwarder = _Forwarder()
    yield forwarder
    forwarder.close()


def test_behind_a_proxy_the_pairing_link_names_the_proxy_and_a_browser_answers_through_it(
        demo_main: RunningMain, proxy: _Forwarder, browser: "Browser", tmp_path: Path) -> None:
    public = f"http://127.0.0.1:{proxy.port}"
    with web_window(demo_main, tmp_path / "web", "--origin", public) as web:
        host, port = web.url.rsplit("//", 1)[1].rsplit(":", 1)
        proxy.target = (host, int(port))
        link = web.pair_link("proxied phone")
        assert link.startswith(f"{public}/pair#"), link
        assert json.loads((tmp_path / "web" / "web.json").read_text())["url"] == public

        page = browser.new_context(viewport={"width": 360, "height": 780}).new_page()
        page.goto(link)
        page.get_by_role("button", name="Pair this browser").click()
        page.get_by_text("Connected to main.").wait_for(timeout=TIMEOUT_MS)
        assert page.url == f"{public}/"
        caller = demo_main.peer("proxy-test-host", role="controller")
        channel = caller.call_tool("demo", "book_table", {"restaurant": "Behind the Proxy"})
        page.get_by_text("Book a table at Behind the Proxy?").wait_for(timeout=TIMEOUT_MS)
        page.get_by_label("Name on the booking (required)").fill("Proxied")
        page.get_by_role("button", name="Accept").click()
        answer = json.loads(caller.expect_topic(channel, timeout_s=15)["result"]["content"][0]["text"])
        assert answer["action"] == "accept" and answer["content"]["name"] == "Proxied"
        page.context.close()
