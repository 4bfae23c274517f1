"""The web window's pure parts in-process: where it may listen, pairing codes and devices on disk,
cards from invokes, and what a page may send."""

import stat
from pathlib import Path
from typing import Any

import pytest

from cli_process import cli
from cli_process.command import EXIT_FAILED, EXIT_USAGE
from shared.denial_reason import REASON_MAX_CHARS
from shared.errors import ConfigError, DeviceError, PageMessageError, PairingError, WebWindowNotRunningError
from shared.messages import (
    ApprovalInfo,
    AskerInfo,
    ElicitationInvoke,
    ElicitationRequest,
    RevokeReport,
    RuleInfo,
    SignInHost,
    SignInInfo,
)
from shared.web_devices import read_paired_devices
from web_process.cards import LEGACY_METADATA_LINE, card_of
from web_process.devices import CODE_LIFETIME_S, SEEN_INTERVAL_S, WebDir
from web_process.listen import check_listen
from web_process.page_peer import (
    PageAnswer,
    PageRevoke,
    PageServerPolicy,
    PageSignInRedirect,
    read_page_message,
)
from web_process.remembered import revoked_message, rule_row

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


ANDROID_CHROME = ("Mozilla/5.0 (Linux; Android 14; Pixel 8) AppleWebKit/537.36 (KHTML, like Gecko) "
                  "Chrome/120.0.0.0 Mobile Safari/537.36")


@pytest.mark.parametrize(("user_agent", "said"), [
    (ANDROID_CHROME, "Chrome on Android"),
    (("Mozilla/5.0 (iPhone; CPU iPhone OS 17_2 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) "
     "Version/17.2 Mobile/15E148 Safari/604.1"), "Safari on iPhone"),
    (("Mozilla/5.0 (iPhone; CPU iPhone OS 17_2 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) "
     "CriOS/120.0.6099.119 Mobile/15E148 Safari/604.1"), "Chrome on iPhone"),
    (("Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0.0.0 "
     "Safari/537.36 Edg/120.0.2210.91"), "Edge on Windows"),
    ("Mozilla/5.0 (Macintosh; Intel Mac OS X 14.2; rv:121.0) Gecko/20100101 Firefox/121.0", "Firefox on macOS"),
    (("Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) HeadlessChrome/120.0.0.0 "
     "Safari/537.36"), "Chrome on Linux"),
    ("curl/8.5.0", "browser"),
    ("", "browser"),
])
def test_a_browser_is_called_by_what_its_user_agent_says(user_agent: str, said: str) -> None:
    from web_process.user_agent import browser_on_system

    assert browser_on_system(user_agent) == said


def test_a_device_paired_without_a_name_is_the_persons_browser_and_a_named_one_keeps_its_name(
        tmp_path: Path) -> None:
    web = WebDir(tmp_path / "web")
    unnamed = web.redeem(web.new_code(None, person="ana"), ANDROID_CHROME)[0]
    assert unnamed.name == "ana's Chrome on Android"
    assert web.redeem(web.new_code("kitchen tablet", person="ana"), ANDROID_CHROME)[0].name == "kitchen tablet"
    forged = web.redeem(web.new_code(None, person="ana"), "Chrome/1 <b>\n" + "x" * 500)[0]
    assert forged.name == "ana's Chrome"  # only fixed words come from the header
    assert [device.name for device in read_paired_devices(tmp_path / "web")] == [
        "ana's Chrome on Android", "kitchen tablet", "ana's Chrome"]


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


def test_another_mains_request_names_its_machine_and_ones_own_do_not() -> None:
    params = {"mode": "form", "message": "Book?", "requestedSchema": BOOKING}
    assert card_of(_invoke(params, machine="laptop-a"))["machine"] == "laptop-a"  # the page shows "on laptop-a"
    assert "machine" not in card_of(_invoke(params))


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
    assert card["approval"]["reasonMaxChars"] == REASON_MAX_CHARS  # the reason field's cap, as the wire's


YES_NO = {"type": "object", "properties": {"answer": {"type": "boolean"}}, "required": ["answer"]}


