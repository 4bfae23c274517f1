"""main's `notify` webhooks without main: the config, what a notice says in each format, and the
sender against a real HTTP receiver on loopback (tests/kit/receiver.py), with time on a
SettableClock: one POST per request, the rate limit, retries and backoff, the bounded queue."""

import asyncio
import base64
import json
import os
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import pytest
from kit.receiver import WebhookReceiver

from main_process.clock import SettableClock
from main_process.config import parse_config
from main_process.consent.pending import Elicitation, PendingRequest, PendingRequests, RequestOptions
from main_process.notify.config import NotifyTarget, parse_notify, redact
from main_process.notify.link import running_web_url
from main_process.notify.notifier import Notifier
from main_process.notify.payload import notice_for, render
from main_process.notify.sender import WebhookSender
from shared.errors import ConfigError
from shared.messages import ApprovalInfo, AskerInfo, ElicitationResult, NotifyStatus

SECRET = "sk-live-51HxQ2eZvKYlo2C0aBcD"
FORM = {"mode": "form", "message": f"Paste the key {SECRET} to go on",
        "requestedSchema": {"type": "object", "properties": {
            "key": {"type": "string", "title": f"Key ({SECRET})", "default": SECRET}}}}
URL = {"mode": "url", "message": "Sign in", "url": f"https://example.com/cb?token={SECRET}", "elicitationId": "e1"}
HOUR = RequestOptions(timeout_s=3600)


class Outbox:
    """No window attached unless told."""

    def __init__(self, attached: Iterable[bytes] = ()) -> None:
        self.attached = list(attached)

    def renderers(self) -> list[bytes]:
        return list(self.attached)

    def send(self, routing_ids: Iterable[bytes], frames: list[bytes]) -> list[bytes]:
        return [rid for rid in routing_ids if rid in self.attached]


def run(test: Callable[[], Any]) -> Any:
    return asyncio.run(test())


def target(url: str, **keys: Any) -> NotifyTarget:
    (parsed,) = parse_notify({"url": url, **keys}, "mcp.json")
    return parsed


def opened(pending: PendingRequests, params: dict[str, Any] | None = None, server: str = "demo",
           options: RequestOptions = HOUR) -> PendingRequest:
    return pending.open(Elicitation.read(server, params or FORM), options, lambda _answer: None)


async def until(sender: WebhookSender, holds: Callable[[NotifyStatus], bool], what: str,
                timeout_s: float = 10.0) -> NotifyStatus:
    """The sender's status once `holds(status)`, waiting on its changes."""
    try:
        async with asyncio.timeout(timeout_s):
            while not holds(sender.status()):
                await sender.changed()
    except TimeoutError:
        raise AssertionError(f"{what}: not within {timeout_s} s; status {sender.status()}") from None
    return sender.status()


async def posts(receiver: WebhookReceiver, count: int) -> list[Any]:
    return [r.json() for r in await asyncio.to_thread(receiver.wait_for, count, 10.0)]


def notifier_for(pending: PendingRequests, *targets: NotifyTarget, clock: SettableClock,
                 link: str | None = None) -> Notifier:
    notifier = Notifier(targets, still_open=lambda channel: pending.get(channel) is not None,
                        link=lambda: link, clock=clock)
    pending.opened = notifier.opened
    notifier.start()
    return notifier


# ---- the config ---------------------------------------------------------------------------------


def test_a_notify_url_that_is_not_http_is_refused_with_what_to_write() -> None:
    for url, shown in (("ftp://files.example.com/drop", "ftp: given"), ("ntfy.sh/my-topic", "no scheme given"),
                       ("file:///etc/passwd", "file: given"), ("https:///nohost", "https: given")):
        with pytest.raises(ConfigError) as refused:
            parse_config({"mcpServers": {}, "elicitron": {"notify": {"url": url}}}, "mcp.json")
        assert str(refused.value) == (f"mcp.json: elicitron.notify: \"url\" must be an http:// or https:// URL with "
                                      f"a host ({shown}); e.g. \"https://ntfy.sh/my-topic\"")


