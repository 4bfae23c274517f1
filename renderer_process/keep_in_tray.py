"""KeepInTray: Window ▸ "Keep running in the tray when closed", remembered in the window's settings.

Disabled (and off) where the desktop has no tray: closing would otherwise leave no way back.
"""

from PySide6.QtCore import QObject, QSettings
from PySide6.QtGui import QAction

KEEP_IN_TRAY_KEY = "window/keepInTray"


class KeepInTray(QAction):
    def __init__(self, settings: QSettings | None, parent: QObject | None = None) -> None:
        super().__init__("Keep running in the tray when closed", parent)
        self._settings = settings  # None: the option lasts as long as the window
        self.setObjectName("keep_in_tray")
        self.setCheckable(True)

    def load(self, tray_available: bool) -> None:
        """The saved choice, once it is known whether there is a tray; later changes are saved."""
        keep = self._settings.value(KEEP_IN_TRAY_KEY, False, bool) if self._settings is not None else False
        self.setChecked(bool(keep) and tray_available)
        self.setEnabled(tray_available)
        if not tray_available:
            self.setToolTip("This desktop has no system tray")
        self.toggled.connect(self._save)

    def _save(self) -> None:
        if self._settings is not None:
            self._settings.setValue(KEEP_IN_TRAY_KEY, self.isChecked())
            self._settings.sync()
