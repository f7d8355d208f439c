"""The query service's reads on ClickHouse: the lists, metric points, discovery and analytics
(`TraceStore.list_traces` ... `cost_points`; `mcpd.signals.queries` states each question).

**Tables read**, for whoever deletes from them: `traces`, `spans`, `logs`, `metrics`, `scores`,
`feedback` and `facet_values`, and nothing else: there is no list table or projection beside
them. `traces` is laid out for the trace list by migration 0004: ReplacingMergeTree(version),
PARTITION BY toYYYYMM(start_time), ORDER BY (project, start_time, trace_id); a trace whose
start_time moved has a tombstone (is_deleted = 1) at each earlier key, and its `models` and
`providers` hold the distinct models and providers of its spans.

**Exact reads.** Every read is FINAL (the newest version of each sort key), with conditions
evaluated after FINAL (`optimize_move_to_prewhere_if_final = 0`: PREWHERE would filter versions
before FINAL picks the newest), so `is_deleted = 0` drops tombstoned keys, and skip indexes in
exact mode (`use_skip_indexes_if_final_exact_mode`: the granules a skip index keeps are widened
to every newer version of their keys, so a skipped granule never hides the row FINAL would
pick). The newest traces are read in key order, and the read stops once the page is full.

**Paging** is keyset: the WHERE clause keeps the rows strictly after `after` in the list's order,
written so the leading time column bounds a primary-key range, and `limit + 1` rows are fetched
to answer `has_more`. The trace list orders by start_time, duration_ns or total_cost, NULL last
in either direction, then trace_id.

**Text search** is `substring` (`capabilities.CLICKHOUSE`): q as a whole, case-insensitively
(ILIKE, which folds non-ASCII letters too), with `%`, `_` and `\\` in q taken literally. A span
matches on its name or on a string value inside its input or output (`mcpd.signals.search`), not
on a JSON key: the raw JSON text is screened for q as JSON escapes it (a value that holds q
holds it escaped), and the string tokens of the documents that pass are unescaped and matched
one by one. A log record matches on its message; a trace when one of its spans matches.

Values are parameters bound by the executor (`{name:Type}`); the only text formatted into SQL
is column names from this module's own constants.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, cast

from mcpd.signals.queries import (
    LOG_LEVELS,
    SPAN_GROUPS,
    TRACE_GROUPS,
    CostPoint,
    FeedbackQuery,
    GroupFigures,
    LatencyFigures,
    LogQuery,
    Page,
    ScoreQuery,
    SpanQuery,
    TraceQuery,
    Window,
)
from mcpd.signals.rows import FeedbackRow, LogRow, MetricRow, ScoreRow, SpanRow, TraceRow
from mcpd.storage.clickhouse.executor import ClickHouseExecutor
from mcpd.storage.clickhouse.signals import rollups
from mcpd.storage.clickhouse.signals.columns import (
    FEEDBACK,
    LOGS,
    METRICS,
    SCORES,
    SPANS,
    TRACE_ROW,
    TRACES,
    Table,
    as_rows,
)

_SETTINGS = (
    " SETTINGS optimize_move_to_prewhere_if_final = 0, use_skip_indexes_if_final = 1,"
    " use_skip_indexes_if_final_exact_mode = 1"
)
# A JSON string token in the stored (compact) JSON text, and a colon right after it, which makes
# it an object key: group 1 is the escaped text, group 2 the colon or ''.
_JSON_STRING = r'"((?:[^"\\]|\\.)*)"(:?)'
_QUANTILES = (0.5, 0.9, 0.95, 0.99)
# A trace row that is not a tombstone (migration 0004); after FINAL, so a tombstoned key drops.
_LIVE = "is_deleted = 0"
# The parameter type of the trace list's nullable order values.
_TRACE_ORDER_TYPES = {"duration_ns": "UInt64", "total_cost": "Float64"}
_TRACE_KEY = (("start_time", "time"), ("trace_id", "String"))


class _Where:
    """The conditions of one read (ANDed) and the parameters they bind; always one project."""

    def __init__(self, project: str) -> None:
        self.conditions = ["project = {project:String}"]
        self.params: dict[str, object] = {"project": project}

    def add(self, condition: str, **params: object) -> None:
        """One more condition, with the parameters it names."""
        self.conditions.append(condition)
        self.params.update(params)

    def equal(self, column: str, value: str | None) -> None:
        """`column` is `value`, when it is given."""
        if value is not None:
            self.add(f"{column} = {{{column}:String}}", **{column: value})

    def any_of(self, column: str, values: Sequence[str]) -> None:
        """`column` is one of `values`, when there are any."""
        if values:
            self.add(f"{column} IN {{{column}:Array(String)}}", **{column: list(values)})

    def window(self, column: str, window: Window) -> None:
        """The time `column` is in the half-open window."""
        if window.start is not None:
            self.add(f"{column} >= {_time('window_start')}", window_start=window.start)
        if window.end is not None:
            self.add(f"{column} < {_time('window_end')}", window_end=window.end)

    def between(self, column: str, kind: str, low: object | None, high: object | None) -> None:
        """`column` in [low, high], each bound when given (a NULL never matches)."""
        if low is not None:
            self.add(f"{column} >= {{{column}_min:{kind}}}", **{f"{column}_min": low})
        if high is not None:
            self.add(f"{column} <= {{{column}_max:{kind}}}", **{f"{column}_max": high})

    def after(
        self,
        key: Sequence[tuple[str, str]],
        values: Sequence[object] | None,
        *,
        descending: bool = True,
    ) -> None:
        """Rows strictly after `values` in the order of `key` ((column, parameter type) pairs
        of non-NULL columns, the first a time), spelled so the first column bounds a range of
        the primary key."""
        if values is None:
            return
        beyond = "<" if descending else ">"
        refs = [_ref(f"after_{index}", kind) for index, (_, kind) in enumerate(key)]
        first, rest = key[0][0], [column for column, _ in key[1:]]
        tail = (
            f"({', '.join(rest)}) {beyond} ({', '.join(refs[1:])})"
            if len(rest) > 1
            else f"{rest[0]} {beyond} {refs[1]}"
        )
        self.add(
            f"{first} {beyond}= {refs[0]} AND ({first} {beyond} {refs[0]} OR {tail})",
            **{f"after_{index}": value for index, value in enumerate(values)},
        )

    def sql(self) -> str:
        """The WHERE clause's text."""
        return " AND ".join(self.conditions)


