"""What the query service asks a trace store, as backend-neutral values.

The query service turns a request (filters, an opaque cursor, a page size) into one of these
and hands it to the store; every backend answers the same question the same way, and the one
behaviour suite (tests/libs/storage/test_query_store.py) holds them to it. Conventions are the
rows' (`mcpd.signals.rows`): times are int nanoseconds, enumerations the spec's lowercase
names, `user_id` already the keyed hash the store holds.

Keyset paging: a list is ordered by a sort key that ends in the row's identity, so it is total;
`after` is the sort key of the last row of the previous page, and the next page is the rows
strictly after it in that order. A store fetches `limit + 1` rows to answer `has_more`. Rows
that arrive while a caller pages are never repeated and never skipped unless their own sort
value is before the cursor (a trace whose cost grows as spans arrive may move).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Generic, Literal, TypeVar

Row = TypeVar("Row")

LOG_LEVELS: tuple[str, ...] = ("trace", "debug", "info", "warn", "error", "fatal")
"""LogLevel in severity order; a level filter keeps this level and every one after it."""

TRACE_ORDER_COLUMNS: dict[str, str] = {
    "start_time": "start_time",
    "duration": "duration_ns",
    "cost": "total_cost",
}
"""`order_by` names (ListTracesRequest) -> the traces column they sort on."""

SPAN_GROUPS: frozenset[str] = frozenset({"model", "provider"})
"""Analytics/cost dimensions that live on spans: grouped over the spans that carry them
(model calls), so a trace that used two models counts in both groups."""

TRACE_GROUPS: frozenset[str] = frozenset(
    {"name", "kind", "status", "service_name", "service_version", "environment", "release"}
)
"""Analytics/cost dimensions that live on the trace row: grouped over traces."""

STAT_SIGNALS: tuple[str, ...] = ("spans", "logs", "metrics", "scores", "feedback")
"""The signals a retention window applies to (`spans` also covers traces and aspect notes)."""


@dataclass(frozen=True)
class Window:
    """A half-open time range [start, end) in ns; None leaves that side open."""

    start: int | None = None
    end: int | None = None


@dataclass(frozen=True)
class Page(Generic[Row]):
    """One page of rows in the query's order; `has_more` when another row follows."""

    rows: list[Row]
    has_more: bool


@dataclass(frozen=True)
class TraceQuery:
    """ListTraces. Every set field narrows.

    Window is on `start_time`. `statuses`/`kinds` are the trace's (root's) values, any of them.
    `model`/`provider`: some span of the trace carries it. `tags`: the trace carries all of
    them. `min/max_duration_ns` on `duration_ns` and `min/max_cost` on `total_cost`, inclusive;
    a trace without the value does not match a range on it. `scorer_id` with `min_score` /
    `max_score` (inclusive) on `score_summary[scorer_id]` (a trace without that scorer does not
    match); `scorer_id` alone: the trace has a score from it. `feedback_kind` alone: the trace
    has feedback of that kind; with `feedback_value`: `feedback_summary[kind][value] > 0`.
    `q`: the backend's text search (see `StoreCapabilities.text_search`) matched against one
    span of the trace (its name, and the string values inside its input and output):
    `words` = every word of q appears as a whole word, case folded; `substring` = q as a whole
    appears case-insensitively.

    Order: `order_column` (`start_time`, `duration_ns` or `total_cost`), then `trace_id`, both
    descending when `descending`; rows without a value in `order_column` come LAST in either
    direction. `after` = (order value or None, trace_id) of the previous page's last row.
    """

    window: Window = field(default_factory=Window)
    statuses: tuple[str, ...] = ()
    kinds: tuple[str, ...] = ()
    name: str | None = None
    model: str | None = None
    provider: str | None = None
    tags: tuple[str, ...] = ()
    environment: str | None = None
    service_name: str | None = None
    session_id: str | None = None
    user_id: str | None = None
    min_duration_ns: int | None = None
    max_duration_ns: int | None = None
    min_cost: float | None = None
    max_cost: float | None = None
    scorer_id: str | None = None
    min_score: float | None = None
    max_score: float | None = None
    feedback_kind: str | None = None
    feedback_value: str | None = None
    q: str | None = None
    order_column: Literal["start_time", "duration_ns", "total_cost"] = "start_time"
    descending: bool = True
    after: tuple[Any, str] | None = None
    limit: int = 50


@dataclass(frozen=True)
class SpanQuery:
    """ListSpans. Window on `start_time`; `q` as in TraceQuery, on the span itself.

    Order: start_time, trace_id, span_id, all descending (newest first); `after` is that
    triple of the previous page's last row."""

    window: Window = field(default_factory=Window)
    trace_id: str | None = None
    kinds: tuple[str, ...] = ()
    statuses: tuple[str, ...] = ()
    name: str | None = None
    model: str | None = None
    q: str | None = None
    after: tuple[int, str, str] | None = None
    limit: int = 50


