"""Main's policies while it runs: the set in force, and why the last reload could not replace it."""

import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from main_process.policy.engine import Annotations, Engine, Verdict
from main_process.policy.errors import PolicyError
from main_process.policy.load import load
from shared.messages import PolicyStatus

logger = logging.getLogger(__name__)


class Policies:
    def __init__(self, paths: Sequence[Path] = ()) -> None:
        """Loaded now (cedarpy imported only if there are `paths`): PolicyError if a file cannot be
        used, which at main's start stops main."""
        self._engine = Engine(load(paths)) if paths else None
        self.problem: str | None = None  # why the last reload kept the set in force
        if paths:
            logger.info("policies: %d from %s", self.count, ", ".join(map(str, paths)))

    @property
    def active(self) -> bool:
        return self._engine is not None

    @property
    def count(self) -> int:
        return 0 if self._engine is None else len(self._engine.loaded.infos)

    def reload(self, paths: Sequence[Path]) -> str | None:
        """Read the files again (none named: no policies); a bad file keeps the set in force. Returns
        why, or None."""
        try:
            self._engine = Engine(load(paths)) if paths else None
        except PolicyError as exc:
            kept = f"the last good set ({self.count} policies)" if self.active else "no policy"
            self.problem = f"{exc}; {kept} stays in force"
            logger.error("policies: %s", self.problem)
            return self.problem
        self.problem = None
        if paths:
            logger.info("policies reloaded: %d from %s", self.count, ", ".join(map(str, paths)))
        return None

    def host_call(self, host: str, server: str, tool: str, arguments: dict[str, Any],
                  annotations: Annotations) -> Verdict | None:
        """The policies' verdict on a host's call; None when no policies are configured."""
        if self._engine is None:
            return None
        return self._engine.decide_call(host, server, tool, arguments, annotations)

    def elicitation(self, host: str, server: str) -> Verdict | None:
        """The policies' verdict on `server` eliciting in `host`'s relayed session (action `elicit`);
        None when no policies are configured."""
        if self._engine is None:
            return None
        return self._engine.decide_elicit(("Host", host), server)

    def status(self) -> PolicyStatus | None:
        if self._engine is None and self.problem is None:
            return None
        files = [str(f) for f in self._engine.loaded.files] if self._engine is not None else []
        return PolicyStatus(files=files, policies=self.count, problem=self.problem)
