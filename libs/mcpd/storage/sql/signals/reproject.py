"""Re-projecting the traces a write touches, inside the write's transaction.

The stored spans (only `PROJECTION_SPAN_COLUMNS`), scores and feedback of every touched trace
are read in bulk (one SELECT per table and project per `CHUNK` trace ids) *before* the write's
own rows go in, and the write's rows are laid over them in memory, newest winning. Reading first
means a brand-new trace (the common case) costs an index probe that finds nothing, instead of a
read-back of the rows just written. The caller must already hold the traces' locks
(`statements.lock_traces`), so what is read cannot change before the commit.

A brand-new trace's projection depends on the write's rows only, so the writer computes it
before its transaction (`project_alone`) and `reproject` takes it for every trace the reads find
nothing of: the projection's Python work, about a fifth of a SQLite write's time, no longer
holds the database's one write lock.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any, TypeVar, cast

from sqlalchemy import Connection, Select, Table, bindparam, select

from mcpd.signals.projection import (
    PROJECTION_FEEDBACK_COLUMNS,
    PROJECTION_SCORE_COLUMNS,
    PROJECTION_SPAN_COLUMNS,
    project_trace,
)
from mcpd.signals.rows import FeedbackRow, ScoreRow, SpanRow, TraceRow
from mcpd.storage.sql.schema.trace import feedback, scores, spans
from mcpd.storage.sql.signals.statements import CHUNK

TraceKey = tuple[str, str]
"""(project, trace_id)."""
Row = Mapping[str, Any]
T = TypeVar("T")


def reproject(
    conn: Connection,
    touched: Iterable[TraceKey],
    new_spans: Iterable[Mapping[str, Any]],
    new_scores: Iterable[Mapping[str, Any]],
    new_feedback: Iterable[Mapping[str, Any]],
    *,
    alone: Mapping[TraceKey, TraceRow] | None = None,
) -> list[TraceRow]:
    """The projection rows of the `touched` traces, from what is stored overlaid with the rows
    this transaction is about to write; a trace without spans (a score that arrived first) gets
    none. `alone` (`project_alone` of exactly the new rows) is taken as it is for a trace with
    nothing stored: the overlay would be the new rows alone, so the result is the same, and the
    projection's work stays out of the transaction for the common case of a new trace."""
    by_project = _by_project(touched)
    if not by_project:
        return []
    span_groups = _stored(conn, spans, PROJECTION_SPAN_COLUMNS, by_project, "span_id")
    score_groups = _stored(conn, scores, PROJECTION_SCORE_COLUMNS, by_project, "score_id")
    feedback_groups = _stored(
        conn, feedback, PROJECTION_FEEDBACK_COLUMNS, by_project, "feedback_id"
    )
    taken: dict[TraceKey, TraceRow] = {}
    if alone:
        stored = span_groups.keys() | score_groups.keys() | feedback_groups.keys()
        taken = {key: row for key, row in alone.items() if key not in stored}
    _overlay(span_groups, new_spans, "span_id")
    _overlay(score_groups, new_scores, "score_id")
    _overlay(feedback_groups, new_feedback, "feedback_id")
    return [
        row for _, row in _projected(by_project, span_groups, score_groups, feedback_groups, taken)
    ]


def project_alone(
    touched: Iterable[TraceKey],
    new_spans: Iterable[Mapping[str, Any]],
    new_scores: Iterable[Mapping[str, Any]],
    new_feedback: Iterable[Mapping[str, Any]],
) -> dict[TraceKey, TraceRow]:
    """What `reproject` gives the `touched` traces when nothing of them is stored yet; needs no
    connection, so it can run before the write's transaction begins."""
    span_groups: dict[TraceKey, dict[str, Row]] = {}
    score_groups: dict[TraceKey, dict[str, Row]] = {}
    feedback_groups: dict[TraceKey, dict[str, Row]] = {}
    _overlay(span_groups, new_spans, "span_id")
    _overlay(score_groups, new_scores, "score_id")
    _overlay(feedback_groups, new_feedback, "feedback_id")
    projected = _projected(_by_project(touched), span_groups, score_groups, feedback_groups, {})
    return dict(projected)


def _by_project(touched: Iterable[TraceKey]) -> dict[str, list[str]]:
    by_project: dict[str, list[str]] = {}
    for project, trace_id in sorted(set(touched)):
        by_project.setdefault(project, []).append(trace_id)
    return by_project


def _projected(
    by_project: Mapping[str, Sequence[str]],
    span_groups: Mapping[TraceKey, Mapping[str, Row]],
    score_groups: Mapping[TraceKey, Mapping[str, Row]],
    feedback_groups: Mapping[TraceKey, Mapping[str, Row]],
    skip: Mapping[TraceKey, TraceRow],
) -> Iterator[tuple[TraceKey, TraceRow]]:
    """Each trace's projection in key order; a trace in `skip` is yielded with its row there."""
    for project, trace_ids in by_project.items():
        for trace_id in trace_ids:
            key = (project, trace_id)
            if key in skip:
                yield key, skip[key]
                continue
            span_rows = span_groups.get(key)
            if not span_rows:
                continue
            row = project_trace(
                project,
                trace_id,
                cast(Sequence[SpanRow], list(span_rows.values())),
                cast(Sequence[ScoreRow], list(score_groups.get(key, {}).values())),
                cast(Sequence[FeedbackRow], list(feedback_groups.get(key, {}).values())),
            )
            if row is not None:
                yield key, row


@functools.cache
def _select(table: Table, names: tuple[str, ...]) -> Select[Any]:
    """The read of `names` for one project's traces, built once: building the statement cost
    more than running it when the traces are new. The parameters carry the names SQLAlchemy
    gives the literals of `table.c.project == project, table.c.trace_id.in_(chunk)`, so the SQL
    is the same text."""
    return select(*[table.c[name] for name in names]).where(
        table.c.project == bindparam("project_1"),
        table.c.trace_id.in_(bindparam("trace_id_1", expanding=True)),
    )


def _stored(
    conn: Connection,
    table: Table,
    names: Sequence[str],
    by_project: Mapping[str, Sequence[str]],
    id_column: str,
) -> dict[TraceKey, dict[str, Row]]:
    statement = _select(table, tuple(names))
    groups: dict[TraceKey, dict[str, Row]] = {}
    for project, trace_ids in by_project.items():
        for chunk in chunks(trace_ids):
            result = conn.execute(statement, {"project_1": project, "trace_id_1": list(chunk)})
            for values in result:
                row = dict(zip(names, values, strict=True))
                groups.setdefault((project, row["trace_id"]), {})[row[id_column]] = row
    return groups


def _overlay(
    groups: dict[TraceKey, dict[str, Row]], rows: Iterable[Mapping[str, Any]], id_column: str
) -> None:
    """Lay the rows about to be written over the stored ones: same id, newest wins. (A score
    or feedback re-sent under another trace id also leaves the group it was read into.)"""
    listed = [row for row in rows if row.get("trace_id") is not None]
    if id_column != "span_id":
        moved = {row[id_column] for row in listed}
        for group in groups.values():
            for stale in moved.intersection(group):
                del group[stale]
    for row in listed:
        groups.setdefault((row["project"], row["trace_id"]), {})[row[id_column]] = row


def chunks(items: Sequence[T]) -> Iterator[Sequence[T]]:
    """`items` in slices of at most CHUNK."""
    for start in range(0, len(items), CHUNK):
        yield items[start : start + CHUNK]
