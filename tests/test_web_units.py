"""The web window's pure parts in-process: where it may listen, pairing codes and devices on disk,
cards from invokes, and what a page may send."""

import stat
from pathlib import Path
from typing import Any

import pytest

from cli_process import cli
from cli_process.command import EXIT_FAILED, EXIT_USAGE
from shared.errors import ConfigError, PageMessageError, PairingError, WebWindowNotRunningError
from shared.messages import ApprovalInfo, ElicitationInvoke, ElicitationRequest
from web_process.cards import card_of
from web_process.devices import CODE_LIFETIME_S, WebDir
from web_process.listen import check_listen
from web_process.page_peer import read_page_message

BOOKING = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "title": "Name", "default": "Ada", "minLength": 1},
        "size": {"type": "integer", "title": "Guests", "minimum": 1, "maximum": 12},
        "outdoor": {"type": "boolean", "default": False},
        "budget": {"type": "number", "minimum": 0},
        "cuisine": {"type": "string", "oneOf": [{"const": "fr", "title": "French"}, {"const": "jp", "title": "Japanese"}]},
        "extras": {"type": "array", "items": {"anyOf": [{"const": "wine", "title": "Wine"}]}, "maxItems": 1},
        "email": {"type": "string", "format": "email"},
    },
    "required": ["name", "size"],
}


def _invoke(params: dict[str, Any], **extra: Any) -> ElicitationInvoke:
    return ElicitationInvoke(request=ElicitationRequest(server="demo", params=params), response_channel="chan",
                             created_at=1, expires_at=2, origin=None, **extra)


class Clock:
    def __init__(self) -> None:
        self.now = 1_000.0

    def __call__(self) -> float:
        return self.now


# ---- listen --------------------------------------------------------------------------------------


def test_the_web_window_stays_on_loopback_unless_told_how_to_leave_it() -> None:
    listen = check_listen("8766", None, None, False)
    assert (listen.host, listen.port, listen.tls) == ("127.0.0.1", 8766, None)
    assert listen.origins() >= {"http://127.0.0.1:8766", "http://localhost:8766"}
    assert "127.0.0.1:8766" in listen.hosts() and "evil.example:8766" not in listen.hosts()
    with pytest.raises(ConfigError, match="--tls-cert FILE --tls-key FILE, or --insecure-http"):
        check_listen("0.0.0.0:8766", None, None, False)
    exposed = check_listen("192.0.2.7:8766", None, None, True)
    assert exposed.origins() == {"http://192.0.2.7:8766"}  # no localhost for an address that is not
    with pytest.raises(ConfigError, match="go together"):
        check_listen("8766", Path("cert.pem"), None, False)
    with pytest.raises(ConfigError, match="expected"):
        check_listen("host:port", None, None, False)
    proxied = check_listen("8766", None, None, False, ("https://phone.example.net",))
    assert "https://phone.example.net" in proxied.origins() and "phone.example.net" in proxied.hosts()


# ---- pairing and devices -------------------------------------------------------------------------


def test_a_pairing_code_works_once_and_keeps_no_secret_on_disk(tmp_path: Path) -> None:
    web = WebDir(tmp_path / "web")
    code = web.new_code("my  phone\n")
    files = list((tmp_path / "web" / "pairing").iterdir())
    assert len(files) == 1 and code not in files[0].name and code not in files[0].read_text()
    assert stat.S_IMODE(files[0].stat().st_mode) == 0o600
    device, token = web.redeem(code)
    assert device.name == "my phone"
    with pytest.raises(PairingError, match="unknown or used"):
        web.redeem(code)
    assert web.device_for(token) == device
    assert web.device_for("guess") is None and web.device_for(None) is None
    devices = tmp_path / "web" / "devices.json"
    assert token not in devices.read_text() and stat.S_IMODE(devices.stat().st_mode) == 0o600
    assert stat.S_IMODE((tmp_path / "web").stat().st_mode) == 0o700
    assert web.device_for_id(device.id) == device
    devices.write_text('{"devices": []}')  # revoked
    assert web.device_for(token) is None and web.device_for_id(device.id) is None


def test_a_pairing_code_expires_after_five_minutes(tmp_path: Path) -> None:
    clock = Clock()
    web = WebDir(tmp_path / "web", clock=clock)
    late, in_time = web.new_code("a"), web.new_code("b")
    clock.now += CODE_LIFETIME_S - 1
    assert web.redeem(in_time)[0].name == "b"
    clock.now += 2
    with pytest.raises(PairingError):
        web.redeem(late)
    assert list((tmp_path / "web" / "pairing").iterdir()) == []  # an expired code is gone, not kept


