"""shared/PROTOCOL.md is what a third-party window or controller is written from: its §5 and §6 tables
must say what shared/channels.py's table says (names, directions, roles, bodies, replies), and it must
name every error code main sends."""

import re
from pathlib import Path

import msgspec
import pytest

from shared import channels
from shared.errors import WireCode
from shared.messages import Body, Role

PROTOCOL = Path(channels.__file__).with_name("PROTOCOL.md").read_text(encoding="utf-8")
PEER_TO_MAIN = "## 5. Topics, peer → main"
MAIN_TO_PEER = "## 6. Topics, main → peer"
RESULT_ROW = f"`{channels.RESULT_CHANNEL_PREFIX}<uuid7>`"
REPLY_ROW = "`<responseChannel>`"
ROLE_NAMES: frozenset[str] = frozenset(channels.EVERY_ROLE)
_BRACED = r"`(\{[^`]*\})`"  # a body or an answer as the tables write it: `{key, key?: ..., ...}`


def _table(heading: str) -> dict[str, list[str]]:
    """The first table under `heading`: each row's topic (its first backquoted name) -> its cells."""
    assert f"\n{heading}\n" in PROTOCOL, f"PROTOCOL.md has no section {heading!r}"
    section = PROTOCOL[PROTOCOL.index(heading):]
    section = section[:section.index("\n## ", 1)]
    lines = [line for line in section.splitlines() if line.startswith("|")]
    rows: dict[str, list[str]] = {}
    for line in lines[2:]:  # past the header and its rule
        cells = [cell.strip() for cell in re.split(r"(?<!\\)\|", line)[1:-1]]
        name = cells[0].split()[0]
        assert name not in rows, f"{heading}: {name} twice"
        rows[name] = cells
    return rows


PEER_ROWS = _table(PEER_TO_MAIN)  # topic, from, body, answer
MAIN_ROWS = _table(MAIN_TO_PEER)  # topic, to, body


def _fields(text: str) -> dict[str, bool]:
    """The keys of the first `{...}` in `text` (top level only), each with whether it is marked
    optional (`name?`)."""
    match = re.search(_BRACED, text)
    assert match, f"no body in {text!r}"
    return _keys(match.group(1))


def _keys(braced: str) -> dict[str, bool]:
    keys: dict[str, bool] = {}
    depth, item = 0, ""
    for char in braced[1:-1] + ",":
        if char in "{[":
            depth += 1
        elif char in "}]":
            depth -= 1
        if char == "," and depth == 0:
            key = item.split(":")[0].strip()
            if key:
                keys[key.rstrip("?")] = key.endswith("?")
            item = ""
        else:
            item += char
    return keys


def _wire_fields(body: type[Body]) -> dict[str, bool]:
    """A body type's fields by their wire names, each with whether it may be left out."""
    return {field.encode_name: not field.required for field in msgspec.structs.fields(body)}


def _doc_roles(cell: str) -> frozenset[Role]:
    if cell.startswith("any"):
        return channels.EVERY_ROLE
    named = frozenset(re.findall(r"`([a-z]+)`", cell))
    assert named and named <= ROLE_NAMES, f"{cell!r} names no role"
    return named


def _doc_audience(cell: str) -> tuple[frozenset[Role], bool]:
    """(roles, addressed) of a §6 `to` cell."""
    if cell == "every peer":
        return channels.EVERY_ROLE, False
    if match := re.fullmatch(r"every `([a-z]+)`", cell):
        assert match.group(1) in ROLE_NAMES, cell
        return frozenset({match.group(1)}), False  # type: ignore[arg-type]
    return channels.EVERY_ROLE, True


def test_the_sections_are_numbered_as_the_code_and_this_test_cite_them() -> None:
    numbered = re.findall(r"^## (\d+)\. (.+)$", PROTOCOL, re.MULTILINE)
    assert [int(number) for number, _ in numbered] == list(range(1, len(numbered) + 1))
    assert ("5", "Topics, peer → main") in numbered and ("6", "Topics, main → peer") in numbered


def test_the_peer_to_main_table_lists_exactly_the_topics_peers_send() -> None:
    assert set(PEER_ROWS) - {RESULT_ROW} == {f"`{name}`" for name in channels.TO_MAIN}


def test_the_main_to_peer_table_lists_exactly_the_topics_main_sends() -> None:
    assert set(MAIN_ROWS) - {REPLY_ROW} == {f"`{name}`" for name in channels.TO_PEER}


@pytest.mark.parametrize("name", sorted(channels.TO_MAIN))
def test_who_may_send_a_topic_and_whether_it_is_answered_are_as_documented(name: str) -> None:
    topic = channels.TO_MAIN[name]
    _, sender, _, answer = PEER_ROWS[f"`{name}`"]
    assert _doc_roles(sender) == topic.roles
    assert ("on `responseChannel`" in answer) == topic.reply
    if topic.reply:
        replied = {key for braced in re.findall(_BRACED, answer) for key in _keys(braced)}
        assert replied and replied <= _wire_fields(channels.REPLY_BODY).keys(), answer


@pytest.mark.parametrize("name", sorted(channels.TO_PEER))
def test_who_gets_a_topic_is_as_documented(name: str) -> None:
    topic = channels.TO_PEER[name]
    assert _doc_audience(MAIN_ROWS[f"`{name}`"][1]) == (topic.roles, topic.addressed)


def _documented_bodies(topic: channels.Topic) -> list[dict[str, bool]]:
    cells = ([PEER_ROWS[f"`{topic.name}`"][2]] if topic.to_main else []) + (
        [MAIN_ROWS[f"`{topic.name}`"][2]] if topic.to_peer else [])
    return [_fields(cell) for cell in cells if cell != "§4"]  # invoke and dismiss: §4 shows them whole


@pytest.mark.parametrize("topic", channels.TABLE, ids=lambda topic: topic.name)
def test_every_documented_body_is_its_topic_body_type_field_for_field(topic: channels.Topic) -> None:
    """A field the page marks optional may be left out; a body that goes both ways lists, in each
    table, the fields of that way: between them, all of its fields."""
    wire = _wire_fields(topic.body)
    documented = _documented_bodies(topic)
    for fields in documented:
        assert fields.keys() <= wire.keys(), f"{topic.name}: no fields {sorted(fields.keys() - wire.keys())}"
        marked_but_required = [key for key, optional in fields.items() if optional and not wire[key]]
        assert not marked_but_required, f"{topic.name}: main requires {marked_but_required}"
    if documented:
        assert set().union(*documented) == wire.keys(), f"{topic.name}: undocumented fields"


def test_the_result_channel_and_the_response_channels_carry_their_body_types() -> None:
    assert _fields(PEER_ROWS[RESULT_ROW][2]).keys() == _wire_fields(channels.RESULT_BODY).keys()
    replies = {key for braced in re.findall(_BRACED, MAIN_ROWS[REPLY_ROW][2]) for key in _keys(braced)}
    assert replies == _wire_fields(channels.REPLY_BODY).keys()


def test_every_wire_error_code_is_documented_in_the_errors_table() -> None:
    table = PROTOCOL[PROTOCOL.index("## 7. Errors"):]
    documented = set(re.findall(r"^\| `([a-z-]+)`", table, re.MULTILINE))
    assert {code.value for code in WireCode} <= documented
