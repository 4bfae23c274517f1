"""WindowCore (shared/window_core.py) with plain values: the cards a window shows, its queue, the
"waiting in another window" list, the replay of a welcome, dismissals and answers asked again.
No Qt, no sockets: what both windows (Qt, a browser page) render is decided here."""

from shared import messages
from shared.window_core import (
    NOT_SENT,
    AnswerRefused,
    Arrived,
    Closed,
    Effect,
    Elsewhere,
    ElsewhereChanged,
    NotOpen,
    SendAnswer,
    Show,
    WindowCore,
    Withdraw,
)

ME = "0190a000-0000-7000-8000-00000000000a"
LEFT = "0190a000-0000-7000-8000-00000000000b"
RIGHT = "0190a000-0000-7000-8000-00000000000c"


def invoke(channel: str, created_at: int, origin: str | None = None, server: str = "demo") -> messages.ElicitationInvoke:
    params = {"mode": "form", "message": f"question {channel}",
              "requestedSchema": {"type": "object", "properties": {}}}
    return messages.ElicitationInvoke(request=messages.ElicitationRequest(server=server, params=params),
                                      response_channel=channel, created_at=created_at, expires_at=None, origin=origin)


def welcome(*pending: messages.ElicitationInvoke, session: str = "s1",
            channels: list[str] | None = None) -> messages.Welcome:
    return messages.Welcome(session=session, window=ME, servers=[], pending=list(pending), pending_channels=channels)


def peers(*others: tuple[str, str, messages.Role]) -> list[messages.PeerInfo]:
    return [messages.PeerInfo(window=ME, name="me", role="renderer"),
            *(messages.PeerInfo(window=window, name=name, role=role) for window, name, role in others)]


def dismiss(channel: str, reason: messages.DismissReason = "answered", by: str | None = None,
            rule: str | None = None) -> messages.ElicitationDismiss:
    return messages.ElicitationDismiss(response_channel=channel, reason=reason, by=by, rule=rule)


def shows(effects: list[Effect]) -> list[str]:
    return [effect.invoke.response_channel for effect in effects if isinstance(effect, Show)]


def listed(core: WindowCore) -> list[tuple[str, str]]:
    return [(item.invoke.response_channel, item.window) for item in core.elsewhere]


def channels(items: tuple[messages.ElicitationInvoke, ...]) -> list[str]:
    return [item.response_channel for item in items]


# ---- one card at a time, oldest first ----------------------------------------------------------


def test_one_slot_shows_the_first_then_the_oldest_waiting_and_counts_the_rest_by_server() -> None:
    core = WindowCore(ME)
    assert shows(core.invoked(invoke("c-new", 300))) == ["c-new"]  # nothing older known yet
    assert shows(core.invoked(invoke("c-old", 100, server="weather"))) == []
    assert core.invoked(invoke("c-mid", 200)) != []
    assert core.invoked(invoke("c-mid", 200)) == [Arrived((invoke("c-mid", 200),))]  # a repeat: queued once
    assert core.summary() == "2 more waiting (weather: 1, demo: 1)" and core.waiting_count == 3

    effects = core.answer("c-new", "accept", {"n": 1})
    assert effects[0] == SendAnswer(invoke("c-new", 300), "accept", {"n": 1}, None)
    assert shows(effects) == ["c-old"]
    assert shows(core.answer("c-old", "decline")) == ["c-mid"]
    assert core.summary() == ""


def test_a_page_shows_every_card_at_once_and_an_answer_for_a_card_it_does_not_show_is_not_sent() -> None:
    core = WindowCore(ME, slots=None)
    assert shows(core.invoked(invoke("c-2", 2))) == ["c-2"]
    assert shows(core.invoked(invoke("c-1", 1))) == ["c-1"]
    assert channels(core.shown) == ["c-2", "c-1"] and core.summary() == ""
    assert core.answer("c-9", "accept", {}) == [NotOpen("c-9")]
    core.answer("c-1", "cancel")
    assert core.answer("c-1", "cancel") == [NotOpen("c-1")]  # once


