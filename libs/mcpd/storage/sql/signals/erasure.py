"""Deleting from the trace store on SQLite and PostgreSQL: one trace, one subject, what aged out.

Rows are deleted outright (StoreCapabilities.immediate_deletes): what a call counts has left the
tables when its transaction commits. The FTS5 entries of deleted spans and logs go with them by
trigger (`statements` documents the index).

* `delete_trace`: a trace whole, its row, spans and held spans with the logs, metrics, scores,
  feedback and aspect notes that name it.
* `erase_subject`: every trace with a span, held span or trace row of the subject goes whole (a
  trace is one conversation: its other spans carry the same prompts); then the subject's logs,
  metrics, scores, feedback and aspect notes matched on their own correlation; then the session
  read model's sessions built from those traces (harness `mcpd`, keyed by the spans' session
  id) or keyed by the subject's session id, in any harness. A trace that only lost a score or
  feedback of the subject is re-projected, so its summaries stop counting it. Facet values
  stay: no facet holds a user id or a session id (they are entity kinds and names, services,
  environments, tags, metric names and labels). Dataset items captured from the erased traces
  are emptied in place (their input, expected and metadata): a case was kept on purpose, so it
  stays, without what the subject said.
* `apply_retention`: rows whose `received_at` is before their signal's cutoff, a bounded batch
  per transaction, so a backlog of millions never holds SQLite's write lock, or one PostgreSQL
  transaction, for its whole length. `spans` takes traces whole by the trace's arrival (the
  first of its spans), then any older span left (re-projecting its trace), held spans and
  aspect notes; scores and feedback re-project the traces they leave.

Scrubbing (SQLite). A deleted row's bytes stay in the file's free space until reused, and FTS5 keeps
a deleted row's words in its index segments until they merge. Every connection of the store deletes
with `PRAGMA secure_delete` on (the engine sets it: freed content is overwritten with zeros), and
`erase_subject` ends with an FTS5 'optimize' of the indexes it deleted from (one merged segment,
without the deleted words), so the subject's values leave the database file once the WAL is
checkpointed (the store does that after the erasure commits). The price: optimize rewrites the whole
index inside the write lock (about a second per 100,000 spans). `delete_trace` deletes securely but
skips the optimize, which would make every single delete cost a full index rewrite: the trace's
words stay in index segments (unreachable: they point at deleted rows) until FTS5 merges them.
Retention does neither, since aged data is not a request to forget. PostgreSQL keeps dead tuples
until VACUUM reuses their space, and its WAL and backups keep what they kept: no transaction can
scrub those.

Rollups (`rollups`): what a delete removes, and the change of every trace it re-projects, is
read before it is written and subtracted from the rollups at the end of the transaction, in one
upsert in key order, as a write adds to them. The scores a delete removes come back from the
DELETE itself (`RETURNING`), and are subtracted from the score rollups the same way
(`score_rollups`).

Locks (PostgreSQL): writers serialise per trace with advisory locks (`statements.lock_traces`).
A delete that removes or re-projects a trace takes them first, in key order and in one call, so
a concurrent write cannot re-project a trace from rows being deleted under it. (Only an erasure
that finds a score or feedback of the subject written while it looked takes a second batch of
locks; should that close a cycle with a writer, PostgreSQL fails one of the two transactions.)
"""

from __future__ import annotations

import functools
import uuid
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from sqlalchemy import (
    Column,
    ColumnElement,
    Connection,
    Delete,
    Table,
    delete,
    or_,
    select,
    tuple_,
    update,
)
from sqlalchemy.engine import Engine

