"""PeerCore driven with plain values: bodies in, effects out, and a clock that is a number we move."""

from dataclasses import dataclass, field

import pytest
import zmq

from shared import channels
from shared.connection_file import ConnectionInfo
from shared.errors import ConnectionFileError
from shared.messages import (
    Bye,
    ChannelReply,
    ElicitationInvoke,
    ElicitationRequest,
    ErrorNotice,
    Heartbeat,
    Hello,
    Progress,
    QuestionAnswer,
    Welcome,
)
from shared.peer import (
    AttachFailed,
    Connect,
    Disconnect,
    Effect,
    GaveUp,
    Lost,
    PeerCore,
    Policy,
    Pushed,
    Refused,
    Send,
    Timing,
    Welcomed,
    curve_options,
)

INFO = ConnectionInfo(protocol=1, endpoint="ipc:///run/main.sock", token="t1", pid=42)
RESULT = channels.RESULT_CHANNEL_PREFIX + "0001"


@dataclass
class Recorder:
    """A waiter that writes down what it was told."""

    told: list[object] = field(default_factory=list)

    def reply(self, answer: ChannelReply) -> None:
        self.told.append(answer)

    def progress(self, update: Progress) -> None:
        self.told.append(update)

    def refused(self, notice: ErrorNotice) -> None:
        self.told.append(notice)

    def lost(self, why: str) -> None:
        self.told.append(("lost", why))


def welcome(session: str = "s1") -> Welcome:
    return Welcome(session=session, window="w", servers=[], pending=[])


def sent(effects: list[Effect]) -> list[str]:
    return [effect.topic for effect in effects if isinstance(effect, Send)]


def attached(core: PeerCore, now: float = 0.0) -> PeerCore:
    assert core.attach(now) == [Connect()]
    hello = core.connected(INFO, now)
    assert sent(hello) == [channels.HELLO]
    core.sent(now)
    assert core.receive(channels.WELCOME, welcome(), now) == [Welcomed(welcome(), again=False)]
    return core


def new_core(**timing: float) -> PeerCore:
    return PeerCore(role="asker", name="probe", window="w-1", timing=Timing(**timing))


def test_hello_carries_the_files_token_and_a_welcome_attaches() -> None:
    core = new_core()
    assert core.attach(0.0) == [Connect()]
    [hello] = core.connected(INFO, 0.0)
    assert hello == Send(channels.HELLO, Hello(protocol=1, token="t1", window="w-1", name="probe", role="asker"))
    [welcomed] = core.receive(channels.WELCOME, welcome(), 0.1)
    assert welcomed == Welcomed(welcome(), again=False) and core.attached


def test_a_refused_hello_carries_mains_code_and_message_and_gives_up_the_first_attach() -> None:
    core = new_core()
    core.attach(0.0)
    core.connected(INFO, 0.0)
    notice = ErrorNotice(code="bad-token", message="token does not match", topic=channels.HELLO)
    assert core.receive(channels.ERROR, notice, 0.1) == [
        Disconnect(), AttachFailed("main refused us: bad-token: token does not match", notice, retrying=False)]
    assert core.state == "idle" and core.tick(10.0) == []


def test_a_window_retries_a_failed_first_attach_backing_off() -> None:
    core = PeerCore(role="renderer", name="w", window="w", policy=Policy(retry_first_attach=True),
                    timing=Timing(retry_first=0.25, retry_max=1.0))
    due: list[float] = []
    now = 0.0
    core.attach(now)
    for _ in range(5):
        assert core.connect_failed("no connection file", now)[-1].retrying  # type: ignore[union-attr]
        while core.tick(now) != [Connect()]:
            now = round(now + 0.05, 2)
        due.append(now)
    gaps = [round(b - a, 2) for a, b in zip([0.0, *due], due, strict=False)]
    assert gaps == [0.25, 0.5, 1.0, 1.0, 1.0]


def test_a_heartbeat_is_due_after_one_second_of_sending_nothing_and_not_before() -> None:
    core = attached(new_core())
    assert core.tick(0.99) == []
    core.receive(channels.HEARTBEAT, Heartbeat(), 0.9)
    assert core.tick(1.0) == [Send(channels.HEARTBEAT, Heartbeat())]
    assert core.tick(1.5) == []  # the heartbeat itself was a send
    core.sent(1.75)  # anything the adapter sent counts
    core.receive(channels.HEARTBEAT, Heartbeat(), 2.5)
    assert core.tick(2.625) == []
    assert core.tick(2.75) == [Send(channels.HEARTBEAT, Heartbeat())]


def test_main_is_gone_after_three_seconds_of_silence() -> None:
    core = attached(new_core(heartbeat_after=100.0))
    core.receive(channels.HEARTBEAT, Heartbeat(), 1.0)
    assert core.tick(4.0) == []
    effects = core.tick(4.01)
    assert effects == [Disconnect(), Lost("main silent for 3.0 s"), Connect()]  # the file is read again at once