# ---- origin affinity --------------------------------------------------------------------------------


def test_a_request_made_in_another_attached_window_waits_there_with_its_name() -> None:
    core = WindowCore(ME)
    core.peers(peers((LEFT, "left", "renderer"), (RIGHT, "elicitron call", "controller")))
    effects = core.invoked(invoke("c-1", 1, origin=LEFT))
    assert effects == [ElsewhereChanged((Elsewhere(invoke("c-1", 1, origin=LEFT), "left"),))]
    assert core.waiting_count == 0
    for origin in (ME, None, RIGHT, "a window that is gone"):  # ours: this window's, nobody's, a controller's
        core.invoked(invoke(f"c-{origin}", 2, origin=origin))
    assert core.waiting_count == 4 and listed(core) == [("c-1", "left")]


def test_with_no_peers_list_yet_every_request_is_ours() -> None:
    core = WindowCore(ME)
    assert shows(core.invoked(invoke("c-1", 1, origin=LEFT))) == ["c-1"]
    assert listed(core) == []


def test_answer_here_makes_it_ours_for_good_and_the_next_card_after_the_one_shown() -> None:
    core = WindowCore(ME)
    core.peers(peers((LEFT, "left", "renderer")))
    core.invoked(invoke("c-mine", 5))
    core.invoked(invoke("c-0", 0, origin=LEFT))
    core.invoked(invoke("c-1", 1, origin=LEFT))
    assert listed(core) == [("c-0", "left"), ("c-1", "left")]

    effects = core.answer_here("c-1")
    assert effects == [ElsewhereChanged((Elsewhere(invoke("c-0", 0, origin=LEFT), "left"),))]
    assert channels(core.shown) == ["c-mine"] and channels(core.queued) == ["c-1"]
    core.peers(peers((LEFT, "left", "renderer")))  # its window is still there: it stays here
    assert channels(core.queued) == ["c-1"]
    assert shows(core.answer("c-mine", "accept", {})) == ["c-1"]
    assert core.answer_here("c-unknown") == []


def test_when_its_window_detaches_its_requests_come_here_oldest_first_and_a_shown_card_never_leaves() -> None:
    core = WindowCore(ME)
    core.peers(peers((LEFT, "left", "renderer"), (RIGHT, "right", "renderer")))
    core.invoked(invoke("c-3", 3, origin=LEFT))
    core.invoked(invoke("c-1", 1, origin=LEFT))
    core.invoked(invoke("c-2", 2, origin=RIGHT))
    assert core.shown == ()

    effects = core.peers(peers((RIGHT, "right", "renderer")))  # "left" is gone
    assert shows(effects) == ["c-1"] and channels(core.queued) == ["c-3"]
    assert listed(core) == [("c-2", "right")]
    core.peers(peers((LEFT, "left", "renderer"), (RIGHT, "right", "renderer")))  # "left" is back
    assert channels(core.shown) == ["c-1"]  # on screen: the user may be filling it in
    assert listed(core) == [("c-2", "right"), ("c-3", "left")]


# ---- dismissals -------------------------------------------------------------------------------------


def test_a_dismiss_withdraws_the_shown_card_saying_why_and_the_next_takes_its_place() -> None:
    core = WindowCore(ME)
    for index in range(1, 7):
        core.invoked(invoke(f"c-{index}", index))
    cases = [
        (dismiss("c-1", by=LEFT), "demo: answered in another window", False),
        (dismiss("c-2", by=ME), "demo: answered", False),
        (dismiss("c-3", rule="r-7"), "demo: answered by rule r-7", False),
        (dismiss("c-4", "cancelled"), "demo: cancelled by the server", True),
        (dismiss("c-5", "expired"), "demo: expired", False),
        (dismiss("c-6", "server-closed"), "demo: server closed", False),
    ]
    for index, (body, why, brief) in enumerate(cases, start=1):
        effects = core.dismissed(body)
        assert effects[0] == Withdraw(invoke(f"c-{index}", index), why, brief, body)
        assert shows(effects) == ([f"c-{index + 1}"] if index < 6 else [])
    assert core.waiting_count == 0