def test_a_programs_question_names_the_program_and_a_yes_no_one_is_a_confirm() -> None:
    asker = AskerInfo(name="deploy.sh", pid=4242, machine="build-7")
    question = ElicitationRequest(server="deploy.sh", params={"mode": "form", "message": "Deploy?",
                                                              "requestedSchema": YES_NO})  # as main names it
    card = card_of(ElicitationInvoke(request=question, response_channel="q", created_at=1, expires_at=None,
                                     origin=None, kind="question", asker=asker))
    assert (card["who"], card["question"], card["confirm"]) == ("deploy.sh (pid 4242 on build-7)", True, "answer")
    assert card["remember"] == {"who": "the program deploy.sh"}  # its remembered answers are its own
    server = card_of(_invoke({"mode": "form", "message": "Deploy?", "requestedSchema": YES_NO}))
    assert (server["who"], server["confirm"], server["remember"]) == ("demo", None, {"who": "the server demo"})
    link = card_of(_invoke({"mode": "url", "message": "Go", "url": "https://a.example/", "elicitationId": "1"},
                           kind="question", asker=asker))
    assert link["kind"] == "url" and link["remember"] is None  # no rule ever answers a link
    # "Decline all from …" is a policy for servers: never offered for a program's question
    assert (card["declineAll"], link["declineAll"], server["declineAll"]) == (False, False, True)


def _sign_in(url: str, **info: Any) -> ElicitationInvoke:
    return _invoke({"mode": "url", "message": "Sign in", "url": url, "elicitationId": "sign-in-1"},
                   kind="sign-in", sign_in=SignInInfo(**info))


def test_a_sign_in_card_shows_where_you_sign_in_and_the_hosts_to_allow() -> None:
    card = card_of(_sign_in("https://auth.example/authorize?x=1", authorization_server="auth.example",
                            scopes=["mcp:read"], redirect_uri="http://127.0.0.1:5000/callback", hosts=[
                                SignInHost(role="authorization", origin="https://auth.example"),
                                SignInHost(role="token", origin="https://tokens.example", elsewhere=True)]))
    info = card["signIn"]
    assert (card["kind"], card["elicitationId"], card["remember"], card["declineAll"]) == (
        "sign-in", "sign-in-1", None, False)  # no policy or rule ever answers a sign-in
    assert card["link"]["runs"][1] == "auth.example" and card["link"]["openable"] and not card["link"]["warnings"]
    assert info["hosts"] == [{"role": "Sign-in page", "origin": "https://auth.example", "elsewhere": False},
                             {"role": "Tokens (gets the sign-in code)", "origin": "https://tokens.example",
                              "elsewhere": True}]
    assert (info["allow"], info["allowProperty"], info["legacy"]) == (["https://tokens.example"], "allowHosts", None)
    elsewhere = card_of(_sign_in("https://evil.example/authorize", authorization_server="auth.example",
                                 legacy_metadata=True))
    assert "The link goes to evil.example, not to auth.example." in elsewhere["link"]["warnings"]
    assert elsewhere["signIn"]["legacy"] == LEGACY_METADATA_LINE


def test_time_left_is_what_main_set_less_the_web_windows_now() -> None:
    invoke = ElicitationInvoke(request=ElicitationRequest(server="demo", params={"message": "?", "requestedSchema": {
        "type": "object", "properties": {}}}), response_channel="c", created_at=0, expires_at=1_000_000, origin=None)
    assert card_of(invoke, now=400_000)["msLeft"] == 600_000
    assert card_of(invoke, now=2_000_000)["msLeft"] == 0  # past: "Expiring now", never negative
    never = ElicitationInvoke(request=invoke.request, response_channel="c", created_at=0, expires_at=None, origin=None)
    assert card_of(never, now=400_000)["msLeft"] is None