from mcpd.runtime.errors import InvalidArgument
from mcpd.sessions.model import TRACE_HARNESS
from mcpd.signals.queries import STAT_SIGNALS, ErasureCounts, ErasureSubject
from mcpd.signals.rollups import Delta
from mcpd.storage.sql.dialect import SqlDialect
from mcpd.storage.sql.evaluation import empty_captured_items
from mcpd.storage.sql.schema.sessions import (
    event_search,
    events,
    file_touches,
    session_versions,
    sessions,
    trace_turns,
    turns,
)
from mcpd.storage.sql.schema.trace import (
    aspect_notes,
    feedback,
    held_spans,
    ingest_keys,
    logs,
    metrics,
    scores,
    spans,
    traces,
)
from mcpd.storage.sql.signals import rollups, score_rollups
from mcpd.storage.sql.signals.reproject import chunks, reproject
from mcpd.storage.sql.signals.statements import (
    SEARCH_TEXT,
    bulk_upsert,
    fts_table,
    lock_traces,
    next_arrival,
)
from mcpd.storage.sql.themes import erase_note_themes, expire_snapshots

RETENTION_ROWS = 5_000
"""Rows one retention transaction deletes from one table, at most."""
RETENTION_TRACES = 500
"""Traces one retention transaction deletes whole, at most (each with all its spans)."""

# Everything that names a trace by its id.
_OF_TRACE: tuple[Table, ...] = (
    traces,
    spans,
    held_spans,
    logs,
    metrics,
    scores,
    feedback,
    aspect_notes,
)
# What a subject's correlation matches on its own (their spans' traces go whole instead).
_OWN_ROWS: tuple[Table, ...] = (logs, metrics, scores, feedback, aspect_notes)
# Tables whose rows feed a trace's projection.
_PROJECTED = frozenset({"spans", "scores", "feedback"})
# The rows of the session read model, per session id (sessions themselves are keyed by id).
_SESSION_ROWS: tuple[Table, ...] = (event_search, file_touches, events, turns, trace_turns)
# The tables each retention signal counts rows of.
_COUNTED: Mapping[str, tuple[str, ...]] = {
    "spans": ("traces", "spans", "held_spans", "aspect_notes"),
    "logs": ("logs",),
    "metrics": ("metrics",),
    "scores": ("scores",),
    "feedback": ("feedback",),
}

Match = Callable[[str], ColumnElement[Any]]
"""A correlation field's column (or JSON field) by name."""


# --- one trace ---------------------------------------------------------------------------------


def delete_trace(conn: Connection, dialect: SqlDialect, project: str, trace_id: str) -> int:
    """`TraceStore.delete_trace` inside the caller's transaction: records removed."""
    lock_traces(conn, dialect, [(project, trace_id)])
    notes = _trace_notes(conn, project, [trace_id])
    delta = Delta()
    removed = _delete_of_traces(conn, project, [trace_id], _OF_TRACE, delta)
    erase_note_themes(conn, project, notes)
    rollups.apply(conn, dialect, delta)
    return sum(removed.values())


# --- one subject -------------------------------------------------------------------------------


def erase_subject(
    conn: Connection, dialect: SqlDialect, project: str, subject: ErasureSubject
) -> ErasureCounts:
    """`TraceStore.erase_subject` inside the caller's transaction (see the module docstring)."""
    if not subject.user_ids and subject.session_id is None:
        return ErasureCounts()
    whole = _subject_traces(conn, project, subject)
    annotated = _annotated_traces(conn, project, subject) - set(whole)
    locked = set(whole) | annotated
    lock_traces(conn, dialect, [(project, trace_id) for trace_id in sorted(locked)])
    session_keys = _session_keys(conn, project, whole)
    notes = _subject_notes(conn, project, subject, whole)
    delta = Delta()
    removed = _delete_of_traces(conn, project, whole, _OF_TRACE, delta)
    touched: set[str] = set()
    for table in _OWN_ROWS:
        count, named = _delete_matching(conn, table, project, subject, delta)
        removed[table.name] += count
        if table.name in _PROJECTED:
            touched |= named
    touched -= set(whole)
    # A score or feedback of the subject written since the look-up above: its trace is
    # locked now (rare; PostgreSQL resolves a lock cycle by failing one transaction).
    lock_traces(conn, dialect, [(project, trace_id) for trace_id in sorted(touched - locked)])
    _reproject(conn, dialect, project, sorted(touched), delta)
    erased_sessions = _erase_sessions(conn, project, session_keys, subject.session_id)
    items = empty_captured_items(conn, project, whole)
    taken = erase_note_themes(conn, project, notes)
    rollups.apply(conn, dialect, delta)
    _scrub_search(conn, dialect, removed)
    return ErasureCounts(
        traces=removed["traces"],
        spans=removed["spans"] + removed["held_spans"],
        logs=removed["logs"],
        metrics=removed["metrics"],
        scores=removed["scores"],
        feedback=removed["feedback"],
        aspect_notes=removed["aspect_notes"],
        sessions=erased_sessions,
        dataset_items=items.items,
        datasets=items.datasets,
        theme_labels=taken.labels,
        theme_examples=taken.examples,
    )


