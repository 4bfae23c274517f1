"""The sign-in card in Elicitron's window: offscreen Qt widgets, and the whole way round with a real
main, the test authorization server and the test browser named in BROWSER."""

import webbrowser
from collections.abc import Iterator
from pathlib import Path

import pytest
from oauth_kit import Browser, OAuthMain, OAuthServers, oauth_config, oauth_servers, start_oauth_main
from PySide6.QtCore import Qt, QUrl
from PySide6.QtWidgets import (
    QCheckBox,
    QLabel,
    QLineEdit,
    QListWidget,
    QMessageBox,
    QPlainTextEdit,
    QPushButton,
    QWidget,
)
from pytestqt.qtbot import QtBot

from renderer_process.bridge import MainBridge
from renderer_process.card import ElicitationCard
from renderer_process.consent_cards import card_for
from renderer_process.main_window import MainWindow
from renderer_process.remember import RememberBox
from renderer_process.screenshot import grab_widget
from renderer_process.sign_in_card import SignInFinishDialog
from shared import messages


def child[T: QWidget](widget: QWidget, kind: type[T], name: str) -> T:
    found = widget.findChild(kind, name)
    assert found is not None, f"no {kind.__name__} named {name!r}"
    return found


def sign_in_invoke(url: str, host: str, scopes: list[str]) -> messages.ElicitationInvoke:
    params = {"mode": "url", "url": url, "elicitationId": "sign-in-1", "message": "Sign in to github"}
    return messages.ElicitationInvoke(
        request=messages.ElicitationRequest(server="github", params=params), response_channel="r-1",
        created_at=0, expires_at=None, origin=None, kind="sign-in",
        sign_in=messages.SignInInfo(authorization_server=host, scopes=scopes,
                                    redirect_uri="http://127.0.0.1:5555/callback"))


@pytest.mark.screenshot
def test_the_card_names_the_server_the_host_in_bold_and_the_scopes(qtbot: QtBot,
                                                                   screenshot_dir: Path) -> None:
    card = ElicitationCard(sign_in_invoke("https://github.com/login/oauth/authorize?state=x", "github.com",
                                          ["repo", "read:org"]), opener=lambda url: True)
    qtbot.addWidget(card)
    assert "<b>github</b>" in child(card, QLabel, "header").text()
    assert "<b>github.com</b>" in child(card, QLabel, "sign_in_host").text()
    assert child(card, QLabel, "sign_in_scopes").text() == "It asks for: repo, read:org"
    assert not child(card, QLabel, "warnings").isVisibleTo(card)
    assert child(card, QPushButton, "accept").text() == "Sign in with browser"
    assert not child(card, QPushButton, "decline_all").isVisibleTo(card)
    grab_widget(card, screenshot_dir / "sign_in_card.png")


def test_a_server_without_oauth_metadata_gets_one_line_saying_so(qtbot: QtBot) -> None:
    invoke = sign_in_invoke("http://localhost:8080/authorize?state=x", "localhost", [])
    assert invoke.sign_in is not None
    invoke.sign_in.legacy_metadata = True
    card = ElicitationCard(invoke, opener=lambda url: True)
    qtbot.addWidget(card)
    line = child(card, QLabel, "sign_in_legacy")
    assert line.isVisibleTo(card) and "predates the OAuth metadata spec" in line.text()
    plain = ElicitationCard(sign_in_invoke("https://github.com/authorize?state=x", "github.com", []),
                            opener=lambda url: True)
    qtbot.addWidget(plain)
    assert plain.findChild(QLabel, "sign_in_legacy") is None


def test_the_card_warns_about_http_and_punycode(qtbot: QtBot) -> None:
    card = ElicitationCard(sign_in_invoke("http://xn--gthub-n4a.com/authorize?state=x", "xn--gthub-n4a.com", []),
                           opener=lambda url: True)
    qtbot.addWidget(card)
    warnings = child(card, QLabel, "warnings")
    assert warnings.isVisibleTo(card)
    assert "not encrypted" in warnings.text() and "international characters" in warnings.text()
    assert "no particular permissions" in child(card, QLabel, "sign_in_scopes").text()