def _ref(name: str, kind: str) -> str:
    """A parameter reference; a time travels as Int64 nanoseconds."""
    return _time(name) if kind == "time" else f"{{{name}:{kind}}}"


def _time(name: str) -> str:
    return f"fromUnixTimestamp64Nano({{{name}:Int64}}, 'UTC')"


def _page(
    executor: ClickHouseExecutor,
    table: Table,
    where: _Where,
    order: str,
    limit: int,
    names: Sequence[str] | None = None,
) -> Page[Any]:
    """One page of `table` FINAL: `limit` rows in `order`, and whether another follows."""
    sql = (
        f"SELECT {table.select_list(names)} FROM {table.name} FINAL WHERE {where.sql()} "
        f"ORDER BY {order} LIMIT {{limit:UInt64}}" + _SETTINGS
    )
    found = executor.query(sql, {**where.params, "limit": limit + 1})
    rows = as_rows(table, found, names)
    return Page(rows=rows[:limit], has_more=len(rows) > limit)


# --- the lists ---------------------------------------------------------------------------------


def list_traces(executor: ClickHouseExecutor, project: str, query: TraceQuery) -> Page[TraceRow]:
    """`TraceStore.list_traces` (see `TraceQuery`)."""
    where = _Where(project)
    where.add(_LIVE)
    where.window("start_time", query.window)
    where.any_of("status", query.statuses)
    where.any_of("kind", query.kinds)
    for column in ("name", "environment", "service_name", "session_id", "user_id"):
        where.equal(column, getattr(query, column))
    if query.model is not None:
        where.add("has(models, {model:String})", model=query.model)
    if query.provider is not None:
        where.add("has(providers, {provider:String})", provider=query.provider)
    if query.tags:
        where.add("hasAll(tags, {tags:Array(String)})", tags=list(query.tags))
    where.between("duration_ns", "UInt64", query.min_duration_ns, query.max_duration_ns)
    where.between("total_cost", "Float64", query.min_cost, query.max_cost)
    _summary_filters(where, query)
    if query.q is not None:
        spans = _Where(project)
        # A trace's spans start no earlier than the trace: its window's start bounds them.
        spans.window("start_time", Window(start=query.window.start))
        _span_search(spans, query.q)
        where.add(f"trace_id IN (SELECT trace_id FROM spans FINAL WHERE {spans.sql()})")
        where.params.update(spans.params)
    _trace_after(where, query.order_column, query.descending, query.after)
    direction = "DESC" if query.descending else "ASC"
    order = f"{query.order_column} {direction} NULLS LAST, trace_id {direction}"
    return _page(executor, TRACES, where, order, query.limit, TRACE_ROW)


