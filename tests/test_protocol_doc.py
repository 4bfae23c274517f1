"""shared/PROTOCOL.md is what a third-party window or controller is written from: it must name every
topic main knows and every error code it sends."""

import re
from pathlib import Path

from shared import channels
from shared.errors import WireCode

PROTOCOL = Path(channels.__file__).with_name("PROTOCOL.md").read_text(encoding="utf-8")


def test_every_topic_in_channels_is_documented() -> None:
    topics = [value for name, value in vars(channels).items() if name.isupper() and isinstance(value, str)]
    missing = [topic for topic in topics if f"`{topic}" not in PROTOCOL]
    assert not missing, f"PROTOCOL.md does not name {missing}"


def test_every_wire_error_code_is_documented_in_the_errors_table() -> None:
    table = PROTOCOL[PROTOCOL.index("## 7. Errors"):]
    documented = set(re.findall(r"^\| `([a-z-]+)`", table, re.MULTILINE))
    assert {code.value for code in WireCode} <= documented
