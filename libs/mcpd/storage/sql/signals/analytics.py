"""Analytics on SQLite and PostgreSQL: figures per group, and spend per time bucket.

A window that holds a whole hour is answered from the rollups (`rollups`: whole buckets from
rollup rows, the ragged edges from the rows); the statements below answer the rest, and the
edges. What is counted is `mcpd.signals.queries.GroupFigures`' contract: traces whose start is
in the window (grouped by a trace column, or not at all), or spans whose start is in the window and
whose grouping column (model, provider) is set. Each question is one statement, built from the
same parts on both backends; only the latency columns differ. PostgreSQL computes quantiles in
SQL (`percentile_cont` over an array of fractions, so one sort serves all four). SQLite has no
ordered-set aggregate, so its statement hands each group's durations back as one
comma-separated text (`group_concat`), finished by `mcpd.signals.stats.latency_figures`, which
interpolates as `percentile_cont` does: the backends give the same figures. One text per
group because a row fetched per duration costs more than the scan over many traces, while one
text, split in C, costs little; and Python sorts the integers faster than SQLite's sorter
hands them over.

Groups are ordered in Python (code point order), not by the database's collation, so SQLite and
PostgreSQL agree on the order of mixed-case keys.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, assert_never

from sqlalchemy import (
    BigInteger,
    ColumnElement,
    Connection,
    Row,
    Select,
    Table,
    case,
    func,
    literal,
    literal_column,
    null,
    select,
)
from sqlalchemy.dialects.postgresql import array

from mcpd.signals.queries import SPAN_GROUPS, CostPoint, GroupFigures, LatencyFigures, Window
from mcpd.signals.stats import NS_PER_MS, latency_figures
from mcpd.storage.sql.dialect import SqlDialect
from mcpd.storage.sql.schema.trace import spans, traces
from mcpd.storage.sql.signals import rollups

_QUANTILES = (0.50, 0.90, 0.95, 0.99)


@dataclass(frozen=True, slots=True)
class _Source:
    """The rows one analytics question is over: `table` filtered by `conditions`, grouped by
    `key` (None: one group of everything)."""

    table: Table
    key: ColumnElement[Any] | None
    conditions: tuple[ColumnElement[bool], ...]

    def select(self, *columns: ColumnElement[Any]) -> Select[Any]:
        """SELECT the group key (NULL when ungrouped) and `columns` over the source rows."""
        key = self.key if self.key is not None else null()
        return select(key.label("key"), *columns).where(*self.conditions)

    def grouped(self, statement: Select[Any]) -> Select[Any]:
        return statement if self.key is None else statement.group_by(self.key)


def _source(project: str, window: Window, group_by: str | None) -> _Source:
    """Spans that carry a SPAN_GROUPS column; traces for everything else."""
    table = spans if group_by in SPAN_GROUPS else traces
    conditions = [table.c.project == project]
    if window.start is not None:
        conditions.append(table.c.start_time >= window.start)
    if window.end is not None:
        conditions.append(table.c.start_time < window.end)
    if group_by is None:
        return _Source(table, None, tuple(conditions))
    column = table.c[group_by]
    if table is spans:
        return _Source(table, column, (*conditions, column.is_not(None)))
    # An inline '' (not a bound parameter), so the GROUP BY expression is textually the
    # selected one, as PostgreSQL requires.
    return _Source(table, func.coalesce(column, literal_column("''")), tuple(conditions))


def group_figures(
    conn: Connection, dialect: SqlDialect, project: str, window: Window, group_by: str | None
) -> list[GroupFigures]:
    """Figures per group over the window (see `TraceStore.group_figures`): from the rollups
    when the window holds a whole hour, else from the rows."""
    found = rollups.group_figures(conn, dialect, project, window, group_by)
    if found is not None:
        return found
    source = _source(project, window, group_by)
    columns = [*_sums(source.table), *_latency_columns(dialect, source.table)]
    rows = conn.execute(source.grouped(source.select(*columns)))
    figures = [_figures(row, _latency_of(dialect, row)) for row in rows]
    return sorted(figures, key=lambda group: group.key or "")


def _sums(table: Table) -> list[ColumnElement[Any]]:
    c = table.c
    span_count = func.count() if table is spans else func.sum(c.span_count)
    return [
        func.count().label("row_count"),
        func.sum(case((c.status == "error", 1), else_=0)).label("error_count"),
        span_count.label("span_count"),
        func.sum(c.input_tokens).label("input_tokens"),
        func.sum(c.output_tokens).label("output_tokens"),
        func.sum(c.total_cost).label("total_cost"),
    ]


def _figures(row: Row[Any], latency: LatencyFigures) -> GroupFigures:
    """A group's figures from its row of `_sums` (PostgreSQL sums bigints as numeric)."""
    return GroupFigures(
        key=row.key,
        count=int(row.row_count),
        error_count=int(row.error_count or 0),
        span_count=int(row.span_count or 0),
        input_tokens=int(row.input_tokens or 0),
        output_tokens=int(row.output_tokens or 0),
        total_cost=float(row.total_cost) if row.total_cost is not None else None,
        latency=latency,
    )


