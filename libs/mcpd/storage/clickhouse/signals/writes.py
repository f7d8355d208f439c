"""Writing signals to ClickHouse: group-committed batches and tail sampling's releases.

`write_batches`, in order (ClickHouse has no transactions; the package docstring sums up what
this order guarantees):

1. **Ingest keys.** One SELECT ... FINAL reads which of the call's keys are stored. A batch
   whose key is stored, or whose key an earlier batch of the call carries, is not written.
2. **Rows.** The written batches' aspect notes are filed under their entity first
   (`mcpd.signals.notes.file_notes`: from a root span in the batches, else the stored one,
   `reads.stored_roots`). The rows are gathered per table, the last row of each identity
   winning (across batches too, as the SQL backends' upserts in batch order do); a row without
   `received_at` takes its batch's. Every row is converted to INSERT data now, before the
   first INSERT, so a malformed row fails the call before anything is written.
3. **Projection** of every (project, trace_id) a span, score or feedback row touches: what is
   stored is read with FINAL (`reads.stored_for_projection`) before this call's rows go in,
   and this call's rows are laid over it in memory, the latest arrival of each id winning as it
   does in the replacing tables. Reading first means a new trace (the common case) reads
   nothing back. A trace row also carries the models and providers of its spans, and when the
   trace's start_time moved, a tombstone for each stored row at its old sort key (`reproject`).
   The rollups' change is worked out alongside: the stored projections and the spans replaced,
   subtracted, the new ones added (`rollups.stored_delta`), and the change of each written
   score id's live copy (`score_rollups.replace_scores`), inserted right after the trace rows.
4. **Writes**, ONE INSERT per table: spans, held spans, logs, metrics, scores, feedback, aspect
   notes, the trace rows, the facet values, and LAST the ingest keys, which are the commit
   marker. One INSERT is one block, which ClickHouse commits as one part per partition (month
   of the anchor time): a table's rows of the call appear together, except that rows spanning
   two months commit as two parts. Each INSERT carries its rows as data
   (`ClickHouseExecutor.insert`, the HTTP request body), in JSONCompactColumns with every
   time as DateTime64 text (`_insert_data`), so a call of any size fits a server's URL cap.

Between the trace rows and the ingest keys, a follower of the writes (the sessions of the
written traces, `mcpd.sessions.traces`) is told what was written (`follow`).

A call that fails part-way has written some tables and no key, so the retry of any of its
batches (same key, in whatever group) is not taken for a replay and writes the batch again.
That is harmless: every table written here is a ReplacingMergeTree keyed by the row's identity
(spans and traces since migration 0001, the other signal tables since 0003), so a second copy
replaces the first, exactly under FINAL and physically after merges. Until the retry, reads see
what the failed call wrote (there is no rollback).

Trace rows carry a version above any this process wrote before, and at least the wall clock and
the call's latest arrival time in ns (`WriterState`), so a trace's newest projection wins;
between replicas the wall clock orders them.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Literal, TypeVar, cast

from mcpd.signals.batch import SignalBatch
from mcpd.signals.facets import FacetValue, batch_facets, span_facets
from mcpd.signals.notes import file_notes
from mcpd.signals.projection import project_trace
from mcpd.signals.rollups import Delta
from mcpd.signals.rows import AspectNoteRow, FeedbackRow, ScoreRow, SpanRow
from mcpd.storage.clickhouse.executor import ClickHouseExecutor
from mcpd.storage.clickhouse.signals import columns, rollups, score_rollups
from mcpd.storage.clickhouse.signals.columns import (
    ASPECT_NOTES,
    FACET_VALUES,
    FEEDBACK,
    HELD_SPANS,
    INGEST_KEYS,
    LOGS,
    METRICS,
    ROW_ID,
    SCORES,
    SPANS,
    TRACES,
    Table,
    dump_json,
)
from mcpd.storage.clickhouse.signals.reads import (
    Groups,
    StoredKeys,
    stored_for_projection,
    stored_roots,
    stored_trace_keys,
)

R = TypeVar("R", bound=Mapping[str, Any])
IngestKey = tuple[str, str]
"""(key_project, ingest_key)."""

# How stale a facet value's `last_seen` may get before it is written again (see `WriterState`).
FACET_REFRESH_NS = 60 * 1_000_000_000
# Facet values remembered per process; past this the memory is cleared and starts again.
FACET_MEMORY = 100_000


class _Versions:
    """Trace-row versions: strictly increasing within the process (every store shares one
    counter, used under the process-wide write lock), and never below the wall clock in ns nor
    below the floor a call asks for (its latest arrival time)."""

    def __init__(self) -> None:
        self._last = 0

    def next(self, floor: int) -> int:
        self._last = max(self._last + 1, time.time_ns(), floor)
        return self._last


_VERSIONS = _Versions()


class WriterState:
    """What one store remembers between calls (used under the write lock).

    * Trace-row versions, from the process-wide counter.
    * The facet values it wrote recently and the `last_seen` it wrote them with. A value whose
      stored `last_seen` is less than FACET_REFRESH_NS older than a new sighting is not written
      again, which spares almost every call a facet INSERT (a new part for a handful of rows);
      `last_seen` may therefore lag the latest sighting by up to that much.
    """

    def __init__(self) -> None:
        self._facets: dict[FacetValue, int] = {}

    def next_version(self, floor: int = 0) -> int:
        """A version above every earlier one, at least `floor` and the wall clock in ns."""
        return _VERSIONS.next(floor)

    def facets_due(self, seen: Mapping[FacetValue, int]) -> dict[FacetValue, int]:
        """The sightings worth writing: values not written recently enough before them."""
        return {
            facet: at
            for facet, at in seen.items()
            if self._facets.get(facet, at - FACET_REFRESH_NS) <= at - FACET_REFRESH_NS
        }

    def facets_written(self, written: Mapping[FacetValue, int]) -> None:
        """Remember facet values as written (call once their INSERT succeeded)."""
        if len(self._facets) + len(written) > FACET_MEMORY:
            self._facets.clear()
        self._facets.update(written)


Follow = Callable[[Sequence[SpanRow], Sequence[Mapping[str, Any]]], None]
"""What a write tells its follower: the span rows it wrote, the touched traces' projections."""