def _subject_notes(
    conn: Connection, project: str, subject: ErasureSubject, whole: Sequence[str]
) -> list[str]:
    """The notes the erasure deletes: those of its traces and those matched on their own
    correlation (their copies in themes go with them)."""
    statement = select(aspect_notes.c.note_id).where(
        aspect_notes.c.project == project, _matches(_columns_of(aspect_notes), subject)
    )
    return sorted(set(conn.execute(statement).scalars()) | set(_trace_notes(conn, project, whole)))


def _trace_notes(conn: Connection, project: str, trace_ids: Sequence[str]) -> list[str]:
    """The notes about `trace_ids`."""
    found: list[str] = []
    for chunk in chunks(trace_ids):
        statement = select(aspect_notes.c.note_id).where(
            aspect_notes.c.project == project, aspect_notes.c.trace_id.in_(chunk)
        )
        found += conn.execute(statement).scalars()
    return found


def _matches(column: Match, subject: ErasureSubject) -> ColumnElement[bool]:
    clauses: list[ColumnElement[bool]] = []
    if subject.user_ids:
        clauses.append(column("user_id").in_(subject.user_ids))
    if subject.session_id is not None:
        clauses.append(column("session_id") == subject.session_id)
    return or_(*clauses)


def _columns_of(table: Table) -> Match:
    return lambda name: table.c[name]


def _held_fields(name: str) -> ColumnElement[Any]:
    field: ColumnElement[Any] = held_spans.c.row[name].as_string()
    return field


def _subject_traces(conn: Connection, project: str, subject: ErasureSubject) -> list[str]:
    """Traces with a span, a trace row or a held span of the subject."""
    found: set[str] = set()
    for table, column in (
        (spans, _columns_of(spans)),
        (traces, _columns_of(traces)),
        (held_spans, _held_fields),
    ):
        statement = select(table.c.trace_id).where(
            table.c.project == project, _matches(column, subject)
        )
        found.update(conn.execute(statement.distinct()).scalars())
    return sorted(found)


def _annotated_traces(conn: Connection, project: str, subject: ErasureSubject) -> set[str]:
    """Traces with a score or feedback of the subject (their projection changes)."""
    found: set[str] = set()
    for table in (scores, feedback):
        statement = select(table.c.trace_id).where(
            table.c.project == project,
            table.c.trace_id.is_not(None),
            _matches(_columns_of(table), subject),
        )
        found.update(conn.execute(statement.distinct()).scalars())
    return found


def _delete_matching(
    conn: Connection, table: Table, project: str, subject: ErasureSubject, delta: Delta
) -> tuple[int, set[str]]:
    """Delete the table's rows of the subject; how many, and the traces they named. Deleted
    scores are subtracted into `delta`."""
    counted = score_rollups.SCORE_RETURNING if table is scores else ()
    named = conn.execute(
        delete(table)
        .where(table.c.project == project, _matches(_columns_of(table), subject))
        .returning(table.c.trace_id, *counted)
    ).all()
    if counted:
        score_rollups.subtract_deleted(delta, project, (row[1:] for row in named))
    return len(named), {row[0] for row in named if row[0] is not None}


