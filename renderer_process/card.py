"""ElicitationCard: the modal dialog for one elicitation (form, URL consent, or an "unsupported" notice).

The card only asks; it never sends. It emits `answered(action, content)` exactly once and closes;
whoever opened it forwards the answer. Form and URL cards also offer "Decline all from <server> for
this session": it emits `decline_all_requested(server)`, then answers this card with decline. Esc and the window's close button mean "cancel". A card
closed by `close_silently()` (another window answered, the server cancelled) emits nothing.
"""

import html
import logging
from collections.abc import Callable
from typing import Any

from PySide6.QtCore import Qt, QUrl, Signal
from PySide6.QtGui import QDesktopServices
from PySide6.QtWidgets import (
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
from renderer_process.url_safety import inspect_url
from shared import messages
from shared.errors import UnsupportedSchemaError
from shared.schema import check_schema

logger = logging.getLogger(__name__)

UrlOpener = Callable[[QUrl], Any]

FORM = "form"
URL = "url"
NOTICE = "notice"

_MAX_PROBLEMS_SHOWN = 3


def open_in_browser(url: QUrl) -> bool:
    return QDesktopServices.openUrl(url)


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
    ) -> None:
        super().__init__(parent)
        self.invoke = invoke
        self._opener = opener
        self._finished = False
        self.form: FormBody | None = None
        self._url = ""

        params = invoke.request.params
        self.server = invoke.request.server
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
        message = QLabel(str(params.get("message", "")), self)
        message.setObjectName("message")
        message.setTextFormat(Qt.TextFormat.PlainText)  # server text is never markup
        message.setWordWrap(True)
        message.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        layout.addWidget(message)

        self.waiting = QLabel(self)  # "2 more waiting", kept current by the window
        self.waiting.setObjectName("waiting")
        self.waiting.hide()

        self.problem_label = QLabel(self)
        self.problem_label.setObjectName("problems")
        self.problem_label.setTextFormat(Qt.TextFormat.PlainText)
        self.problem_label.setWordWrap(True)
        self.problem_label.setStyleSheet("color: #b00020;")
        self.problem_label.hide()

        self.accept_button = _button("Accept", "accept", self)
        self.decline_button = _button("Decline", "decline", self)
        self.cancel_button = _button("Cancel", "cancel", self)
        self.accept_button.clicked.connect(self._on_accept)
        self.decline_button.clicked.connect(lambda: self._finish("decline", None))
        self.cancel_button.clicked.connect(self.reject)
        # A secondary, quieter action: stop a server that asks too often, for this main session.
        self.decline_all_button = _button(
            f"Decline all from {self.server} for this session", "decline_all", self
        )
        self.decline_all_button.setFlat(True)
        self.decline_all_button.setToolTip(
            f"Decline this request and every further one from {self.server} until main restarts. "
            "You can ask again from the Servers panel."
        )
        self.decline_all_button.clicked.connect(self._on_decline_all)

        mode = params.get("mode", FORM)  # MCP: a request without mode is a form
        if mode == URL:
            self.kind = URL
            self._build_url(layout, str(params.get("url", "")))
        elif mode == FORM:
            try:
                check_schema(params.get("requestedSchema"))
            except UnsupportedSchemaError as exc:
                self.kind = NOTICE
                self._build_notice(layout, str(exc))
            else:
                self.kind = FORM
                self._build_form(layout, params["requestedSchema"])
        else:
            self.kind = NOTICE
            self._build_notice(layout, f"this window does not know the request mode {mode!r}")

        layout.addWidget(self.problem_label)
        layout.addWidget(self.waiting)
        buttons = QHBoxLayout()
        buttons.addStretch(1)
        if self.kind != NOTICE:
            buttons.addWidget(self.accept_button)
        else:
            self.accept_button.hide()
        buttons.addWidget(self.decline_button)
        buttons.addWidget(self.cancel_button)
        layout.addLayout(buttons)
        if self.kind != NOTICE:  # its own line under the answer buttons: secondary, never clipped
            secondary = QHBoxLayout()
            secondary.addStretch(1)
            secondary.addWidget(self.decline_all_button)
            layout.addLayout(secondary)
        else:
            self.decline_all_button.hide()

    # ---- the three bodies -----------------------------------------------------------------

    def _build_form(self, layout: QVBoxLayout, schema: dict[str, Any]) -> None:
        who = html.escape(self.server)
        self.setWindowTitle(f"{self.server} asks for input")
        self._header.setText(f"<b>{who}</b> asks for input:")
        self.form = FormBody(schema, self)
        scroll = QScrollArea(self)
        scroll.setWidgetResizable(True)
        scroll.setFrameShape(QScrollArea.Shape.NoFrame)
        scroll.setWidget(self.form)
        # Show the whole form when it fits a screen; scroll only beyond that.
        scroll.setMinimumHeight(min(self.form.sizeHint().height() + 4, 720))
        layout.addWidget(scroll, 1)
        self.form.validity_changed.connect(self._show_validity)
        self._show_validity(self.form.is_valid)

    def _build_url(self, layout: QVBoxLayout, url: str) -> None:
        who = html.escape(self.server)
        self.setWindowTitle(f"{self.server} asks you to open a link")
        self._header.setText(f"<b>{who}</b> asks you to open a link in your browser:")
        report = inspect_url(url)
        self._url = url
        url_label = QLabel(report.highlighted_html(), self)
        url_label.setObjectName("url")
        url_label.setTextFormat(Qt.TextFormat.RichText)
        url_label.setWordWrap(True)
        url_label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        layout.addWidget(url_label)
        host = QLabel(f"Goes to: <b>{html.escape(report.host) or '(no host)'}</b>", self)
        host.setObjectName("host")
        host.setTextFormat(Qt.TextFormat.RichText)
        layout.addWidget(host)
        warnings = QLabel("\n".join(f"⚠ {w}" for w in report.warnings), self)
        warnings.setObjectName("warnings")
        warnings.setTextFormat(Qt.TextFormat.PlainText)
        warnings.setWordWrap(True)
        warnings.setStyleSheet("color: #8a4b00;")
        warnings.setVisible(bool(report.warnings))
        layout.addWidget(warnings)
        self.accept_button.setText("Accept and open")
        self.accept_button.setEnabled(report.openable)

    def _build_notice(self, layout: QVBoxLayout, reason: str) -> None:
        who = html.escape(self.server)
        self.setWindowTitle(f"{self.server} sent a request this window cannot show")
        self._header.setText(f"<b>{who}</b> asks for something this window cannot show.")
        notice = QLabel(f"Reason: {reason}. You can decline or cancel it.", self)
        notice.setObjectName("notice")
        notice.setTextFormat(Qt.TextFormat.PlainText)
        notice.setWordWrap(True)
        layout.addWidget(notice)

    # ---- answering ------------------------------------------------------------------------

    @property
    def is_finished(self) -> bool:
        return self._finished

    def set_waiting_text(self, text: str) -> None:
        self.waiting.setText(text)
        self.waiting.setVisible(bool(text))

    def _show_validity(self, valid: bool) -> None:
        self.accept_button.setEnabled(valid)
        problems = self.form.problems if self.form is not None else []
        shown = "; ".join(problems[:_MAX_PROBLEMS_SHOWN])
        if len(problems) > _MAX_PROBLEMS_SHOWN:
            shown += f"; and {len(problems) - _MAX_PROBLEMS_SHOWN} more"
        self.problem_label.setText(f"To accept: {shown}" if problems else "")
        self.problem_label.setVisible(bool(problems))

    def _on_accept(self) -> None:
        if self.kind == FORM and self.form is not None:
            self.form.refresh()
            if not self.form.is_valid:  # the button is disabled then; guard anyway
                return
            self._finish("accept", dict(self.form.content))
        elif self.kind == URL:
            self._finish("accept", None)
            # Open only now that the user has agreed; the renderer itself never fetches it.
            if self._opener(QUrl(self._url)) is False:
                logger.warning("no browser could open %s", self._url)

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
        self.done(QDialog.DialogCode.Rejected)


def _button(text: str, name: str, parent: QWidget) -> QPushButton:
    button = QPushButton(text, parent)
    button.setObjectName(name)
    button.setAutoDefault(False)  # Enter in a text field must not answer for the user
    return button
