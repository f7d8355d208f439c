"""Reading signals back from ClickHouse: projection inputs, held traces, one trace's records,
one session's spans.

Every read is scoped by project and uses FINAL, which resolves the replacing engines at read
time (the newest version of each row identity), so reads are exact right after a write, before
any merge. A row whose sort key changed between two sends (a span re-sent with another start
time, a log with another timestamp) is two rows to ClickHouse; reads here fold them by identity,
keeping the latest arrival.

Lookups by trace id are pruned by the tables' bloom-filter skip indexes. They are used under
FINAL (`use_skip_indexes_if_final`) only where the trace id is part of the sort key, because then
every version of a row has the same trace id and skipping a granule cannot hide a newer version.

`traces` is ordered by (project, start_time, trace_id) since migration 0004: a trace whose
start_time moved has a tombstone at its old key (`writes.reproject`), which is that key's newest
version, so reads keep `is_deleted = 0` after FINAL.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, cast

from mcpd.signals.batch import HeldTrace, TraceRecords
from mcpd.signals.notes import Root, root_of
from mcpd.signals.projection import (
    PROJECTION_FEEDBACK_COLUMNS,
    PROJECTION_SCORE_COLUMNS,
    PROJECTION_SPAN_COLUMNS,
    order_spans,
)
from mcpd.signals.rows import (
    SESSION_SPAN_COLUMNS,
    CorrelationColumns,
    FeedbackRow,
    LogRow,
    ScoreRow,
    SpanRow,
    TraceRow,
)
from mcpd.storage.clickhouse.executor import ClickHouseExecutor
from mcpd.storage.clickhouse.signals.columns import (
    FEEDBACK,
    LOGS,
    ROW_ID,
    SCORES,
    SPANS,
    TRACE_ROW,
    TRACES,
    Table,
    as_rows,
)

TraceKey = tuple[str, str]
"""(project, trace_id)."""
Groups = dict[TraceKey, dict[str, dict[str, Any]]]
"""Rows per trace, keyed by their id within the trace (span id, score id, feedback id)."""
StoredKeys = dict[TraceKey, list[tuple[int, int]]]
"""The sort keys of stored trace rows, per trace: (start_time, received_at) of each."""

# The span columns the writer reads back: the projection's, and the models and providers the
# trace row carries beside it (migration 0004).
_STORED_SPAN_COLUMNS = (*PROJECTION_SPAN_COLUMNS, "model", "provider", "duration_ns")

# Skip indexes under FINAL: safe where trace_id is in the sort key (see the module docstring).
# WHERE stays after FINAL (a condition on a column outside the sort key must not be moved into
# PREWHERE, where it would filter row versions before FINAL picks the newest).
_FINAL_SETTINGS = " SETTINGS optimize_move_to_prewhere_if_final = 0"
_SKIP_UNDER_FINAL = _FINAL_SETTINGS + ", use_skip_indexes_if_final = 1"
_PRUNABLE = frozenset({"spans", "logs", "feedback", "traces"})


def stored_for_projection(
    executor: ClickHouseExecutor, wanted: Sequence[TraceKey]
) -> tuple[Groups, Groups, Groups]:
    """What is stored for each wanted trace of what `project_trace` reads: its spans, scores and
    feedback (only the projection's columns, plus `received_at`, and a span's model, provider
    and duration, which rollups read), each group keyed by row id."""
    where, params = _traces_filter(wanted)
    return (
        _grouped(executor, SPANS, _STORED_SPAN_COLUMNS, where, params),
        _grouped(executor, SCORES, PROJECTION_SCORE_COLUMNS, where, params),
        _grouped(executor, FEEDBACK, PROJECTION_FEEDBACK_COLUMNS, where, params),
    )


def stored_trace_keys(executor: ClickHouseExecutor, wanted: Sequence[TraceKey]) -> StoredKeys:
    """The sort key of each live stored row of the wanted traces. One per trace, unless a move
    of its start_time was never tombstoned (a call that failed part-way, or two replicas that
    re-projected the trace at once): then each, so the next re-projection removes them all."""
    if not wanted:
        return {}
    where, params = _traces_filter(wanted)
    found = executor.query(
        "SELECT project, trace_id, toUnixTimestamp64Nano(start_time), "
        f"toUnixTimestamp64Nano(received_at) FROM traces FINAL WHERE {where} AND is_deleted = 0"
        + _SKIP_UNDER_FINAL,
        params,
    )
    keys: StoredKeys = {}
    for project, trace_id, start_time, received_at in found:
        keys.setdefault((str(project), str(trace_id)), []).append(
            (int(start_time), int(received_at))
        )
    return keys


def held_traces(executor: ClickHouseExecutor) -> list[HeldTrace]:
    """Every trace with held spans, summarised from the holding table; the earliest first
    arrival first (as `mcpd.signals.projection.summarize_held` summarises, in SQL here)."""
    # The root is the root span with the earliest (start, span id), as the projection picks
    # it. -1 stands for its missing end: aggregate functions skip NULL arguments, which would
    # hide that the root is still running.
    found = executor.query(
        "SELECT project, trace_id, toUnixTimestamp64Nano(min(received_at)) AS first, count(), "
        "countIf(status = 'error'), countIf(is_root), "
        "argMinIf(toUnixTimestamp64Nano(start_time), (start_time, span_id), is_root), "
        "argMinIf(ifNull(toUnixTimestamp64Nano(end_time), -1), (start_time, span_id), is_root), "
        "countIf(NOT is_event AND end_time IS NULL) "
        "FROM held_spans FINAL GROUP BY project, trace_id ORDER BY first, project, trace_id"
    )
    traces = []
    for project, trace_id, first, spans, errors, roots, start, end, open_spans in found:
        has_root = int(roots) > 0
        traces.append(
            HeldTrace(
                project=str(project),
                trace_id=str(trace_id),
                first_received_at=int(first),
                span_count=int(spans),
                error_count=int(errors),
                root_start_time=int(start) if has_root else None,
                root_end_time=int(end) if has_root and int(end) >= 0 else None,
                open_count=int(open_spans),
            )
        )
    return traces


def trace_records(
    executor: ClickHouseExecutor,
    project: str,
    trace_id: str,
    *,
    logs: bool,
    scores: bool,
    feedback: bool,
) -> TraceRecords | None:
    """One trace of one project and what hangs off it, in `TraceRecords` order."""
    params: dict[str, object] = {"project": project, "trace_id": trace_id}
    where = "project = {project:String} AND trace_id = {trace_id:String}"
    # The newest version, should a trace have two live rows (see `stored_trace_keys`).
    found = executor.query(
        f"SELECT {TRACES.select_list(TRACE_ROW)} FROM traces FINAL WHERE {where} "
        "AND is_deleted = 0 ORDER BY version DESC LIMIT 1" + _SKIP_UNDER_FINAL,
        params,
    )
    if not found:
        return None

    def timed(table: Table, wanted: bool) -> list[dict[str, Any]]:
        if not wanted:
            return []
        rows = _select(executor, table, None, where, params)
        id_name = ROW_ID[table.name][-1]
        return sorted(rows, key=lambda row: (row["timestamp"], row[id_name]))

    return TraceRecords(
        trace=cast(TraceRow, as_rows(TRACES, found, TRACE_ROW)[0]),
        spans=order_spans(cast(list[SpanRow], _select(executor, SPANS, None, where, params))),
        logs=cast(list[LogRow], timed(LOGS, logs)),
        scores=cast(list[ScoreRow], timed(SCORES, scores)),
        feedback=cast(list[FeedbackRow], timed(FEEDBACK, feedback)),
    )


def trace_spans(
    executor: ClickHouseExecutor, project: str, trace_ids: Sequence[str]
) -> list[SpanRow]:
    """Every stored span of these traces (the latest arrival of each span id), with the columns
    `SESSION_SPAN_COLUMNS`, in no particular order."""
    if not trace_ids:
        return []
    sql = (
        f"SELECT {SPANS.select_list(SESSION_SPAN_COLUMNS)} FROM ("
        "SELECT * FROM spans FINAL WHERE project = {project:String} "
        "AND trace_id IN {ids:Array(String)} "
        "ORDER BY received_at DESC LIMIT 1 BY trace_id, span_id)" + _SKIP_UNDER_FINAL
    )
    found = executor.query(sql, {"project": project, "ids": sorted(set(trace_ids))})
    return cast(list[SpanRow], as_rows(SPANS, found, SESSION_SPAN_COLUMNS))


# What a note takes from its trace's root span (`mcpd.signals.notes`).
_ROOT_COLUMNS = (
    "trace_id",
    "entity_kind",
    "entity_name",
    *(name for name in CorrelationColumns.__annotations__ if name != "project"),
)


def stored_roots(
    executor: ClickHouseExecutor, project: str, trace_ids: Sequence[str]
) -> dict[str, Root]:
    """The stored root spans of these traces (the latest arrival of each), as notes are filed
    from them (`mcpd.signals.notes.RootLookup`)."""
    if not trace_ids:
        return {}
    sql = (
        f"SELECT {SPANS.select_list(_ROOT_COLUMNS)} FROM spans FINAL "
        "WHERE project = {project:String} AND trace_id IN {ids:Array(String)} AND is_root "
        "ORDER BY received_at DESC LIMIT 1 BY trace_id" + _SKIP_UNDER_FINAL
    )
    found = executor.query(sql, {"project": project, "ids": sorted(set(trace_ids))})
    return {row["trace_id"]: root_of(row) for row in as_rows(SPANS, found, _ROOT_COLUMNS)}


def session_traces(executor: ClickHouseExecutor, project: str, session_id: str) -> list[str]:
    """The ids of the traces with a span that carries (or carried) this session id."""
    found = executor.query(
        "SELECT DISTINCT trace_id FROM spans "
        "WHERE project = {project:String} AND session_id = {session_id:String}",
        {"project": project, "session_id": session_id},
    )
    return sorted(str(row[0]) for row in found)


def facet_value_count(executor: ClickHouseExecutor, project: str, facet: str, key: str) -> int:
    """How many distinct values `facet_values` holds for (project, facet, key)."""
    found = executor.query(
        "SELECT count() FROM facet_values FINAL WHERE project = {project:String} "
        "AND facet = {facet:String} AND key = {key:String}",
        {"project": project, "facet": facet, "key": key},
    )
    return int(found[0][0]) if found else 0


def _traces_filter(wanted: Sequence[TraceKey]) -> tuple[str, dict[str, object]]:
    projects = sorted({project for project, _ in wanted})
    params: dict[str, object] = {
        "projects": projects,
        "trace_ids": sorted({trace_id for _, trace_id in wanted}),
    }
    where = "project IN {projects:Array(String)} AND trace_id IN {trace_ids:Array(String)}"
    if len(projects) > 1:
        # Several projects: the pairs, so one project's trace id never selects another's.
        where += " AND (project, trace_id) IN {pairs:Array(Tuple(String, String))}"
        params["pairs"] = list(wanted)
    return where, params


def _select(
    executor: ClickHouseExecutor,
    table: Table,
    names: Sequence[str] | None,
    where: str,
    params: Mapping[str, object],
) -> list[dict[str, Any]]:
    """Rows of `table` FINAL matching `where`, one per identity (the latest arrival)."""
    selected = tuple(names or table.names)
    read = selected if "received_at" in selected else (*selected, "received_at")
    sql = f"SELECT {table.select_list(read)} FROM {table.name} FINAL WHERE {where}"
    sql += _SKIP_UNDER_FINAL if table.name in _PRUNABLE else _FINAL_SETTINGS
    rows = as_rows(table, executor.query(sql, params), read)
    return _latest(rows, ("project", *ROW_ID[table.name]))


def _latest(rows: Sequence[dict[str, Any]], identity: Sequence[str]) -> list[dict[str, Any]]:
    """One row per identity: the one with the latest `received_at` (the later one on a tie)."""
    latest: dict[tuple[Any, ...], dict[str, Any]] = {}
    for row in rows:
        key = tuple(row[name] for name in identity)
        held = latest.get(key)
        if held is None or row["received_at"] >= held["received_at"]:
            latest[key] = row
    return list(latest.values()) if len(latest) < len(rows) else list(rows)


def _grouped(
    executor: ClickHouseExecutor,
    table: Table,
    names: Sequence[str],
    where: str,
    params: Mapping[str, object],
) -> Groups:
    read = tuple(names) if "project" in names else ("project", *names)
    id_name = ROW_ID[table.name][-1]
    groups: Groups = {}
    for row in _select(executor, table, read, where, params):
        project = row["project"] if "project" in names else row.pop("project")
        groups.setdefault((project, row["trace_id"]), {})[row[id_name]] = row
    return groups
