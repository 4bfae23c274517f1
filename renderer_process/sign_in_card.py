"""The sign-in card's body, and the "finish sign-in" field for a window on another machine.

A sign-in is a URL-mode request with the invoke's `signIn` extension; any v1 window can answer it
as a URL. Here it reads as what it is: the server that wants you signed in, the authorization
server's host in bold (where you will type your password), the scopes it asks for, every host the
flow talks to (`signIn.hosts`: a token or registration endpoint on another origin than the
authorization server's gets an unticked "Allow" box, and Accept waits for it), and warnings for
an unencrypted (http) or international (punycode) address, from `url_safety`, and one line when
the server predates OAuth metadata (`signIn.legacyMetadata`). The card stays an
`ElicitationCard` (answering, Esc, decline-all): `build_sign_in_body` only fills its layout.

On Accept the card answers first and only then opens the browser (`open_sign_in_page`): the
accept carries the hosts allowed, and an authorization server that redirects at once sends the
browser back to main at once (main holds such a redirect for the answer too, so any window works).

After Accept the browser opens on this machine, but it is sent back to main's loopback address
(`signIn.redirectUri`, 127.0.0.1 on main's machine). A window attached over tcp is on another
machine, so `SignInFinishDialog` asks for the address the browser ended on, and main checks it like
its listener would (`msgSignInRedirect`).
"""

import html
import logging
from collections.abc import Callable
from typing import Any

