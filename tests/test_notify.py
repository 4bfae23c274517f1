"""main's `notify` webhooks end to end: a real main with the demo server POSTs to a real HTTP
receiver on loopback (tests/kit/receiver.py); the link is a real `elicitron web`'s; failures and
the rate limit show in `elicitron status`; a URL that is not http(s) stops main at start."""

import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from kit import contract
from kit.demo import demo_stdio_entry
from kit.env import default_home
from kit.main import RunningMain, start_main, write_config
from kit.receiver import WebhookReceiver
from web_kit import web_window

SECRET = "sk-live-51HxQ2eZvKYlo2C0aBcD"
URL_SECRET = "T0B0-whk-8c1f2e7d9a4b"  # a webhook URL's own credential (its path)
SECRET_FORM = {"message": f"Paste the deploy key ({SECRET}) to go on", "schema": {
    "type": "object", "properties": {"key": {"type": "string", "title": f"Key {SECRET}", "default": SECRET}}}}

MainWithNotify = Callable[..., RunningMain]


@pytest.fixture
def receiver() -> Iterator[WebhookReceiver]:
    with WebhookReceiver() as running:
        yield running


@pytest.fixture
def notify_main(main_factory: Callable[..., RunningMain], tmp_path: Path) -> MainWithNotify:
    """main with the demo server (ready) and `notify` set to the keys given."""

    def start(**notify: Any) -> RunningMain:
        config = write_config(tmp_path / "mcp.json", {"demo": demo_stdio_entry()}, elicitron={"notify": notify})
        main: RunningMain = main_factory.with_config(config)  # type: ignore[attr-defined]
        main.wait_server_ready("demo")
        return main

    return start


def notify_status(main: RunningMain, holds: Callable[[dict[str, Any]], bool], what: str) -> dict[str, Any]:
    """The one receiver's entry in main's status once `holds(entry)`."""
    status = main.wait_status(lambda s: len(s.get("notify", [])) == 1 and holds(s["notify"][0]), what)
    entry: dict[str, Any] = status["notify"][0]
    return entry


def test_each_request_no_window_got_is_posted_once_with_the_web_link_and_none_of_its_values(
        notify_main: MainWithNotify, receiver: WebhookReceiver) -> None:
    main = notify_main(url=receiver.url)
    caller = main.peer("caller", role="controller")
    # The web window's default dir under main's home: main finds its web.json there.
    with web_window(main, default_home() / "state" / "elicitron" / "web") as web:
        caller.call_tool("demo", "ask", SECRET_FORM)
        (first,) = receiver.wait_for(1)
        notice = first.json()
        assert (first.method, first.path, first.headers["content-type"]) == ("POST", "/hook", "application/json")
        assert {k: notice[k] for k in ("source", "count", "server", "kind", "mode", "title", "link")} == {
            "source": "elicitron", "count": 1, "server": "demo", "kind": "elicitation", "mode": "form",
            "title": "demo asks for your input", "link": f"{web.url}/"}
        assert notice["message"] == f"demo asks for your input. Answer at {web.url}/"
        window = main.peer("desk-window")  # a window attached: what it gets is no notice
        caller.call_tool("demo", "book_table", {"restaurant": SECRET})
        window.expect(lambda topic, body: topic == contract.INVOKE
                      and body["request"]["params"]["message"] == f"Book a table at {SECRET}?")
        window.close()
        main.wait_peer("desk-window", attached=False)
        caller.call_tool("demo", "open_link", {"url": f"https://example.com/authorize?token={SECRET}"})
        second = receiver.wait_for(2)[1].json()
        # One at a time, in order: had the windowed request been notified, it would be the second.
        assert (second["title"], second["link"]) == ("demo asks you to open a link", f"{web.url}/")
    caller.call_tool("demo", "ask", {"message": "and now?"})  # the web window has stopped: no link
    third = receiver.wait_for(3)[2].json()
    assert (third["title"], third["link"], third["message"]) == (
        "demo asks for your input", None, "demo asks for your input. Open an Elicitron window to answer.")
    entry = notify_status(main, lambda n: n.get("sent") == 3, "three sent")
    assert len(receiver.received) == 3 and entry.get("failed", 0) == 0
    for post in receiver.received:
        assert SECRET not in post.text
    base = receiver.url.removesuffix("/hook")
    assert f"notify json {base}/…: 3 sent, 0 failed\n" in main.cli("status").stdout


