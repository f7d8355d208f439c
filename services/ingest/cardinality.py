"""How many distinct values a metric label key already has in a project, cached.

The cardinality filter (`validation.check_metric`) asks this for every label of every metric
point; the answer comes from the facet table (`metric_label_value` values per key), read at
most once per `ttl_s` per (project, key). The cap is therefore soft by up to one TTL's worth
of new values, which is the price of not reading storage for every point.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from mcpd.storage.interfaces import FacetCounts

METRIC_LABEL_VALUE = "metric_label_value"


class LabelCardinality:
    """Cached distinct-value counts of metric label keys (see the module docstring)."""

    def __init__(
        self, store: FacetCounts, *, monotonic: Callable[[], float], ttl_s: float = 10.0
    ) -> None:
        self._store = store
        self._monotonic = monotonic
        self._ttl_s = ttl_s
        self._counts: dict[tuple[str, str], tuple[float, int]] = {}
        self._lock = threading.Lock()

    def values_seen(self, project: str, key: str) -> int:
        """Distinct values of label `key` in `project`, at most `ttl_s` old."""
        now = self._monotonic()
        with self._lock:
            cached = self._counts.get((project, key))
        if cached is not None and now - cached[0] < self._ttl_s:
            return cached[1]
        count = self._store.facet_value_count(project, METRIC_LABEL_VALUE, key)
        with self._lock:
            self._counts[(project, key)] = (now, count)
        return count