def _summary_filters(where: _Where, query: TraceQuery) -> None:
    """The score and feedback filters, on the trace's `score_summary` and `feedback_summary`."""
    if query.scorer_id is not None:
        where.add("JSONHas(score_summary, {scorer_id:String})", scorer_id=query.scorer_id)
        mean = "JSONExtractFloat(score_summary, {scorer_id:String})"
        if query.min_score is not None:
            where.add(f"{mean} >= {{min_score:Float64}}", min_score=query.min_score)
        if query.max_score is not None:
            where.add(f"{mean} <= {{max_score:Float64}}", max_score=query.max_score)
    if query.feedback_kind is not None:
        where.params["feedback_kind"] = query.feedback_kind
        if query.feedback_value is None:
            where.add("JSONHas(feedback_summary, {feedback_kind:String})")
        else:
            where.add(
                "JSONExtractInt(feedback_summary, {feedback_kind:String}, "
                "{feedback_value:String}) > 0",
                feedback_value=query.feedback_value,
            )


def _trace_after(
    where: _Where, column: str, descending: bool, after: tuple[Any, str] | None
) -> None:
    """Traces after (order value, trace_id) in the list's order, NULL values last."""
    if after is None:
        return
    value, trace_id = after
    if column == "start_time":  # never NULL
        where.after(_TRACE_KEY, after, descending=descending)
        return
    beyond = "<" if descending else ">"
    where.params["after_id"] = trace_id
    if value is None:
        where.add(f"{column} IS NULL AND trace_id {beyond} {{after_id:String}}")
        return
    ref = f"{{after_value:{_TRACE_ORDER_TYPES[column]}}}"
    where.add(
        f"({column} {beyond} {ref} OR ({column} = {ref} AND trace_id {beyond} {{after_id:String}})"
        f" OR {column} IS NULL)",
        after_value=value,
    )


def list_spans(executor: ClickHouseExecutor, project: str, query: SpanQuery) -> Page[SpanRow]:
    """`TraceStore.list_spans`: newest first (see `SpanQuery`)."""
    where = _Where(project)
    where.window("start_time", query.window)
    where.equal("trace_id", query.trace_id)
    where.any_of("kind", query.kinds)
    where.any_of("status", query.statuses)
    where.equal("name", query.name)
    where.equal("model", query.model)
    if query.q is not None:
        _span_search(where, query.q)
    key = (("start_time", "time"), ("trace_id", "String"), ("span_id", "String"))
    where.after(key, query.after)
    order = "start_time DESC, trace_id DESC, span_id DESC"
    return _page(executor, SPANS, where, order, query.limit)


def list_logs(executor: ClickHouseExecutor, project: str, query: LogQuery) -> Page[LogRow]:
    """`TraceStore.list_logs`: newest first (see `LogQuery`)."""
    where = _Where(project)
    where.window("timestamp", query.window)
    if query.min_level is not None:
        where.any_of("level", LOG_LEVELS[LOG_LEVELS.index(query.min_level) :])
    where.equal("trace_id", query.trace_id)
    where.equal("span_id", query.span_id)
    if query.q is not None:
        where.add("message ILIKE {q_like:String}", q_like=_like(query.q))
    where.after((("timestamp", "time"), ("log_id", "String")), query.after)
    order = "timestamp DESC, log_id DESC"
    return _page(executor, LOGS, where, order, query.limit)


def list_scores(executor: ClickHouseExecutor, project: str, query: ScoreQuery) -> Page[ScoreRow]:
    """`TraceStore.list_scores`: newest first."""
    where = _Where(project)
    where.equal("trace_id", query.trace_id)
    where.equal("scorer_id", query.scorer_id)
    where.equal("source", query.source)
    where.after((("timestamp", "time"), ("score_id", "String")), query.after)
    order = "timestamp DESC, score_id DESC"
    return _page(executor, SCORES, where, order, query.limit)