def test_pair_web_says_when_no_web_window_runs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["pair", "--web", "--web-dir", str(tmp_path / "web")]) == EXIT_FAILED
    said = capsys.readouterr().err
    assert said.startswith("elicitron: no web window is running") and "start one with `elicitron web`" in said
    with pytest.raises(WebWindowNotRunningError, match="start one with `elicitron web`"):
        WebDir(tmp_path / "web").running_url()
    web = WebDir(tmp_path / "web")
    web.announce("http://127.0.0.1:8766")
    assert web.running_url() == "http://127.0.0.1:8766"  # this test's own pid is alive
    web.withdraw()
    with pytest.raises(WebWindowNotRunningError):
        web.running_url()


def test_web_refuses_a_non_loopback_address_without_tls_before_it_binds(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["web", "--listen", "0.0.0.0:0"]) == EXIT_USAGE
    assert "reachable from other machines" in capsys.readouterr().err


# ---- cards ---------------------------------------------------------------------------------------


def test_a_form_card_has_a_labelled_control_per_property_with_its_limits() -> None:
    card = card_of(_invoke({"mode": "form", "message": "Book?", "requestedSchema": BOOKING}))
    assert card["kind"] == "form" and card["message"] == "Book?" and card["expiresAt"] == 2
    fields = {field["name"]: field for field in card["fields"]}
    assert fields["name"] == {"name": "name", "title": "Name", "description": "", "required": True,
                              "default": "Ada", "kind": "text", "inputType": "text", "minLength": 1}
    assert (fields["size"]["kind"], fields["size"]["minimum"], fields["size"]["maximum"]) == ("integer", 1, 12)
    assert fields["outdoor"]["kind"] == "boolean" and fields["outdoor"]["title"] == "outdoor"
    assert fields["budget"]["kind"] == "number" and not fields["budget"]["required"]
    assert fields["cuisine"]["choices"] == [{"value": "fr", "title": "French"}, {"value": "jp", "title": "Japanese"}]
    assert fields["extras"] == {"name": "extras", "title": "extras", "description": "", "required": False,
                                "kind": "multi", "choices": [{"value": "wine", "title": "Wine"}], "maxItems": 1}
    assert fields["email"]["inputType"] == "email"


def test_a_schema_no_form_can_take_becomes_a_card_that_says_why() -> None:
    card = card_of(_invoke({"message": "?", "requestedSchema": {"type": "object", "properties": {
        "deep": {"type": "object"}}}}))
    assert card["kind"] == "unsupported" and "'deep'" in card["why"]


def test_a_link_with_a_bidi_override_cannot_be_opened_and_its_host_is_split_out() -> None:
    card = card_of(_invoke({"mode": "url", "message": "Go", "url": "https://exa\u202emple.com/x", "elicitationId": "1"}))
    link = card["link"]
    assert card["kind"] == "url" and not link["openable"] and "hidden" in link["refusal"]
    plain = card_of(_invoke({"mode": "url", "message": "Go", "url": "https://user@0x7f.1/x", "elicitationId": "1"}))
    assert plain["link"]["runs"] == ["https://user@", "0x7f.1", "/x"] and plain["link"]["address"] == "127.0.0.1"
    punycode = card_of(_invoke({"mode": "url", "message": "Go", "url": "https://xn--pple-43d.com/", "elicitationId": "1"}))
    assert punycode["link"]["warnings"]


def test_an_approval_card_offers_the_qt_cards_four_decisions() -> None:
    info = ApprovalInfo(server="demo", tool="cancel_booking", arguments={"id": 7, "why": "<b>x</b>"})
    card = card_of(_invoke({"mode": "form", "message": "m", "requestedSchema": {}}, kind="approval", approval=info))
    assert [decision for decision, _ in card["approval"]["buttons"]] == [
        "allow-once", "allow-session", "allow-always", "deny"]
    assert card["approval"]["arguments"] == [["id", "7"], ["why", "<b>x</b>"]]


# ---- what a page sends ---------------------------------------------------------------------------


def test_a_page_sends_answers_and_nothing_else() -> None:
    answer = read_page_message(b'{"type": "answer", "channel": "c", "action": "accept", "content": {"a": 1}}')
    assert (answer.channel, answer.action, answer.content) == ("c", "accept", {"a": 1})
    for bad in (b"{", b'{"type": "answer", "channel": "c", "action": "maybe"}', b'{"type": "shell"}',
                b"x" * 2_000_000):
        with pytest.raises(PageMessageError):
            read_page_message(bad)