@pytest.mark.parametrize(("entry", "says"), [
    ({"format": "ntfy"}, "needs \"url\""),
    ({"url": "https://ntfy.sh/t", "format": "telegram"}, "\"format\" must be one of 'json', 'ntfy', 'gotify'"),
    ({"url": "https://ntfy.sh/t", "burts": 3}, "unknown key 'burts'"),
    ({"url": "https://ntfy.sh/t", "when": "sometimes"}, "\"when\" must be \"no-window\""),
    ({"url": "https://ntfy.sh/t", "retries": 11}, "\"retries\" must be a whole number from 0 to 10"),
    ({"url": "https://ntfy.sh/t", "headers": {"Title": "a\r\nX-Injected: 1"}}, "must be ASCII on one line"),
    ({"url": "https://ntfy.sh/t", "link": "javascript:alert(1)"}, "\"link\" must be an http:// or https:// URL"),
    ({"url": "https://ntfy.sh/t", "burstWindowSeconds": 0}, "\"burstWindowSeconds\" must be a number of seconds"),
])
def test_a_bad_notify_entry_names_the_key_and_the_fix(entry: dict[str, Any], says: str) -> None:
    with pytest.raises(ConfigError) as refused:
        parse_notify([entry], "mcp.json")
    assert str(refused.value).startswith("mcp.json: elicitron.notify[0]: ") and says in str(refused.value)


def test_notify_defaults_and_a_label_without_the_secret_part_of_the_url() -> None:
    config = parse_config({"mcpServers": {}, "elicitron": {"notify": [
        {"url": f"https://hooks.slack.com/services/T0/B0/{SECRET}", "format": "slack"},
        {"url": f"https://user:{SECRET}@push.example.net:8443/message?token={SECRET}", "format": "gotify"}]}},
        "mcp.json")
    slack, gotify = config.notify
    assert (slack.when, slack.burst, slack.burst_window_s, slack.retries, slack.timeout_s, slack.link) == \
        ("no-window", 5, 60.0, 3, 10.0, None)
    assert (slack.label, gotify.label) == ("slack https://hooks.slack.com/…", "gotify https://push.example.net:8443/…")
    assert redact("http://[::1]:9/") == "http://[::1]:9" and parse_config({"mcpServers": {}}, "x").notify == ()


# ---- what a notice says ---------------------------------------------------------------------------


def test_a_notice_names_server_and_kind_and_never_the_request_s_content() -> None:
    async def body() -> None:
        pending = PendingRequests(Outbox(), asyncio.get_running_loop(), clock=SettableClock())
        form, url = opened(pending, FORM), opened(pending, URL)
        approval = opened(pending, {"mode": "form", "message": f"Allow? {SECRET}", "requestedSchema": {
            "type": "object", "properties": {"decision": {"type": "string", "enum": ["allow-once", "deny"]}}}},
            options=RequestOptions(timeout_s=60, kind="approval", via="Claude Desktop", approval=ApprovalInfo(
                server="files", tool="delete_file", arguments={"path": f"/home/{SECRET}"})))
        question = opened(pending, FORM, server="deploy.sh", options=RequestOptions(
            timeout_s=60, kind="question", asker=AskerInfo(name="deploy.sh", pid=42, machine="build-7")))
        notices = [notice_for(p.invoke, p.params.mode) for p in (form, url, approval, question)]
        assert [n.title for n in notices] == [
            "demo asks for your input", "demo asks you to open a link",
            "files: allow the tool delete_file? (via Claude Desktop)", "deploy.sh asks you a question"]
        assert [(n.kind, n.mode) for n in notices] == [
            ("elicitation", "form"), ("elicitation", "url"), ("approval", "form"), ("question", "form")]
        for fmt in ("json", "ntfy", "gotify", "slack", "discord"):
            for notice in notices:
                out = render([notice], 1, "https://phone.example.net/", fmt)
                assert SECRET not in out.body.decode() + json.dumps(out.headers)

    run(body)


