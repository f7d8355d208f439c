"""Rows of the intelligence service's tables in the trace store: what a clustering pass reads
(the notes filed under one entity) and writes (a snapshot, its themes, the notes each theme holds
and the themes that ended), and the tallies the progress reads count.

Times are nanoseconds since the epoch; sketches are stored bytes (`mcpd.themes.encode`). The
intelligence service turns these rows into the spec's ThemeSnapshot, Theme and friends.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = [
    "AspectTally",
    "EndingRow",
    "Entity",
    "EntityTally",
    "HistoryRow",
    "MemberRow",
    "PassNote",
    "SnapshotRow",
    "SnapshotWrite",
    "ThemeErasure",
    "ThemeRow",
    "TraceEnding",
    "error_class",
    "run_status",
    "split_wordings",
    "step_key",
    "trace_ending",
]


@dataclass(frozen=True, slots=True, order=True)
class Entity:
    """An entity: the kind and name its notes are filed under."""

    kind: str
    name: str


@dataclass(frozen=True, slots=True)
class AspectTally:
    """The notes stored about one entity along one aspect."""

    entity: Entity
    aspect: str
    note_count: int
    trace_count: int
    last_note_at: int


@dataclass(frozen=True, slots=True)
class EntityTally:
    """The notes stored about one entity, every aspect together."""

    entity: Entity
    note_count: int
    trace_count: int
    last_note_at: int


@dataclass(frozen=True, slots=True)
class PassNote:
    """One note as a pass reads it."""

    note_id: str
    trace_id: str
    created_at: int
    sketch: bytes


@dataclass(frozen=True, slots=True)
class SnapshotRow:
    """A snapshot; `ordinal` is its place among the entity's stored snapshots when read (the
    ordinal the pass saw when written)."""

    snapshot_id: str
    entity: Entity
    aspects: tuple[str, ...]
    ordinal: int
    cutoff_at: int
    window_from: int
    window_to: int
    trace_count: int
    note_count: int
    capped: bool


@dataclass(frozen=True, slots=True)
class ThemeRow:
    """A theme of one snapshot along one aspect, with its history links and wording."""

    snapshot_id: str
    aspect: str
    theme_id: str
    entity: Entity
    label: str
    label_note_id: str
    label_trace_id: str
    state: str
    note_count: int
    trace_count: int
    coverage: float
    split_from: tuple[str, ...] = ()
    split_into: tuple[str, ...] = ()
    merged_from: tuple[str, ...] = ()
    wording: bytes = b""


@dataclass(frozen=True, slots=True)
class MemberRow:
    """One note of a theme (`theme_id` `noise` for the notes that joined none)."""

    aspect: str
    theme_id: str
    note_id: str
    trace_id: str
    similarity: int


@dataclass(frozen=True, slots=True)
class EndingRow:
    """A theme of the previous snapshot with no row in this one: `death`, or `merge` into
    `merged_into`."""

    aspect: str
    theme_id: str
    state: str
    merged_into: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class SnapshotWrite:
    """Everything one pass writes about one entity, stored together or not at all."""

    snapshot: SnapshotRow
    themes: tuple[ThemeRow, ...]
    members: tuple[MemberRow, ...]
    endings: tuple[EndingRow, ...]


@dataclass(frozen=True, slots=True)
class HistoryRow:
    """One point of a theme's history: its snapshot, and its row there or how it ended there."""

    snapshot: SnapshotRow
    theme: ThemeRow | None
    ending: EndingRow | None


@dataclass(frozen=True, slots=True)
class TraceEnding:
    """How one trace ended, as a derived outcome note reads it: the trace's status and errors,
    its root span's kind and run status (`mcpd.run.status`, on a run's `workflow_run` span), and
    per failed span, the class of its error (`mcpd.step.error_class`, on a run's step spans, or
    the error's `kind`), in span start order."""

    trace_id: str
    status: str
    error_count: int
    ended_at: int
    root_kind: str | None
    run_status: str | None
    error_classes: tuple[str, ...]
    # A run's id (its root's correlation) and the key of its first failed step
    # (`mcpd.step.key`), which its cause chain is read by.
    run_id: str | None = None
    failed_step: str | None = None


@dataclass(frozen=True, slots=True)
class ThemeErasure:
    """What erasing notes took out of the themes: labels blanked, member rows removed."""

    labels: int = 0
    examples: int = 0


def split_wordings(
    snapshots: Sequence[SnapshotRow], aspect: str, rows: Iterable[tuple[int, ThemeRow]]
) -> tuple[list[ThemeRow], list[ThemeRow]]:
    """`ThemeRecords.theme_wordings` from the entity's snapshots before the pass (oldest first)
    and its theme rows along `aspect` in them, each with its snapshot's cutoff: the themes of
    the newest snapshot that covered the aspect (none when its notes all were noise), and the
    newest row of every other theme id."""
    covering = [snap.cutoff_at for snap in snapshots if aspect in snap.aspects]
    last = covering[-1] if covering else None
    newest: dict[str, tuple[int, ThemeRow]] = {}
    for cutoff, theme in sorted(rows, key=lambda item: (item[0], item[1].theme_id)):
        newest[theme.theme_id] = (cutoff, theme)
    previous = [theme for cutoff, theme in newest.values() if cutoff == last]
    earlier = [theme for cutoff, theme in newest.values() if cutoff != last]
    return (
        sorted(previous, key=lambda theme: theme.theme_id),
        sorted(earlier, key=lambda theme: theme.theme_id),
    )


RUN_STATUS = "mcpd.run.status"
ERROR_CLASS = "mcpd.step.error_class"
STEP_KEY = "mcpd.step.key"


def run_status(attributes: Any) -> str | None:
    """The run status a root span's attributes (a JSON object, or None) carry, if any."""
    value = attributes.get(RUN_STATUS) if isinstance(attributes, dict) else None
    return value if isinstance(value, str) else None


def error_class(attributes: Any, error: Any) -> str:
    """The class of a failed span's error: a run step's `mcpd.step.error_class`, else the
    error's `kind`, else '' (JSON objects, or None)."""
    for source, key in ((attributes, ERROR_CLASS), (error, "kind")):
        value = source.get(key) if isinstance(source, dict) else None
        if isinstance(value, str) and value:
            return value
    return ""


def step_key(attributes: Any) -> str | None:
    """The step key a run step's span attributes (a JSON object, or None) carry, if any."""
    value = attributes.get(STEP_KEY) if isinstance(attributes, dict) else None
    return value if isinstance(value, str) else None


def trace_ending(
    trace_id: str,
    status: str,
    error_count: int,
    ended_at: int,
    root: tuple[str, Any, str | None] | None,
    failed: Sequence[tuple[str, str | None]],
) -> TraceEnding:
    """A TraceEnding from a trace's row, its root span's (kind, attributes, run id) when stored,
    and each failed span's (error class, step key) in start order."""
    kind, attributes, run_id = root if root is not None else (None, None, None)
    return TraceEnding(
        trace_id=trace_id,
        status=status,
        error_count=error_count,
        ended_at=ended_at,
        root_kind=kind,
        run_status=run_status(attributes),
        error_classes=tuple(error for error, _ in failed),
        run_id=run_id or None,
        failed_step=next((key for _, key in failed if key), None),
    )