def test_a_reattach_tells_the_listeners_lost_says_hello_again_and_is_welcomed_again() -> None:
    core = attached(new_core(heartbeat_after=100.0))
    waiter = Recorder()
    core.expect("ask-1", waiter)
    assert core.tick(3.1)[-1] == Connect()  # silent since 0; attaching again at once
    assert waiter.told == [("lost", "main silent for 3.1 s")]
    [hello] = core.connected(ConnectionInfo(protocol=1, endpoint="ipc:///x", token="t2", pid=43), 3.2)
    assert isinstance(hello, Send) and isinstance(hello.body, Hello) and hello.body.token == "t2"
    assert core.receive(channels.WELCOME, welcome("s2"), 3.3) == [Welcomed(welcome("s2"), again=True)]
    assert core.receive("ask-1", ChannelReply(), 3.4) == [] and core.dropped_replies == 1


def test_a_reattach_that_finds_no_main_gives_up_after_the_grace() -> None:
    core = attached(new_core(give_up_after=2.0, heartbeat_after=100.0))
    effects, now, outcome = core.lose("main (pid 42) is gone", 1.0), 1.0, list[Effect]()
    while not outcome:
        if effects[-1:] == [Connect()]:
            core.connect_failed("no connection file", now)
        elif effects:
            outcome = effects
        now += 0.125
        effects = core.tick(now)
    assert outcome == [GaveUp("main did not come back within 2 s")] and now - 1.0 == pytest.approx(2.125)


def test_replies_go_to_their_channels_waiter_once_and_unknown_ones_are_counted() -> None:
    core = attached(new_core())
    waiter = Recorder()
    core.expect("ask-1", waiter)
    answer = ChannelReply(answer=QuestionAnswer(action="accept", outcome="accept", content={}))
    update = Progress(response_channel="ask-1", progress=0.5)
    assert core.receive(channels.PROGRESS, update, 0.1) == []
    assert core.receive("ask-1", answer, 0.2) == []
    assert core.receive("ask-1", answer, 0.3) == []  # one reply per channel
    assert core.receive("nobody-asked", answer, 0.4) == []
    assert waiter.told == [update, answer] and core.dropped_replies == 2


def test_not_attached_says_hello_again_at_once_and_a_burst_costs_one_hello() -> None:
    core = attached(new_core())
    waiter = Recorder()
    core.expect("call-1", waiter)
    notice = ErrorNotice(code="not-attached", message="send a valid hello first", topic=channels.HEARTBEAT)
    assert core.receive(channels.ERROR, notice, 1.0) == [Lost("main no longer has this peer attached"), Connect()]
    assert waiter.told == [("lost", "main no longer has this peer attached")]
    assert sent(core.connected(INFO, 1.0)) == [channels.HELLO]
    assert core.receive(channels.ERROR, notice, 1.01) == []  # the hello answers it
    assert core.receive(channels.WELCOME, welcome(), 1.1) == [Welcomed(welcome(), again=True)]


def test_a_refusal_on_a_result_channel_reaches_only_its_waiter() -> None:
    core = attached(new_core())
    mine, other = Recorder(), Recorder()
    core.expect(RESULT, mine)
    core.expect("call-2", other)
    notice = ErrorNotice(code="invalid-content", message="age: not an integer", topic=RESULT)
    assert core.receive(channels.ERROR, notice, 0.5) == []
    assert mine.told == [notice] and other.told == []
    unread = ErrorNotice(code="too-large", message="over 1 MiB", topic=channels.ASK)
    assert core.receive(channels.ERROR, unread, 0.6) == [Refused(unread)]


def test_mains_bye_is_a_loss_at_once_and_its_file_is_no_main_until_the_token_changes() -> None:
    core = attached(new_core())
    assert core.receive(channels.BYE, Bye(), 0.5) == [Disconnect(), Lost("main is stopping", stopping=True),
                                                      Connect()]
    failed = core.connected(INFO, 0.5)  # the same token: the stopping main's file
    assert isinstance(failed[-1], AttachFailed) and failed[-1].stopping
    core.tick(0.75)
    assert sent(core.connected(ConnectionInfo(protocol=1, endpoint="ipc:///y", token="t9", pid=7), 0.75)) == [
        channels.HELLO]


def test_pushes_are_handed_on_and_close_says_bye() -> None:
    core = attached(new_core())
    invoke = ElicitationInvoke(request=ElicitationRequest(server="demo", params={}), response_channel=RESULT,
                               created_at=0, expires_at=None, origin=None)
    assert core.receive(channels.INVOKE, invoke, 0.1) == [Pushed(channels.INVOKE, invoke)]
    assert core.close() == [Send(channels.BYE, Bye()), Disconnect()]
    assert core.state == "closed" and core.tick(9.0) == []


def test_a_bad_frame_is_skipped_but_counts_as_mains_word() -> None:
    core = attached(new_core(heartbeat_after=100.0))
    assert core.feed([b"heartbeat", b"\xc1"], 2.9) == []
    assert core.tick(5.0) == []


def test_curve_options_come_from_a_paired_file_and_a_file_without_keys_is_refused() -> None:
    paired = ConnectionInfo(protocol=1, endpoint="tcp://h:1", token="t", pid=1, server_key="S",
                            client_public_key="P", client_secret_key="K")
    assert curve_options(paired, "f") == [(zmq.CURVE_SERVERKEY, b"S"), (zmq.CURVE_PUBLICKEY, b"P"),
                                          (zmq.CURVE_SECRETKEY, b"K")]
    assert curve_options(INFO, "f") == []
    with pytest.raises(ConnectionFileError, match="elicitron pair"):
        curve_options(ConnectionInfo(protocol=1, endpoint="tcp://h:1", token="t", pid=1, server_key="S"), "f")
