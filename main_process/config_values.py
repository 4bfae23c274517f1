"""The number checks every part of main's config uses: seconds within a bound, whole numbers within
a range; each refusal is one line naming where in the config and the key (a ConfigError)."""

import math
from typing import Any

from shared.errors import ConfigError

DAY_S = 24 * 3600.0


def seconds(where: str, entry: dict[str, Any], key: str, default: float, most: float) -> float:
    value = entry.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) \
            or not 0 < value <= most:
        days = f" ({most / DAY_S:.0f} days)" if most >= 2 * DAY_S and most % DAY_S == 0 else ""
        raise ConfigError(f"{where}: \"{key}\" must be a number of seconds above 0 and at most {most:.0f}{days}")
    return float(value)


def whole(where: str, entry: dict[str, Any], key: str, default: int, low: int, high: int) -> int:
    value = entry.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise ConfigError(f"{where}: \"{key}\" must be a whole number from {low} to {high}")
    return value