def test_each_format_fits_its_receiver() -> None:
    async def body() -> None:
        pending = PendingRequests(Outbox(), asyncio.get_running_loop(), clock=SettableClock())
        plain = notice_for(opened(pending, FORM).invoke, "form")
        odd = notice_for(opened(pending, FORM, server="<!channel> @everyone Zürich\u202e").invoke, "form")
        link = "https://phone.example.net/"
        as_json = json.loads(render([plain], 1, link, "json").body)
        assert {k: as_json[k] for k in ("source", "count", "server", "kind", "mode", "title", "link")} == {
            "source": "elicitron", "count": 1, "server": "demo", "kind": "elicitation", "mode": "form",
            "title": "demo asks for your input", "link": link}
        assert as_json["message"] == f"demo asks for your input. Answer at {link}"
        ntfy = render([odd], 1, link, "ntfy")
        title = ntfy.headers["Title"]
        assert title.startswith("=?UTF-8?B?") and ntfy.headers["Click"] == link
        assert base64.b64decode(title[10:-2]).decode() == "<!channel> @everyone Zürich\\u202e asks for your input"
        assert ntfy.body.decode().endswith(f"Answer at {link}")
        gotify = json.loads(render([plain], 1, link, "gotify").body)
        assert gotify["extras"] == {"client::notification": {"click": {"url": link}}} and gotify["priority"] == 8
        assert json.loads(render([odd], 1, link, "slack").body)["text"] == (
            f"&lt;!channel&gt; @everyone Zürich\\u202e asks for your input. <{link}|Open Elicitron>")
        assert json.loads(render([plain], 1, None, "slack").body)["text"] == (
            "demo asks for your input. Open an Elicitron window to answer.")
        discord = json.loads(render([odd], 1, link, "discord").body)
        assert discord["allowed_mentions"] == {"parse": []} and discord["content"].endswith(link)
        several = json.loads(render([plain, odd], 3, None, "json").body)
        assert (several["count"], several["server"], several["link"]) == (3, None, None)
        assert several["title"] == "3 requests wait (demo, <!channel> @everyone Zürich\\u202e)"

    run(body)


def test_the_link_is_the_running_web_window_s(tmp_path: Path) -> None:
    assert running_web_url(tmp_path) is None
    (tmp_path / "web.json").write_text(json.dumps({"url": "http://127.0.0.1:8766", "pid": 2 ** 22 + 7}))
    assert running_web_url(tmp_path) is None  # its process is gone
    (tmp_path / "web.json").write_text(json.dumps({"url": "http://127.0.0.1:8766", "pid": os.getpid()}))
    assert running_web_url(tmp_path) == "http://127.0.0.1:8766/"


# ---- sending -------------------------------------------------------------------------------------


def test_one_post_per_request_that_no_window_got_unless_always() -> None:
    async def body() -> None:
        clock = SettableClock()
        outbox = Outbox()
        pending = PendingRequests(outbox, asyncio.get_running_loop(), clock=clock)
        with WebhookReceiver() as unseen_only, WebhookReceiver() as always:
            notifier = notifier_for(pending, target(unseen_only.url), target(always.url, when="always"),
                                    clock=clock, link="http://127.0.0.1:8766/")
            opened(pending)
            first = (await posts(unseen_only, 1))[0]
            assert (first["title"], first["link"]) == ("demo asks for your input", "http://127.0.0.1:8766/")
            await posts(always, 1)
            outbox.attached = [b"\x00window"]
            opened(pending, URL)  # a window got it: only "always" hears of it
            assert (await posts(always, 2))[1]["title"] == "demo asks you to open a link"
            outbox.attached = []
            opened(pending, URL, server="files")
            assert [p["server"] for p in await posts(unseen_only, 2)] == ["demo", "files"]
            await posts(always, 3)
            first_sender, always_sender = notifier._senders
            assert (await until(first_sender, lambda s: s.sent == 2, "two sent")).failed == 0
            assert (await until(always_sender, lambda s: s.sent == 3, "three sent")).failed == 0
            assert (len(unseen_only.received), len(always.received)) == (2, 3)
            await notifier.close()

    run(body)


