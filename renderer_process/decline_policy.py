"""DeclinePolicy: the servers whose requests the user declines for this main session.

Set from a card's "Decline all from this server" or the servers panel, cleared by the panel's
"Ask again" or a (re)started main (its own policies); main applies it, the panel marks the rows.
"""

from PySide6.QtCore import QObject, Signal

from renderer_process.servers_panel import ServersPanel


class DeclinePolicy(QObject):
    policy_requested = Signal(str, bool)  # server, decline_all
    status = Signal(str)  # what changed, for the status bar

    def __init__(self, panel: ServersPanel) -> None:
        super().__init__(panel)
        self._panel = panel
        self._declining: set[str] = set()

    def decline_all(self, server: str) -> None:
        self._declining.add(server)
        self._panel.set_declining(self._declining)
        self.policy_requested.emit(server, True)
        # main confirms with a notice, which the results log shows.
        self.status.emit(f"{server}: declining all its requests for this session")

    def set(self, server: str, decline_all: bool) -> None:
        """The servers panel's choice for `server`."""
        if decline_all:
            self.decline_all(server)
            return
        self._declining.discard(server)
        self._panel.set_declining(self._declining)
        self.policy_requested.emit(server, False)
        self.status.emit(f"{server}: its requests are shown again")

    def reset(self) -> None:
        """A (re)started main: nothing is declined."""
        self._declining.clear()
        self._panel.set_declining(self._declining)
