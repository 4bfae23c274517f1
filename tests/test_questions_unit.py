"""QuestionDesk in one process: the gate's rules answering a question, the per-asker cap, and a
question asked again after its main was lost, as a shared store says it stands (wire: test_ask_*;
real mains on PostgreSQL: test_team_questions.py)."""

import asyncio
from collections.abc import Iterable

from main_process.clock import SettableClock
from main_process.consent.elicitation_gate import ElicitationGate
from main_process.consent.pending import Elicitation, PendingRequests
from main_process.consent.questions import MAX_OPEN_PER_ASKER, QuestionDesk
from main_process.store.records import ResumedQuestion
from shared import channels
from shared.codec import decode_from_main
from shared.elicit_params import ElicitParams
from shared.messages import Ask, AskerInfo, ChannelReply, ElicitationResult, Withdraw

ASKER = AskerInfo(name="deploy.sh", pid=4242, machine="build-7")
FORM = {"mode": "form", "message": "Ship it?",
        "requestedSchema": {"type": "object", "properties": {"ok": {"type": "boolean"}}}}
URL = {"mode": "url", "message": "Sign in", "url": "https://example.test/login"}


class Windows:
    """The Outbox: one window that takes everything it is sent."""

    def __init__(self) -> None:
        self.topics: list[str] = []

    def renderers(self) -> list[bytes]:
        return [b"window"]

    def send(self, routing_ids: Iterable[bytes], frames: list[bytes]) -> list[bytes]:
        self.topics.append(decode_from_main(frames)[0])
        return list(routing_ids)


class Rules:
    """The consent layer's lookups: every question of an asker answered "ok"; a server's, never."""

    def __init__(self) -> None:
        self.asked: list[tuple[str, str]] = []

    def answer_for(self, elicitation: Elicitation) -> tuple[str, ElicitationResult] | None:
        raise AssertionError("a question is never answered by a server's rule")

    def answer_asker(self, asker: str, params: ElicitParams) -> tuple[str, ElicitationResult] | None:
        self.asked.append((asker, params.message))
        return "r-1", ElicitationResult(action="accept", content={"ok": True})

    def policy_declines(self, server: str, host: str) -> tuple[str, str | None] | None:
        return None  # (a question is never asked of the policies)


def desk_with(rules: Rules | None = None,
              clock: SettableClock | None = None) -> tuple[QuestionDesk, Windows, list[ChannelReply]]:
    windows = Windows()
    pending = PendingRequests(windows, asyncio.get_running_loop(), clock=clock or SettableClock())
    return QuestionDesk(pending, ElicitationGate(pending, rules)), windows, []


def test_a_question_nobody_answers_in_its_time_is_dismissed_and_the_asker_hears_expired() -> None:
    async def scenario() -> None:
        clock = SettableClock()
        desk, windows, replies = desk_with(clock=clock)
        desk.ask(b"asker", Ask(response_channel="a1", params=FORM, asker=ASKER, timeout_seconds=30), replies.append)
        clock.advance(29.9)
        assert replies == [] and windows.topics == [channels.INVOKE]
        clock.advance(0.1)
        assert windows.topics == [channels.INVOKE, channels.DISMISS]
        [expired] = replies
        assert expired.answer is not None and (expired.answer.action, expired.answer.outcome) == ("cancel", "expired")

    asyncio.run(scenario())


def test_a_rule_answers_a_form_question_before_any_window_sees_it_and_never_a_link() -> None:
    rules = Rules()

    async def scenario() -> None:
        desk, windows, replies = desk_with(rules)
        desk.ask(b"asker", Ask(response_channel="a1", params=FORM, asker=ASKER), replies.append)
        assert rules.asked == [("deploy.sh", "Ship it?")] and windows.topics == []
        assert replies[0].answer is not None
        assert (replies[0].answer.outcome, replies[0].answer.content) == ("accept", {"ok": True})
        desk.ask(b"asker", Ask(response_channel="a2", params=URL, asker=ASKER), replies.append)
        assert len(rules.asked) == 1 and windows.topics == [channels.INVOKE]  # the link went to a person
        desk.withdraw(b"asker", Withdraw(response_channel="a2"))
        assert replies[1].answer is not None and replies[1].answer.outcome == "withdrawn"

    asyncio.run(scenario())


