"""Percentiles of measured samples."""

import math
from collections.abc import Sequence


def percentile(sorted_values: Sequence[float], q: float) -> float:
    """Nearest-rank percentile `q` (0-100) of already sorted values; nan if there are none."""
    if not sorted_values:
        return float("nan")
    rank = max(1, min(len(sorted_values), math.ceil(q / 100.0 * len(sorted_values))))
    return float(sorted_values[rank - 1])
