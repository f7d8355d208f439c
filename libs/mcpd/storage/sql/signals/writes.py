"""Writing signal batches, and tail sampling's release of held spans, in one transaction each.

`write_batches`, in order:

1. **Ingest keys.** The call's keys are deduplicated (a key repeated in the call belongs to its
   first batch) and recorded with one `INSERT ... ON CONFLICT DO NOTHING RETURNING`; a batch is
   written when its key came back (or it has none). A concurrent writer of the same key waits
   on PostgreSQL's unique index until the first commits and then gets nothing back; SQLite's
   BEGIN IMMEDIATE already serialises writers.
2. **Rows.** The written batches' rows are gathered per table, keyed by primary key (a later
   row replaces an earlier one, across batches too) and sorted by key; a row without
   `received_at` takes its batch's (on a copy: the caller's rows are never changed).
3. **Locks** (PostgreSQL): an advisory lock per touched trace, in key order
   (`statements.lock_traces`), so concurrent writers of one trace cannot lose each other's
   projection update.
4. **Projection** of every touched trace (`reproject`), read before the rows are written.
5. **Writes**: one bulk upsert per table (`statements.BulkUpsert`), then the projection rows,
   then the facet values (`last_seen` is the batch's arrival, and only ever moves forward).
   Spans, logs and projection rows carry the transaction's arrival sequence
   (`statements.next_arrival`), and the upserts of spans and logs keep the search index.

Every statement that takes row locks takes them in key order, and the phases run in the same
order in every writer, so two PostgreSQL writers cannot deadlock.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any, cast

from sqlalchemy import Connection, Table, delete

from mcpd.signals.batch import SignalBatch
from mcpd.signals.facets import FacetValue, batch_facets, span_facets
from mcpd.signals.rows import SpanRow, TraceRow
from mcpd.storage.sql.dialect import SqlDialect
from mcpd.storage.sql.schema.trace import (
    aspect_notes,
    facet_values,
    feedback,
    held_spans,
    logs,
    metrics,
    scores,
    spans,
    traces,
)
from mcpd.storage.sql.signals.reproject import TraceKey, chunks, reproject
from mcpd.storage.sql.signals.statements import (
    bulk_upsert,
    insert_new_keys,
    lock_traces,
    next_arrival,
)

Row = Mapping[str, Any]
Key = tuple[str, ...]


class _Gathered:
    """The rows of the written batches, per table, keyed by primary key (last one wins)."""

    def __init__(self) -> None:
        self.spans: dict[Key, Row] = {}
        self.held: dict[Key, Row] = {}
        self.logs: dict[Key, Row] = {}
        self.metrics: dict[Key, Row] = {}
        self.scores: dict[Key, Row] = {}
        self.feedback: dict[Key, Row] = {}
        self.notes: dict[Key, Row] = {}
        self.facets: dict[FacetValue, int] = {}

    def add(self, batch: SignalBatch) -> None:
        received = batch.received_at
        for row in _stamped(batch.spans, received):
            self.spans[(row["project"], row["trace_id"], row["span_id"])] = row
        for row in _stamped(batch.held_spans, received):
            key = (row["project"], row["trace_id"], row["span_id"])
            self.held[key] = {
                "project": key[0],
                "trace_id": key[1],
                "span_id": key[2],
                "received_at": row["received_at"],
                "row": row,
            }
        for row in _stamped(batch.logs, received):
            self.logs[(row["project"], row["log_id"])] = row
        for row in _stamped(batch.metrics, received):
            self.metrics[(row["project"], row["metric_id"])] = row
        for row in _stamped(batch.scores, received):
            self.scores[(row["project"], row["score_id"])] = row
        for row in _stamped(batch.feedback, received):
            self.feedback[(row["project"], row["feedback_id"])] = row
        for row in _stamped(batch.aspect_notes, received):
            self.notes[(row["project"], row["note_id"])] = row
        _note_facets(self.facets, batch_facets(batch), received)

    def touched(self) -> set[TraceKey]:
        """The traces whose projection the rows change."""
        found = {(key[0], key[1]) for key in self.spans}
        for rows in (self.scores, self.feedback):
            found.update(
                (row["project"], row["trace_id"])
                for row in rows.values()
                if row.get("trace_id") is not None
            )
        return found


def _stamped(rows: Iterable[Mapping[str, Any]], received_at: int) -> Iterator[Row]:
    """The rows, each with an arrival time: a row without one (a copy) takes its batch's."""
    for row in rows:
        if row.get("received_at") is None:
            yield {**row, "received_at": received_at}
        else:
            yield row


def _note_facets(into: dict[FacetValue, int], found: Iterable[FacetValue], seen: int) -> None:
    for facet in found:
        if into.get(facet, seen - 1) < seen:
            into[facet] = seen