def test_a_token_endpoint_elsewhere_is_named_and_accept_waits_for_its_box(qtbot: QtBot) -> None:
    invoke = sign_in_invoke("https://login.example.com/authorize?state=x", "login.example.com", [])
    assert invoke.sign_in is not None
    invoke.sign_in.hosts = [
        messages.SignInHost(role="authorization", origin="https://login.example.com"),
        messages.SignInHost(role="token", origin="https://tokens.elsewhere.net", elsewhere=True),
        messages.SignInHost(role="resource", origin="https://mcp.example.com")]
    card = ElicitationCard(invoke, opener=lambda url: True)
    qtbot.addWidget(card)
    hosts = child(card, QLabel, "sign_in_hosts").text()
    assert "<b>https://login.example.com</b>" in hosts and "<b>https://tokens.elsewhere.net</b>" in hosts
    assert "another host than the authorization server" in hosts
    allow = child(card, QCheckBox, "sign_in_allow")
    assert "tokens.elsewhere.net" in allow.text() and not allow.isChecked()
    accept = child(card, QPushButton, "accept")
    assert not accept.isEnabled()  # default: refused
    answers: list[tuple[str, object]] = []
    card.answered.connect(lambda action, content: answers.append((action, content)))
    allow.setChecked(True)
    assert accept.isEnabled()
    qtbot.mouseClick(accept, Qt.MouseButton.LeftButton)
    assert answers == [("accept", {"allowHosts": ["https://tokens.elsewhere.net"]})]

    plain = ElicitationCard(sign_in_invoke("https://github.com/authorize?state=x", "github.com", []),
                            opener=lambda url: True)
    qtbot.addWidget(plain)
    assert plain.findChild(QCheckBox, "sign_in_allow") is None and child(plain, QPushButton, "accept").isEnabled()


def test_the_card_answers_before_it_opens_the_browser(qtbot: QtBot) -> None:
    # An authorization server that redirects at once sends the browser back to main at once: main
    # must have the accept (and the hosts it allowed) first.
    answers: list[tuple[str, object]] = []
    seen_when_opened: list[list[tuple[str, object]]] = []

    def opener(url: QUrl) -> bool:
        seen_when_opened.append(list(answers))
        return True

    invoke = sign_in_invoke("https://login.example.com/authorize?state=x", "login.example.com", [])
    assert invoke.sign_in is not None
    invoke.sign_in.hosts = [messages.SignInHost(role="token", origin="https://tokens.elsewhere.net", elsewhere=True)]
    card = ElicitationCard(invoke, opener=opener)
    qtbot.addWidget(card)
    card.answered.connect(lambda action, content: answers.append((action, content)))
    child(card, QCheckBox, "sign_in_allow").setChecked(True)
    qtbot.mouseClick(child(card, QPushButton, "accept"), Qt.MouseButton.LeftButton)
    assert seen_when_opened == [[("accept", {"allowHosts": ["https://tokens.elsewhere.net"]})]]


def test_when_no_browser_opens_the_sign_in_page_the_link_is_shown_to_open_by_hand(qtbot: QtBot) -> None:
    window = QWidget()
    qtbot.addWidget(window)
    card = ElicitationCard(sign_in_invoke("https://github.com/login/oauth/authorize?state=x", "github.com", []),
                           window, opener=lambda url: False)
    answers: list[str] = []
    card.answered.connect(lambda action, content: answers.append(action))
    qtbot.mouseClick(child(card, QPushButton, "accept"), Qt.MouseButton.LeftButton)
    assert answers == ["accept"]  # main already has it and waits for the redirect
    box = window.findChild(QMessageBox, "sign_in_no_browser")
    assert box is not None and box.isVisible()
    assert "https://github.com/login/oauth/authorize?state=x" in box.text() and "No browser" in box.text()


def test_a_window_on_another_machine_gets_a_field_for_the_redirected_address(qtbot: QtBot) -> None:
    window = MainWindow(name="remote window", opener=lambda url: True)
    qtbot.addWidget(window)
    window.remote = True
    window.on_invoked(sign_in_invoke("https://github.com/login/oauth/authorize?state=x", "github.com", []))
    card = window.current_card()
    assert card is not None
    sent: list[tuple[str, str, str, str]] = []
    window.sign_in_redirect_requested.connect(lambda *args: sent.append(args))
    qtbot.mouseClick(child(card, QPushButton, "accept"), Qt.MouseButton.LeftButton)
    dialog = window.findChild(SignInFinishDialog)
    assert dialog is not None and "http://127.0.0.1:5555/callback" in child(dialog, QLabel, "sign_in_explain").text()
    finish = child(dialog, QPushButton, "sign_in_finish_button")
    assert not finish.isEnabled()
    child(dialog, QLineEdit, "sign_in_paste").setText("http://127.0.0.1:5555/callback?code=c&state=x")
    qtbot.mouseClick(finish, Qt.MouseButton.LeftButton)
    assert sent and sent[0][1:] == ("github", "sign-in-1", "http://127.0.0.1:5555/callback?code=c&state=x")
    window.on_completed(messages.ElicitationComplete(server="github", elicitation_id="sign-in-1"))
    assert not dialog.isVisible()


@pytest.fixture
def servers() -> Iterator[OAuthServers]:
    with oauth_servers() as running:
        yield running


