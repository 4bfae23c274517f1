"""One call decided by the loaded policies: forbid, permit, or no match (Cedar's "deny" with no
policy behind it, which here means "not decided: today's flow")."""

import logging
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any, Literal

from main_process.policy import schema
from main_process.policy.load import LoadedPolicies, PolicyInfo

logger = logging.getLogger(__name__)

Decision = Literal["permit", "forbid", "none"]

_ENTITY_CACHE = 256  # (host, server, tool) triples whose parsed entities are kept
_REPORTED = 256  # evaluation errors logged once each (a policy reading an argument most calls lack)


@dataclass(frozen=True)
class Verdict:
    decision: Decision
    policy: PolicyInfo | None  # the one that decided (the first in file order); None: no match
    errors: tuple[str, ...] = ()  # policies that could not be evaluated (e.g. an argument not sent)


class Engine:
    """A loaded set and the parsed entities of recent calls (parsing them is most of a decision's cost)."""

    def __init__(self, loaded: LoadedPolicies) -> None:
        self.loaded = loaded
        self._entities: OrderedDict[tuple[str, str, str], Any] = OrderedDict()
        self._reported: set[str] = set()

    def decide_call(self, host: str, server: str, tool: str, arguments: dict[str, Any],
                    annotations: dict[str, Any] | None, now: float | None = None) -> Verdict:
        import cedarpy

        request = schema.call_request(host, server, tool, arguments, annotations, now)
        result = cedarpy.is_authorized(request, self.loaded.handle, self._entities_of(host, server, tool))
        diagnostics = result.diagnostics
        errors = tuple(diagnostics.errors)
        for error in errors:
            if error not in self._reported and len(self._reported) < _REPORTED:
                self._reported.add(error)
                logger.warning("policies: %s (a policy that errs does not apply; `has` tests an argument)", error)
        deciding = sorted((self.loaded.infos[r] for r in diagnostics.reasons if r in self.loaded.infos),
                          key=lambda info: info.order)
        if result.allowed:
            return Verdict("permit", deciding[0] if deciding else None, errors)
        if deciding:
            return Verdict("forbid", deciding[0], errors)
        return Verdict("none", None, errors)

    def _entities_of(self, host: str, server: str, tool: str) -> Any:
        import cedarpy

        key = (host, server, tool)
        handle = self._entities.get(key)
        if handle is None:
            handle = cedarpy.Entities.from_json_str(schema.entities(host, server, tool))
            self._entities[key] = handle
            if len(self._entities) > _ENTITY_CACHE:
                self._entities.popitem(last=False)
        else:
            self._entities.move_to_end(key)
        return handle