def _session_keys(conn: Connection, project: str, trace_ids: Sequence[str]) -> set[str]:
    """The session ids the spans of these traces carry: the keys of the read model's
    sessions built from them."""
    keys: set[str] = set()
    for chunk in chunks(trace_ids):
        statement = select(spans.c.session_id).where(
            spans.c.project == project,
            spans.c.trace_id.in_(chunk),
            spans.c.session_id.is_not(None),
        )
        keys.update(conn.execute(statement.distinct()).scalars())
    return keys


def _erase_sessions(
    conn: Connection, project: str, trace_session_keys: set[str], named: str | None
) -> int:
    """Remove the read model's sessions built from the erased traces or keyed by `named`;
    return how many."""
    wanted: list[ColumnElement[bool]] = [
        (sessions.c.harness == TRACE_HARNESS) & sessions.c.session_key.in_(chunk)
        for chunk in chunks(sorted(trace_session_keys))
    ]
    if named is not None:
        wanted.append(sessions.c.session_key == named)
    if not wanted:
        return 0
    ids = sorted(
        conn.execute(
            select(sessions.c.id).where(sessions.c.project == project, or_(*wanted))
        ).scalars()
    )
    # A trace session none of whose traces made an event yet has trace states and no row.
    unlisted = _unlisted_trace_sessions(conn, project, trace_session_keys, named) - set(ids)
    for chunk in chunks([*ids, *sorted(unlisted)]):
        for table in _SESSION_ROWS:
            conn.execute(
                delete(table).where(table.c.project == project, table.c.session_id.in_(chunk))
            )
        conn.execute(
            delete(sessions).where(sessions.c.project == project, sessions.c.id.in_(chunk))
        )
    if ids:
        # A new generation makes the SQLite search index (tantivy) re-index the project whole
        # at its next catch-up, which drops the erased events' documents; a version bump alone
        # would only re-index sessions that still exist.
        conn.execute(
            update(session_versions)
            .where(session_versions.c.project == project)
            .values(version=session_versions.c.version + 1, generation=uuid.uuid4().hex)
        )
    return len(ids)


def _unlisted_trace_sessions(
    conn: Connection, project: str, keys: set[str], named: str | None
) -> set[str]:
    """The ids of the trace sessions with these keys (or `named`) that have trace states."""
    wanted = sorted(keys | ({named} if named is not None else set()))
    found: set[str] = set()
    for chunk in chunks(wanted):
        statement = select(trace_turns.c.session_id).where(
            trace_turns.c.project == project, trace_turns.c.session_key.in_(chunk)
        )
        found.update(conn.execute(statement.distinct()).scalars())
    return found


# --- retention ---------------------------------------------------------------------------------

Step = Callable[[Connection], tuple[Counter[str], bool]]
"""One retention transaction's work: rows removed per table, and whether more may wait."""


def apply_retention(
    engine: Engine, dialect: SqlDialect, project: str, cutoffs: Mapping[str, int]
) -> dict[str, int]:
    """`TraceStore.apply_retention`, one bounded batch per transaction; rows removed per
    signal of `cutoffs` (`spans` counts every row its window covers: trace rows, spans, held
    spans and aspect notes). Raises InvalidArgument (field `cutoffs`) for a signal outside
    STAT_SIGNALS, before deleting anything."""
    unknown = sorted(set(cutoffs) - set(STAT_SIGNALS))
    if unknown:
        raise InvalidArgument(
            f"no retention for {', '.join(unknown)}; signals are {', '.join(STAT_SIGNALS)}",
            field="cutoffs",
        )
    removed: Counter[str] = Counter()
    for step in _retention_steps(dialect, project, cutoffs):
        more = True
        while more:
            with engine.begin() as conn:
                counts, more = step(conn)
            removed.update(counts)
    return {signal: sum(removed[name] for name in _COUNTED[signal]) for signal in cutoffs}


