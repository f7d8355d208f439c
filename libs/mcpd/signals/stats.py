"""Order statistics computed in Python, identically to PostgreSQL's `percentile_cont`.

Backends that cannot compute a quantile in their own SQL (SQLite) fetch the values and finish
here, and PostgreSQL computes the same figure in SQL; both must give the same number for the
same rows, so the interpolation below follows PostgreSQL's (float8, `lo + (hi - lo) * frac`
between the two nearest order statistics). The metric series reuse `quantile` for raw
observations, so a chart and an analytics summary agree on what p95 means.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from mcpd.signals.queries import LatencyFigures

NS_PER_MS = 1_000_000


def quantile(ordered: Sequence[float], q: float) -> float:
    """The `q` quantile (0 <= q <= 1) of `ordered` (ascending, not empty), interpolated
    linearly between the two nearest values as `percentile_cont` does."""
    position = q * (len(ordered) - 1)
    below = math.floor(position)
    above = math.ceil(position)
    low = float(ordered[below])
    if below == above:
        return low
    return low + (float(ordered[above]) - low) * (position - below)


def latency_figures(durations_ns: Sequence[int]) -> LatencyFigures:
    """p50/p90/p95/p99, mean and max of `durations_ns` (in any order), in milliseconds; every
    figure None when there are none."""
    if not durations_ns:
        return LatencyFigures()
    ordered = sorted(durations_ns)  # linear on input that is already sorted
    return LatencyFigures(
        p50=quantile(ordered, 0.50) / NS_PER_MS,
        p90=quantile(ordered, 0.90) / NS_PER_MS,
        p95=quantile(ordered, 0.95) / NS_PER_MS,
        p99=quantile(ordered, 0.99) / NS_PER_MS,
        mean=sum(ordered) / len(ordered) / NS_PER_MS,
        max=ordered[-1] / NS_PER_MS,
    )