def test_one_asker_has_at_most_its_cap_of_open_questions_others_are_not_affected() -> None:
    async def scenario() -> None:
        desk, windows, replies = desk_with()
        for index in range(MAX_OPEN_PER_ASKER + 1):
            desk.ask(b"busy", Ask(response_channel=f"q{index}", params=FORM, asker=ASKER), replies.append)
        [refused] = replies
        assert refused.error is not None and "100 open questions" in refused.error.message
        desk.ask(b"other", Ask(response_channel="q0", params=FORM, asker=ASKER), replies.append)
        assert len(replies) == 1 and windows.topics.count(channels.INVOKE) == MAX_OPEN_PER_ASKER + 1

    asyncio.run(scenario())


class Store:
    """A shared store's `resume`, saying what it was told to, once its `ready` is set."""

    def __init__(self, resumed: ResumedQuestion) -> None:
        self.resumed = resumed
        self.asked: list[tuple[str, str]] = []
        self.ready = asyncio.Event()

    async def resume(self, asked_on: str, asker: str) -> ResumedQuestion:
        self.asked.append((asked_on, asker))
        await self.ready.wait()
        return self.resumed


def test_a_question_asked_again_gets_the_answer_kept_for_it_or_opens_anew_or_nothing_once_withdrawn() -> None:
    async def asked_again(resumed: ResumedQuestion, *, withdraw: bool = False,
                          resumes: str | None = "old") -> tuple[list[str], list[ChannelReply], Store]:
        store = Store(resumed)
        windows = Windows()
        decided = asyncio.Event()  # the asker heard something, or the question opened for the windows
        pending = PendingRequests(windows, asyncio.get_running_loop(), clock=SettableClock(),
                                  opened=lambda _pending, _shown: decided.set())
        desk = QuestionDesk(pending, ElicitationGate(pending, None), resume=store.resume)
        replies: list[ChannelReply] = []

        def reply(answer: ChannelReply) -> None:
            replies.append(answer)
            decided.set()

        desk.ask(b"asker", Ask(response_channel="new", params=FORM, asker=ASKER, resumes=resumes), reply)
        if withdraw:
            desk.withdraw(b"asker", Withdraw(response_channel="new"))
        store.ready.set()
        await asyncio.wait_for(decided.wait(), 5)
        return windows.topics, replies, store

    async def scenario() -> None:
        topics, [reply], store = await asked_again(ResumedQuestion("answered", "accept", {"ok": True}))
        assert store.asked == [("old", "deploy.sh")] and topics == []  # no window asked again
        assert reply.answer is not None and (reply.answer.outcome, reply.answer.content) == ("accept", {"ok": True})

        topics, [reply], _ = await asked_again(ResumedQuestion("taken"))
        assert topics == [] and reply.error is not None and "handed to its asker already" in reply.error.message

        topics, [reply], _ = await asked_again(ResumedQuestion("expired"))
        assert topics == [] and reply.answer is not None and reply.answer.outcome == "expired"

        for state in ("moved", "unknown", "unreachable", "cancelled"):
            topics, replies, _ = await asked_again(ResumedQuestion(state))
            assert (topics, replies) == ([channels.INVOKE], []), state  # open here, as a new question

        topics, [reply], _ = await asked_again(ResumedQuestion("moved"), withdraw=True)
        assert topics == [] and reply.answer is not None and reply.answer.outcome == "withdrawn"

        topics, replies, store = await asked_again(ResumedQuestion("answered"), resumes=None)
        assert (topics, replies, store.asked) == ([channels.INVOKE], [], [])  # not asked again: the store is not read

    asyncio.run(scenario())
