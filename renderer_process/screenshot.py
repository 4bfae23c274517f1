"""Save what a widget looks like as a PNG (for the README screenshot and test artifacts)."""

import logging
from pathlib import Path

from PySide6.QtWidgets import QWidget

logger = logging.getLogger(__name__)


def grab_widget(widget: QWidget, path: Path | str) -> Path:
    """Render `widget` (shown or not) into a PNG at `path`; raises OSError if it cannot be written."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    if not widget.grab().save(str(target), "PNG"):
        raise OSError(f"could not write screenshot {target}")
    logger.info("saved screenshot %s", target)
    return target