def test_a_failing_receiver_is_retried_then_the_failure_shows_in_status(
        notify_main: MainWithNotify, receiver: WebhookReceiver) -> None:
    receiver.answer_with(500)
    main = notify_main(url=f"{receiver.url}/{URL_SECRET}", retries=2)
    main.peer("caller", role="controller").call_tool("demo", "ask", {"message": "Deploy?"})
    posts = receiver.wait_for(3)  # the first, then after 1 s and 2 s
    assert all(post.path == f"/hook/{URL_SECRET}" for post in posts)
    entry = notify_status(main, lambda n: n.get("failed") == 1, "the failure")
    assert entry["lastError"] == "HTTP 500 Internal Server Error (3 attempts; 1 request not notified)"
    assert len(receiver.received) == 3
    shown = main.cli("status")
    assert shown.returncode == 0, shown.stderr
    failure = (r"^notify json http://127\.0\.0\.1:\d+/…: 0 sent, 1 failed\n  last failure at \d\d:\d\d:\d\d: "
               r"HTTP 500 Internal Server Error \(3 attempts; 1 request not notified\)$")
    assert re.search(failure, shown.stdout, re.MULTILINE), shown.stdout
    as_json = main.cli("status", "--json")
    assert URL_SECRET not in shown.stdout + as_json.stdout
    assert URL_SECRET not in main.stderr.text()  # main's log (at info: httpx2 logs each request's URL)


def test_a_burst_of_requests_is_rate_limited(notify_main: MainWithNotify, receiver: WebhookReceiver) -> None:
    main = notify_main(url=receiver.url, burst=2, burstWindowSeconds=3600)
    caller = main.peer("caller", role="controller")
    for index in range(5):
        caller.call_tool("demo", "ask", {"message": f"question {index}"})
    entry = notify_status(main, lambda n: n["state"] == "rate-limited" and n.get("sent") == 2 and n.get("held") == 3,
                          "two sent, three held")
    # Held for the hour: nothing more can reach the receiver before then.
    assert len(receiver.received) == 2 and entry.get("dropped", 0) == 0
    assert [post.json()["count"] for post in receiver.received] == [1, 1]
    assert ": 2 sent, 0 failed, 3 held (rate limit)\n" in main.cli("status").stdout


def test_a_notify_url_that_is_not_http_is_refused_at_start_and_on_reload(
        runtime_dir: Path, tmp_path: Path, notify_main: MainWithNotify, receiver: WebhookReceiver) -> None:
    bad = write_config(tmp_path / "bad.json", {"demo": demo_stdio_entry()},
                       elicitron={"notify": {"url": "ftp://files.example.com/drop"}})
    refused = start_main(bad, runtime_dir, wait=False)
    try:
        code = refused.proc.wait(30)
    finally:
        refused.stop()
    said = (f"elicitron: config error: {bad}: elicitron.notify: \"url\" must be an http:// or https:// URL with a "
            "host (ftp: given); e.g. \"https://ntfy.sh/my-topic\"")
    assert (code, refused.stderr.text().strip()) == (2, said)
    main = notify_main(url=receiver.url)
    reload = main.cli("reload", "--config", str(bad))
    assert (reload.returncode, said.removeprefix("elicitron: config error: ") in reload.stderr) == (2, True), \
        reload.stderr
    assert [n["target"] for n in main.status()["notify"]] == [f"json {receiver.url.removesuffix('/hook')}/…"]
    with WebhookReceiver("/elicitron-topic") as ntfy:  # a reload to another receiver takes it from then on
        good = write_config(tmp_path / "good.json", {"demo": demo_stdio_entry()},
                            elicitron={"notify": {"url": ntfy.url, "format": "ntfy"}})
        assert main.cli("reload", "--config", str(good)).returncode == 0
        assert [n["target"] for n in main.status()["notify"]] == [f"ntfy {ntfy.url.removesuffix('/elicitron-topic')}/…"]
        main.wait_server_ready("demo")
        main.peer("caller", role="controller").call_tool("demo", "ask", {"message": "ntfy?"})
        (pushed,) = ntfy.wait_for(1)
    assert (pushed.path, pushed.headers["title"], pushed.body.decode()) == (
        "/elicitron-topic", "demo asks for your input", "demo asks for your input. Open an Elicitron window to answer.")
    assert receiver.received == []
