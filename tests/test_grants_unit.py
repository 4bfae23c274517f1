"""Grants (main_process/consent/grants.py): an approval's allow bound to what was approved, in main's
consent layer with a settable clock (no sleeps): each scope of arguments, each duration, single
use, the stored digest, and the one line that says what a grant covers."""

import asyncio
import sqlite3
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from main_process.clock import SettableClock
from main_process.consent import approvals, grants
from main_process.consent.consent import Consent
from main_process.consent.rules import Rule
from main_process.store.sqlite import SqliteRules
from main_process.store.sqlite_rules import SqliteRuleStore
from main_process.wire.peers import Peer
from shared import channels, grant_text, rule_text
from shared.messages import (
    ApprovalInfo,
    ElicitationInvoke,
    ElicitationRequest,
    ElicitationResult,
    GrantChoice,
    RuleInfo,
)

PROGRAM = "program-of-files"
HOST = "host-link-1"


class Ports:
    """What the consent layer publishes: the rules as windows and `elicitron rules` see them."""

    def __init__(self) -> None:
        self.rules: list[RuleInfo] = []
        self.notices: list[str] = []

    def publish_rules(self, rules: list[RuleInfo]) -> None:
        self.rules = rules

    def publish_notice(self, level: str, message: str, server: str | None) -> None:
        self.notices.append(message)

    def peer(self, routing_id: bytes) -> Peer | None:
        return None


class NoOpenRequests:
    def all(self) -> list[Any]:
        return []


def approval(arguments: dict[str, Any], tool: str = "read_file") -> ElicitationInvoke:
    return ElicitationInvoke(request=ElicitationRequest(server="files", params={"mode": "form", "message": "?"}),
                             response_channel=channels.new_result_channel(), created_at=0, expires_at=None,
                             origin=HOST, kind="approval", via="Claude",
                             approval=ApprovalInfo(server="files", tool=tool, arguments=arguments))


def with_consent[T](use: Callable[[Consent, SettableClock, Ports], Awaitable[T]]) -> T:
    async def scenario() -> T:
        clock = SettableClock(start=time.time())  # wall time that moves only when the test says so
        ports = Ports()
        consent = Consent(ports, None, [], [], asyncio.get_running_loop(), {"files": PROGRAM},
                          now=lambda: int(clock.now() * 1000))
        try:
            return await use(consent, clock, ports)
        finally:
            await consent.close()

    return asyncio.run(scenario())


def grant(consent: Consent, call: dict[str, Any], **choice: Any) -> None:
    consent.grant(approval(call), GrantChoice(**choice), "Ada (w-1)", NoOpenRequests())  # type: ignore[arg-type]


def decides(consent: Consent, arguments: dict[str, Any], host: str = HOST, tool: str = "read_file") -> bool:
    """Whether a grant decides this call (True) or a card would be asked (False); a decision uses it."""
    rule = consent.tool_rule("files", tool, arguments, host)
    if rule is not None:
        assert consent.use(rule) is None  # no store here: nothing to take it from
    return rule is not None


# ---- the must-show facts ----------------------------------------------------------------


def test_a_session_grant_for_exact_arguments_asks_again_for_other_arguments() -> None:
    async def scenario(consent: Consent, clock: SettableClock, ports: Ports) -> None:
        grant(consent, {"path": "/tmp/a.txt", "lines": 10}, arguments="exact", duration="session")
        assert decides(consent, {"lines": 10, "path": "/tmp/a.txt"})  # the same arguments, in any key order
        assert decides(consent, {"path": "/tmp/a.txt", "lines": 10})  # and again: not single use
        assert not decides(consent, {"path": "/tmp/b.txt", "lines": 10})  # other arguments: asked again
        assert not decides(consent, {"path": "/tmp/a.txt", "lines": 10, "follow": True})  # one more: asked
        assert not decides(consent, {"path": "/tmp/a.txt", "lines": 10}, host="another-host")  # this host's session
        assert not decides(consent, {"path": "/tmp/a.txt", "lines": 10}, tool="write_file")
        [shown] = ports.rules
        assert rule_text.describe(shown) == "tool read_file with exactly the approved arguments → allow (Claude only)"
        assert rule_text.scope_text(shown) == "this session"

    with_consent(scenario)


