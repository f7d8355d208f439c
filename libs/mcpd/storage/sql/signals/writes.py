"""Writing signal batches, and tail sampling's release of held spans, in one transaction each.

`write_batches`, in order:

0. **Binding** (`bind_batches`, before the transaction: it needs no database): every row's
   upsert parameters are built (JSON texts, a span's rendered head, the search text), the rows
   are gathered as in step 2 as though every batch is written, and the touched traces are
   projected from those rows alone (`reproject.project_alone`), so the transaction, which on
   SQLite holds the one write lock of the file, runs only what needs the database.
   `SqlTraceStore.write_batches` binds, then begins.
1. **Ingest keys.** The call's keys are deduplicated (a key repeated in the call belongs to its
   first batch) and recorded with one `INSERT ... ON CONFLICT DO NOTHING RETURNING`; a batch is
   written when its key came back (or it has none). A concurrent writer of the same key waits
   on PostgreSQL's unique index until the first commits and then gets nothing back; SQLite's
   BEGIN IMMEDIATE already serialises writers.
2. **Rows.** The written batches' bound rows are gathered per table, keyed by primary key (a
   later row replaces an earlier one, across batches too) and sorted by key; a row without
   `received_at` took its batch's when it was bound (on a copy: the caller's rows are never
   changed).
3. **Locks** (PostgreSQL): an advisory lock per touched trace, and per score id written
   (`score_rollups.lock_keys`), in key order in one call (`statements.take_locks`), so
   concurrent writers of one trace cannot lose each other's projection update, nor writers of
   one score each other's change to the score rollups.
4. **Projection** of every touched trace (`reproject`), read before the rows are written; a
   trace nothing is stored of takes its projection from step 0 when every batch is written
   (a replayed batch changes the rows, so then every trace is projected here).
5. **Writes**: one bulk upsert per table (`statements.BulkUpsert`), then the projection rows,
   then the facet values (`last_seen` is the batch's arrival, and only ever moves forward).
   Spans, logs and projection rows carry the transaction's arrival sequence
   (`statements.next_arrival`), and the upserts of spans and logs keep the search index.
   A note written about a trace along an aspect that already has one leaves only the newer of
   the two (`themes.keep_newest_notes`). Notes arrive filed under their trace's entity
   (`SqlTraceStore.write_batches` files them before binding, `mcpd.signals.notes`).
6. **Followers**: when spans were written, the caller's `follow` is given them and the touched
   traces' projections, still inside the transaction (the sessions of those traces,
   `mcpd.sessions.traces`). Tail sampling's release does the same with the spans it moved.
7. **Rollups** (`rollups`): the new projections, spans and scores less the stored rows they
   replace (read before step 5; the stored scores under row locks, `score_rollups`), added to
   the rollup rows and then the score rollup rows last of all, in key order.

Every statement that takes row locks takes them in key order, and the phases run in the same
order in every writer, so two PostgreSQL writers cannot deadlock.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from operator import itemgetter
from typing import Any, cast

from sqlalchemy import Connection, Table, delete

from mcpd.signals.batch import SignalBatch
from mcpd.signals.facets import FacetValue, batch_facets, span_facets
from mcpd.signals.rollups import Delta, carries_spans
from mcpd.signals.rows import AspectNoteRow, SpanRow, TraceRow
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
from mcpd.storage.sql.signals import rollups, score_rollups
from mcpd.storage.sql.signals.reproject import TraceKey, chunks, project_alone, reproject
from mcpd.storage.sql.signals.statements import (
    Bound,
    bulk_upsert,
    insert_new_keys,
    lock_traces,
    next_arrival,
    take_locks,
    trace_lock_key,
)
from mcpd.storage.sql.themes import keep_newest_notes

Row = Mapping[str, Any]
Key = tuple[str, ...]

# The tables a batch writes, each with the batch's rows for it and its primary key's columns.
_WRITTEN: tuple[tuple[Table, str, tuple[str, ...]], ...] = (
    (spans, "spans", ("project", "trace_id", "span_id")),
    (held_spans, "held_spans", ("project", "trace_id", "span_id")),
    (logs, "logs", ("project", "log_id")),
    (metrics, "metrics", ("project", "metric_id")),
    (scores, "scores", ("project", "score_id")),
    (feedback, "feedback", ("project", "feedback_id")),
    (aspect_notes, "aspect_notes", ("project", "note_id")),
)


@dataclass(frozen=True, slots=True)
class BoundBatch:
    """A batch whose rows are bound for their upserts (`bind_batches`), ready for `write_bound`:
    everything that needs no database is done before the write's transaction begins."""

    batch: SignalBatch
    # Per table name, the batch's rows in order, each with its key and what its upsert binds.
    rows: dict[str, list[tuple[Key, Bound]]]
    facets: tuple[FacetValue, ...]


