"""Escalation (`escalateAfterSeconds` rules): a request nobody answered in time goes to the `notify`
webhooks once more, naming the request, the machine and the server; once, and not when answered."""

import asyncio
import json
from collections.abc import Callable
from pathlib import Path

import pytest
from kit.demo import demo_stdio_entry
from kit.main import RunningMain, write_config
from kit.receiver import WebhookReceiver
from test_notify_units import FORM, HOUR, Outbox, posts, target, until

from main_process.clock import SettableClock
from main_process.config import parse_config
from main_process.consent.escalation_rules import parse_escalations
from main_process.consent.pending import Elicitation, PendingRequests
from main_process.notify.notifier import Notifier
from shared.errors import ConfigError


def test_escalation_rules_are_their_own_kind_and_a_bad_one_says_what_to_write() -> None:
    config = parse_config({"mcpServers": {"demo": {"command": "demo"}}, "elicitron": {"rules": [
        {"server": "demo", "tool": "drop_*", "decision": "deny"},
        {"server": "demo", "escalateAfterSeconds": 300}]}}, "mcp.json")
    assert [r.id for r in config.rules] == ["config-1"]  # the escalation answers nothing
    [escalation] = config.escalations
    assert (escalation.name, escalation.after_s, escalation.tool) == ("demo", 300.0, None)
    with pytest.raises(ConfigError, match=r"rules\[0\]: \"escalateAfterSeconds\" must be a number of seconds"):
        parse_escalations([{"server": "demo", "escalateAfterSeconds": 0}], "mcp.json")
    with pytest.raises(ConfigError, match=r"rules\[0\]: unknown key\(s\) decision"):
        parse_escalations([{"server": "demo", "decision": "allow", "escalateAfterSeconds": 5}], "mcp.json")


def test_a_request_unanswered_after_n_seconds_is_sent_again_once_naming_machine_and_server() -> None:
    async def body() -> None:
        clock = SettableClock()
        outbox = Outbox([b"\x00window"])  # a window got them: the first notice goes to none (when: no-window)
        pending = PendingRequests(outbox, asyncio.get_running_loop(), clock=clock)
        with WebhookReceiver() as receiver:
            notifier = Notifier((target(receiver.url),), still_open=lambda channel: pending.get(channel) is not None,
                                link=lambda: None, clock=clock, machine="build-server",
                                escalations=parse_escalations([{"server": "demo", "escalateAfterSeconds": 30}], "t"))
            pending.opened = notifier.opened
            notifier.start()
            waiting = pending.open(Elicitation.read("demo", FORM), HOUR, lambda _answer: None)
            withdrawn = pending.open(Elicitation.read("demo", FORM), HOUR, lambda _answer: None)
            other = pending.open(Elicitation.read("files", FORM), HOUR, lambda _answer: None)
            clock.advance(29)
            assert not receiver.received
            pending.withdraw(withdrawn, "cancelled")  # closed before its time: nothing goes
            clock.advance(1)
            [escalated] = await posts(receiver, 1)
            assert escalated["title"] == "Unanswered after 30 s on build-server: demo asks for your input"
            assert escalated["server"] == "demo"
            [sender] = notifier._senders
            await until(sender, lambda s: s.sent == 1, "one sent")
            clock.advance(3000)  # once per request; a closed one and another server's never
            assert len(receiver.received) == 1
            assert pending.get(waiting.channel) is not None and pending.get(other.channel) is not None
            await notifier.close()

    asyncio.run(body())


@pytest.mark.slow
def test_main_escalates_a_request_nobody_answered_to_the_webhook(
        main_factory: Callable[..., RunningMain], tmp_path: Path) -> None:
    with WebhookReceiver() as receiver:
        config = write_config(tmp_path / "mcp.json", {"demo": demo_stdio_entry()}, elicitron={
            "notify": {"url": receiver.url}, "machine": "ci-runner-7",
            "rules": [{"server": "demo", "escalateAfterSeconds": 1}]})
        main: RunningMain = main_factory.with_config(config)  # type: ignore[attr-defined]
        main.wait_server_ready("demo")
        caller = main.peer("caller", role="controller")
        caller.call_tool("demo", "ask", {"message": "deploy?"})
        first, second = (post.json() for post in receiver.wait_for(2))
        assert first["title"] == "demo asks for your input"
        assert second["title"] == "Unanswered after 1 s on ci-runner-7: demo asks for your input"
        assert "deploy?" not in json.dumps(second)  # a notice never carries the request's message
        assert main.wait_status(lambda s: s["notify"][0].get("sent") == 2, "two sent")
        assert len(receiver.received) == 2


def test_escalation_rules_with_no_webhook_say_so_in_one_line(caplog: pytest.LogCaptureFixture) -> None:
    from main_process.notifications import Notifications

    config = parse_config({"mcpServers": {"demo": {"command": "demo"}}, "elicitron": {"rules": [
        {"server": "demo", "escalateAfterSeconds": 300}]}}, "mcp.json")

    async def load() -> None:
        notifications = Notifications("laptop")
        await notifications.replace(config.notify, PendingRequests(Outbox(), asyncio.get_running_loop()),
                                    config.escalations)
        await notifications.close()

    with caplog.at_level("WARNING", logger="main_process.notifications"):
        asyncio.run(load())
    [line] = [record.getMessage() for record in caplog.records]
    assert "1 escalation rule(s)" in line and "no `notify` webhooks" in line