def test_an_hours_grant_stops_applying_when_the_clock_passes_it() -> None:
    async def scenario(consent: Consent, clock: SettableClock, ports: Ports) -> None:
        grant(consent, {"path": "/tmp/a.txt"}, arguments="any", duration="hour")
        [shown] = ports.rules
        assert shown.scope == "until" and shown.expires_at == int(clock.now() * 1000) + 3_600_000
        clock.advance(3599)
        assert decides(consent, {"path": "/etc/passwd"})  # any arguments, for another second
        assert decides(consent, {"path": "/tmp/b"}, host="another-host")  # not a session grant: every host
        clock.advance(1)
        assert not decides(consent, {"path": "/tmp/a.txt"})  # passed: asked again
        assert ports.rules == [] and consent.book.user_rules() == []  # and gone from the Remembered panel

    with_consent(scenario)


def test_a_single_use_grant_applies_once() -> None:
    async def scenario(consent: Consent, clock: SettableClock, ports: Ports) -> None:
        grant(consent, {"path": "/tmp/a.txt"}, arguments="exact", duration="always", single_use=True)
        assert rule_text.describe(ports.rules[0]) == \
            "tool read_file with exactly the approved arguments → allow, one call only"
        assert decides(consent, {"path": "/tmp/a.txt"})
        assert not decides(consent, {"path": "/tmp/a.txt"})  # used: asked again
        assert ports.rules == []

    with_consent(scenario)


# ---- arguments like these, until a date, and what is refused --------------------------------


def test_a_pattern_grant_covers_values_like_those_and_only_those_arguments() -> None:
    async def scenario(consent: Consent, clock: SettableClock, ports: Ports) -> None:
        proposed = grants.proposed_pattern({"path": "/home/ada/notes/today.md", "lines": 10})
        assert proposed == {"path": "/home/ada/notes/*", "lines": "10"}
        grant(consent, {"path": "/home/ada/notes/today.md", "lines": 10}, arguments="pattern",
              duration="session", pattern={**proposed, "path": "/home/ada/*"})  # the person widened it
        assert decides(consent, {"path": "/home/ada/notes/old/x.md", "lines": 10})
        assert not decides(consent, {"path": "/home/bob/x.md", "lines": 10})
        assert not decides(consent, {"path": "/home/ada/x.md", "lines": 11})  # another value, kept exact
        assert not decides(consent, {"path": "/home/ada/x.md"})  # an argument missing
        assert not decides(consent, {"path": "/home/ada/x.md", "lines": 10, "all": True})  # one more
        assert rule_text.describe(ports.rules[0]) == \
            "tool read_file with lines like “10”, path like “/home/ada/*” → allow (Claude only)"

    with_consent(scenario)


def test_a_grant_until_a_date_lasts_until_then_and_a_narrower_grant_is_kept_beside_a_wider_one() -> None:
    async def scenario(consent: Consent, clock: SettableClock, ports: Ports) -> None:
        until = int(clock.now() * 1000) + 2 * 86_400_000
        grant(consent, {"path": "/a"}, arguments="exact", duration="until", until=until)
        grant(consent, {"path": "/a"}, arguments="any", duration="session", single_use=True)
        assert len(ports.rules) == 2  # different coverage: two grants
        assert decides(consent, {"path": "/a"}) and decides(consent, {"path": "/a"})  # the exact one, not used up
        assert decides(consent, {"path": "/b"})  # the single-use one for any arguments
        assert not decides(consent, {"path": "/b"})
        clock.advance(2 * 86_400)
        assert not decides(consent, {"path": "/a"})

    with_consent(scenario)


@pytest.mark.parametrize(("choice", "complaint"), [
    ({"arguments": "pattern", "pattern": {"path": "/etc/*"}}, "does not cover the call it is given on: path"),
    ({"arguments": "pattern", "pattern": {"file": "*"}}, "must name each argument of the call"),
    ({"arguments": "exact", "pattern": {"path": "*"}}, "`pattern` goes only with arguments"),
    ({"duration": "until", "until": 1}, "needs `until` in the future"),
    ({"duration": "always", "until": 2**50}, "`until` goes only with duration"),
])
def test_a_grant_that_does_not_fit_its_call_is_refused_and_nothing_is_granted(choice: dict[str, Any],
                                                                               complaint: str) -> None:
    async def scenario(consent: Consent, clock: SettableClock, ports: Ports) -> None:
        with pytest.raises(grants.GrantError, match=complaint):
            grant(consent, {"path": "/tmp/a"}, **choice)
        assert consent.book.user_rules() == [] and ports.rules == []

    with_consent(scenario)


