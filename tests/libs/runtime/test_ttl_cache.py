"""TtlCache: a key's value is loaded once and kept for the TTL, then loaded again; keys are
kept apart."""

from __future__ import annotations

from mcpd.runtime.clock import ManualClock
from mcpd.runtime.ttl_cache import TtlCache


def test_a_value_is_kept_for_the_ttl_then_loaded_again() -> None:
    clock = ManualClock()
    loads: list[str] = []

    def load(key: str) -> str:
        loads.append(key)
        return f"{key}#{len(loads)}"

    cache = TtlCache(load, monotonic=clock.monotonic, ttl_s=5.0)
    assert cache.get("a") == "a#1"
    clock.advance(4.999)
    assert cache.get("a") == "a#1"
    assert cache.get("b") == "b#2"
    clock.advance(0.001)
    assert cache.get("a") == "a#3"
    assert cache.get("b") == "b#2"
    assert loads == ["a", "b", "a"]