def test_a_card_whose_host_stopped_waiting_says_who_left_instead_of_vanishing() -> None:
    core = WindowCore(ME)
    card = messages.ElicitationInvoke(request=invoke("c-1", 1).request, response_channel="c-1", created_at=1,
                                      expires_at=None, origin=None, via="Claude Code")
    core.invoked(card)
    core.invoked(invoke("c-2", 2))
    body = messages.ElicitationDismiss(response_channel="c-1", reason="cancelled", cause=messages.HOST_GONE)
    effects = core.dismissed(body)
    assert effects[0] == Withdraw(card, "Claude Code stopped waiting: demo request withdrawn", False, body)
    assert shows(effects) == ["c-2"]
    unnamed = core.dismissed(messages.ElicitationDismiss(response_channel="c-2", reason="cancelled",
                                                         cause=messages.HOST_GONE))
    assert unnamed[0].why == "the host stopped waiting: demo request withdrawn"  # type: ignore[union-attr]
    unknown = WindowCore(ME)  # a cause this window does not know: a plain "cancelled"
    unknown.invoked(invoke("c-3", 3))
    assert unknown.dismissed(messages.ElicitationDismiss(response_channel="c-3", reason="cancelled",
                                                         cause="moon-phase"))[0].why == "demo: cancelled by the server"  # type: ignore[union-attr]


def test_a_dismiss_removes_a_queued_or_listed_request_and_closes_an_answered_one() -> None:
    core = WindowCore(ME)
    core.peers(peers((LEFT, "left", "renderer")))
    core.invoked(invoke("c-1", 1))
    core.invoked(invoke("c-2", 2))
    core.invoked(invoke("c-3", 3, origin=LEFT))
    assert core.dismissed(dismiss("c-2", "expired")) == []
    assert core.summary() == ""
    assert core.dismissed(dismiss("c-3", "expired")) == [ElsewhereChanged(())]
    core.answer("c-1", "accept", {})
    assert core.dismissed(dismiss("c-1", by=ME)) == [Closed(invoke("c-1", 1), dismiss("c-1", by=ME))]
    core.peers(peers())  # nothing comes back once dismissed
    assert core.waiting_count == 0 and core.open_channels() == set()


# ---- an answer main did not take ----------------------------------------------------------------------


def test_an_answer_refused_as_invalid_or_not_sent_is_asked_again_other_refusals_are_only_told() -> None:
    core = WindowCore(ME)
    core.invoked(invoke("c-1", 1))
    core.answer("c-1", "accept", {"n": "x"})
    refusal = messages.ErrorNotice(code="invalid-content", message="n: not an integer", topic="c-1")
    effects = core.refused(refusal)
    assert effects == [AnswerRefused(invoke("c-1", 1), "n: not an integer", True), Show(invoke("c-1", 1))]
    core.answer("c-1", "accept", {"n": 1})
    assert shows(core.refused(messages.ErrorNotice(code=NOT_SENT, message="not connected", topic="c-1"))) == ["c-1"]

    core.answer("c-1", "accept", {"n": 1})
    late = messages.ErrorNotice(code="already-answered", message="answered elsewhere", topic="c-1")
    assert core.refused(late) == [AnswerRefused(invoke("c-1", 1), "answered elsewhere", False)]
    assert core.refused(messages.ErrorNotice(code="bad-body", message="?", topic="msgMcpCallTool")) == []
    assert core.waiting_count == 0


# ---- the replay of a welcome ----------------------------------------------------------------------------