def test_v1_answers_grant_what_they_granted_before() -> None:
    def answer(decision: str) -> ElicitationResult:
        return ElicitationResult(action="accept", content={"decision": decision})

    assert approvals.grant_of(answer("allow-session")) == GrantChoice(arguments="any", duration="session")
    assert approvals.grant_of(answer("allow-always")) == GrantChoice(arguments="any", duration="always")
    assert approvals.grant_of(answer("allow-once")) is None and approvals.grant_of(answer("deny")) is None


def test_a_stored_single_use_grant_applies_once_across_two_mains_of_one_store(tmp_path: Path) -> None:
    async def scenario() -> list[bool | None]:
        store = SqliteRules(tmp_path / "rules.sqlite3")
        once = grant_rule("r-once", grants.exact({"path": "/a"}), single_use=True)
        assert await store.add(once)
        loop = asyncio.get_running_loop()
        mains = [Consent(Ports(), store, await store.load(0), [], loop, {"files": PROGRAM}) for _ in range(2)]
        taken = []
        for consent in mains:  # each main still holds it in memory: only one takes it from the store
            rule = consent.tool_rule("files", "read_file", {"path": "/a"}, HOST)
            assert rule is not None and rule.id == "r-once"
            taking = consent.use(rule)
            assert taking is not None
            taken.append(await taking())
            assert consent.tool_rule("files", "read_file", {"path": "/a"}, HOST) is None
        for consent in mains:
            await consent.close()
        store.close()
        return taken

    assert asyncio.run(scenario()) == [True, False]


# ---- stored with a digest of what it covers --------------------------------------------------


def grant_rule(rule_id: str, coverage: grants.Coverage, **extra: Any) -> Rule:
    return Rule(id=rule_id, source="user", server="files", created_at=1, created_by="w", tool="read_file",
                decision="allow", identity=PROGRAM, coverage=coverage, **extra)


def test_the_store_keeps_grants_and_refuses_a_row_edited_to_cover_more(tmp_path: Path) -> None:
    path = tmp_path / "rules.sqlite3"
    kept = [grant_rule("r-exact", grants.exact({"path": "/a"})),
            grant_rule("r-like", grants.pattern_of({"path": "/tmp/*"}, {"path": "/tmp/x"}), single_use=True),
            grant_rule("r-any", grants.ANY, scope="until", expires_at=10_000)]
    with SqliteRuleStore(path) as store:
        for rule in kept:
            assert store.add(rule)
        assert sorted(store.load(now_ms=5), key=lambda rule: rule.id) == sorted(kept, key=lambda rule: rule.id)
    with sqlite3.connect(path) as conn:  # someone widens a stored grant behind main's back
        conn.execute("""UPDATE rules SET arguments = '{"arguments":"pattern","pattern":{"path":"*"}}'
                        WHERE id = 'r-like'""")
        conn.execute("""UPDATE rules SET arguments = '{"arguments":"any"}' WHERE id = 'r-exact'""")
    with SqliteRuleStore(path) as store:
        assert [rule.id for rule in store.load(now_ms=5)] == ["r-any"]  # the edited ones are not applied


def test_the_one_line_says_what_a_grant_covers() -> None:
    assert grant_text.covers("read_file", "pattern", {"path": "/tmp/*"}, grant_text.duration_text("session"),
                             True) == "Allows read_file with path like “/tmp/*”, for this session, one call only"
    assert grant_text.covers("echo", "any", None, grant_text.duration_text("hour"), False) == \
        "Allows echo with any arguments, for an hour"
    assert grant_text.covers("echo", "exact", None, grant_text.duration_text("always"), False) == \
        "Allows echo with exactly the approved arguments, always"
    assert grant_text.duration_text("until", 0).startswith("until 19")


def test_a_proposed_pattern_matches_each_value_only_as_it_is_unless_it_is_a_path() -> None:
    call = {"query": "a*b?[c]", "ids": [1, 2], "url": "https://example.test/docs/page", "flag": True}
    proposed = grants.proposed_pattern(call)
    assert proposed["url"] == "https://example.test/docs/*"
    like = grants.pattern_of(proposed, call)
    assert like.matches(call)
    assert like.matches({**call, "url": "https://example.test/docs/other"})
    for other in ({"query": "axbx[c]"}, {"query": "a*b?c"}, {"ids": [1, 2, 3]}, {"flag": False}):
        assert not like.matches({**call, **other}), other  # a glob's characters in a value match only themselves