from PySide6.QtCore import Qt, QUrl, Signal
from PySide6.QtWidgets import (
    QCheckBox,
    QDialog,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QMessageBox,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from shared import messages
from shared.url_safety import UrlReport, inspect_url

logger = logging.getLogger(__name__)

ROLE_NAMES = {"authorization": "Sign-in page", "token": "Tokens (gets the sign-in code)",
              "registration": "Client registration", "resource": "The server"}
LEGACY_METADATA_LINE = ("This server predates the OAuth metadata spec (it publishes none), so you sign in at "
                        "the server's own address.")


def is_sign_in(invoke: messages.ElicitationInvoke) -> bool:
    return invoke.kind == "sign-in" and invoke.sign_in is not None \
        and invoke.request.params.get("mode") == "url"


def build_sign_in_body(card: QDialog, layout: QVBoxLayout, header: QLabel, invoke: messages.ElicitationInvoke,
                       accept: QPushButton) -> UrlReport:
    """Fill a card for a sign-in request; the report of its URL (the card opens it on Accept)."""
    info = invoke.sign_in
    assert info is not None
    server = invoke.request.server
    url = str(invoke.request.params.get("url", ""))
    report = inspect_url(url)
    card.setWindowTitle(f"Sign in to {server}")
    header.setText(f"<b>{html.escape(server)}</b> needs you to sign in.")

    host = QLabel(f"You will sign in at <b>{html.escape(info.authorization_server or report.host or '?')}</b>",
                  card)
    host.setObjectName("sign_in_host")
    host.setTextFormat(Qt.TextFormat.RichText)
    layout.addWidget(host)
    if report.host and info.authorization_server and report.host.lower() != info.authorization_server.lower():
        report.warnings.append(f"The link goes to {report.host}, not to {info.authorization_server}.")

    asked = ", ".join(info.scopes) if info.scopes else "no particular permissions (the server's defaults)"
    scopes = QLabel(f"It asks for: {asked}", card)
    scopes.setObjectName("sign_in_scopes")
    scopes.setTextFormat(Qt.TextFormat.PlainText)
    scopes.setWordWrap(True)
    layout.addWidget(scopes)

    if info.hosts:
        _add_hosts(card, layout, info, accept, report)

    if info.legacy_metadata:
        legacy = QLabel(LEGACY_METADATA_LINE, card)
        legacy.setObjectName("sign_in_legacy")
        legacy.setTextFormat(Qt.TextFormat.PlainText)
        legacy.setWordWrap(True)
        layout.addWidget(legacy)

    warnings = QLabel("\n".join(f"⚠ {w}" for w in report.warnings), card)
    warnings.setObjectName("warnings")
    warnings.setTextFormat(Qt.TextFormat.PlainText)
    warnings.setWordWrap(True)
    warnings.setStyleSheet("color: #8a4b00;")
    warnings.setVisible(bool(report.warnings))
    layout.addWidget(warnings)

    link = QLabel(report.highlighted_html(), card)
    link.setObjectName("url")
    link.setTextFormat(Qt.TextFormat.RichText)
    link.setWordWrap(True)
    link.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
    link.setStyleSheet("color: #555;")
    layout.addWidget(link)

    accept.setText("Sign in with browser")
    accept.setEnabled(report.openable)
    return report


def _add_hosts(card: QDialog, layout: QVBoxLayout, info: messages.SignInInfo, accept: QPushButton,
               report: UrlReport) -> None:
    """Every host the sign-in talks to; for a token or registration endpoint elsewhere, a box to
    allow it, unticked: Accept stays off until every one is ticked."""
    lines = [f"{ROLE_NAMES[h.role]}: <b>{html.escape(h.origin)}</b>"
             + (" <span style='color:#b00020'>(another host than the authorization server)</span>"
                if h.elsewhere else "") for h in info.hosts]
    hosts = QLabel("Elicitron will talk to:<br>" + "<br>".join(lines), card)
    hosts.setObjectName("sign_in_hosts")
    hosts.setTextFormat(Qt.TextFormat.RichText)
    hosts.setWordWrap(True)
    layout.addWidget(hosts)
    boxes: list[QCheckBox] = []
    for origin in dict.fromkeys(h.origin for h in info.hosts if h.elsewhere):
        box = QCheckBox(f"Allow {origin} to receive the sign-in code, the PKCE verifier and any client secret", card)
        box.setObjectName("sign_in_allow")
        box.setProperty("origin", origin)
        layout.addWidget(box)
        boxes.append(box)

    def refresh() -> None:
        accept.setEnabled(report.openable and all(b.isChecked() for b in boxes))

    for box in boxes:
        box.toggled.connect(refresh)


def sign_in_ready(card: QDialog) -> bool:
    """Every other host on the card is allowed (or there is none)."""
    return all(box.isChecked() for box in card.findChildren(QCheckBox, "sign_in_allow"))


def sign_in_answer(card: QDialog) -> dict[str, list[str]] | None:
    """The accept's content: the other hosts the user allowed (`allowHosts`), or None."""
    allowed = [str(box.property("origin")) for box in card.findChildren(QCheckBox, "sign_in_allow")
               if box.isChecked()]
    return {messages.SIGN_IN_ALLOW_PROPERTY: allowed} if allowed else None


def open_sign_in_page(opener: Callable[[QUrl], Any], url: QUrl, server: str, parent: QWidget | None) -> None:
    """Open the sign-in page once the accept is on its way to main. No browser took it: the accept
    stands (main waits for the redirect until the card's time runs out), so show the link to open
    by hand."""
    if opener(url) is not False:
        return
    logger.warning("no browser could open the sign-in page of %s; its link is shown to open by hand", server)
    box = QMessageBox(QMessageBox.Icon.Warning, f"Sign in to {server}",
                      "No browser could open the sign-in page. Open this link in a browser yourself before "
                      f"the sign-in expires:\n\n{url.toString()}", QMessageBox.StandardButton.Close, parent)
    box.setObjectName("sign_in_no_browser")
    box.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
    box.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
    box.open()


class SignInFinishDialog(QDialog):
    """For a window on another machine: paste the address the browser ended on after signing in."""

    pasted = Signal(str, str, str)  # server, elicitationId, url

    def __init__(self, invoke: messages.ElicitationInvoke, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("sign_in_finish")
        self.server = invoke.request.server
        self.elicitation_id = str(invoke.request.params.get("elicitationId", ""))
        info = invoke.sign_in
        landing = info.redirect_uri if info is not None and info.redirect_uri else "http://127.0.0.1:…/callback"
        self.setWindowTitle(f"Finish signing in to {self.server}")
        layout = QVBoxLayout(self)
        explain = QLabel(
            f"Elicitron runs on another machine, so your browser cannot deliver the sign-in to it. When the "
            f"browser shows an error page at an address starting with {landing}, copy that whole address "
            "from the address bar and paste it here.", self)
        explain.setObjectName("sign_in_explain")
        explain.setTextFormat(Qt.TextFormat.PlainText)
        explain.setWordWrap(True)
        layout.addWidget(explain)
        self.field = QLineEdit(self)
        self.field.setObjectName("sign_in_paste")
        self.field.setPlaceholderText(f"{landing}?code=…&state=…")
        layout.addWidget(self.field)
        self.problem = QLabel(self)
        self.problem.setObjectName("sign_in_problem")
        self.problem.setTextFormat(Qt.TextFormat.PlainText)
        self.problem.setWordWrap(True)
        self.problem.setStyleSheet("color: #b00020;")
        self.problem.hide()
        layout.addWidget(self.problem)
        buttons = QHBoxLayout()
        buttons.addStretch(1)
        self.finish_button = QPushButton("Finish sign-in", self)
        self.finish_button.setObjectName("sign_in_finish_button")
        self.finish_button.setEnabled(False)
        close = QPushButton("Close", self)
        buttons.addWidget(self.finish_button)
        buttons.addWidget(close)
        layout.addLayout(buttons)
        self.field.textChanged.connect(lambda text: self.finish_button.setEnabled("code=" in text))
        self.finish_button.clicked.connect(self._finish)
        close.clicked.connect(self.reject)

    def _finish(self) -> None:
        self.problem.hide()
        self.pasted.emit(self.server, self.elicitation_id, self.field.text().strip())

    def show_problem(self, text: str) -> None:
        """main refused the address (wrong sign-in, or not an answer): say so, keep the dialog."""
        self.problem.setText(text)
        self.problem.show()
