"""The definition bodies runs are pinned to, read once per process: a stored version never
changes, so a body read is a body kept."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Mapping
from typing import Any

from mcpd.runtime.errors import Internal
from mcpd.storage.interfaces import DefinitionReads
from mcpd.storage.run_records import RunRow

__all__ = ["Bodies", "node_of"]

CAPACITY = 1024


class Bodies:
    """The pinned body of a run's definition version, from a bounded cache over the store."""

    def __init__(self, store: DefinitionReads, capacity: int = CAPACITY) -> None:
        self._store = store
        self._capacity = capacity
        self._kept: OrderedDict[tuple[str, str, int], Mapping[str, Any]] = OrderedDict()
        self._lock = threading.Lock()

    def of(self, run: RunRow) -> Mapping[str, Any]:
        key = (run["project"], run["definition_id"], run["definition_version"])
        with self._lock:
            if key in self._kept:
                self._kept.move_to_end(key)
                return self._kept[key]
        stored = self._store.definition(*key)
        if stored is None:
            # A run's version is a foreign key: it cannot be missing.
            raise Internal(f"run {run['run_id']} is pinned to a definition version not stored")
        body: Mapping[str, Any] = stored.body
        with self._lock:
            self._kept[key] = body
            while len(self._kept) > self._capacity:
                self._kept.popitem(last=False)
        return body


def node_of(body: Mapping[str, Any], step_key: str) -> Mapping[str, Any]:
    """The node of a top-level step key."""
    nodes: list[Mapping[str, Any]] = body["steps"]
    for node in nodes:
        if node["id"] == step_key:
            return node
    raise Internal(f"step key {step_key!r} names no node of its definition")
