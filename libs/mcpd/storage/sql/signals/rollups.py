"""Rollups on SQLite and PostgreSQL: kept in the transaction of every write and delete, read by
the analytics statements (`mcpd.signals.rollups` says what a row holds).

* **Keeping.** A write reads the stored rows it replaces (the touched traces' rows, the stored
  versions of the spans it writes that carry a model or provider) before it writes, and adds to
  the rollups the new rows' contributions less the stored ones' (`Delta`), in one upsert per
  write whose conflict clause adds every part, the sketch's bins included (merged by the
  database's JSON functions). Deletes subtract what they delete, read in the same transaction
  (`subtract_traces`, `subtract_spans`), and a re-projection after a delete is a write like any
  other (`replace_traces`). Rows are upserted in key order after every other row a transaction
  locks, so on PostgreSQL two writers take rollup row locks in one order and only add: no lost
  update, no deadlock. What a transaction reads of the rows it replaces is under its traces'
  advisory locks, so no other writer changes them in between.
* **Reading.** `group_figures` and `cost_points` answer a window's whole buckets from rollup rows
  and its ragged edges from the raw rows (`plan`); None when the window holds no whole hour
  (the caller computes everything from the raw rows, exactly, as before).
* `rebuild` recomputes every row from the stored traces and spans (the migration's backfill).
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, assert_never

import orjson
from sqlalchemy import (
    BigInteger,
    ColumnElement,
    Connection,
    Select,
    TextClause,
    and_,
    bindparam,
    case,
    delete,
    func,
    literal,
    literal_column,
    or_,
    select,
    text,
)
from sqlalchemy.dialects.postgresql import aggregate_order_by

from mcpd.signals.queries import SPAN_GROUPS, TRACE_GROUPS, CostPoint, GroupFigures, Window
from mcpd.signals.rollups import (
    HOUR_NS,
    ROLLUP_KEY,
    ROLLUP_PARTS,
    SPAN_COLUMNS,
    TRACE_COLUMNS,
    WHOLE,
    Delta,
    Figures,
    Groups,
    Plan,
    Range,
    cost_point,
    merge_bins,
    plan,
    series_plan,
)
from mcpd.storage.sql.dialect import SqlDialect
from mcpd.storage.sql.schema.rollups import rollups
from mcpd.storage.sql.schema.trace import spans, traces
from mcpd.storage.sql.signals import score_rollups
from mcpd.storage.sql.signals.reproject import TraceKey, chunks

Row = Mapping[str, Any]

_PARTS, _KEY = ROLLUP_PARTS, ROLLUP_KEY


# --- keeping -----------------------------------------------------------------------------------


def stored_traces(conn: Connection, keys: Iterable[TraceKey]) -> list[dict[str, Any]]:
    """The rollup columns of the stored trace rows of `keys` (none for a new trace)."""
    found: list[dict[str, Any]] = []
    for project, trace_ids in _by_project(keys).items():
        for chunk in chunks(trace_ids):
            result = conn.execute(
                _stored_traces_statement(), {"project": project, "ids": list(chunk)}
            )
            found.extend({"project": project, **row} for row in result.mappings())
    return found


def stored_spans(
    conn: Connection, keys: Iterable[TraceKey], span_keys: set[tuple[str, str, str]] | None
) -> list[dict[str, Any]]:
    """The rollup columns of the stored spans of the traces `keys` that carry a model or a
    provider; only those whose (project, trace_id, span_id) is in `span_keys` unless None."""
    found: list[dict[str, Any]] = []
    for project, trace_ids in _by_project(keys).items():
        for chunk in chunks(trace_ids):
            result = conn.execute(
                _stored_spans_statement(), {"project": project, "ids": list(chunk)}
            )
            for row in result.mappings():
                if span_keys is None or (project, row["trace_id"], row["span_id"]) in span_keys:
                    found.append({"project": project, **row})
    return found


@functools.cache
def _stored_traces_statement() -> Select[Any]:
    return select(*[traces.c[name] for name in TRACE_COLUMNS]).where(
        traces.c.project == bindparam("project"),
        traces.c.trace_id.in_(bindparam("ids", expanding=True)),
    )


@functools.cache
def _stored_spans_statement() -> Select[Any]:
    return select(*[spans.c[name] for name in SPAN_COLUMNS]).where(
        spans.c.project == bindparam("project"),
        spans.c.trace_id.in_(bindparam("ids", expanding=True)),
        or_(*[spans.c[name].is_not(None) for name in sorted(SPAN_GROUPS)]),
    )


def _by_project(keys: Iterable[TraceKey]) -> dict[str, list[str]]:
    grouped: dict[str, list[str]] = {}
    for project, trace_id in sorted(set(keys)):
        grouped.setdefault(project, []).append(trace_id)
    return grouped


def replace_traces(
    conn: Connection,
    dialect: SqlDialect,
    projected: Sequence[Row],
    keys: Iterable[TraceKey],
    delta: Delta | None = None,
) -> Delta:
    """Into `delta` (a new one when None): the projection rows `projected` less the stored
    rows of `keys` (read now, before the caller writes)."""
    delta = delta if delta is not None else Delta()
    delta.add_traces(stored_traces(conn, keys), -1)
    delta.add_traces(projected, 1)
    return delta


def subtract_traces(
    conn: Connection, dialect: SqlDialect, project: str, trace_ids: Sequence[str]
) -> None:
    """Before the traces are deleted whole: subtract their rows and their spans."""
    if not trace_ids:
        return
    keys = [(project, trace_id) for trace_id in trace_ids]
    delta = Delta()
    delta.add_traces(stored_traces(conn, keys), -1)
    delta.add_spans(stored_spans(conn, keys, None), -1)
    apply(conn, dialect, delta)


def subtract_spans(
    conn: Connection, dialect: SqlDialect, project: str, identities: Sequence[tuple[str, str]]
) -> None:
    """Before the spans (trace_id, span_id) are deleted: subtract those that count."""
    if not identities:
        return
    wanted = {(project, trace_id, span_id) for trace_id, span_id in identities}
    keys = {(project, trace_id) for trace_id, _ in identities}
    delta = Delta()
    delta.add_spans(stored_spans(conn, keys, wanted), -1)
    apply(conn, dialect, delta)


def apply(conn: Connection, dialect: SqlDialect, delta: Delta) -> None:
    """Add the delta to the rollup rows, then its score parts to the score rollup rows
    (`score_rollups.apply`), each in key order; rows left counting nothing go."""
    params: list[dict[str, Any]] = []
    emptied: list[dict[str, Any]] = []
    for key, figures in delta.changes():
        row = dict(zip(_KEY, key, strict=True))
        params.append(
            {
                **row,
                **{name: getattr(figures, name) for name in _PARTS},
                "sketch": orjson.dumps(figures.sketch()).decode(),
            }
        )
        if figures.count < 0:
            emptied.append(row)
    if params:
        conn.execute(_upsert(dialect), params)
    if emptied:
        conn.execute(_delete_empty(), emptied)
    score_rollups.apply(conn, dialect, delta)


@functools.cache
def _upsert(dialect: SqlDialect) -> TextClause:
    """INSERT one rollup row, or add every part to the stored one (bins merged in SQL)."""
    columns = [*_KEY, *_PARTS, "sketch"]
    added = ", ".join(f"{name} = rollups.{name} + excluded.{name}" for name in _PARTS)
    match dialect:
        case SqlDialect.SQLITE:
            values = ", ".join(f":{name}" for name in columns)
            merged = (
                "(SELECT coalesce(json_group_object(k, n), '{}') FROM (SELECT key AS k, "
                "sum(value) AS n FROM (SELECT key, value FROM json_each(rollups.sketch) "
                "UNION ALL SELECT key, value FROM json_each(excluded.sketch)) "
                "GROUP BY key HAVING sum(value) <> 0))"
            )
        case SqlDialect.POSTGRES:
            values = ", ".join(
                "CAST(:sketch AS JSONB)" if name == "sketch" else f":{name}" for name in columns
            )
            merged = (
                "(SELECT coalesce(jsonb_object_agg(k, n), '{}'::jsonb) FROM (SELECT k, "
                "sum(n)::bigint AS n FROM (SELECT key AS k, value::bigint AS n "
                "FROM jsonb_each_text(rollups.sketch) UNION ALL SELECT key, value::bigint "
                "FROM jsonb_each_text(excluded.sketch)) AS parts GROUP BY k "
                "HAVING sum(n) <> 0) AS bins)"
            )
        case _:
            assert_never(dialect)
    return text(
        f"INSERT INTO rollups ({', '.join(columns)}) VALUES ({values}) "
        f"ON CONFLICT ({', '.join(_KEY)}) DO UPDATE SET {added}, sketch = {merged}"
    )


@functools.cache
def _delete_empty() -> TextClause:
    where = " AND ".join(f"{name} = :{name}" for name in _KEY)
    return text(f"DELETE FROM rollups WHERE {where} AND count = 0 AND duration_count = 0")


def rebuild(conn: Connection, dialect: SqlDialect) -> None:
    """Every rollup row again, from the stored traces and spans (the migration's backfill);
    a project at a time, a chunk of rows at a time."""
    conn.execute(delete(rollups))
    projects = list(conn.execute(select(traces.c.project).distinct()).scalars())
    for project in sorted(projects):
        delta = Delta()
        trace_rows = select(*[traces.c[name] for name in TRACE_COLUMNS]).where(
            traces.c.project == project
        )
        for row in conn.execute(trace_rows).mappings():
            delta.add_trace({"project": project, **row})
        span_rows = select(*[spans.c[name] for name in SPAN_COLUMNS]).where(
            spans.c.project == project,
            or_(*[spans.c[name].is_not(None) for name in sorted(SPAN_GROUPS)]),
        )
        for row in conn.execute(span_rows).mappings():
            delta.add_span({"project": project, **row})
        apply(conn, dialect, delta)


# --- reading -----------------------------------------------------------------------------------


def _dimension(group_by: str | None) -> str | None:
    """The rollup dimension of a `group_by` (None: not one rollups keep)."""
    if group_by is None:
        return WHOLE
    if group_by in TRACE_GROUPS or group_by in SPAN_GROUPS:
        return group_by
    return None


def _in_ranges(ranges: Sequence[Range]) -> ColumnElement[bool]:
    clauses = []
    for part in ranges:
        conditions = [rollups.c.level == part.level]
        if part.start is not None:
            conditions.append(rollups.c.bucket_start >= part.start)
        if part.end is not None:
            conditions.append(rollups.c.bucket_start < part.end)
        clauses.append(and_(*conditions))
    return or_(*clauses)


def group_figures(
    conn: Connection, dialect: SqlDialect, project: str, window: Window, group_by: str | None
) -> list[GroupFigures] | None:
    """`TraceStore.group_figures` from rollups and the window's edges; None when the window
    holds no whole hour (or rollups do not keep `group_by`)."""
    dimension = _dimension(group_by)
    shape = plan(window)
    if dimension is None or not shape.ranges:
        return None
    groups = Groups()
    parts = [rollups.c[name].label(f"part_{name}") for name in _PARTS]
    statement = select(rollups.c.key, *parts, rollups.c.sketch).where(
        rollups.c.project == project, rollups.c.dimension == dimension, _in_ranges(shape.ranges)
    )
    for row in conn.execute(statement):
        figures = groups.of(row.key)
        _add_parts(figures, row)
        sketch = row.sketch
        merge_bins(
            figures.bins, (orjson.loads(sketch) if isinstance(sketch, str) else sketch).items()
        )
    for edge in shape.raw:
        _raw_parts(conn, dialect, project, edge, group_by, groups)
    return groups.answer(grouped=group_by is not None)


def _add_parts(figures: Figures, row: Any) -> None:
    figures.count += int(row.part_count)
    figures.error_count += int(row.part_error_count)
    figures.span_count += int(row.part_span_count)
    figures.input_tokens += int(row.part_input_tokens)
    figures.output_tokens += int(row.part_output_tokens)
    figures.cost_count += int(row.part_cost_count)
    figures.total_cost += float(row.part_total_cost)
    figures.duration_count += int(row.part_duration_count)
    figures.duration_sum += int(row.part_duration_sum)


def _source(
    project: str, window: Window, group_by: str | None
) -> tuple[Any, ColumnElement[Any], list[ColumnElement[bool]]]:
    """The raw rows a group_by counts (as `analytics._source`): table, key, conditions."""
    table = spans if group_by in SPAN_GROUPS else traces
    conditions: list[ColumnElement[bool]] = [table.c.project == project]
    if window.start is not None:
        conditions.append(table.c.start_time >= window.start)
    if window.end is not None:
        conditions.append(table.c.start_time < window.end)
    if group_by is None:
        return table, literal_column("''"), conditions
    column = table.c[group_by]
    if table is spans:
        return table, column, [*conditions, column.is_not(None)]
    return table, func.coalesce(column, literal_column("''")), conditions


def _raw_parts(
    conn: Connection,
    dialect: SqlDialect,
    project: str,
    window: Window,
    group_by: str | None,
    groups: Groups,
) -> None:
    """Add the raw rows of `window` (an edge) to `groups`, durations one by one."""
    table, key, conditions = _source(project, window, group_by)
    c = table.c
    duration = c.duration_ns
    match dialect:
        case SqlDialect.POSTGRES:
            durations: ColumnElement[Any] = func.array_agg(aggregate_order_by(duration, duration))
        case SqlDialect.SQLITE:
            durations = func.group_concat(duration)
        case _:
            assert_never(dialect)
    span_count = func.count() if table is spans else func.sum(c.span_count)
    statement = select(
        key.label("key"),
        func.count().label("row_count"),
        func.sum(case((c.status == "error", 1), else_=0)).label("error_count"),
        span_count.label("span_count"),
        func.sum(c.input_tokens).label("input_tokens"),
        func.sum(c.output_tokens).label("output_tokens"),
        func.count(c.total_cost).label("cost_count"),
        func.sum(c.total_cost).label("total_cost"),
        durations.label("durations"),
    ).where(*conditions)
    if group_by is not None:
        statement = statement.group_by(key)
    for row in conn.execute(statement):
        figures = groups.of(row.key or "")
        figures.count += int(row.row_count)
        figures.error_count += int(row.error_count or 0)
        figures.span_count += int(row.span_count or 0)
        figures.input_tokens += int(row.input_tokens or 0)
        figures.output_tokens += int(row.output_tokens or 0)
        figures.cost_count += int(row.cost_count or 0)
        figures.total_cost += float(row.total_cost or 0.0)
        if isinstance(row.durations, str):
            found = [int(value) for value in row.durations.split(",")]
        else:
            found = [int(value) for value in row.durations or () if value is not None]
        groups.add_durations(row.key or "", found)


def cost_points(
    conn: Connection,
    project: str,
    window: Window,
    group_by: str | None,
    bucket_ns: int,
    raw: Any,
) -> list[CostPoint] | None:
    """`TraceStore.cost_points` from hour rollups and the window's edges (`raw(window)` gives
    an edge's points); None when no whole hour is inside or `bucket_ns` is not whole hours."""
    dimension = _dimension(group_by)
    shape: Plan = series_plan(window, bucket_ns)
    if dimension is None or not shape.ranges:
        return None
    width = literal(bucket_ns, BigInteger, literal_execute=True)
    bucket = (rollups.c.bucket_start - rollups.c.bucket_start % width).label("bucket")
    statement = (
        select(
            bucket,
            rollups.c.key,
            func.sum(rollups.c.count).label("row_count"),
            func.sum(rollups.c.cost_count).label("cost_count"),
            func.sum(rollups.c.total_cost).label("total_cost"),
            func.sum(rollups.c.input_tokens).label("input_tokens"),
            func.sum(rollups.c.output_tokens).label("output_tokens"),
        )
        .where(
            rollups.c.project == project,
            rollups.c.dimension == dimension,
            rollups.c.level == HOUR_NS,
            _in_ranges(shape.ranges),
        )
        .group_by(bucket, rollups.c.key)
    )
    points: dict[tuple[int, str], Figures] = {}
    for row in conn.execute(statement):
        if not int(row.row_count):
            continue
        figures = points.setdefault((int(row.bucket), row.key), Figures())
        figures.count += int(row.row_count)
        figures.cost_count += int(row.cost_count)
        figures.total_cost += float(row.total_cost)
        figures.input_tokens += int(row.input_tokens)
        figures.output_tokens += int(row.output_tokens)
    for edge in shape.raw:
        for point in raw(edge):
            figures = points.setdefault((point.bucket_start, point.key), Figures())
            figures.count += 1
            figures.cost_count += 1
            figures.total_cost += point.total_cost
            figures.input_tokens += point.input_tokens
            figures.output_tokens += point.output_tokens
    return [
        cost_point(bucket_start, key, points[(bucket_start, key)])
        for bucket_start, key in sorted(points)
    ]