def test_a_remembered_row_reads_as_in_the_qt_panel_and_only_user_rules_are_revocable() -> None:
    user = RuleInfo(id="r-1", source="user", kind="answer", server="deploy.sh", party="asker", scope="always",
                    created_at=0, created_by="my phone (web)", message="Deploy?", fields=["answer"], action="accept")
    row = rule_row(user)
    assert (row["who"], row["what"], row["scope"], row["revocable"]) == (
        "program deploy.sh", "“Deploy?” → accept (answer)", "always", True)
    assert row["made"].startswith("made by my phone (web), ")
    config = rule_row(RuleInfo(id="config-1", source="config", kind="tool", server="demo", scope="always",
                               created_at=0, created_by="mcp.json", tool="read_*", decision="allow"))
    assert (config["what"], config["revocable"], config["note"]) == (
        "tool read_* → allow", False, "config rule: change it in the config file")
    assert revoked_message(RevokeReport(revoked=["r-1"], refused=["config-1 is a config rule"])) == {
        "type": "revoked", "lines": ["Revoked r-1.", "Not revoked: config-1 is a config rule"], "problem": True}
    assert revoked_message(None, "not connected")["lines"] == ["Not revoked: not connected"]


# ---- what a page sends ---------------------------------------------------------------------------


def test_a_page_sends_a_remembered_answer_a_denys_reason_a_revoke_and_a_sign_in_address() -> None:
    answer = read_page_message(b'{"type": "answer", "channel": "c", "action": "accept", "content": {},'
                               b' "remember": {"scope": "until", "until": 1700000000000}}')
    assert isinstance(answer, PageAnswer) and answer.remember is not None
    assert (answer.remember.scope, answer.remember.until) == ("until", 1_700_000_000_000)
    revoke = read_page_message(b'{"type": "revoke", "ids": ["r-1"], "all": false}')
    assert isinstance(revoke, PageRevoke) and (revoke.ids, revoke.revoke_all) == (["r-1"], False)
    pasted = read_page_message(b'{"type": "sign-in-redirect", "server": "remote", "elicitationId": "e",'
                               b' "url": "http://127.0.0.1:1/callback?code=x"}')
    assert isinstance(pasted, PageSignInRedirect) and pasted.elicitation_id == "e"
    denied = read_page_message(b'{"type": "answer", "channel": "c", "action": "accept", "content": {"decision": "deny"},'
                               b' "reason": "use staging"}')
    assert isinstance(denied, PageAnswer) and denied.reason == "use staging"
    policy = read_page_message(b'{"type": "server-policy", "server": "demo", "declineAll": true}')
    assert isinstance(policy, PageServerPolicy) and (policy.server, policy.decline_all) == ("demo", True)
    for bad in (b'{"type": "answer", "channel": "c", "action": "accept", "remember": {"scope": "forever"}}',
                b'{"type": "revoke", "ids": "r-1"}',
                b'{"type": "answer", "channel": "c", "action": "decline", "reason": "' + b"x" * (REASON_MAX_CHARS + 1) + b'"}',
                b'{"type": "sign-in-redirect", "server": "s", "elicitationId": "e", "url": "' + b"x" * 17_000 + b'"}'):
        with pytest.raises(PageMessageError):
            read_page_message(bad)



def test_a_page_sends_answers_and_nothing_else() -> None:
    answer = read_page_message(b'{"type": "answer", "channel": "c", "action": "accept", "content": {"a": 1}}')
    assert isinstance(answer, PageAnswer)
    assert (answer.channel, answer.action, answer.content) == ("c", "accept", {"a": 1})
    for bad in (b"{", b'{"type": "answer", "channel": "c", "action": "maybe"}', b'{"type": "shell"}',
                b"x" * 2_000_000):
        with pytest.raises(PageMessageError):
            read_page_message(bad)