def list_feedback(
    executor: ClickHouseExecutor, project: str, query: FeedbackQuery
) -> Page[FeedbackRow]:
    """`TraceStore.list_feedback`: newest first."""
    where = _Where(project)
    where.equal("trace_id", query.trace_id)
    where.equal("kind", query.kind)
    where.after((("timestamp", "time"), ("feedback_id", "String")), query.after)
    order = "timestamp DESC, feedback_id DESC"
    return _page(executor, FEEDBACK, where, order, query.limit)


def metric_points(
    executor: ClickHouseExecutor, project: str, name: str, window: Window, *, limit: int
) -> list[MetricRow]:
    """`TraceStore.metric_points`: the oldest `limit` points of one metric in the window."""
    where = _Where(project)
    where.equal("name", name)
    where.window("timestamp", window)
    sql = (
        f"SELECT {METRICS.select_list()} FROM metrics FINAL WHERE {where.sql()} "
        "ORDER BY timestamp, metric_id LIMIT {limit:UInt64}" + _SETTINGS
    )
    found = executor.query(sql, {**where.params, "limit": limit})
    return cast(list[MetricRow], as_rows(METRICS, found))


def discover(
    executor: ClickHouseExecutor,
    project: str,
    facet: str,
    key: str,
    prefix: str | None,
    limit: int,
) -> list[tuple[str, int]]:
    """`TraceStore.discover`: (value, last_seen) of one facet, by value."""
    where = _Where(project)
    where.equal("facet", facet)
    where.equal("key", key)
    if prefix is not None:
        where.add("startsWith(value, {prefix:String})", prefix=prefix)
    found = executor.query(
        "SELECT value, toUnixTimestamp64Nano(last_seen) FROM facet_values FINAL "
        f"WHERE {where.sql()} ORDER BY value LIMIT {{limit:UInt64}}" + _SETTINGS,
        {**where.params, "limit": limit},
    )
    return [(str(value), int(seen)) for value, seen in found]


# --- text search -------------------------------------------------------------------------------


def _span_search(where: _Where, q: str) -> None:
    """A span's name, or a string value in its input or output, holds q (module docstring)."""
    where.add(
        f"(name ILIKE {{q_like:String}} OR {_json_values_match('input')} "
        f"OR {_json_values_match('output')})",
        q_like=_like(q),
        q_escaped=_like(json.dumps(q, ensure_ascii=False)[1:-1]),
        json_string=_JSON_STRING,
    )


def _json_values_match(column: str) -> str:
    """A string value (not a key) of the JSON document in `column` holds q. The cheap screen on
    the escaped text comes first: ClickHouse evaluates the token match only where it passes."""
    token = "JSONExtractString(concat('\"', token[1], '\"'))"
    return (
        f"({column} ILIKE {{q_escaped:String}} AND arrayExists(token -> token[2] = '' "
        f"AND {token} ILIKE {{q_like:String}}, extractAllGroups({column}, {{json_string:String}})))"
    )


def _like(text: str) -> str:
    """An ILIKE pattern matching `text` anywhere, its wildcards and backslashes literal."""
    escaped = text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return f"%{escaped}%"


# --- analytics ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Grouped:
    """The rows analytics sums over: which table, its group key and the span count of a row."""

    table: str
    key: str
    span_count: str
    where: _Where


def _grouped(project: str, window: Window, group_by: str | None) -> _Grouped:
    """Traces in the window (ungrouped, or grouped by a trace column), or the spans in the
    window that carry the span column grouped by (see `GroupFigures`)."""
    if group_by is not None and group_by not in SPAN_GROUPS | TRACE_GROUPS:
        raise ValueError(f"cannot group by {group_by!r}")  # it becomes SQL text below
    where = _Where(project)
    where.window("start_time", window)
    if group_by in SPAN_GROUPS:
        where.add(f"{group_by} != ''")
        return _Grouped("spans", group_by, "count()", where)
    where.add(_LIVE)
    return _Grouped("traces", group_by or "''", "sum(span_count)", where)


