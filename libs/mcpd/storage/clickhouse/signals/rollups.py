"""Rollups on ClickHouse (`mcpd.signals.rollups` says what a row holds): the `rollups` table of
migration 0007, an AggregatingMergeTree whose parts are `SimpleAggregateFunction(sum)` columns
and the sketch a `SimpleAggregateFunction(sumMap, Map(Int32, Int64))`, so merges add rows of
one key together and every read sums with `sum` and `sumMap`.

* **Keeping.** Not a materialized view over `spans` and `traces`: those are replacing tables,
  and a view sees every inserted version (a span re-sent when it ends, each re-projection of a
  trace), which it would count again and again. The writer knows what each version replaces (it
  reads the stored spans of the traces it touches to project them), so it inserts the change
  itself: per rollup row, the new rows' contributions less the replaced ones' (`delta_of`),
  one INSERT per call right after the trace rows. Deletes rebuild the hours they touch
  (`Rebuild`): the hours of the rows about to go are read first, and after the deletes their hour
  rows are computed again from the raw rows and their days from their hours, under the write
  lock, so no write interleaves.
* **Reading.** As on SQL: whole buckets from rollups, edges from raw rows (`plan`), None when
  the window holds no whole hour.

No transactions: a call that fails between its trace rows and its rollup rows leaves the rollups
without its change (its retry finds the rows stored and changes nothing); a rebuild of the
hours (`Rebuild.hours` then `run`) repairs them.

Score rollups (`score_rollups`) ride along: `insert` inserts the delta's score rows after its
rollup rows, and `Rebuild` notes and rebuilds the hours of the scores a delete touches.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, cast

import orjson

from mcpd.signals.projection import project_trace
from mcpd.signals.queries import SPAN_GROUPS, TRACE_GROUPS, CostPoint, GroupFigures, Window
from mcpd.signals.rollups import (
    DAY_NS,
    GAMMA,
    HOUR_NS,
    LEVELS,
    ROLLUP_KEY,
    ROLLUP_PARTS,
    WHOLE,
    Delta,
    Figures,
    Groups,
    cost_point,
    merge_bins,
    plan,
    series_plan,
)
from mcpd.signals.rows import SpanRow
from mcpd.storage.clickhouse.executor import ClickHouseExecutor
from mcpd.storage.clickhouse.signals.buckets import clear_hours, in_ranges
from mcpd.storage.clickhouse.signals.score_rollups import ScoreRebuild
from mcpd.storage.clickhouse.signals.score_rollups import insert as insert_scores

_PARTS, _KEY = ROLLUP_PARTS, ROLLUP_KEY
_COLUMNS = (*_KEY, *_PARTS, "sketch")

Groups_ = Mapping[tuple[str, str], Mapping[str, Mapping[str, Any]]]
"""Stored rows per (project, trace_id), per row id (as `reads.stored_for_projection`)."""


# --- keeping -------------------------------------------------------------------------------------


def _span(row: Mapping[str, Any], project: str) -> dict[str, Any]:
    """A span row as rollups read it (stored rows are read without their project): ClickHouse
    stores an unset model or provider as ''."""
    return {
        **row,
        "project": project,
        "model": row.get("model") or None,
        "provider": row.get("provider") or None,
    }


def stored_delta(span_groups: Groups_, spans: Sequence[Mapping[str, Any]]) -> Delta:
    """What the stored state contributes that the call's rows replace, subtracted: the stored
    projection of every trace with stored spans, and each stored span the call's spans replace
    (a stored span that arrived later than the call's copy stays, as the replacing table keeps
    it). Call before the stored groups are overlaid."""
    delta = Delta()
    for (project, trace_id), stored in span_groups.items():
        rows = cast(list[SpanRow], [_span(row, project) for row in stored.values()])
        old = project_trace(project, trace_id, rows, [], [])
        if old is not None:
            delta.add_trace(old, -1)
    for span in spans:
        project = span["project"]
        stored_span = span_groups.get((project, span["trace_id"]), {}).get(span["span_id"])
        if stored_span is None:
            delta.add_span(_span(span, project))
        elif span["received_at"] >= stored_span["received_at"]:
            delta.add_span(_span(stored_span, project), -1)
            delta.add_span(_span(span, project))
    return delta


def insert(executor: ClickHouseExecutor, delta: Delta) -> None:
    """ONE INSERT of the delta's rows (JSONEachRow; the sketch a JSON object), then one of its
    score rollup rows (`score_rollups.insert`)."""
    lines = []
    for key, figures in delta.changes():
        row = dict(zip(_KEY, key, strict=True))
        row.update({name: getattr(figures, name) for name in _PARTS})
        row["sketch"] = figures.sketch()
        lines.append(orjson.dumps(row))
    if lines:
        executor.insert("rollups", _COLUMNS, b"\n".join(lines), "JSONEachRow")
    insert_scores(executor, delta)


def _bin(value: str) -> str:
    """The sketch bin of a non-negative duration, in SQL (`mcpd.signals.rollups.sketch_bin`)."""
    return f"toInt32(if({value} = 0, 0, ceil(log({value}) / log({GAMMA!r})) + 1))"


def _parts_sql(span_count: str) -> str:
    return (
        f"count(), countIf(status = 'error'), {span_count}, sum(ifNull(input_tokens, 0)), "
        "sum(ifNull(output_tokens, 0)), count(total_cost), sum(ifNull(total_cost, 0)), "
        "count(duration_ns), sum(ifNull(duration_ns, 0)), "
        f"sumMapIf(map({_bin('assumeNotNull(duration_ns)')}, toInt64(1)), "
        "duration_ns IS NOT NULL)"
    )


def hour_rows_sql(condition: str) -> list[str]:
    """INSERTs of the hour rows computed from the raw rows matching `condition` (SQL over
    `start_time` and `project`): one over traces, one over spans."""
    dims = ", ".join(
        ["('', '')", *(f"('{name}', ifNull({name}, ''))" for name in sorted(TRACE_GROUPS))]
    )
    spans_dims = ", ".join(f"('{name}', {name})" for name in sorted(SPAN_GROUPS))
    head = f"INSERT INTO rollups ({', '.join(_COLUMNS)}) SELECT project, dim.1, {HOUR_NS}, "
    bucket = f"intDiv(toUnixTimestamp64Nano(start_time), {HOUR_NS}) * {HOUR_NS}"
    return [
        f"{head}{bucket} AS bucket, dim.2, {_parts_sql('sum(span_count)')} "
        f"FROM traces FINAL ARRAY JOIN [{dims}] AS dim "
        f"WHERE is_deleted = 0 AND {condition} GROUP BY project, dim, bucket "
        "SETTINGS optimize_move_to_prewhere_if_final = 0",
        f"{head}{bucket} AS bucket, dim.2, {_parts_sql('count()')} "
        f"FROM spans FINAL ARRAY JOIN arrayFilter(d -> d.2 != '', [{spans_dims}]) AS dim "
        f"WHERE {condition} GROUP BY project, dim, bucket "
        "SETTINGS optimize_move_to_prewhere_if_final = 0",
    ]


def day_rows_sql(condition: str) -> str:
    """The INSERT of the day rows summed from the hour rows matching `condition`."""
    sums = ", ".join(f"sum({name})" for name in _PARTS)
    return (
        f"INSERT INTO rollups ({', '.join(_COLUMNS)}) SELECT project, dimension, {DAY_NS}, "
        f"intDiv(bucket_start, {DAY_NS}) * {DAY_NS} AS day, key, {sums}, sumMap(sketch) "
        f"FROM rollups WHERE level = {HOUR_NS} AND {condition} "
        "GROUP BY project, dimension, day, key"
    )


class Rebuild:
    """The hours a delete touches, rebuilt once its rows are gone (under the write lock); those
    of scores by `scores` (`score_rollups.ScoreRebuild`)."""

    def __init__(self, executor: ClickHouseExecutor, project: str) -> None:
        self.executor = executor
        self.project = project
        self.pending: set[int] = set()
        self.scores = ScoreRebuild(executor, project)

    def note(self, table: str, condition: str, params: Mapping[str, object]) -> None:
        """Remember the hours of the rows of `table` (spans, traces or scores) matching
        `condition`."""
        if table == "scores":
            self.scores.note(condition, params)
            return
        if table not in ("spans", "traces"):
            return
        found = self.executor.query(
            f"SELECT DISTINCT intDiv(toUnixTimestamp64Nano(start_time), {HOUR_NS}) * {HOUR_NS} "
            f"FROM {table} WHERE project = {{project:String}} AND {condition}",
            {**params, "project": self.project},
        )
        self.pending.update(int(hour) for (hour,) in found)

    def run(self) -> None:
        """Compute the pending hours (and their days) again from what is stored."""
        self.scores.run()
        params = clear_hours(self.executor, "rollups", self.project, self.pending)
        if params is None:
            return
        raw = (
            "project = {project:String} AND intDiv(toUnixTimestamp64Nano(start_time), "
            f"{HOUR_NS}) * {HOUR_NS} IN {{hours:Array(Int64)}}"
        )
        for statement in hour_rows_sql(raw):
            self.executor.command(statement, params)
        self.executor.command(
            day_rows_sql(
                "project = {project:String} AND "
                f"intDiv(bucket_start, {DAY_NS}) * {DAY_NS} IN {{days:Array(Int64)}}"
            ),
            params,
        )


# --- reading -------------------------------------------------------------------------------------


def _dimension(group_by: str | None) -> str | None:
    if group_by is None:
        return WHOLE
    if group_by in TRACE_GROUPS or group_by in SPAN_GROUPS:
        return group_by
    return None


def group_figures(
    executor: ClickHouseExecutor,
    project: str,
    window: Window,
    group_by: str | None,
    raw: Callable[[Window], Any],
) -> list[GroupFigures] | None:
    """`TraceStore.group_figures` from rollups and raw edges (`raw(window)` is the edge's
    `lists._Grouped`); None when the window holds no whole hour."""
    dimension = _dimension(group_by)
    shape = plan(window)
    if dimension is None or not shape.ranges:
        return None
    params: dict[str, object] = {"project": project, "dimension": dimension}
    sums = ", ".join(f"sum({name})" for name in _PARTS)
    found = executor.query(
        f"SELECT key, {sums}, sumMap(sketch) FROM rollups WHERE project = {{project:String}} "
        f"AND dimension = {{dimension:String}} AND {in_ranges(shape.ranges, params)} "
        "GROUP BY key",
        params,
    )
    groups = Groups()
    for row in found:
        _add(groups.of(str(row[0])), row[1:10])
        merge_bins(groups.of(str(row[0])).bins, dict(row[10]).items())
    for edge in shape.raw:
        rows = raw(edge)
        edge_rows = executor.query(
            f"SELECT {rows.key} AS key, count(), countIf(status = 'error'), {rows.span_count}, "
            "sum(ifNull(input_tokens, 0)), sum(ifNull(output_tokens, 0)), count(total_cost), "
            "sum(ifNull(total_cost, 0)), groupArray(duration_ns) "
            f"FROM {rows.table} FINAL WHERE {rows.where.sql()} GROUP BY key "
            "SETTINGS optimize_move_to_prewhere_if_final = 0",
            rows.where.params,
        )
        for key, *parts, durations in edge_rows:
            figures = groups.of(str(key))
            _add(figures, (*parts, 0, 0))
            groups.add_durations(str(key), [int(value) for value in durations])
    return groups.answer(grouped=group_by is not None)


def _add(figures: Figures, parts: Sequence[Any]) -> None:
    count, errors, spans, tokens_in, tokens_out, costs, cost, durations, duration_sum = parts
    figures.count += int(count)
    figures.error_count += int(errors)
    figures.span_count += int(spans)
    figures.input_tokens += int(tokens_in)
    figures.output_tokens += int(tokens_out)
    figures.cost_count += int(costs)
    figures.total_cost += float(cost)
    figures.duration_count += int(durations)
    figures.duration_sum += int(duration_sum)


def cost_points(
    executor: ClickHouseExecutor,
    project: str,
    window: Window,
    group_by: str | None,
    bucket_ns: int,
    raw: Callable[[Window], Iterable[CostPoint]],
) -> list[CostPoint] | None:
    """`TraceStore.cost_points` from hour rollups and raw edges; None when no whole hour is
    inside or `bucket_ns` is not whole hours."""
    dimension = _dimension(group_by)
    shape = series_plan(window, bucket_ns)
    if dimension is None or not shape.ranges:
        return None
    params: dict[str, object] = {"project": project, "dimension": dimension, "width": bucket_ns}
    found = executor.query(
        "SELECT intDiv(bucket_start, {width:Int64}) * {width:Int64} AS bucket, key, "
        "sum(count), sum(cost_count), sum(total_cost), sum(input_tokens), sum(output_tokens) "
        "FROM rollups WHERE project = {project:String} AND dimension = {dimension:String} "
        f"AND {in_ranges(shape.ranges, params)} GROUP BY bucket, key",
        params,
    )
    points: dict[tuple[int, str], Figures] = {}
    for bucket, key, count, costs, cost, tokens_in, tokens_out in found:
        if not int(count):
            continue
        figures = points.setdefault((int(bucket), str(key)), Figures())
        figures.count += int(count)
        figures.cost_count += int(costs)
        figures.total_cost += float(cost)
        figures.input_tokens += int(tokens_in)
        figures.output_tokens += int(tokens_out)
    for edge in shape.raw:
        for point in raw(edge):
            figures = points.setdefault((point.bucket_start, point.key), Figures())
            figures.count += 1
            figures.cost_count += 1
            figures.total_cost += point.total_cost
            figures.input_tokens += point.input_tokens
            figures.output_tokens += point.output_tokens
    return [cost_point(bucket, key, points[(bucket, key)]) for bucket, key in sorted(points)]


assert LEVELS == (HOUR_NS, DAY_NS)  # the SQL above rebuilds exactly these two levels