def test_a_burst_is_rate_limited_and_what_waited_goes_as_one_post() -> None:
    async def body() -> None:
        clock = SettableClock()
        pending = PendingRequests(Outbox(), asyncio.get_running_loop(), clock=clock)
        with WebhookReceiver() as receiver:
            notifier = notifier_for(pending, target(receiver.url, burst=2, burstWindowSeconds=60), clock=clock)
            (sender,) = notifier._senders
            burst = [opened(pending, server=f"s{i}") for i in range(6)]
            status = await until(sender, lambda s: s.state == "rate-limited" and s.sent == 2, "two sent, then held")
            assert status.held == 4 and len(receiver.received) == 2
            pending.withdraw(burst[2], "cancelled")  # answered meanwhile: left out of the notice
            clock.advance(59.9)
            assert len(receiver.received) == 2
            clock.advance(0.1)
            third = (await posts(receiver, 3))[2]
            assert (third["count"], third["title"]) == (3, "3 requests wait (s3, s4, s5)")
            await until(sender, lambda s: s.state == "idle" and s.sent == 3, "idle")
            await notifier.close()

    run(body)


def test_a_failing_receiver_is_retried_with_backoff_then_the_failure_is_kept() -> None:
    async def body() -> None:
        clock = SettableClock()
        pending = PendingRequests(Outbox(), asyncio.get_running_loop(), clock=clock)
        with WebhookReceiver() as receiver:
            receiver.answer_with(500)
            notifier = notifier_for(pending, target(receiver.url, retries=2), clock=clock)
            (sender,) = notifier._senders
            opened(pending)
            await posts(receiver, 1)
            await until(sender, lambda s: s.state == "retrying", "waiting to retry")
            clock.advance(0.9)
            assert len(receiver.received) == 1
            clock.advance(0.1)  # 1 s
            await posts(receiver, 2)
            await until(sender, lambda s: s.state == "retrying" and len(receiver.received) == 2, "second wait")
            clock.advance(1.9)
            assert len(receiver.received) == 2
            clock.advance(0.1)  # then 2 s
            await posts(receiver, 3)
            status = await until(sender, lambda s: s.failed == 1, "failed")
            assert status.last_error == "HTTP 500 Internal Server Error (3 attempts; 1 request not notified)"
            assert (status.sent, status.state) == (0, "idle") and status.last_error_at is not None
            receiver.answer_with(200)
            opened(pending)  # the next one goes as usual
            await posts(receiver, 4)
            assert (await until(sender, lambda s: s.sent == 1, "sent")).failed == 1
            await notifier.close()

    run(body)


def test_a_wrong_url_fails_at_once_and_429_waits_as_long_as_it_says() -> None:
    async def body() -> None:
        clock = SettableClock()
        pending = PendingRequests(Outbox(), asyncio.get_running_loop(), clock=clock)
        with WebhookReceiver() as receiver:
            receiver.answer_with(404)
            notifier = notifier_for(pending, target(receiver.url), clock=clock)
            (sender,) = notifier._senders
            opened(pending)
            status = await until(sender, lambda s: s.failed == 1, "failed")
            assert status.last_error == "HTTP 404 Not Found (1 attempt; 1 request not notified)"
            assert len(receiver.received) == 1
            receiver.answer_with(429, **{"Retry-After": "30"})
            opened(pending)
            await posts(receiver, 2)
            await until(sender, lambda s: s.state == "retrying", "waiting to retry")
            receiver.answer_with(200)
            clock.advance(29.9)  # not the 1 s backoff: the receiver asked for 30
            assert len(receiver.received) == 2
            clock.advance(0.1)
            await posts(receiver, 3)
            assert (await until(sender, lambda s: s.sent == 1, "sent")).failed == 1
            await notifier.close()

    run(body)


