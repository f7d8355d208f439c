"""What the run store keeps and answers, as plain records.

`RunErasure` is the run store's part of an erasure request: the spec's ErasureResult carries
its counts (`runs_erased`, `runs_in_flight`) and turns `in_flight_roots` into the note that
tells an operator which run trees to cancel or wait for before sending the request again.
`StoredDefinition` and `PlacedDefinition` are the spec's Definition and DefinitionVersion;
`NewDefinition` is a checked DefinitionDocument.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class RunErasure:
    """What erasing one subject did in the run store.

    `runs_erased` counts every run removed, the subject's own and the other runs of their
    trees. `runs_in_flight` counts the subject's runs left in place because some run of their
    tree has not ended, and `in_flight_roots` names those trees by root run id, sorted.
    """

    runs_erased: int = 0
    runs_in_flight: int = 0
    in_flight_roots: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class StoredDefinition:
    """One stored version of a definition (the spec's Definition). `body` is the document as
    posted, normalised, without its version."""

    project: str
    id: str
    version: int
    kind: str
    body: dict[str, Any]
    created_at: int


@dataclass(frozen=True, slots=True)
class NewDefinition:
    """A checked definition document to place: its id, kind, normalised body and the version
    it names (None: the store chooses)."""

    id: str
    kind: str
    body: dict[str, Any]
    version: int | None


@dataclass(frozen=True, slots=True)
class PlacedDefinition:
    """Where a posted definition landed (the spec's DefinitionVersion)."""

    id: str
    version: int
    assigned: bool