@pytest.mark.parametrize(("listen_origins", "page_origin", "secure"), [
    ((), "http://127.0.0.1:8766", False),  # plain http on loopback: a Secure cookie would be dropped
    (("https://phone.example.net",), "https://phone.example.net", True),  # a TLS reverse proxy in front
])
def test_the_device_cookie_is_secure_whenever_the_page_came_over_tls(
        tmp_path: Path, listen_origins: tuple[str, ...], page_origin: str, secure: bool) -> None:
    from starlette.testclient import TestClient

    from web_process.app import COOKIE, WebWindow

    web_dir = WebDir(tmp_path / "web")
    listen = check_listen("127.0.0.1:8766", None, None, False, listen_origins)
    client = TestClient(WebWindow(tmp_path / "connection.json", web_dir, listen).asgi(),
                        base_url=page_origin)
    response = client.post("/api/pair", json={"code": web_dir.new_code("phone")}, headers={"Origin": page_origin})
    assert response.status_code == 200, response.text
    cookie = response.headers["set-cookie"]
    assert cookie.startswith(f"{COOKIE}=") and "HttpOnly" in cookie and "SameSite=strict" in cookie
    assert ("Secure" in cookie) is secure


def test_revoking_a_device_by_name_or_id_and_a_name_two_devices_share(tmp_path: Path) -> None:
    clock = Clock()
    web = WebDir(tmp_path / "web", clock=clock)
    kept, _ = web.redeem(web.new_code("tablet"))
    first, _ = web.redeem(web.new_code("phone"))
    second, _ = web.redeem(web.new_code("phone"))
    with pytest.raises(DeviceError, match=f"2 paired web devices are called 'phone'.*{first.id}, {second.id}"):
        web.revoke("phone")
    with pytest.raises(DeviceError, match=r"no paired web device is called 'laptop' \(paired: phone, tablet\)"):
        web.revoke("laptop")
    assert web.revoke(first.id) == [first]
    assert web.revoke("phone") == [second]  # the name is one device's now
    assert [device.name for device in read_paired_devices(tmp_path / "web")] == ["tablet"]
    assert web.still_paired(kept.id) and not web.still_paired(first.id)


def test_last_seen_is_kept_beside_the_devices_at_most_once_a_minute(tmp_path: Path) -> None:
    clock = Clock()
    web = WebDir(tmp_path / "web", clock=clock)
    device, _ = web.redeem(web.new_code("phone"))
    assert read_paired_devices(tmp_path / "web")[0].last_seen is None  # never connected yet
    before = (tmp_path / "web" / "devices.json").read_bytes()
    web.seen(device)
    first = clock.now
    clock.now += SEEN_INTERVAL_S - 1
    web.seen(device)
    assert read_paired_devices(tmp_path / "web")[0].last_seen == first
    clock.now += 2
    web.seen(device)
    assert read_paired_devices(tmp_path / "web")[0].last_seen == clock.now
    assert (tmp_path / "web" / "devices.json").read_bytes() == before  # never rewritten for a visit
    assert stat.S_IMODE((tmp_path / "web" / "seen" / device.id).stat().st_mode) == 0o600
    web.revoke("phone")
    assert not (tmp_path / "web" / "seen" / device.id).exists()


def test_devices_cli_lists_none_then_a_device_and_says_what_to_do_on_a_bad_revoke(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    web_dir = str(tmp_path / "web")
    assert cli.main(["devices", "--web-dir", web_dir]) == 0
    assert capsys.readouterr().out == "web devices: none paired (pair a browser: elicitron pair --web --name NAME)\n"
    WebDir(tmp_path / "web").redeem(WebDir(tmp_path / "web").new_code("o'neil's phone"))
    assert cli.main(["devices", "--web-dir", web_dir]) == 0
    listed = capsys.readouterr().out.splitlines()
    assert listed[0] == "web devices (1):" and "o'neil's phone" in listed[1] and "last seen never" in listed[1]
    assert cli.main(["devices", "revoke", "--web-dir", web_dir]) == EXIT_USAGE
    assert "say which device: `elicitron devices revoke NAME`" in capsys.readouterr().err
    assert cli.main(["devices", "revoke", "nobody", "--web-dir", web_dir]) == EXIT_FAILED
    assert "no paired web device is called 'nobody'" in capsys.readouterr().err
    assert cli.main(["devices", "revoke", "o'neil's phone", "--web-dir", web_dir]) == 0
    assert "elicitron pair --web --name 'o'\"'\"'neil'\"'\"'s phone'" in capsys.readouterr().out