def group_figures(
    executor: ClickHouseExecutor, project: str, window: Window, group_by: str | None
) -> list[GroupFigures]:
    """`TraceStore.group_figures`: one row (key None) ungrouped, else one per key, by key.
    Latency quantiles are quantileExactInclusive: linear interpolation between the two nearest
    observations, PostgreSQL's percentile_cont. A window holding a whole hour is answered
    from the rollups (`rollups.group_figures`), its edges from the rows."""
    if group_by is not None and group_by not in SPAN_GROUPS | TRACE_GROUPS:
        raise ValueError(f"cannot group by {group_by!r}")
    answered = rollups.group_figures(
        executor, project, window, group_by, lambda edge: _grouped(project, edge, group_by)
    )
    if answered is not None:
        return answered
    rows = _grouped(project, window, group_by)
    levels = ", ".join(str(level) for level in _QUANTILES)
    grouping = "" if group_by is None else " GROUP BY key ORDER BY key"
    found = executor.query(
        f"SELECT {rows.key} AS key, count(), countIf(status = 'error'), {rows.span_count}, "
        "ifNull(sum(input_tokens), 0), ifNull(sum(output_tokens), 0), sum(total_cost), "
        # Over no duration the quantiles are NaN: [] instead, which reads as None.
        f"if(count(duration_ns) > 0, quantilesExactInclusive({levels})(duration_ns / 1e6), []), "
        "avg(duration_ns / 1e6), max(duration_ns / 1e6) "
        f"FROM {rows.table} FINAL WHERE {rows.where.sql()}{grouping}{_SETTINGS}",
        rows.where.params,
    )
    return [_figures(row, grouped=group_by is not None) for row in found]


def _figures(row: Sequence[Any], *, grouped: bool) -> GroupFigures:
    key, count, errors, spans, tokens_in, tokens_out, cost, quantiles, mean, longest = row
    p50, p90, p95, p99 = (_optional_float(value) for value in quantiles or (None,) * 4)
    return GroupFigures(
        key=str(key) if grouped else None,
        count=int(count),
        error_count=int(errors),
        span_count=int(spans),
        input_tokens=int(tokens_in),
        output_tokens=int(tokens_out),
        total_cost=_optional_float(cost),
        latency=LatencyFigures(
            p50=p50,
            p90=p90,
            p95=p95,
            p99=p99,
            mean=_optional_float(mean),
            max=_optional_float(longest),
        ),
    )


def _optional_float(value: Any) -> float | None:
    return None if value is None else float(value)


def cost_points(
    executor: ClickHouseExecutor,
    project: str,
    window: Window,
    group_by: str | None,
    bucket_ns: int,
) -> list[CostPoint]:
    """`TraceStore.cost_points`: spend per epoch-aligned bucket and key, by bucket then key;
    from the hour rollups when the window holds a whole hour and `bucket_ns` is whole hours
    (`rollups.cost_points`), the edges from the rows."""
    answered = rollups.cost_points(
        executor,
        project,
        window,
        group_by,
        bucket_ns,
        lambda edge: _raw_cost_points(executor, project, edge, group_by, bucket_ns),
    )
    return (
        answered
        if answered is not None
        else _raw_cost_points(executor, project, window, group_by, bucket_ns)
    )


def _raw_cost_points(
    executor: ClickHouseExecutor,
    project: str,
    window: Window,
    group_by: str | None,
    bucket_ns: int,
) -> list[CostPoint]:
    rows = _grouped(project, window, group_by)
    start = "toUnixTimestamp64Nano(start_time)"
    found = executor.query(
        f"SELECT {start} - positiveModulo({start}, {{bucket_ns:Int64}}) AS bucket, "
        f"{rows.key} AS key, ifNull(sum(total_cost), 0), ifNull(sum(input_tokens), 0), "
        f"ifNull(sum(output_tokens), 0) FROM {rows.table} FINAL WHERE {rows.where.sql()} "
        "GROUP BY bucket, key ORDER BY bucket, key" + _SETTINGS,
        {**rows.where.params, "bucket_ns": bucket_ns},
    )
    return [
        CostPoint(
            bucket_start=int(bucket),
            key=str(key),
            total_cost=float(cost),
            input_tokens=int(tokens_in),
            output_tokens=int(tokens_out),
        )
        for bucket, key, cost, tokens_in, tokens_out in found
    ]
