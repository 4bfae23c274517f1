"""Policy files read, split, parsed and validated into one Cedar policy set.

Every error names the file, the line and the column: cedarpy's messages name a policy by its index
in the file and an attribute by name, so the position is found in the file's text (source.py).
"""

import dataclasses
import json
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from main_process.policy import arguments, schema, source
from main_process.policy.errors import PolicyError

Effect = Literal["permit", "forbid"]

# cedarpy's message for an access into the free-form arguments (schema.py says why those pass).
_INTO_ARGUMENTS = re.compile(r"attribute `arguments\.[^`]*` in context")
_ATTRIBUTE = re.compile(r"attribute `([^`]+)`")
_POLICY = re.compile(r"^for policy `[^`]*`, ")
_FOR_ACTION = re.compile(r" for Action::\"[^\"]*\"")  # the schema's actions share one context: noise


@dataclass(frozen=True)
class PolicyInfo:
    id: str  # its @id, else "<file name>:<line>"
    effect: Effect
    file: str
    line: int
    column: int
    reason: str | None  # its @reason
    order: int  # in the files as configured: the first of several that decide is named

    @property
    def where(self) -> str:
        return f"{self.file}:{self.line}"


@dataclass(frozen=True)
class LoadedPolicies:
    handle: Any  # cedarpy.PolicySet (cedarpy is imported lazily, so not named in annotations)
    infos: dict[str, PolicyInfo]  # by the id the engine reports
    files: tuple[Path, ...]
    parsed: dict[str, dict[str, Any]]  # each policy's EST JSON, by id (engine.py slices the set by scope)


def load(paths: Iterable[Path]) -> LoadedPolicies:
    """Every policy of `paths`, validated; PolicyError on the first file that cannot be used."""
    import cedarpy

    files = tuple(paths)
    parsed = [(path, *_parsed(path)) for path in files]
    declared = arguments.declared([est for _, _, _, found in parsed for _, est in found])
    cedar_schema = cedarpy.Schema.from_str(schema.SCHEMA.replace("ARGUMENTS", declared))
    statics: dict[str, Any] = {}
    infos: dict[str, PolicyInfo] = {}
    for path, text, chunks, found in parsed:
        _validate(path, text, chunks, cedar_schema)
        for info, est in found:
            if info.id in infos:
                raise PolicyError(f"{info.where}:{info.column}: policy id {info.id!r} is already the id of the policy at "
                                  f"{infos[info.id].where}")
            infos[info.id] = dataclasses.replace(info, order=len(infos))
            statics[info.id] = est
    handle = cedarpy.PolicySet.from_json_str(json.dumps({"staticPolicies": statics, "templates": {},
                                                         "templateLinks": []}))
    return LoadedPolicies(handle, infos, files, statics)


def _parsed(path: Path) -> tuple[str, list[source.Chunk], list[tuple[PolicyInfo, dict[str, Any]]]]:
    """The file's text, its policies' places, and each policy parsed (EST JSON)."""
    import cedarpy

    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise PolicyError(f"{path}: cannot read the policy file: {exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:
        raise PolicyError(f"{path}: not UTF-8 text (byte {exc.start})") from None
    chunks = source.split(text)
    found: list[tuple[PolicyInfo, dict[str, Any]]] = []
    for chunk in chunks:
        where = _where(path, text, chunk.offset)
        try:
            est = json.loads(cedarpy.policies_to_json_str(chunk.text))
        except ValueError as exc:
            raise PolicyError(f"{where}: not a Cedar policy: {exc}") from None
        if est.get("templates"):
            raise PolicyError(f"{where}: a template (?principal, ?resource): Elicitron reads only policies")
        policies = list(est.get("staticPolicies", {}).values())
        if len(policies) != 1:
            raise PolicyError(f"{where}: not a Cedar policy (a policy ends with `;`)")
        policy = policies[0]
        annotations = policy.get("annotations") or {}
        line, column = source.line_col(text, chunk.offset)
        info = PolicyInfo(id=annotations.get("id") or f"{path.name}:{line}", effect=policy["effect"],
                          file=str(path), line=line, column=column, reason=annotations.get("reason"), order=0)
        found.append((info, policy))
    return text, chunks, found


def _validate(path: Path, text: str, chunks: list[source.Chunk], cedar_schema: Any) -> None:
    import cedarpy

    result = cedarpy.validate_policies(text, cedar_schema)
    for error in result.errors:
        if _INTO_ARGUMENTS.search(error.error):
            continue
        index = int(error.policy_id.removeprefix("policy")) if error.policy_id.startswith("policy") else 0
        chunk = chunks[min(index, len(chunks) - 1)] if chunks else source.Chunk("", 0)
        offset = chunk.offset + _attribute_at(chunk.text, error.error)
        raise PolicyError(f"{_where(path, text, offset)}: {_FOR_ACTION.sub('', _POLICY.sub('', error.error))}")


def _attribute_at(text: str, message: str) -> int:
    """Where in a policy's text the thing the message names is (an attribute's access, an entity
    type's name); 0, the policy's start, when it cannot be told."""
    named = _ATTRIBUTE.search(message)
    if named is not None:
        last = named.group(1).split(".")[-1]
        access = re.search(rf"(?:\.\s*|\bhas\s+){re.escape(last)}\b", text)
        if access is not None:
            return access.end() - len(last)
    for name in re.findall(r"`([^`]+)`", message):
        found = re.search(rf"(?<![\w\"]){re.escape(name)}(?![\w\"])", text)
        if found is not None:
            return found.start()
    return 0


def _where(path: Path, text: str, offset: int) -> str:
    line, column = source.line_col(text, offset)
    return f"{path}:{line}:{column}"