def write_batches(
    executor: ClickHouseExecutor,
    state: WriterState,
    batches: Sequence[SignalBatch],
    follow: Follow | None = None,
) -> list[bool]:
    """`TraceStore.write_batches` (see the module docstring; the caller holds the lock). When
    spans were written, `follow` is told about them after the trace rows and before the ingest
    keys, so a failure in between leaves the batch to be written again, followed again."""
    written = _unclaimed(executor, batches)
    accepted = [batch for batch, ok in zip(batches, written, strict=True) if ok]
    if not accepted:
        return written
    file_notes(accepted, lambda project, trace_ids: stored_roots(executor, project, trace_ids))

    spans = _last_by_id("spans", _stamped(accepted, lambda batch: batch.spans))
    scores = _last_by_id("scores", _stamped(accepted, lambda batch: batch.scores))
    feedback = _last_by_id("feedback", _stamped(accepted, lambda batch: batch.feedback))
    held = [_held(span) for span in _stamped(accepted, lambda batch: batch.held_spans)]
    plan: list[tuple[Table, Sequence[Mapping[str, Any]]]] = [
        (SPANS, spans),
        (HELD_SPANS, _last_by_id("held_spans", held)),
        (LOGS, _last_by_id("logs", _stamped(accepted, lambda batch: batch.logs))),
        (METRICS, _last_by_id("metrics", _stamped(accepted, lambda batch: batch.metrics))),
        (SCORES, scores),
        (FEEDBACK, feedback),
        (ASPECT_NOTES, _last_by_id("aspect_notes", _notes(accepted))),
    ]
    sightings: dict[FacetValue, int] = {}
    for batch in accepted:
        _sighted(sightings, batch_facets(batch), batch.received_at)
    facets = state.facets_due(sightings)
    keys = [
        {
            "project": batch.key_project,
            "ingest_key": batch.ingest_key,
            "received_at": batch.received_at,
            "record_count": batch.record_count(),
        }
        for batch in accepted
        if batch.ingest_key is not None
    ]
    # Everything is converted before the first INSERT, so a malformed row writes nothing.
    prepared = [(table, _insert_data(table, rows)) for table, rows in plan if rows]
    facet_data = _insert_data(FACET_VALUES, facet_rows(facets))
    key_data = _insert_data(INGEST_KEYS, keys)

    latest = max(batch.received_at for batch in accepted)
    delta = Delta()
    traces = reproject(executor, state, spans, scores, feedback, latest, delta)
    score_rollups.replace_scores(executor, scores, delta)
    for table, data in prepared:
        _insert(executor, table, data)
    if traces:
        _insert(executor, TRACES, _insert_data(TRACES, traces))
    rollups.insert(executor, delta)
    if facets:
        _insert(executor, FACET_VALUES, facet_data)
        state.facets_written(facets)
    if follow is not None and spans:
        follow(spans, _live(traces))
    if keys:
        _insert(executor, INGEST_KEYS, key_data)
    return written