def write_batches(
    conn: Connection, dialect: SqlDialect, batches: Sequence[SignalBatch]
) -> list[bool]:
    """`TraceStore.write_batches` inside the caller's transaction (see the module docstring)."""
    written = claim_keys(conn, dialect, batches)
    gathered = _Gathered()
    for batch, ok in zip(batches, written, strict=True):
        if ok:
            gathered.add(batch)
    touched = gathered.touched()
    held_traces = {(key[0], key[1]) for key in gathered.held}
    lock_traces(conn, dialect, sorted(touched | held_traces))
    projected = reproject(
        conn,
        touched,
        gathered.spans.values(),
        gathered.scores.values(),
        gathered.feedback.values(),
    )
    arrival = next_arrival(conn, dialect) if any(written) else 0
    _upsert(conn, dialect, spans, gathered.spans, arrival)
    _upsert(conn, dialect, held_spans, gathered.held)
    _upsert(conn, dialect, logs, gathered.logs, arrival)
    _upsert(conn, dialect, metrics, gathered.metrics)
    _upsert(conn, dialect, scores, gathered.scores)
    _upsert(conn, dialect, feedback, gathered.feedback)
    _upsert(conn, dialect, aspect_notes, gathered.notes)
    _upsert_traces(conn, dialect, projected, arrival)
    _upsert_facets(conn, dialect, gathered.facets)
    return written


def claim_keys(conn: Connection, dialect: SqlDialect, batches: Sequence[SignalBatch]) -> list[bool]:
    """Record the batches' ingest keys; per batch, whether it is to be written."""
    written = [batch.ingest_key is None for batch in batches]
    first: dict[tuple[str, str], int] = {}
    for index, batch in enumerate(batches):
        if batch.ingest_key is not None:
            first.setdefault((batch.key_project, batch.ingest_key), index)
    if not first:
        return written
    params = [
        {
            "project": project,
            "ingest_key": key,
            "received_at": batches[index].received_at,
            "record_count": batches[index].record_count(),
        }
        for (project, key), index in sorted(first.items())
    ]
    inserted = {(project, key) for project, key in conn.execute(insert_new_keys(dialect), params)}
    for pair, index in first.items():
        written[index] = pair in inserted
    return written


def release_held(
    conn: Connection, dialect: SqlDialect, project: str, keep: Sequence[str], drop: Sequence[str]
) -> int:
    """`TraceStore.release_held` inside the caller's transaction; returns the spans moved.

    The held rows are taken with `DELETE ... RETURNING`, so exactly the spans deleted are the
    spans moved, and the traces' locks keep a concurrent writer from holding one more span of a
    trace between the two.
    """
    kept = sorted(set(keep))
    dropped = sorted(set(drop))
    if set(kept) & set(dropped):
        raise ValueError("a held trace cannot be both kept and dropped")
    lock_traces(conn, dialect, [(project, trace_id) for trace_id in [*kept, *dropped]])
    moved: dict[Key, Row] = {}
    latest = 0
    for chunk in chunks(kept):
        taken = conn.execute(
            delete(held_spans)
            .where(held_spans.c.project == project, held_spans.c.trace_id.in_(chunk))
            .returning(held_spans.c.row, held_spans.c.received_at)
        )
        for document, received_at in taken:
            span = {**document, "project": project}
            if span.get("received_at") is None:
                span["received_at"] = received_at
            moved[(project, span["trace_id"], span["span_id"])] = span
            latest = max(latest, span["received_at"])
    for chunk in chunks(dropped):
        conn.execute(
            delete(held_spans).where(
                held_spans.c.project == project, held_spans.c.trace_id.in_(chunk)
            )
        )
    if not moved:
        return 0
    touched = {(key[0], key[1]) for key in moved}
    projected = reproject(conn, touched, moved.values(), (), ())
    arrival = next_arrival(conn, dialect)
    _upsert(conn, dialect, spans, moved, arrival)
    _upsert_traces(conn, dialect, projected, arrival)
    facets: dict[FacetValue, int] = {}
    _note_facets(facets, span_facets(cast(Iterable[SpanRow], moved.values())), latest)
    _upsert_facets(conn, dialect, facets)
    return len(moved)


def _upsert(
    conn: Connection,
    dialect: SqlDialect,
    table: Table,
    rows: Mapping[Key, Row],
    arrival: int | None = None,
) -> None:
    if rows:
        bulk_upsert(table, dialect).execute(
            conn, [rows[key] for key in sorted(rows)], arrival=arrival
        )


def _upsert_traces(
    conn: Connection, dialect: SqlDialect, projected: Sequence[TraceRow], arrival: int
) -> None:
    if projected:
        keyed: dict[Key, Row] = {(row["project"], row["trace_id"]): row for row in projected}
        _upsert(conn, dialect, traces, keyed, arrival)


def _upsert_facets(conn: Connection, dialect: SqlDialect, facets: Mapping[FacetValue, int]) -> None:
    if facets:
        bulk_upsert(facet_values, dialect).execute(
            conn,
            [
                {"project": p, "facet": f, "key": k, "value": v, "last_seen": facets[(p, f, k, v)]}
                for p, f, k, v in sorted(facets)
            ],
        )