def _latency_columns(dialect: SqlDialect, table: Table) -> list[ColumnElement[Any]]:
    """What a group's latency is computed from: its quantiles, mean and max on PostgreSQL;
    on SQLite every duration, as one comma-separated text (a C-level split is far cheaper
    than fetching a row per duration)."""
    duration = table.c.duration_ns
    match dialect:
        case SqlDialect.POSTGRES:
            return [
                func.percentile_cont(array(_QUANTILES)).within_group(duration).label("quantiles"),
                func.avg(duration).label("mean"),
                func.max(duration).label("max"),
            ]
        case SqlDialect.SQLITE:
            return [func.group_concat(duration).label("durations")]
        case _:
            assert_never(dialect)


def _latency_of(dialect: SqlDialect, row: Row[Any]) -> LatencyFigures:
    """A group's latency from its `_latency_columns` (None: no duration in the group)."""
    match dialect:
        case SqlDialect.POSTGRES:
            if row.max is None:
                return LatencyFigures()
            p50, p90, p95, p99 = (float(value) / NS_PER_MS for value in row.quantiles)
            mean, slowest = float(row.mean) / NS_PER_MS, float(row.max) / NS_PER_MS
            return LatencyFigures(p50=p50, p90=p90, p95=p95, p99=p99, mean=mean, max=slowest)
        case SqlDialect.SQLITE:
            if row.durations is None:
                return LatencyFigures()
            return latency_figures(list(map(int, row.durations.split(","))))
        case _:
            assert_never(dialect)


def cost_points(
    conn: Connection,
    dialect: SqlDialect,
    project: str,
    window: Window,
    group_by: str | None,
    bucket_ns: int,
) -> list[CostPoint]:
    """Spend per epoch-aligned bucket and group key (see `TraceStore.cost_points`): from the
    hour rollups when the window holds a whole hour and `bucket_ns` is whole hours, else from
    the rows (the same statement on both backends)."""
    del dialect  # one statement serves both

    def raw(edge: Window) -> list[CostPoint]:
        return _raw_cost_points(conn, project, edge, group_by, bucket_ns)

    found = rollups.cost_points(conn, project, window, group_by, bucket_ns, raw)
    return found if found is not None else raw(window)


def _raw_cost_points(
    conn: Connection, project: str, window: Window, group_by: str | None, bucket_ns: int
) -> list[CostPoint]:
    source = _source(project, window, group_by)
    c = source.table.c
    # Inline, so the GROUP BY expression is textually the selected one (see `_source`).
    width = literal(bucket_ns, BigInteger, literal_execute=True)
    bucket = (c.start_time - c.start_time % width).label("bucket_start")
    statement = source.select(
        bucket,
        func.sum(c.total_cost).label("total_cost"),
        func.sum(c.input_tokens).label("input_tokens"),
        func.sum(c.output_tokens).label("output_tokens"),
    ).group_by(bucket)
    points = [_cost_point(row) for row in conn.execute(source.grouped(statement))]
    return sorted(points, key=lambda point: (point.bucket_start, point.key))


def _cost_point(row: Row[Any]) -> CostPoint:
    return CostPoint(
        bucket_start=int(row.bucket_start),
        key=row.key or "",
        total_cost=float(row.total_cost or 0.0),
        input_tokens=int(row.input_tokens or 0),
        output_tokens=int(row.output_tokens or 0),
    )
