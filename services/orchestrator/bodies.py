"""The definition bodies runs are pinned to, read once per process: a stored version never
changes, so a body read is a body kept."""

from __future__ import annotations

import re
import threading
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from mcpd.runtime.errors import Internal
from mcpd.storage.interfaces import DefinitionReads
from mcpd.storage.run_records import RunRow, StoredDefinition

__all__ = ["Bodies", "StepAt", "step_at"]

CAPACITY = 1024


class Bodies:
    """The pinned body of a run's definition version, from a bounded cache over the store."""

    def __init__(self, store: DefinitionReads, capacity: int = CAPACITY) -> None:
        self._store = store
        self._capacity = capacity
        self._kept: OrderedDict[tuple[str, str, int], Mapping[str, Any]] = OrderedDict()
        self._lock = threading.Lock()

    def definition(
        self, project: str, definition_id: str, version: int | None
    ) -> StoredDefinition | None:
        """A stored version (the highest without `version`), read from the store."""
        return self._store.definition(project, definition_id, version)

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


@dataclass(frozen=True, slots=True)
class StepAt:
    """What a step key names in a body: its top-level `node`, the `step` it runs (the node
    itself, a branch, or a foreach or loop body) and `number`, the item index or iteration
    folded into the key (None for the others)."""

    node: Mapping[str, Any]
    step: Mapping[str, Any]
    number: int | None = None


_NUMBERED = re.compile(
    r"(?P<node>[a-z][a-z0-9_]*)\[(?P<number>\d+)\](?:/(?P<body>[a-z][a-z0-9_]*))?"
)


def step_at(body: Mapping[str, Any], step_key: str) -> StepAt:
    """What `step_key` names in `body` (DEFINITIONS.md, step keys)."""
    nodes: dict[str, Mapping[str, Any]] = {node["id"]: node for node in body["steps"]}
    if step_key in nodes:
        return StepAt(nodes[step_key], nodes[step_key])
    parent, _, branch = step_key.partition("/")
    node = nodes.get(parent)
    if node is not None and node["kind"] == "parallel":
        for candidate in node["branches"]:
            if candidate["id"] == branch:
                return StepAt(node, candidate)
    numbered = _NUMBERED.fullmatch(step_key)
    if numbered is not None:
        node = nodes.get(numbered["node"])
        wanted = "loop" if numbered["body"] else "foreach"
        if (
            node is not None
            and node["kind"] == wanted
            and (numbered["body"] is None or node["body"]["id"] == numbered["body"])
        ):
            return StepAt(node, node["body"], int(numbered["number"]))
    raise Internal(f"step key {step_key!r} names no step of its definition")