def test_an_unreachable_receiver_fails_without_showing_the_url_s_secret() -> None:
    async def body() -> None:
        clock = SettableClock()
        pending = PendingRequests(Outbox(), asyncio.get_running_loop(), clock=clock)
        with WebhookReceiver() as receiver:
            dead = receiver.url.rsplit("/", 1)[0] + f"/{SECRET}"
        notifier = notifier_for(pending, target(dead, retries=0), clock=clock)  # its port is closed now
        (sender,) = notifier._senders
        opened(pending)
        status = await until(sender, lambda s: s.failed == 1, "failed")
        assert status.last_error is not None and status.last_error.startswith("could not reach it (ConnectError")
        assert SECRET not in status.last_error and SECRET not in status.target
        await notifier.close()

    run(body)


def test_a_receiver_that_does_not_answer_holds_at_most_the_queue_and_counts_what_it_dropped() -> None:
    async def body() -> None:
        clock = SettableClock()
        pending = PendingRequests(Outbox(), asyncio.get_running_loop(), clock=clock)
        with WebhookReceiver() as receiver:
            receiver.hold()
            sender = WebhookSender(target(receiver.url), still_open=lambda ch: pending.get(ch) is not None,
                                   link=lambda: None, clock=clock, queue_size=10)
            pending.opened = lambda request, _seen: sender.offer(notice_for(request.invoke, request.params.mode))
            sender.start()
            opened(pending)
            await posts(receiver, 1)  # in flight, and stuck there
            for _ in range(25):
                opened(pending)
            assert (sender.status().held, sender.status().dropped) == (10, 15)
            receiver.release()
            second = (await posts(receiver, 2))[1]
            assert second["count"] == 25  # the ten it kept and the fifteen it dropped
            status = await until(sender, lambda s: s.sent == 2, "both sent")
            assert (status.held, status.dropped) == (0, 15)
            await sender.close()

    run(body)


def test_a_receiver_that_never_answers_is_cut_off_after_the_timeout() -> None:
    async def body() -> None:
        clock = SettableClock()
        pending = PendingRequests(Outbox(), asyncio.get_running_loop(), clock=clock)
        with WebhookReceiver() as receiver:
            receiver.hold()
            notifier = notifier_for(pending, target(receiver.url, retries=0, timeoutSeconds=0.3), clock=clock)
            opened(pending)
            status = await until(notifier._senders[0], lambda s: s.failed == 1, "cut off")
            assert status.last_error == "no answer within 0.3 s (1 attempt; 1 request not notified)"
            await notifier.close()

    run(body)


def test_requests_answered_by_a_rule_or_meant_for_a_host_alone_are_not_notified() -> None:
    async def body() -> None:
        clock = SettableClock()
        pending = PendingRequests(Outbox(), asyncio.get_running_loop(), clock=clock)
        with WebhookReceiver() as receiver:
            notifier = notifier_for(pending, target(receiver.url, when="always"), clock=clock)
            pending.open(Elicitation.read("demo", FORM), RequestOptions(timeout_s=60, record_only=True),
                         lambda _a: None)
            pending.decided.record_by_rule(Elicitation.read("demo", FORM), ElicitationResult(action="decline"), "config-1",
                                   HOUR)
            opened(pending, URL, server="last")
            assert [p["server"] for p in await posts(receiver, 1)] == ["last"]  # the first and only one
            await until(notifier._senders[0], lambda s: s.state == "idle" and s.sent == 1, "idle")
            assert len(receiver.received) == 1
            await notifier.close()

    run(body)
