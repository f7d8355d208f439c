"""The query service's lists on SQLite and PostgreSQL: keyset pages of traces, spans, logs,
scores and feedback, one metric's points, and facet values (`mcpd.signals.queries` documents
each question; rows come back as `reads` gives them).

Paging. Each list orders by one value column, then the row's identity, and reads `limit + 1`
rows to learn `has_more`. A nullable value column (a trace's duration or cost) is read in two
parts, each in the order an index serves: the rows with a value, then (when the page is not yet
full) the rows without one, by identity; so those come last in either direction, and a cursor
whose value is None resumes inside the second part. The cursor condition is written as
`value <= v AND (value < v OR ids < after_ids)` (for a descending list) so the first conjunct
is an index range. Every sort key has an index ending in the row's id (migration 0004), so a
page is one walk down an index that stops when the page is full: the default trace list and
the cost-sorted one take a few milliseconds at 100,000 traces on either backend.

Text search (`q`) uses the index ingest keeps (`statements` documents it): SQLite matches each
word of q as an FTS5 phrase, AND-ed; PostgreSQL matches the case-folded words, AND-ed, against
the search vector. The words are `search_words`' runs of letters and digits on both, so a q
with none (only punctuation) matches nothing: there is no word to find.

A trace filter on its spans (model, provider, q: some span of the trace) first asks how many spans
match, up to `_FEW_SPANS`: few, and their traces are named outright (looked up by key); many, and
each trace's spans are probed on the walk down the list, which fills a page after a few traces.
Either alone takes seconds at 1M spans (building the set of a common model or word; walking every
trace for a rare one). SQLite's probe is written so it looks the trace's spans up by key
(`model || ''` keeps it off the (project, model) index) and a span's FTS entry by rowid;
PostgreSQL, whose planner weighs a subquery, gets the subquery (`_has_span`).

Filters on a trace's JSON summaries and tags read the documents in SQL (`json_each` on SQLite,
`->`/`@>` on PostgreSQL) on the rows an index walk yields. Facet values are ordered by code
point on both backends (`COLLATE "C"` on PostgreSQL, whose default collation may differ from
SQLite's binary order), and a prefix is compared as a substring, so `%` and `_` are plain
characters and case counts.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, assert_never, cast

from sqlalchemy import (
    Column,
    ColumnElement,
    Connection,
    Double,
    Table,
    Text,
    and_,
    column,
    exists,
    false,
    func,
    literal,
    literal_column,
    or_,
    select,
    table,
    tuple_,
)
from sqlalchemy.dialects.postgresql import JSONB, TSQUERY
from sqlalchemy.sql.elements import UnaryExpression

from mcpd.signals.queries import (
    LOG_LEVELS,
    FeedbackQuery,
    LogQuery,
    Page,
    ScoreQuery,
    SpanQuery,
    TraceQuery,
    Window,
)
from mcpd.signals.rows import FeedbackRow, LogRow, MetricRow, ScoreRow, SpanRow, TraceRow
from mcpd.storage.sql.dialect import SqlDialect
from mcpd.storage.sql.schema.trace import (
    SEARCH_VECTOR,
    facet_values,
    feedback,
    logs,
    metrics,
    scores,
    spans,
    traces,
)
from mcpd.storage.sql.signals.reads import rows_of, select_rows
from mcpd.storage.sql.signals.statements import folded_words, fts_table, search_words

Condition = ColumnElement[bool]
# At most this many spans matching a span-side filter have their traces named in the query.
_FEW_SPANS = 10_000


@dataclass(frozen=True)
class _Order:
    """A list's order: a value column, then the row's identity, one direction for all."""

    value: Column[Any]
    ids: tuple[Column[Any], ...]
    descending: bool


def list_traces(
    conn: Connection, dialect: SqlDialect, project: str, query: TraceQuery
) -> Page[TraceRow]:
    """One page of trace rows (see `TraceQuery`)."""
    where = [
        traces.c.project == project,
        *_window(traces.c.start_time, query.window),
        *_trace_filters(dialect, query),
        *_span_filters(conn, dialect, project, query),
    ]
    order = _Order(traces.c[query.order_column], (traces.c.trace_id,), query.descending)
    rows, has_more = _page(conn, traces, where, order, query.after, query.limit)
    return Page(cast(list[TraceRow], rows), has_more)


def list_spans(
    conn: Connection, dialect: SqlDialect, project: str, query: SpanQuery
) -> Page[SpanRow]:
    """One page of spans, newest first (see `SpanQuery`)."""
    where = [
        spans.c.project == project,
        *_window(spans.c.start_time, query.window),
        *_equal(
            (spans.c.trace_id, query.trace_id),
            (spans.c.name, query.name),
            (spans.c.model, query.model),
        ),
        *_any_of(spans.c.kind, query.kinds),
        *_any_of(spans.c.status, query.statuses),
        *_text_search(dialect, spans, query.q),
    ]
    order = _Order(spans.c.start_time, (spans.c.trace_id, spans.c.span_id), descending=True)
    rows, has_more = _page(conn, spans, where, order, query.after, query.limit)
    return Page(cast(list[SpanRow], rows), has_more)


def list_logs(conn: Connection, dialect: SqlDialect, project: str, query: LogQuery) -> Page[LogRow]:
    """One page of log records, newest first (see `LogQuery`)."""
    levels = LOG_LEVELS[LOG_LEVELS.index(query.min_level) :] if query.min_level else ()
    where = [
        logs.c.project == project,
        *_window(logs.c.timestamp, query.window),
        *_any_of(logs.c.level, levels),
        *_equal((logs.c.trace_id, query.trace_id), (logs.c.span_id, query.span_id)),
        *_text_search(dialect, logs, query.q),
    ]
    order = _Order(logs.c.timestamp, (logs.c.log_id,), descending=True)
    rows, has_more = _page(conn, logs, where, order, query.after, query.limit)
    return Page(cast(list[LogRow], rows), has_more)


def list_scores(
    conn: Connection, dialect: SqlDialect, project: str, query: ScoreQuery
) -> Page[ScoreRow]:
    """One page of scores, newest first (see `ScoreQuery`)."""
    where = [
        scores.c.project == project,
        *_equal(
            (scores.c.trace_id, query.trace_id),
            (scores.c.scorer_id, query.scorer_id),
            (scores.c.source, query.source),
        ),
    ]
    order = _Order(scores.c.timestamp, (scores.c.score_id,), descending=True)
    rows, has_more = _page(conn, scores, where, order, query.after, query.limit)
    return Page(cast(list[ScoreRow], rows), has_more)


def list_feedback(
    conn: Connection, dialect: SqlDialect, project: str, query: FeedbackQuery
) -> Page[FeedbackRow]:
    """One page of feedback, newest first (see `FeedbackQuery`)."""
    where = [
        feedback.c.project == project,
        *_equal((feedback.c.trace_id, query.trace_id), (feedback.c.kind, query.kind)),
    ]
    order = _Order(feedback.c.timestamp, (feedback.c.feedback_id,), descending=True)
    rows, has_more = _page(conn, feedback, where, order, query.after, query.limit)
    return Page(cast(list[FeedbackRow], rows), has_more)


def metric_points(
    conn: Connection, dialect: SqlDialect, project: str, name: str, window: Window, *, limit: int
) -> list[MetricRow]:
    """The oldest `limit` points of one metric in `window`, oldest first (then metric_id)."""
    statement = (
        select_rows(metrics)
        .where(
            metrics.c.project == project,
            metrics.c.name == name,
            *_window(metrics.c.timestamp, window),
        )
        .order_by(metrics.c.timestamp, metrics.c.metric_id)
        .limit(limit)
    )
    return cast(list[MetricRow], rows_of(conn, statement))


def discover(
    conn: Connection,
    dialect: SqlDialect,
    project: str,
    facet: str,
    key: str,
    prefix: str | None,
    limit: int,
) -> list[tuple[str, int]]:
    """(value, last_seen) of one facet, values starting with `prefix`, by value; at most
    `limit`."""
    value = facet_values.c.value
    where = [
        facet_values.c.project == project,
        facet_values.c.facet == facet,
        facet_values.c.key == key,
    ]
    if prefix:
        where.append(func.substr(value, 1, len(prefix)) == prefix)
    statement = (
        select(value, facet_values.c.last_seen)
        .where(*where)
        .order_by(_code_point_order(dialect, value))
        .limit(limit)
    )
    return [(found, last_seen) for found, last_seen in conn.execute(statement)]


# --- paging ------------------------------------------------------------------------------------


def _page(
    conn: Connection,
    target: Table,
    where: Sequence[Condition],
    order: _Order,
    after: tuple[Any, ...] | None,
    limit: int,
) -> tuple[list[dict[str, Any]], bool]:
    """The rows after `after` (value, *ids) in `order`, at most `limit`, and whether more
    follow (see the module docstring for the two parts of a nullable order)."""
    value_after = None if after is None else after[0]
    ids_after = None if after is None else tuple(after[1:])
    rows: list[dict[str, Any]] = []
    if after is None or value_after is not None:
        valued = [*where]
        if order.value.nullable:
            valued.append(order.value.is_not(None))
        if value_after is not None and ids_after is not None:
            valued.append(_beyond_value(order, value_after, ids_after))
        statement = select_rows(target).where(*valued).order_by(*_sorting(order, order.value))
        rows = rows_of(conn, statement.limit(limit + 1))
    if order.value.nullable and len(rows) <= limit:
        unvalued = [*where, order.value.is_(None)]
        if value_after is None and ids_after is not None:
            unvalued.append(_beyond(order, tuple_(*order.ids), tuple_(*ids_after)))
        statement = select_rows(target).where(*unvalued).order_by(*_sorting(order))
        rows += rows_of(conn, statement.limit(limit + 1 - len(rows)))
    return rows[:limit], len(rows) > limit


def _sorting(order: _Order, *leading: Column[Any]) -> list[UnaryExpression[Any]]:
    columns = [*leading, *order.ids]
    return [c.desc() if order.descending else c.asc() for c in columns]


def _beyond(order: _Order, left: ColumnElement[Any], right: Any) -> Condition:
    """`left` strictly after `right` in the order's direction."""
    after: Condition = left < right if order.descending else left > right
    return after


