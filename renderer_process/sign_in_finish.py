"""SignInFinishes: on a remote window, the open "paste the address the browser ended on" dialogs.

A sign-in accepted on a window attached over tcp ends on a page of this machine's browser that
main cannot hear; the dialog (sign_in_card.py's SignInFinishDialog) takes its address and this
sends it to main, shows main's refusal in the dialog, and closes it when main reports done.
"""

from PySide6.QtCore import QObject, Signal
from PySide6.QtWidgets import QWidget

from renderer_process.sign_in_card import SignInFinishDialog
from shared import channels, messages


class SignInFinishes(QObject):
    redirect_requested = Signal(str, str, str, str)  # response channel, server, elicitationId, url

    def __init__(self, host: QWidget) -> None:
        super().__init__(host)
        self._host = host  # the dialogs' parent
        self._open: dict[str, SignInFinishDialog] = {}  # elicitationId -> open dialog
        self._pastes: dict[str, SignInFinishDialog] = {}  # response channel -> its dialog

    def open(self, invoke: messages.ElicitationInvoke) -> None:
        dialog = SignInFinishDialog(invoke, self._host)
        self._open[dialog.elicitation_id] = dialog
        dialog.pasted.connect(self._on_pasted)
        dialog.rejected.connect(lambda: self._open.pop(dialog.elicitation_id, None))
        dialog.open()

    def completed(self, elicitation_id: str) -> None:
        """main reports the sign-in done: its dialog, if open, closes."""
        dialog = self._open.pop(elicitation_id, None)
        if dialog is not None:
            dialog.accept()

    def on_reply(self, channel: str, reply: messages.ChannelReply) -> None:
        """main's answer to a pasted address: a refusal shows in the dialog, to paste again."""
        dialog = self._pastes.pop(channel, None)
        if dialog is not None and reply.error is not None:
            dialog.show_problem(reply.error.message)

    def _on_pasted(self, server: str, elicitation_id: str, url: str) -> None:
        dialog = self._open.get(elicitation_id)
        channel = "sign-in-" + channels.new_uuid7()
        if dialog is not None:
            self._pastes[channel] = dialog
        self.redirect_requested.emit(channel, server, elicitation_id, url)