def _live(traces: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """The trace rows, without the tombstones at their old keys."""
    return [row for row in traces if not row.get("is_deleted")]


def release_held(
    executor: ClickHouseExecutor,
    state: WriterState,
    project: str,
    keep: Sequence[str],
    drop: Sequence[str],
    follow: Follow | None = None,
) -> int:
    """`TraceStore.release_held` (the caller holds the lock); returns the spans moved, which
    `follow`, when given, is told about (before the held rows are deleted).

    Order: the kept traces' held spans are read, inserted into `spans` with their traces'
    projection and facet values, and only then are the held rows deleted. A failure before the
    delete leaves them held as well as stored; the next decision moves them again, which
    replaces them. The delete takes, of the kept traces, only rows that arrived no later than
    the latest one moved (a span held meanwhile by another replica stays held, to be decided
    again), and every held row of the dropped traces.

    It is a lightweight DELETE: ClickHouse masks the rows in the parts that hold them, and by
    default (`lightweight_deletes_sync`) returns once that is done, so the next read no longer
    sees them; the rows go physically at the next merge. An ALTER TABLE ... DELETE would
    rewrite every part holding a deleted row, which is wasteful for the small, frequent deletes
    tail sampling makes. chdb runs lightweight deletes like the server does.
    """
    kept = sorted(set(keep))
    dropped = sorted(set(drop))
    if set(kept) & set(dropped):
        raise ValueError("a held trace cannot be both kept and dropped")
    moved: list[SpanRow] = []
    if kept:
        found = executor.query(
            "SELECT row, toUnixTimestamp64Nano(received_at) FROM held_spans FINAL "
            "WHERE project = {project:String} AND trace_id IN {ids:Array(String)}",
            {"project": project, "ids": kept},
        )
        for document, received_at in found:
            span = cast(SpanRow, {**columns.load_json(document), "project": project})
            if span.get("received_at") is None:
                span["received_at"] = int(received_at)
            moved.append(span)
    conditions: list[str] = []
    params: dict[str, object] = {"project": project}
    if moved:
        spans = _last_by_id("spans", moved)
        latest = max(span["received_at"] for span in spans)
        sightings: dict[FacetValue, int] = {}
        _sighted(sightings, span_facets(spans), latest)
        facets = state.facets_due(sightings)
        delta = Delta()
        traces = reproject(executor, state, spans, (), (), latest, delta)
        span_data = _insert_data(SPANS, spans)
        trace_data = _insert_data(TRACES, traces) if traces else None
        facet_data = _insert_data(FACET_VALUES, facet_rows(facets)) if facets else None
        _insert(executor, SPANS, span_data)
        if trace_data is not None:
            _insert(executor, TRACES, trace_data)
        rollups.insert(executor, delta)
        if facet_data is not None:
            _insert(executor, FACET_VALUES, facet_data)
        state.facets_written(facets)
        if follow is not None:
            follow(spans, _live(traces))
        conditions.append(
            "(trace_id IN {kept:Array(String)} "
            "AND received_at <= fromUnixTimestamp64Nano({latest:Int64}, 'UTC'))"
        )
        params.update(kept=kept, latest=latest)
    if dropped:
        conditions.append("trace_id IN {dropped:Array(String)}")
        params["dropped"] = dropped
    if conditions:
        executor.command(
            "DELETE FROM held_spans WHERE project = {project:String} "
            f"AND ({' OR '.join(conditions)})",
            params,
        )
    return len(moved)


def reproject(
    executor: ClickHouseExecutor,
    state: WriterState,
    spans: Sequence[SpanRow],
    scores: Sequence[ScoreRow],
    feedback: Sequence[FeedbackRow],
    latest: int,
    delta: Delta | None = None,
) -> list[dict[str, Any]]:
    """The trace rows (with their version) of every trace the rows about to be written touch:
    what is stored, overlaid with those rows; a trace without spans gets none.

    `traces` is ordered by (project, start_time, trace_id) (migration 0004), and a replacing
    engine only replaces rows of equal sort key. So when a trace's start_time moves (an earlier
    span arrives: a root is sent after its children), the trace gets, beside its new row, a
    tombstone (`is_deleted` = 1, same version) at each stored key with another start_time: the
    newest version of that key, which reads drop. The stored keys are read only for traces with
    stored spans: a trace row is written after its spans, so a trace without any has no row yet.
    """
    touched = {(span["project"], span["trace_id"]) for span in spans}
    touched |= {
        (row["project"], trace) for row in (*scores, *feedback) if (trace := row.get("trace_id"))
    }
    if not touched:
        return []
    wanted = sorted(touched)
    span_groups, score_groups, feedback_groups = stored_for_projection(executor, wanted)
    stored_keys = stored_trace_keys(executor, sorted(span_groups))
    if delta is not None:
        # Before the overlay: what is stored now is what the new rows replace.
        delta.rows.update(rollups.stored_delta(span_groups, spans).rows)
    _overlay(span_groups, spans, "span_id")
    _overlay(score_groups, scores, "score_id")
    _overlay(feedback_groups, feedback, "feedback_id")
    # One version for the call: each trace row is a different key, and a version only has to
    # exceed the earlier versions of its own key.
    version = state.next_version(latest)
    traces: list[dict[str, Any]] = []
    for key in wanted:
        project, trace_id = key
        trace_spans = cast(list[SpanRow], list(span_groups.get(key, {}).values()))
        row = project_trace(
            project,
            trace_id,
            trace_spans,
            cast(list[ScoreRow], list(score_groups.get(key, {}).values())),
            cast(list[FeedbackRow], list(feedback_groups.get(key, {}).values())),
        )
        if row is None:
            continue
        traces.append(
            {
                **row,
                "models": _carried(trace_spans, "model"),
                "providers": _carried(trace_spans, "provider"),
                "version": version,
                "is_deleted": 0,
            }
        )
        traces.extend(_tombstones(key, stored_keys, row["start_time"], version))
        if delta is not None:
            delta.add_trace(row)
    return traces


def _carried(spans: Iterable[SpanRow], column: Literal["model", "provider"]) -> list[str]:
    """The distinct values of a span column (`model`, `provider`) the trace's spans carry."""
    return sorted({value for span in spans if (value := span.get(column))})


def _tombstones(
    key: tuple[str, str], stored: StoredKeys, start_time: int, version: int
) -> list[dict[str, Any]]:
    """A tombstone for each stored row of the trace whose start_time is not `start_time` (only
    the sort key, and received_at for a TTL, are of use; required columns get empty values)."""
    project, trace_id = key
    return [
        {
            **dict.fromkeys(TRACES.names),
            "project": project,
            "trace_id": trace_id,
            "version": version,
            "name": "",
            "kind": "",
            "status": "",
            "start_time": stored_start,
            "span_count": 0,
            "error_count": 0,
            "model_count": 0,
            "tool_count": 0,
            "is_complete": False,
            "received_at": received_at,
            "is_deleted": 1,
        }
        for stored_start, received_at in stored.get(key, ())
        if stored_start != start_time
    ]


# The input format of every INSERT: one JSON array per column (`columns.column_data`).
INSERT_FORMAT = "JSONCompactColumns"


def _insert_data(table: Table, rows: Sequence[Mapping[str, Any]]) -> bytes:
    """The INSERT data of `rows` (`columns.column_data`), as UTF-8.

    Raises ValueError for a malformed row: `column_data`'s checks, or a string that is not
    Unicode text (a lone surrogate).
    """
    return columns.column_data(table, rows).encode()


def _insert(executor: ClickHouseExecutor, table: Table, data: bytes) -> None:
    """ONE INSERT of `_insert_data` into `table`."""
    executor.insert(table.name, table.names, data, INSERT_FORMAT)


def facet_rows(facets: Mapping[FacetValue, int]) -> list[dict[str, Any]]:
    """`facet_values` rows: each value with the time it was last seen."""
    return [
        {"project": project, "facet": facet, "key": key, "value": value, "last_seen": seen}
        for (project, facet, key, value), seen in sorted(facets.items())
    ]


def _unclaimed(executor: ClickHouseExecutor, batches: Sequence[SignalBatch]) -> list[bool]:
    """Per batch, whether to write it: it has no key, or a key neither stored nor carried by
    an earlier batch of the call."""
    keys = sorted({key for batch in batches if (key := _key_of(batch)) is not None})
    stored: set[IngestKey] = set()
    if keys:
        found = executor.query(
            "SELECT project, ingest_key FROM ingest_keys FINAL "
            "WHERE project IN {projects:Array(String)} AND ingest_key IN {keys:Array(String)} "
            "AND (project, ingest_key) IN {pairs:Array(Tuple(String, String))}",
            {
                "projects": sorted({project for project, _ in keys}),
                "keys": sorted({key for _, key in keys}),
                "pairs": keys,
            },
        )
        stored = {(str(project), str(key)) for project, key in found}
    written = []
    for batch in batches:
        key = _key_of(batch)
        written.append(key is None or key not in stored)
        if key is not None:
            stored.add(key)
    return written


def _key_of(batch: SignalBatch) -> IngestKey | None:
    return (batch.key_project, batch.ingest_key) if batch.ingest_key is not None else None


def _stamped(
    batches: Iterable[SignalBatch], rows_of: Callable[[SignalBatch], Iterable[R]]
) -> list[R]:
    """The rows `rows_of(batch)` of every batch, in order; a row without `received_at` (a
    copy) takes its batch's."""
    found: list[R] = []
    for batch in batches:
        for row in rows_of(batch):
            if row.get("received_at") is None:
                row = cast(R, {**row, "received_at": batch.received_at})
            found.append(row)
    return found


def _notes(batches: Iterable[SignalBatch]) -> list[AspectNoteRow]:
    """The batches' aspect notes, stamped, each with a sketch (None when it has none)."""
    return [
        row if "sketch" in row else cast(AspectNoteRow, {**row, "sketch": None})
        for row in _stamped(batches, lambda batch: batch.aspect_notes)
    ]


def _held(span: SpanRow) -> dict[str, Any]:
    """The `held_spans` row of a held span: its summary columns and the whole row as JSON."""
    return {
        "project": span["project"],
        "trace_id": span["trace_id"],
        "span_id": span["span_id"],
        "received_at": span["received_at"],
        "status": span["status"],
        "is_root": span["is_root"],
        "is_event": span["is_event"],
        "start_time": span["start_time"],
        "end_time": span.get("end_time"),
        "row": dump_json(span),
    }


def _sighted(into: dict[FacetValue, int], found: Iterable[FacetValue], seen: int) -> None:
    for facet in found:
        if into.get(facet, seen - 1) < seen:
            into[facet] = seen


def _overlay(groups: Groups, rows: Iterable[Mapping[str, Any]], id_name: str) -> None:
    """Lay rows about to be written over the stored ones of the same id, the later arrival
    winning (this call's row on a tie), as the replacing table will resolve them. A score or
    feedback re-sent under another trace id also leaves the group it was read into."""
    listed = [row for row in rows if row.get("trace_id")]
    if id_name != "span_id":
        moved = {row[id_name] for row in listed}
        for group in groups.values():
            for stale in moved.intersection(group):
                del group[stale]
    for row in listed:
        group = groups.setdefault((row["project"], row["trace_id"]), {})
        stored = group.get(row[id_name])
        if stored is None or row["received_at"] >= stored["received_at"]:
            group[row[id_name]] = dict(row)


def _last_by_id(table: str, rows: Sequence[R]) -> list[R]:
    """The rows, one per identity: the last occurrence wins; order is otherwise kept."""
    names = ("project", *ROW_ID[table])
    latest: dict[tuple[Any, ...], R] = {}
    for row in rows:
        latest[tuple(row[name] for name in names)] = row
    return list(rows) if len(latest) == len(rows) else list(latest.values())