def expire_ingest_keys(engine: Engine, project: str, before: int) -> int:
    """`TraceStore.expire_ingest_keys`, at most RETENTION_ROWS keys per transaction, oldest
    first (the (project, received_at) index finds them); keys removed."""
    oldest = (
        select(ingest_keys.c.project, ingest_keys.c.ingest_key)
        .where(ingest_keys.c.project == project, ingest_keys.c.received_at < before)
        .order_by(ingest_keys.c.received_at)
        .limit(RETENTION_ROWS)
    )
    statement = delete(ingest_keys).where(
        tuple_(ingest_keys.c.project, ingest_keys.c.ingest_key).in_(oldest)
    )
    removed = 0
    while True:
        with engine.begin() as conn:
            count = conn.execute(statement).rowcount
        removed += count
        if count < RETENTION_ROWS:
            return removed


def _retention_steps(dialect: SqlDialect, project: str, cutoffs: Mapping[str, int]) -> list[Step]:
    steps: list[Step] = []
    cutoff = cutoffs.get("spans")
    if cutoff is not None:
        steps.append(functools.partial(_expire_traces, dialect, project, cutoff))
        steps.extend(
            functools.partial(_expire_rows, dialect, project, cutoff, table)
            for table in (spans, held_spans, aspect_notes)
        )
        # Snapshots go with the notes they were read from.
        steps.append(functools.partial(_expire_snapshots, project, cutoff))
    for signal, table in (
        ("logs", logs),
        ("metrics", metrics),
        ("scores", scores),
        ("feedback", feedback),
    ):
        if signal in cutoffs:
            steps.append(functools.partial(_expire_rows, dialect, project, cutoffs[signal], table))
    return steps


def _expire_snapshots(project: str, cutoff: int, conn: Connection) -> tuple[Counter[str], bool]:
    return expire_snapshots(conn, project, cutoff, RETENTION_TRACES)


def _expire_traces(
    dialect: SqlDialect, project: str, cutoff: int, conn: Connection
) -> tuple[Counter[str], bool]:
    """Delete the oldest traces that arrived before `cutoff`, whole (spans, held spans and
    aspect notes; logs, metrics, scores and feedback keep their own windows)."""
    trace_ids = list(
        conn.execute(
            select(traces.c.trace_id)
            .where(traces.c.project == project, traces.c.received_at < cutoff)
            .order_by(traces.c.received_at)
            .limit(RETENTION_TRACES)
        ).scalars()
    )
    lock_traces(conn, dialect, [(project, trace_id) for trace_id in sorted(trace_ids)])
    delta = Delta()
    removed = _delete_of_traces(
        conn, project, trace_ids, (traces, spans, held_spans, aspect_notes), delta
    )
    rollups.apply(conn, dialect, delta)
    return removed, len(trace_ids) == RETENTION_TRACES


def _expire_rows(
    dialect: SqlDialect, project: str, cutoff: int, table: Table, conn: Connection
) -> tuple[Counter[str], bool]:
    """Delete the table's oldest rows that arrived before `cutoff`, re-projecting the traces
    they fed."""
    keys = [column for column in table.primary_key.columns if column.name != "project"]
    older = (table.c.project == project, table.c.received_at < cutoff)
    found = conn.execute(
        select(*keys, table.c.trace_id.label("of_trace"))
        .where(*older)
        .order_by(table.c.received_at)
        .limit(RETENTION_ROWS)
    ).all()
    projected = sorted(
        {row.of_trace for row in found if row.of_trace is not None}
        if table.name in _PROJECTED
        else set()
    )
    lock_traces(conn, dialect, [(project, trace_id) for trace_id in projected])
    delta = Delta()
    if table is spans:
        replaced = {(project, row.trace_id, row.span_id) for row in found}
        of_traces = {(project, trace_id) for _, trace_id, _ in replaced}
        delta.add_spans(rollups.stored_spans(conn, of_traces, replaced), -1)
    removed = 0
    for chunk in chunks(found):
        identities = [tuple(row)[: len(keys)] for row in chunk]
        statement = delete(table).where(*older, _key_in(keys, identities))
        removed += _delete(conn, statement, table, project, delta)
    counts = _reproject(conn, dialect, project, projected, delta)
    rollups.apply(conn, dialect, delta)
    counts[table.name] += removed
    return counts, len(found) == RETENTION_ROWS