@dataclass(frozen=True, slots=True)
class BoundGroup:
    """The batches of one write, bound (`bind_batches`), with their rows gathered and their
    traces projected as though every batch is written."""

    batches: list[BoundBatch]
    gathered: _Gathered
    alone: dict[TraceKey, TraceRow]

    def span_rows(self) -> list[SpanRow]:
        """The span rows the write holds, as though every batch is written."""
        return cast(list[SpanRow], self.gathered.rows(spans))


def bind_batches(dialect: SqlDialect, batches: Sequence[SignalBatch]) -> BoundGroup:
    """Bind every row of `batches` (see `BoundGroup`); needs no connection."""
    bound = [_bind(dialect, batch) for batch in batches]
    gathered = _gather(bound)
    return BoundGroup(bound, gathered, gathered.project_alone())


def _bind(dialect: SqlDialect, batch: SignalBatch) -> BoundBatch:
    received = batch.received_at
    found: dict[str, list[tuple[Key, Bound]]] = {}
    for table, attribute, key_columns in _WRITTEN:
        rows = getattr(batch, attribute)
        if not rows:
            continue
        upsert = bulk_upsert(table, dialect)
        pick_key = itemgetter(*key_columns)
        bound = []
        for row in _stamped(rows, received):
            if table is held_spans:
                row = _held(row)
            bound.append((pick_key(row), upsert.bind(row)))
        found[table.name] = bound
    return BoundBatch(batch, found, tuple(batch_facets(batch)))


def _held(span: Row) -> Row:
    """A held span's row in the holding table: its key, its arrival, and the span itself."""
    return {
        "project": span["project"],
        "trace_id": span["trace_id"],
        "span_id": span["span_id"],
        "received_at": span["received_at"],
        "row": span,
    }


class _Gathered:
    """The bound rows of the written batches, per table, keyed by primary key (last one wins)."""

    def __init__(self) -> None:
        self.tables: dict[str, dict[Key, Bound]] = {table.name: {} for table, _, _ in _WRITTEN}
        self.facets: dict[FacetValue, int] = {}

    def add(self, bound: BoundBatch) -> None:
        for name, rows in bound.rows.items():
            self.tables[name].update(rows)
        _note_facets(self.facets, bound.facets, bound.batch.received_at)

    def rows(self, table: Table) -> list[Row]:
        return [item.row for item in self.tables[table.name].values()]

    def touched(self) -> set[TraceKey]:
        """The traces whose projection the rows change."""
        found = {(key[0], key[1]) for key in self.tables["spans"]}
        for table in (scores, feedback):
            found.update(
                (row["project"], row["trace_id"])
                for row in self.rows(table)
                if row.get("trace_id") is not None
            )
        return found

    def project_alone(self) -> dict[TraceKey, TraceRow]:
        """The touched traces' projections from these rows alone (`reproject.project_alone`)."""
        return project_alone(
            self.touched(), self.rows(spans), self.rows(scores), self.rows(feedback)
        )


def _gather(bound: Iterable[BoundBatch]) -> _Gathered:
    gathered = _Gathered()
    for item in bound:
        gathered.add(item)
    return gathered


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


Follow = Callable[[Sequence[SpanRow], Sequence[TraceRow]], None]
"""What a write tells its follower: the span rows it wrote, the touched traces' projections."""


def write_batches(
    conn: Connection, dialect: SqlDialect, batches: Sequence[SignalBatch]
) -> list[bool]:
    """`TraceStore.write_batches` inside the caller's transaction (see the module docstring)."""
    return write_bound(conn, dialect, bind_batches(dialect, batches))


