"""Values per key, loaded on a miss and kept for a while: what a role reads from the control
store on its hot path (a project's policies, its price book) without reading it per request."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Generic, TypeVar

__all__ = ["TtlCache"]

V = TypeVar("V")


class TtlCache(Generic[V]):
    """`load(key)` kept `ttl_s` seconds of `monotonic` time; safe across threads. Two threads
    missing one key at once may both load it; the later value is kept."""

    def __init__(
        self, load: Callable[[str], V], *, monotonic: Callable[[], float], ttl_s: float
    ) -> None:
        self._load = load
        self._monotonic = monotonic
        self._ttl_s = ttl_s
        self._kept: dict[str, tuple[float, V]] = {}
        self._lock = threading.Lock()

    def get(self, key: str) -> V:
        """The value of `key`, at most `ttl_s` old; loaded (blocking) on a miss."""
        now = self._monotonic()
        with self._lock:
            kept = self._kept.get(key)
        if kept is not None and now - kept[0] < self._ttl_s:
            return kept[1]
        value = self._load(key)
        with self._lock:
            self._kept[key] = (now, value)
        return value
