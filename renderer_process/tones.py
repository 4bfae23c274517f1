"""Text colours that stay readable in the system's light and dark palettes.

Qt follows the system palette by itself; only the few colours of our own (errors, warnings) would
not. A ToneLabel picks its colour from the palette it is shown on and picks again whenever the
application palette changes (the system switched between light and dark).
"""

from typing import Literal

from PySide6.QtCore import QEvent
from PySide6.QtGui import QColor, QPalette
from PySide6.QtWidgets import QApplication, QLabel, QWidget

Tone = Literal["error", "warning"]

# Dark text on light backgrounds, light text on dark ones; each >= 4.5:1 against Fusion's
# default light (#efefef) and dark (#353535) window colours (WCAG AA for normal text).
_COLOURS: dict[Tone, tuple[str, str]] = {
    "error": ("#b00020", "#ff8a80"),
    "warning": ("#8a4b00", "#ffcc80"),
}


def is_dark(palette: QPalette) -> bool:
    return palette.color(QPalette.ColorRole.Window).lightness() < 128


def tone_colour(tone: Tone, palette: QPalette) -> QColor:
    light, dark = _COLOURS[tone]
    return QColor(dark if is_dark(palette) else light)


_PALETTE_EVENTS = (QEvent.Type.ApplicationPaletteChange, QEvent.Type.PaletteChange)


class ToneLabel(QLabel):
    """A plain-text, word-wrapped label in an error or warning colour that follows the palette."""

    def __init__(self, tone: Tone, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.tone: Tone = tone
        self._applying = False
        self._apply()

    def _apply(self) -> None:
        self._applying = True  # setPalette sends PaletteChange to ourselves
        try:
            # Only WindowText is ours; every other role keeps following the parent and the system.
            palette = QPalette()
            palette.setResolveMask(0)
            colour = tone_colour(self.tone, QApplication.palette(self))
            palette.setColor(QPalette.ColorRole.WindowText, colour)
            self.setPalette(palette)
        finally:
            self._applying = False

    def changeEvent(self, event: QEvent) -> None:
        if event.type() in _PALETTE_EVENTS and not self._applying:
            self._apply()
        super().changeEvent(event)
