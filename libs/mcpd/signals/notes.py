"""Filing aspect notes under an entity as they are written.

A note's entity is the entity of its trace's root span (`entity_kind`, `entity_name`), found in
the batch being written or among the spans already stored, and a note inherits the root's
correlation fields it does not carry itself (a note is scoped, filtered, retained and erased as
its trace is). The fallback, when the root carries no entity, is the `service` entity named by
the root's service name; when the root has not been stored yet (a note that arrives before its
trace's root span), the `service` entity named by the note's own service name; `unknown` when
neither names one. Filing happens once, when the note is written: a root span stored later does
not move a note already filed (docs/intelligence.md).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from mcpd.signals.batch import SignalBatch
from mcpd.signals.rows import AspectNoteRow, CorrelationColumns, SpanRow

__all__ = [
    "FALLBACK_KIND",
    "INHERITED",
    "UNKNOWN_NAME",
    "Root",
    "RootLookup",
    "file_notes",
    "root_of",
]

FALLBACK_KIND = "service"
UNKNOWN_NAME = "unknown"

INHERITED = tuple(key for key in CorrelationColumns.__annotations__ if key != "project")
"""The correlation fields a note takes from its trace's root span when it has none."""


@dataclass(frozen=True, slots=True)
class Root:
    """What a note takes from its trace's root span."""

    entity_kind: str | None
    entity_name: str | None
    correlation: Mapping[str, Any]


RootLookup = Callable[[str, Sequence[str]], Mapping[str, Root]]
"""The stored root spans of (project, trace ids), by trace id; a trace with none is absent."""


def root_of(span: Mapping[str, Any]) -> Root:
    """The part of a root span's row a note takes."""
    return Root(
        span.get("entity_kind"),
        span.get("entity_name"),
        {key: span[key] for key in INHERITED if span.get(key) is not None},
    )


def file_notes(batches: Iterable[SignalBatch], stored: RootLookup) -> None:
    """Give every note of `batches` its entity and inherited correlation, in place: from a root
    span in the batches, else from `stored` (one lookup per project)."""
    batches = list(batches)
    notes = [note for batch in batches for note in batch.aspect_notes]
    if not notes:
        return
    roots = _batch_roots(span for batch in batches for span in batch.spans)
    missing: dict[str, set[str]] = {}
    for note in notes:
        if (note["project"], note["trace_id"]) not in roots:
            missing.setdefault(note["project"], set()).add(note["trace_id"])
    for project, trace_ids in sorted(missing.items()):
        for trace_id, root in stored(project, sorted(trace_ids)).items():
            roots[(project, trace_id)] = root
    for note in notes:
        _file(note, roots.get((note["project"], note["trace_id"])))


def _batch_roots(spans: Iterable[SpanRow]) -> dict[tuple[str, str], Root]:
    return {
        (span["project"], span["trace_id"]): root_of(span) for span in spans if span.get("is_root")
    }


def _file(note: AspectNoteRow, root: Root | None) -> None:
    row: dict[str, Any] = note  # type: ignore[assignment]
    if root is not None:
        for key, value in root.correlation.items():
            if row.get(key) is None:
                row[key] = value
    if root is not None and root.entity_kind and root.entity_name:
        row["entity_kind"], row["entity_name"] = root.entity_kind, root.entity_name
        return
    row["entity_kind"] = FALLBACK_KIND
    row["entity_name"] = row.get("service_name") or UNKNOWN_NAME
