"""ElicitationCard: the modal dialog for one elicitation (form, URL consent, or a notice).

The card only asks; it never sends. It emits `answered(action, content)` exactly once and closes;
whoever opened it forwards the answer. What it offers besides its body is given when it is built
(`Offers`, by default `offers_for(invoke)`): "Decline all from <server> for this session" (emits
`decline_all_requested(server)`, then answers this card with decline), "Remember my answer" on a
form (`remember_choice(action)` reads it), and a program's yes/no question drawn as a confirm.

A form's Accept is disabled only while the card shows a problem: an empty required field is
marked, not flagged, until the user edits it or presses Accept; Accept then names what is missing
under the field and in the card, focuses the first such field, and sends nothing (form_body.py).

Keyboard: Enter presses Accept (from ENTER_ARM_MS after the card appears, so a keystroke meant
for something else never answers; on an answer not valid yet, that shows why), Alt+D declines,
Esc and the window's close button cancel; the focus starts on the first field. A card closed by
`close_silently()` (another window answered, the server cancelled) emits nothing.

A request the card cannot show (an unsupported schema, an unknown mode, or anything that fails
while building it from a hostile schema) becomes a notice with Decline and Cancel: never a stall.
A URL card hands the browser only a link that passed url_safety and Qt's strict parser, and
answers accept only once the browser took it; a sign-in card answers first (sign_in_card.py).
"""

import html
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from PySide6.QtCore import QEvent, QObject, Qt, QTimer, QUrl, Signal
from PySide6.QtGui import QDesktopServices, QGuiApplication, QKeyEvent, QKeySequence, QShowEvent
from PySide6.QtWidgets import (
    QCheckBox,
    QDialog,
    QHBoxLayout,
    QLabel,
    QPushButton,
    QScrollArea,
    QVBoxLayout,
    QWidget,
)

from renderer_process.form_body import FormBody
from renderer_process.hosts import via_label
from renderer_process.long_text import LongText
from renderer_process.remember import RememberBox
from renderer_process.sign_in_card import (
    build_sign_in_body,
    is_sign_in,
    open_sign_in_page,
    sign_in_answer,
    sign_in_ready,
)
from renderer_process.time_left import SOON_S, now_ms, seconds_left, time_left_text
from renderer_process.tones import ToneLabel
from shared import messages
from shared.errors import UnsupportedSchemaError
from shared.question_card import is_question, who_asks, yes_no_property
from shared.schema import check_schema
from shared.url_safety import inspect_url

logger = logging.getLogger(__name__)

UrlOpener = Callable[[QUrl], Any]

FORM = "form"
URL = "url"
NOTICE = "notice"

ENTER_ARM_MS = 400
_FORM_MAX_HEIGHT = 720  # the form scrolls beyond this, not the card
_FORM_MIN_HEIGHT = 120  # on the smallest screen, still a few fields at a time
_TITLE_BAR_ALLOWANCE = 48  # the window manager's title bar and frame above the card
# "Decline all from …": a link, in the palette's link colour, that follows light and dark.
_LINK_STYLE = (
    "QPushButton { color: palette(link); text-decoration: underline; border: none; padding: 2px 4px; }"
)
_MAX_PROBLEMS_SHOWN = 3
_TICK_MS = 1000


def open_in_browser(url: QUrl) -> bool:
    if QDesktopServices.openUrl(url):
        return True
    # Qt's platform has no URL service (offscreen, some minimal desktops): Python's webbrowser
    # honours $BROWSER. In a thread, since a browser command may run until the browser quits.
    import threading
    import webbrowser

    threading.Thread(target=webbrowser.open, args=(url.toString(),), daemon=True).start()
    return True


@dataclass(frozen=True)
class Offers:
    """What a card offers besides its body (a notice offers only Decline and Cancel, whatever this says)."""

    decline_all: bool = True  # "Decline all from <server> for this session": a policy for servers
    remember: bool = False  # "Remember my answer", above the answer buttons of a form
    confirm: str | None = None  # a yes/no question: this boolean is the answer; Yes / No, the form hidden


def offers_for(invoke: messages.ElicitationInvoke, *, remember: bool = False) -> Offers:
    """A server's request offers declining all from it; a program's question (not a server) and a
    sign-in card (main never answers one by policy) do not. Nothing of a sign-in is remembered,
    neither its card nor the form before it (registering elsewhere)."""
    return Offers(decline_all=not (is_question(invoke) or is_sign_in(invoke)),
                  remember=remember and invoke.kind != "sign-in", confirm=yes_no_property(invoke))