@dataclass(frozen=True)
class LogQuery:
    """ListLogs. Window on `timestamp`; `min_level` keeps that level and above (LOG_LEVELS);
    `q` searches `message` with the backend's text search.

    Order: timestamp, log_id, both descending; `after` = (timestamp, log_id)."""

    window: Window = field(default_factory=Window)
    min_level: str | None = None
    trace_id: str | None = None
    span_id: str | None = None
    q: str | None = None
    after: tuple[int, str] | None = None
    limit: int = 50


@dataclass(frozen=True)
class ScoreQuery:
    """ListScores. Order: timestamp, score_id, both descending; `after` = (timestamp, score_id)."""

    trace_id: str | None = None
    scorer_id: str | None = None
    source: str | None = None
    after: tuple[int, str] | None = None
    limit: int = 50


@dataclass(frozen=True)
class FeedbackQuery:
    """ListFeedback. Order: timestamp, feedback_id, both descending; `after` likewise."""

    trace_id: str | None = None
    kind: str | None = None
    after: tuple[int, str] | None = None
    limit: int = 50


@dataclass(frozen=True)
class LatencyFigures:
    """A latency distribution in milliseconds; quantiles interpolate linearly between the two
    nearest observations (PostgreSQL's percentile_cont). All None when nothing was measured."""

    p50: float | None = None
    p90: float | None = None
    p95: float | None = None
    p99: float | None = None
    mean: float | None = None
    max: float | None = None


@dataclass(frozen=True)
class GroupFigures:
    """Figures for one group (or for the whole window when `key` is None).

    Over traces (no group, or a TRACE_GROUPS dimension) whose start_time is in the window:
    `count` traces, `error_count` with status error, `span_count` the sum of their span_count,
    tokens and cost summed over their rows (`total_cost` None when no trace carried a cost),
    `latency` over their duration_ns. Over spans (a SPAN_GROUPS dimension) in the window whose
    column is set: the same figures over those spans (`span_count` = `count`). A row whose
    dimension is unset falls in the group with key "".
    """

    key: str | None
    count: int
    error_count: int
    span_count: int
    input_tokens: int
    output_tokens: int
    total_cost: float | None
    latency: LatencyFigures


@dataclass(frozen=True)
class CostPoint:
    """Spend in one bucket (start in ns, aligned to the Unix epoch) for one group key ("" when
    ungrouped), summed over the same rows as GroupFigures."""

    bucket_start: int
    key: str
    total_cost: float
    input_tokens: int
    output_tokens: int


@dataclass(frozen=True)
class ScoreStats:
    """The scores of one scorer whose `timestamp` is in a window: how many, and the sum of
    their values (`mean` is the one over the other)."""

    count: int = 0
    value_sum: float = 0.0

    @property
    def mean(self) -> float | None:
        """The mean value; None when the window holds no score."""
        return self.value_sum / self.count if self.count else None


@dataclass(frozen=True)
class DeltaPosition:
    """Where a delta poll resumes: the arrival sequence, then the row's identity within it.

    Rows come in (seq, key) order and a poll returns those strictly after the position. `key`
    is the row's identity as a tuple of strings (traces: (trace_id,); spans: (trace_id,
    span_id); logs: (log_id,)); `()` sorts before every key, so (s, ()) means "every row of
    sequence s is still to come"."""

    seq: int
    key: tuple[str, ...] = ()


@dataclass(frozen=True)
class DeltaPage:
    """Rows (trace, span or log rows) in arrival order, the position after the last of them
    (unchanged when there are none), and whether more rows were already waiting."""

    rows: list[dict[str, Any]]
    position: DeltaPosition
    has_more: bool


@dataclass(frozen=True)
class ErasureSubject:
    """Whose data to erase: rows whose `user_id` is any of `user_ids` (the keyed hash, and the
    value as given, for rows stored before hashing or by a path that does not hash), and, when
    `session_id` is set, rows whose `session_id` is it. Either or both."""

    user_ids: tuple[str, ...] = ()
    session_id: str | None = None


@dataclass(frozen=True)
class ErasureCounts:
    """What an erasure matched in the trace store, per table. `traces` counts trace rows of
    traces erased whole (every trace with a matching span, all its spans and what hangs off
    it); the other counts also include rows matched on their own correlation. `sessions` counts
    session read-model sessions removed. `dataset_items` counts the dataset items captured from
    the erased traces and emptied in place, `datasets` the datasets they sit in (sorted).
    `theme_labels` counts theme labels copied from erased notes and blanked, `theme_examples`
    the erased notes taken out of themes. `deletes_pending` when the backend applies deletes
    after returning (ClickHouse)."""

    traces: int = 0
    spans: int = 0
    logs: int = 0
    metrics: int = 0
    scores: int = 0
    feedback: int = 0
    aspect_notes: int = 0
    sessions: int = 0
    dataset_items: int = 0
    datasets: tuple[str, ...] = ()
    theme_labels: int = 0
    theme_examples: int = 0
    deletes_pending: bool = False