def write_bound(
    conn: Connection, dialect: SqlDialect, group: BoundGroup, follow: Follow | None = None
) -> list[bool]:
    """`write_batches` of batches already bound (`bind_batches`), in the caller's transaction;
    `follow`, when given, is told what was written (step 6)."""
    written = claim_keys(conn, dialect, [item.batch for item in group.batches])
    if all(written):
        gathered, alone = group.gathered, group.alone
    else:
        gathered = _gather(item for item, ok in zip(group.batches, written, strict=True) if ok)
        alone = {}
    touched = gathered.touched()
    held_traces = {(key[0], key[1]) for key in gathered.tables["held_spans"]}
    written_scores = gathered.rows(scores)
    locked = [trace_lock_key(project, trace_id) for project, trace_id in touched | held_traces]
    take_locks(conn, dialect, [*locked, *score_rollups.lock_keys(written_scores)])
    projected = reproject(
        conn,
        touched,
        gathered.rows(spans),
        written_scores,
        gathered.rows(feedback),
        alone=alone,
    )
    delta = _rollup_delta(conn, touched, projected, gathered.rows(spans))
    score_rollups.replace_scores(conn, written_scores, delta)
    arrival = next_arrival(conn, dialect) if any(written) else 0
    for table, _, _ in _WRITTEN:
        _write(conn, dialect, table, gathered.tables[table.name], arrival)
    if gathered.tables["aspect_notes"]:
        keep_newest_notes(conn, cast(list[AspectNoteRow], gathered.rows(aspect_notes)))
    _upsert_traces(conn, dialect, projected, arrival)
    _upsert_facets(conn, dialect, gathered.facets)
    if follow is not None and gathered.tables["spans"]:
        follow(cast(list[SpanRow], gathered.rows(spans)), projected)
    rollups.apply(conn, dialect, delta)
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
    conn: Connection,
    dialect: SqlDialect,
    project: str,
    keep: Sequence[str],
    drop: Sequence[str],
    follow: Follow | None = None,
) -> int:
    """`TraceStore.release_held` inside the caller's transaction; returns the spans moved, which
    `follow`, when given, is told about with their traces' projections.

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
    delta = _rollup_delta(conn, touched, projected, list(moved.values()))
    arrival = next_arrival(conn, dialect)
    _upsert(conn, dialect, spans, moved, arrival)
    _upsert_traces(conn, dialect, projected, arrival)
    facets: dict[FacetValue, int] = {}
    _note_facets(facets, span_facets(cast(Iterable[SpanRow], moved.values())), latest)
    _upsert_facets(conn, dialect, facets)
    if follow is not None:
        follow([cast(SpanRow, moved[key]) for key in sorted(moved)], projected)
    rollups.apply(conn, dialect, delta)
    return len(moved)


def _rollup_delta(
    conn: Connection,
    touched: Iterable[TraceKey],
    projected: Sequence[TraceRow],
    written_spans: Sequence[Row],
) -> Delta:
    """What the write changes in the rollups: the new projections and spans less the stored
    rows they replace, read now (before the writes; the traces' locks are held). Applied after
    every other row is written, so rollup rows are the last a writer locks."""
    delta = Delta()
    delta.add_traces(rollups.stored_traces(conn, touched), -1)
    delta.add_traces(projected)
    counted = [row for row in written_spans if carries_spans(row)]
    if written_spans:
        keys = {(row["project"], row["trace_id"], row["span_id"]) for row in written_spans}
        traces_of = {(project, trace_id) for project, trace_id, _ in keys}
        delta.add_spans(rollups.stored_spans(conn, traces_of, keys), -1)
    delta.add_spans(counted)
    return delta


def _upsert(
    conn: Connection, dialect: SqlDialect, table: Table, rows: Mapping[Key, Row], arrival: int
) -> None:
    if rows:
        bulk_upsert(table, dialect).execute(
            conn, [rows[key] for key in sorted(rows)], arrival=arrival
        )


def _write(
    conn: Connection, dialect: SqlDialect, table: Table, rows: Mapping[Key, Bound], arrival: int
) -> None:
    """Write bound rows in key order (every writer takes row locks in the same order); a table
    without an arrival sequence ignores `arrival`."""
    if rows:
        ordered = [rows[key] for key in sorted(rows)]
        bulk_upsert(table, dialect).write(conn, ordered, arrival=arrival)


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