def test_a_welcome_keeps_what_main_still_holds_and_withdraws_the_rest() -> None:
    core = WindowCore(ME)
    core.invoked(invoke("c-1", 1))
    core.invoked(invoke("c-2", 2))
    core.invoked(invoke("c-3", 3))
    effects = core.welcomed(welcome(invoke("c-2", 2), invoke("c-9", 9), channels=["c-2", "c-3", "c-9"]))
    assert effects[0] == Withdraw(invoke("c-1", 1), "demo: request is no longer pending")
    assert Arrived((invoke("c-2", 2), invoke("c-9", 9))) in effects
    assert shows(effects) == []  # not before main's peers list had its chance to land
    assert shows(core.settle()) == ["c-2"]
    assert channels(core.queued) == ["c-3", "c-9"]  # c-3's invoke follows the welcome: still open


def test_after_a_welcome_a_request_of_another_window_is_not_put_in_front_of_the_user() -> None:
    core = WindowCore(ME)
    core.welcomed(welcome(invoke("p-1", 1, origin=LEFT), invoke("p-2", 2)))
    effects = core.peers(peers((LEFT, "left", "renderer")))
    assert shows(effects) == ["p-2"] and listed(core) == [("p-1", "left")]


def test_a_welcome_that_lists_the_peers_places_its_replay_by_origin_with_no_turn_between() -> None:
    """The race a main that sends `peers` only after the welcome leaves: the window's next loop
    turn (`settle`) came before the list, and another window's request became this window's card."""
    core = WindowCore(ME)
    replay = messages.Welcome(session="s1", window=ME, servers=[], pending=[invoke("p-1", 1, origin=LEFT),
                              invoke("p-2", 2)], peers=peers((LEFT, "left", "renderer")))
    effects = core.welcomed(replay)
    assert shows(effects) == ["p-2"] and listed(core) == [("p-1", "left")]
    assert ElsewhereChanged((Elsewhere(invoke("p-1", 1, origin=LEFT), "left"),)) in effects
    assert shows(core.settle()) == [] and listed(core) == [("p-1", "left")]  # the turn changes nothing


def test_an_answer_in_flight_over_a_reconnect_is_asked_again_if_main_still_holds_it() -> None:
    core = WindowCore(ME, slots=None)
    core.invoked(invoke("c-1", 1))
    core.invoked(invoke("c-2", 2))
    core.answer("c-1", "accept", {})
    core.answer("c-2", "accept", {})
    core.welcomed(welcome(invoke("c-1", 1)))
    assert shows(core.settle()) == ["c-1"] and core.open_channels() == {"c-1"}


def test_a_restarted_main_forgets_the_peers_and_adoptions_of_the_last() -> None:
    core = WindowCore(ME)
    core.welcomed(welcome())
    core.peers(peers((LEFT, "left", "renderer")))
    core.invoked(invoke("c-1", 1, origin=LEFT))
    core.answer_here("c-1")
    core.answer("c-1", "decline")
    core.welcomed(welcome(invoke("c-5", 5, origin=LEFT), session="s2"))
    assert shows(core.settle()) == ["c-5"]  # no peers list from this main yet: ours


def test_main_stopped_clears_everything_and_withdraws_the_card_on_screen() -> None:
    core = WindowCore(ME)
    core.peers(peers((LEFT, "left", "renderer")))
    core.invoked(invoke("c-1", 1))
    core.invoked(invoke("c-2", 2))
    core.invoked(invoke("c-3", 3, origin=LEFT))
    effects = core.cleared("main stopped: its requests are gone")
    assert effects == [Withdraw(invoke("c-1", 1), "main stopped: its requests are gone"), ElsewhereChanged(())]
    assert core.waiting_count == 0 and core.open_channels() == set()


def test_a_card_given_back_makes_room_for_the_next() -> None:
    core = WindowCore(ME)
    core.invoked(invoke("c-1", 1))
    core.invoked(invoke("c-2", 2))
    assert shows(core.give_back("c-1")) == ["c-2"]
    assert core.answer("c-1", "accept", {}) == [NotOpen("c-1")]