@pytest.mark.slow
def test_sign_in_from_the_window_with_the_browser_named_in_browser(
        qtbot: QtBot, servers: OAuthServers, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    browser = Browser(tmp_path)
    for key, value in browser.env().items():
        monkeypatch.setenv(key, value)
    monkeypatch.setattr(webbrowser, "_tryorder", None)  # read BROWSER afresh
    main: OAuthMain = start_oauth_main(oauth_config(tmp_path, "remote", servers.mcp), tmp_path / "data")
    bridge = MainBridge(main.running.connection, "sign-in window")
    window = MainWindow(name="sign-in window")  # the real opener: Qt, else Python's webbrowser
    qtbot.addWidget(window)
    window.attach(bridge)
    window.show()
    bridge.start()
    try:
        qtbot.waitUntil(lambda: window.current_card() is not None, timeout=30_000)
        card = window.current_card()
        assert card is not None and "127.0.0.1" in child(card, QLabel, "sign_in_host").text()
        assert "mcp:read" in child(card, QLabel, "sign_in_scopes").text()
        qtbot.mouseClick(child(card, QPushButton, "accept"), Qt.MouseButton.LeftButton)
        tree = window.servers_panel
        qtbot.waitUntil(lambda: any(s == "ready" for s in _statuses(tree)), timeout=30_000)
        assert browser.steps()[-1]["status"] == 200
        results = child(window, QPlainTextEdit, "results")
        window.call_panel.call_requested.emit("remote", "whoami", {})
        qtbot.waitUntil(lambda: "mcp:read" in results.toPlainText(), timeout=30_000)
    finally:
        bridge.close()
        main.running.stop()


def _statuses(panel: QWidget) -> list[str]:
    from PySide6.QtWidgets import QTreeWidget

    tree = panel.findChild(QTreeWidget)
    assert tree is not None
    rows = [tree.topLevelItem(i) for i in range(tree.topLevelItemCount())]
    return [row.text(1) for row in rows if row is not None]


@pytest.mark.slow
def test_the_window_shows_a_token_endpoint_elsewhere_and_signs_in_only_once_it_is_allowed(
        qtbot: QtBot, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    browser = Browser(tmp_path)
    for key, value in browser.env().items():
        monkeypatch.setenv(key, value)
    monkeypatch.setattr(webbrowser, "_tryorder", None)
    with oauth_servers("--token-elsewhere") as servers:
        assert servers.elsewhere is not None
        main = start_oauth_main(oauth_config(tmp_path, "remote", servers.mcp), tmp_path / "data")
        bridge = MainBridge(main.running.connection, "sign-in window")
        window = MainWindow(name="sign-in window")
        qtbot.addWidget(window)
        window.attach(bridge)
        window.show()
        bridge.start()
        try:
            qtbot.waitUntil(lambda: window.current_card() is not None, timeout=30_000)
            card = window.current_card()
            assert card is not None
            hosts = child(card, QLabel, "sign_in_hosts").text()
            assert servers.issuer in hosts and servers.elsewhere in hosts  # both, port and all
            accept = child(card, QPushButton, "accept")
            assert not accept.isEnabled()
            allow = child(card, QCheckBox, "sign_in_allow")
            assert servers.elsewhere in allow.text()
            allow.setChecked(True)
            qtbot.mouseClick(accept, Qt.MouseButton.LeftButton)
            qtbot.waitUntil(lambda: any(s == "ready" for s in _statuses(window.servers_panel)), timeout=30_000)
            assert servers.stats()["elsewhereCodes"] == 1
        finally:
            bridge.close()
            main.running.stop()


def test_the_card_before_a_registration_elsewhere_lists_that_host_unticked_and_remembers_nothing(
        qtbot: QtBot) -> None:
    from main_process.oauth.hosts import registration_form

    params = {"mode": "form", "message": "To sign in to github, Elicitron must first register at https://reg.evil.net",
              "requestedSchema": registration_form("https://reg.evil.net", "https://github.com")}
    invoke = messages.ElicitationInvoke(
        request=messages.ElicitationRequest(server="github", params=params), response_channel="r-2", created_at=0,
        expires_at=None, origin=None, kind="sign-in",
        sign_in=messages.SignInInfo(authorization_server="github.com", hosts=[
            messages.SignInHost(role="registration", origin="https://reg.evil.net", elsewhere=True)]))
    card = card_for(invoke, opener=lambda url: True)
    qtbot.addWidget(card)
    assert isinstance(card, ElicitationCard)
    assert card.findChild(RememberBox) is None
    hosts = card.findChild(QListWidget)
    assert hosts is not None and hosts.count() == 1 and hosts.item(0).text() == "https://reg.evil.net"
    assert hosts.item(0).checkState() == Qt.CheckState.Unchecked  # default: refused
    answers: list[tuple[str, object]] = []
    card.answered.connect(lambda action, content: answers.append((action, content)))
    hosts.item(0).setCheckState(Qt.CheckState.Checked)
    qtbot.mouseClick(child(card, QPushButton, "accept"), Qt.MouseButton.LeftButton)
    assert answers == [("accept", {"allowHosts": ["https://reg.evil.net"]})]