def _beyond_value(order: _Order, value: Any, ids: tuple[Any, ...]) -> Condition:
    """Strictly after (value, *ids), with the value's side of it an index range."""
    at_or_beyond = order.value <= value if order.descending else order.value >= value
    return and_(
        at_or_beyond,
        or_(
            _beyond(order, order.value, value),
            _beyond(order, tuple_(*order.ids), tuple_(*ids)),
        ),
    )


# --- filters -----------------------------------------------------------------------------------


def _window(column: Column[Any], window: Window) -> list[Condition]:
    found = []
    if window.start is not None:
        found.append(column >= window.start)
    if window.end is not None:
        found.append(column < window.end)
    return found


def _equal(*pairs: tuple[Column[Any], Any]) -> list[Condition]:
    return [column == value for column, value in pairs if value is not None]


def _any_of(column: Column[Any], values: Sequence[str]) -> list[Condition]:
    return [column.in_(values)] if values else []


def _range(column: ColumnElement[Any], low: Any, high: Any) -> list[Condition]:
    found = []
    if low is not None:
        found.append(column >= low)
    if high is not None:
        found.append(column <= high)
    return found


def _trace_filters(dialect: SqlDialect, query: TraceQuery) -> list[Condition]:
    t = traces.c
    found = [
        *_any_of(t.status, query.statuses),
        *_any_of(t.kind, query.kinds),
        *_equal(
            (t.name, query.name),
            (t.environment, query.environment),
            (t.service_name, query.service_name),
            (t.session_id, query.session_id),
            (t.user_id, query.user_id),
        ),
        *_range(t.duration_ns, query.min_duration_ns, query.max_duration_ns),
        *_range(t.total_cost, query.min_cost, query.max_cost),
    ]
    if query.tags:
        found.append(_has_all(dialect, t.tags, query.tags))
    if query.scorer_id is not None:
        found.extend(_score_filter(dialect, query))
    if query.feedback_kind is not None:
        found.append(_feedback_filter(dialect, query.feedback_kind, query.feedback_value))
    return found