def _key_in(
    keys: Sequence[Column[Any]], identities: Sequence[tuple[Any, ...]]
) -> ColumnElement[bool]:
    if len(keys) == 1:
        return keys[0].in_([identity[0] for identity in identities])
    return tuple_(*keys).in_(identities)


# --- shared ------------------------------------------------------------------------------------


def _delete_of_traces(
    conn: Connection,
    project: str,
    trace_ids: Sequence[str],
    tables: Sequence[Table],
    delta: Delta,
) -> Counter[str]:
    """Delete the rows of `tables` that name one of the traces; how many, per table. What the
    deleted trace rows, spans and scores counted in the rollups is subtracted into `delta`."""
    keys = [(project, trace_id) for trace_id in trace_ids]
    if traces in tables:
        delta.add_traces(rollups.stored_traces(conn, keys), -1)
    if spans in tables:
        delta.add_spans(rollups.stored_spans(conn, keys, None), -1)
    removed: Counter[str] = Counter()
    for chunk in chunks(trace_ids):
        for table in tables:
            statement = delete(table).where(table.c.project == project, table.c.trace_id.in_(chunk))
            removed[table.name] += _delete(conn, statement, table, project, delta)
    return removed


def _delete(conn: Connection, statement: Delete, table: Table, project: str, delta: Delta) -> int:
    """Run one DELETE of `table`; how many rows it removed. Removed scores are returned by the
    statement and subtracted into `delta` (exactly what went, whatever else ran meanwhile)."""
    if table is not scores:
        return int(conn.execute(statement).rowcount)
    removed = conn.execute(statement.returning(*score_rollups.SCORE_RETURNING))
    return score_rollups.subtract_deleted(delta, project, removed)


def _reproject(
    conn: Connection, dialect: SqlDialect, project: str, trace_ids: Sequence[str], delta: Delta
) -> Counter[str]:
    """Rewrite the projection of traces that lost rows (a new arrival, so delta pollers see
    it); a trace left without spans loses its row (counted). The caller holds the traces'
    locks."""
    if not trace_ids:
        return Counter()
    projected = reproject(conn, [(project, trace_id) for trace_id in trace_ids], (), (), ())
    emptied = sorted(set(trace_ids) - {row["trace_id"] for row in projected})
    removed = _delete_of_traces(conn, project, emptied, (traces,), delta)
    if projected:
        stored = [(project, row["trace_id"]) for row in projected]
        delta.add_traces(rollups.stored_traces(conn, stored), -1)
        delta.add_traces(projected)
        bulk_upsert(traces, dialect).execute(conn, projected, arrival=next_arrival(conn, dialect))
    return removed


def _scrub_search(conn: Connection, dialect: SqlDialect, removed: Mapping[str, int]) -> None:
    """SQLite: merge the FTS5 indexes rows were deleted from into one segment, which leaves
    the deleted rows' words out (see "Scrubbing" in the module docstring)."""
    if dialect is not SqlDialect.SQLITE:
        return
    for name in SEARCH_TEXT:
        if removed.get(name):
            index = fts_table(name)
            conn.exec_driver_sql(f"INSERT INTO {index}({index}) VALUES ('optimize')")