class ElicitationCard(QDialog):
    """One elicitation as a dialog; `kind` is "form", "url" or "notice"."""

    answered = Signal(str, object)  # action, content dict (accept of a form) or None
    decline_all_requested = Signal(str)  # server; emitted just before answered("decline", None)

    def __init__(
        self,
        invoke: messages.ElicitationInvoke,
        parent: QWidget | None = None,
        *,
        opener: UrlOpener = open_in_browser,
        offers: Offers | None = None,
    ) -> None:
        super().__init__(parent)
        self.invoke = invoke
        self.offers = offers if offers is not None else offers_for(invoke)
        self.remember_box: RememberBox | None = None
        self._opener = opener
        self._finished = False
        self._enter_armed = False
        self.form: FormBody | None = None
        self._scroll: QScrollArea | None = None  # around the form
        self._url = QUrl()

        params = invoke.request.params
        self.server = invoke.request.server
        self.who = who_asks(invoke)  # the server, or a program: "deploy.sh (pid 4242 on build-7)"
        self.setObjectName("card")
        self.setModal(True)
        self.setMinimumWidth(460)

        layout = QVBoxLayout(self)
        self._header = QLabel(self)
        self._header.setObjectName("header")
        self._header.setTextFormat(Qt.TextFormat.RichText)
        layout.addWidget(self._header)
        if (via := via_label(invoke, self)) is not None:  # "via Claude Desktop": the host whose call asks
            layout.addWidget(via)
        # Server text, never markup; bounded (long_text): a huge message cannot stall the window.
        self.message = LongText(str(params.get("message", "")), "message", self, accessible_name="Message")
        layout.addWidget(self.message)

        self.expiry = QLabel(self)  # "Expires in 4:05", kept current by a one-second tick
        self.expiry.setObjectName("expires")
        self.expiry.setTextFormat(Qt.TextFormat.PlainText)
        self._tick = QTimer(self)
        self._tick.setInterval(_TICK_MS)
        self._tick.timeout.connect(self._show_time_left)

        self.waiting = QLabel(self)  # "2 more waiting", kept current by the window
        self.waiting.setObjectName("waiting")
        self.waiting.hide()

        self.problem_label = ToneLabel("error", self)
        self.problem_label.setObjectName("problems")
        self.problem_label.setTextFormat(Qt.TextFormat.PlainText)
        self.problem_label.setWordWrap(True)
        self.problem_label.hide()

        self.accept_button = _button("Accept", "accept", self)
        self.accept_button.setToolTip("Accept (Enter)")
        self.decline_button = _button("&Decline", "decline", self)
        self.decline_button.setShortcut(QKeySequence("Alt+D"))  # also where mnemonics are off
        self.decline_button.setToolTip("Decline (Alt+D)")
        self.cancel_button = _button("Cancel", "cancel", self)
        self.cancel_button.setToolTip("Cancel (Esc)")
        self.copy_button = _button("Copy link", "copy_link", self)
        self.copy_button.hide()
        self.accept_button.clicked.connect(self._on_accept)
        self.decline_button.clicked.connect(lambda: self._finish("decline", None))
        self.cancel_button.clicked.connect(self.reject)
        self.copy_button.clicked.connect(self._copy_link)
        # A secondary, quieter action: stop a server that asks too often, for this main session.
        # Drawn as a link (a flat button read as plain text): still a button, reached with Tab.
        decline_all_text = f"Decline all from {self.server} for this session"
        self.decline_all_button = _button(decline_all_text, "decline_all", self)
        self.decline_all_button.setFlat(True)
        self.decline_all_button.setStyleSheet(_LINK_STYLE)
        self.decline_all_button.setCursor(Qt.CursorShape.PointingHandCursor)
        self.decline_all_button.setAccessibleName(decline_all_text)
        self.decline_all_button.setToolTip(
            f"Decline this request and every further one from {self.server} until main restarts. "
            "You can ask again from the Servers panel."
        )
        self.decline_all_button.clicked.connect(self._on_decline_all)

        try:
            self.kind = self._build_body(layout, params)
        except Exception:  # top-level handler for one request: whatever a hostile schema breaks -> notice
            logger.exception(
                "cannot build the card for %s from %s; showing a notice", invoke.response_channel, self.server
            )
            self.kind = NOTICE
            self._build_notice(layout, "this window could not build a form from it")

        layout.addWidget(self.expiry)
        layout.addWidget(self.problem_label)
        layout.addWidget(self.waiting)
        if self.kind == FORM and self.offers.remember:
            self.remember_box = RememberBox(self.server, self, asker=is_question(invoke))
            layout.addWidget(self.remember_box)
        buttons = QHBoxLayout()
        buttons.addWidget(self.copy_button)
        buttons.addStretch(1)
        if self.kind != NOTICE:
            buttons.addWidget(self.accept_button)
        else:
            self.accept_button.hide()
        buttons.addWidget(self.decline_button)
        buttons.addWidget(self.cancel_button)
        layout.addLayout(buttons)
        if self.kind != NOTICE and self.offers.decline_all:  # its own line under the answers: never clipped
            secondary = QHBoxLayout()
            secondary.addStretch(1)
            secondary.addWidget(self.decline_all_button)
            layout.addLayout(secondary)
        else:
            self.decline_all_button.hide()
        if self.kind == FORM and self.offers.confirm is not None:
            self._show_as_confirm(self.offers.confirm)
        self.setAccessibleName(self.windowTitle())
        self._fit_form()  # the whole card is built: the room the screen leaves for the form is known
        self._show_time_left()
        if invoke.expires_at is not None:
            self._tick.start()

    # ---- the three bodies -----------------------------------------------------------------

    def _build_body(self, layout: QVBoxLayout, params: dict[str, Any]) -> str:
        """Build the form, URL or notice body; whatever may fail runs before a widget is added."""
        mode = params.get("mode", FORM)  # MCP: a request without mode is a form
        if is_sign_in(self.invoke):  # extension: a URL request drawn as a sign-in card (sign_in_card.py)
            report = build_sign_in_body(self, layout, self._header, self.invoke, self.accept_button)
            strict = QUrl(report.url, QUrl.ParsingMode.StrictMode)
            self._url = strict if report.openable and strict.isValid() else QUrl()
            self.accept_button.setEnabled(self._url.isValid() and sign_in_ready(self))
            return URL
        if mode == URL:
            self._build_url(layout, str(params.get("url", "")))
            return URL
        if mode != FORM:
            self._build_notice(layout, f"this window does not know the request mode {mode!r}")
            return NOTICE
        try:
            check_schema(params.get("requestedSchema"))
        except UnsupportedSchemaError as exc:
            self._build_notice(layout, str(exc))
            return NOTICE
        self._build_form(layout, params["requestedSchema"])
        return FORM

    def _build_form(self, layout: QVBoxLayout, schema: dict[str, Any]) -> None:
        form = FormBody(schema)  # no parent yet: if it raises, nothing of it stays in the card
        who = html.escape(self.who)
        self.setWindowTitle(f"{self.who} asks for input")
        self._header.setText(f"<b>{who}</b> asks for input:")
        self.form = form
        scroll = QScrollArea(self)
        scroll.setWidgetResizable(True)
        scroll.setFrameShape(QScrollArea.Shape.NoFrame)
        scroll.setWidget(form)
        self._scroll = scroll
        # Show the whole form when it fits a screen; scroll only beyond that. Again whenever the
        # form's layout changes (an error line appears under a field) or its width does: the card
        # grows with it instead of hiding the last field behind a scroll bar.
        self._fit_form()
        form.installEventFilter(self)
        layout.addWidget(scroll, 1)
        form.checked.connect(self._show_validity)
        self._show_validity()

    def _show_as_confirm(self, key: str) -> None:
        """A yes/no question: its boolean ticked (Accept sends {key: true}, the "Yes"), the form
        hidden, the answers named Yes and No. A form without that checkbox stays a form."""
        field = self.form.fields.get(key) if self.form is not None else None
        if self.form is None or field is None or not isinstance(field.widget, QCheckBox):
            return
        field.widget.setChecked(True)
        self.form.refresh()
        if self._scroll is not None:
            self._scroll.hide()
        self.accept_button.setText("Yes")
        self.decline_button.setText("No")

    def _build_url(self, layout: QVBoxLayout, url: str) -> None:
        report = inspect_url(url)
        strict = QUrl(url, QUrl.ParsingMode.StrictMode)
        openable, why_not = report.openable, report.refusal
        if openable and not strict.isValid():
            openable, why_not = False, "it is not a well-formed link"
        self._url = strict if openable else QUrl()
        who = html.escape(self.who)
        self.setWindowTitle(f"{self.who} asks you to open a link")
        self._header.setText(f"<b>{who}</b> asks you to open a link in your browser:")
        url_label = QLabel(report.highlighted_html(), self)
        url_label.setObjectName("url")
        url_label.setTextFormat(Qt.TextFormat.RichText)
        url_label.setWordWrap(True)
        url_label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        url_label.setAccessibleName("Link")
        layout.addWidget(url_label)
        host = QLabel(f"Goes to: <b>{html.escape(report.destination) or '(no host)'}</b>", self)
        host.setObjectName("host")
        host.setTextFormat(Qt.TextFormat.RichText)
        layout.addWidget(host)
        lines = [f"⚠ {w}" for w in report.warnings]
        if not openable:
            lines.append(f"This link cannot be opened: {why_not}. You can decline or cancel.")
        warnings = ToneLabel("warning", self)
        warnings.setText("\n".join(lines))
        warnings.setObjectName("warnings")
        warnings.setTextFormat(Qt.TextFormat.PlainText)
        warnings.setWordWrap(True)
        warnings.setVisible(bool(lines))
        layout.addWidget(warnings)
        self.accept_button.setText("Accept and open")
        self.accept_button.setToolTip("Accept and open the link in your browser")
        self.accept_button.setEnabled(openable)

    def _build_notice(self, layout: QVBoxLayout, reason: str) -> None:
        who = html.escape(self.who)
        self.setWindowTitle(f"{self.who} sent a request this window cannot show")
        self._header.setText(f"<b>{who}</b> asks for something this window cannot show.")
        notice = QLabel(f"This request can't be shown: {reason}. You can decline or cancel it.", self)
        notice.setObjectName("notice")
        notice.setTextFormat(Qt.TextFormat.PlainText)
        notice.setWordWrap(True)
        layout.addWidget(notice)

    def _fit_form(self) -> None:
        form, scroll = self.form, self._scroll
        if form is None or scroll is None:
            return
        width = scroll.viewport().width() if scroll.isVisible() else 0
        needed = form.heightForWidth(width) if width > 0 and form.hasHeightForWidth() else -1
        if needed < 0:
            needed = form.sizeHint().height()
        # Only ever taller: a card does not jump smaller under the pointer when an error line goes.
        room = self._form_room()
        scroll.setMinimumHeight(min(max(scroll.minimumHeight(), needed + 4), room))

    def _form_room(self) -> int:
        """The most the form may take: what the screen leaves once the rest of the card (header,
        message, answer buttons, "Decline all") and a title bar are shown, so those stay on screen
        and the form scrolls instead (a 13-field form on a 640 px screen); at most _FORM_MAX_HEIGHT."""
        screen = self.screen() or QGuiApplication.primaryScreen()
        layout = self.layout()
        if screen is None or self._scroll is None or layout is None:
            return _FORM_MAX_HEIGHT
        rest = layout.sizeHint().height() - max(self._scroll.sizeHint().height(), self._scroll.minimumHeight())
        room = screen.availableGeometry().height() - rest - _TITLE_BAR_ALLOWANCE
        return max(_FORM_MIN_HEIGHT, min(room, _FORM_MAX_HEIGHT))

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:
        if watched is self.form and event.type() in (QEvent.Type.LayoutRequest, QEvent.Type.Resize):
            self._fit_form()
        return super().eventFilter(watched, event)

    # ---- state shown on the card ------------------------------------------------------------

    @property
    def enter_armed(self) -> bool:
        """Whether Enter accepts yet (ENTER_ARM_MS after the card was shown)."""
        return self._enter_armed

    def set_waiting_text(self, text: str) -> None:
        self.waiting.setText(text)
        self.waiting.setVisible(bool(text))

    def _show_time_left(self) -> None:
        now = now_ms()
        left = seconds_left(self.invoke.expires_at, now)
        text = time_left_text(self.invoke.expires_at, now)
        soon = left is not None and left < SOON_S
        self.expiry.setText(("⚠ " if soon else "") + text)
        font = self.expiry.font()
        font.setBold(soon)
        self.expiry.setFont(font)
        self.expiry.setVisible(bool(text))
        if left == 0:
            self._tick.stop()  # main dismisses it now; nothing left to count

    def _show_validity(self) -> None:
        problems = self.form.shown_problems if self.form is not None else []
        self.accept_button.setEnabled(not problems)
        shown = "; ".join(problems[:_MAX_PROBLEMS_SHOWN])
        if len(problems) > _MAX_PROBLEMS_SHOWN:
            shown += f"; and {len(problems) - _MAX_PROBLEMS_SHOWN} more"
        self.problem_label.setText(f"To accept: {shown}" if problems else "")
        self.problem_label.setVisible(bool(problems))

    # ---- keyboard and focus ------------------------------------------------------------------

    def showEvent(self, event: QShowEvent) -> None:
        super().showEvent(event)
        if not self._enter_armed:
            QTimer.singleShot(ENTER_ARM_MS, self, self._arm_enter)
        first = self.form.first_field() if self.form is not None else None
        (first or self.decline_button).setFocus(Qt.FocusReason.PopupFocusReason)

    def _arm_enter(self) -> None:
        self._enter_armed = True

    def keyPressEvent(self, event: QKeyEvent) -> None:
        if event.key() in (Qt.Key.Key_Return, Qt.Key.Key_Enter):
            focused = self.focusWidget()
            if isinstance(focused, QPushButton):  # Enter on a focused button presses that button
                focused.click()
            elif self._enter_armed and self.accept_button.isVisible() and self.accept_button.isEnabled():
                self.accept_button.click()
            event.accept()
            return
        super().keyPressEvent(event)

    # ---- answering ------------------------------------------------------------------------

    def _on_accept(self) -> None:
        if self.kind == FORM and self.form is not None:
            first_problem = self.form.try_submit()
            if not self.form.is_valid:  # nothing sent: the card says why, at the first field concerned
                if first_problem is not None:
                    first_problem.setFocus(Qt.FocusReason.OtherFocusReason)
                    if self._scroll is not None:
                        self._scroll.ensureWidgetVisible(first_problem)
                return
            self._finish("accept", dict(self.form.content))
        elif self.kind == URL and self._url.isValid() and is_sign_in(self.invoke):
            self._finish("accept", sign_in_answer(self))  # main hears it before the browser can come back
            open_sign_in_page(self._opener, self._url, self.server, self.parentWidget())
        elif self.kind == URL and self._url.isValid():
            # Open only now that the user has agreed; the renderer itself never fetches it. The
            # server hears "accept" only if the browser took the link.
            if self._opener(self._url) is False:
                logger.warning("no browser could open %s", self._url.toString())
                self.problem_label.setText(
                    f"No browser could open this link, so nothing was sent to {self.server}. "
                    "Try again, copy the link and open it yourself, or decline or cancel."
                )
                self.problem_label.show()
                self.copy_button.show()
                self.accept_button.setText("Try again")
                return
            self._finish("accept", None)

    def remember_choice(self, action: str) -> messages.Remember | None:
        """What to remember with this answer (None: nothing offered or chosen, or not remembered)."""
        return self.remember_box.choice_for(action) if self.remember_box is not None else None

    def _copy_link(self) -> None:
        QGuiApplication.clipboard().setText(self._url.toString())

    def _on_decline_all(self) -> None:
        if self._finished:
            return
        self.decline_all_requested.emit(self.server)
        self._finish("decline", None)

    @property
    def elicitation_id(self) -> str | None:
        """The URL-mode `elicitationId`, if the request has one."""
        value = self.invoke.request.params.get("elicitationId")
        return value if isinstance(value, str) and value else None

    def _finish(self, action: str, content: dict[str, Any] | None) -> None:
        if self._finished:
            return
        self._finished = True
        self._tick.stop()
        logger.info("%s answered %s on %s", self.server, action, self.invoke.response_channel)
        self.answered.emit(action, content)
        self.done(QDialog.DialogCode.Accepted if action == "accept" else QDialog.DialogCode.Rejected)

    def reject(self) -> None:
        """Esc, the close button and close() all land here: a cancel, unless already answered."""
        self._finish("cancel", None)
        super().reject()

    def close_silently(self) -> None:
        """Close without answering (someone else did, or the request is gone)."""
        self._finished = True
        self._tick.stop()
        self.done(QDialog.DialogCode.Rejected)


def _button(text: str, name: str, parent: QWidget) -> QPushButton:
    button = QPushButton(text, parent)
    button.setObjectName(name)
    button.setAutoDefault(False)  # Enter is handled by the card itself (see keyPressEvent)
    return button