def _span_filters(
    conn: Connection, dialect: SqlDialect, project: str, query: TraceQuery
) -> list[Condition]:
    """The trace has a span with the model, one with the provider, one matching q: one
    condition each, since those may be different spans."""
    found = []
    for span_column, value in ((spans.c.model, query.model), (spans.c.provider, query.provider)):
        if value is not None:
            # The probe compares `model || ''` on SQLite, which keeps it from answering the
            # per-trace probe through the (project, model) index (every span with the model,
            # for each trace) instead of the trace's few spans by primary key.
            equal = span_column == value
            probe = span_column.concat("") == value if dialect is SqlDialect.SQLITE else equal
            found.append(_has_span(conn, dialect, project, equal, probe))
    for condition in _text_search(dialect, spans, query.q):
        found.append(_has_span(conn, dialect, project, condition, _fts_probe(dialect, query.q)))
    return found


def _fts_probe(dialect: SqlDialect, q: str | None) -> Condition | None:
    """SQLite: `q` as a probe of one span's own FTS entry (rowid and MATCH together, which
    FTS5 answers by seeking), for the walk down the list; membership in the set of every
    matching rowid costs seconds to build for a common word at 1M spans."""
    words = search_words(q or "")
    if dialect is not SqlDialect.SQLITE or not words:
        return None
    fts = table(fts_table(spans.name), column("rowid"), column("search_text"))
    phrases = " ".join('"' + word.replace('"', '""') + '"' for word in words)
    return exists().where(
        fts.c.search_text.match(phrases), fts.c.rowid == literal_column("spans.rowid")
    )


