"""The policy package's one error."""

from shared.errors import ConfigError


class PolicyError(ConfigError):
    """A policy file cannot be used: the message names file, line and column (a config error: main
    stops at start, and a reload keeps the last good set)."""