def _has_span(
    conn: Connection,
    dialect: SqlDialect,
    project: str,
    condition: Condition,
    probe: Condition | None,
) -> Condition:
    """The trace has a span of `project` meeting `condition`.

    A filter matching few spans names their traces outright (looked up by key). One matching
    many is, on SQLite, `probe` (the same test in a form fit for one span) applied to each
    trace's spans on the walk down the list, which fills a page after a few traces; either
    alone fails at 1M spans: the named set of a common model or word costs seconds to build,
    and the walk for a rare one visits every trace. PostgreSQL, whose planner weighs a
    subquery, gets the subquery.
    """
    matching = select(spans.c.trace_id).where(spans.c.project == project, condition)
    few = conn.execute(matching.limit(_FEW_SPANS + 1)).scalars().all()
    if len(few) <= _FEW_SPANS:
        return traces.c.trace_id.in_(sorted(set(few)))
    if dialect is SqlDialect.POSTGRES or probe is None:
        return traces.c.trace_id.in_(matching)
    return exists().where(
        spans.c.project == traces.c.project, spans.c.trace_id == traces.c.trace_id, probe
    )


def _score_filter(dialect: SqlDialect, query: TraceQuery) -> list[Condition]:
    assert query.scorer_id is not None
    if query.min_score is None and query.max_score is None:
        return [_has_key(dialect, traces.c.score_summary, query.scorer_id)]
    score = _json_number(dialect, traces.c.score_summary, query.scorer_id)
    return _range(score, query.min_score, query.max_score)


def _feedback_filter(dialect: SqlDialect, kind: str, value: str | None) -> Condition:
    if value is None:
        return _has_key(dialect, traces.c.feedback_summary, kind)
    return _json_number(dialect, traces.c.feedback_summary, kind, value) > 0


# --- JSON documents ----------------------------------------------------------------------------


def _json_each(document: ColumnElement[Any], name: str) -> Any:
    """SQLite's json_each over `document`, as a FROM item that may name earlier ones."""
    return func.json_each(document).table_valued("key", "value", joins_implicitly=True).alias(name)


def _has_key(dialect: SqlDialect, document: Column[Any], key: str) -> Condition:
    """The JSON object `document` has the member `key`."""
    match dialect:
        case SqlDialect.SQLITE:
            members = _json_each(document, "member")
            return exists(select(literal(1)).select_from(members).where(members.c.key == key))
        case SqlDialect.POSTGRES:
            return document.op("->")(literal(key, Text)).is_not(None)
        case _:
            assert_never(dialect)


def _json_number(dialect: SqlDialect, document: Column[Any], *path: str) -> ColumnElement[Any]:
    """The number at `path` (object member names) inside `document`; NULL when absent."""
    match dialect:
        case SqlDialect.SQLITE:
            levels = []
            source: ColumnElement[Any] = document
            for depth, _ in enumerate(path):
                level = _json_each(source, f"level{depth}")
                levels.append(level)
                source = level.c.value
            statement = select(source).select_from(*levels)
            keys = [level.c.key == key for level, key in zip(levels, path, strict=True)]
            return statement.where(*keys).scalar_subquery()
        case SqlDialect.POSTGRES:
            member: ColumnElement[Any] = document
            for key in path[:-1]:
                member = member.op("->")(literal(key, Text))
            return member.op("->>")(literal(path[-1], Text)).cast(Double)
        case _:
            assert_never(dialect)


def _has_all(dialect: SqlDialect, document: Column[Any], tags: Sequence[str]) -> Condition:
    """The JSON array `document` holds every one of `tags`."""
    match dialect:
        case SqlDialect.SQLITE:
            items = _json_each(document, "tag")
            return and_(
                *[
                    exists(select(literal(1)).select_from(items).where(items.c.value == tag))
                    for tag in tags
                ]
            )
        case SqlDialect.POSTGRES:
            return document.op("@>")(literal(list(tags), JSONB))
        case _:
            assert_never(dialect)


# --- text search and ordering ------------------------------------------------------------------


def _text_search(dialect: SqlDialect, target: Table, q: str | None) -> list[Condition]:
    """The rows of `target` (spans or logs) whose search text has every word of `q`."""
    if not q:
        return []
    match dialect:
        case SqlDialect.SQLITE:
            words = search_words(q)
            if not words:
                return [false()]
            fts = table(fts_table(target.name), column("rowid"), column("search_text"))
            phrases = " ".join('"' + word.replace('"', '""') + '"' for word in words)
            matched = select(fts.c.rowid).where(fts.c.search_text.match(phrases))
            return [literal_column(f"{target.name}.rowid").in_(matched)]
        case SqlDialect.POSTGRES:
            words = folded_words(q).split()
            if not words:
                return [false()]
            wanted = literal(" & ".join(words), Text).cast(TSQUERY)
            return [target.c[SEARCH_VECTOR].op("@@")(wanted)]
        case _:
            assert_never(dialect)


def _code_point_order(dialect: SqlDialect, value: Column[Any]) -> ColumnElement[Any]:
    match dialect:
        case SqlDialect.SQLITE:
            return value
        case SqlDialect.POSTGRES:
            return value.collate("C")
        case _:
            assert_never(dialect)
