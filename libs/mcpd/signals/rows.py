"""Rows: the trace store's columns as Python values (see the package docstring).

Conventions, identical for every backend:

* keys are the column names of `mcpd.storage.sql.schema.trace` (Correlation, TokenUsage totals
  and Cost flattened; `project` is `correlation.project`);
* times are int nanoseconds since the Unix epoch, UTC;
* enumerations are the spec's lowercase value names (`agent_run`, `error`);
* JSON documents (`input`, `output`, `attributes`, `metadata`, `error`, `links`, `fields`,
  `labels`, `buckets`, `value`, `model_parameters`, `usage_details`, summaries) are Python
  objects (dict, list, str, number, bool), or None when absent;
* `usage_details` is `{"input": {<InputTokenDetails field>: int}, "output": {...}}` holding
  only the fields the producer reported;
* an absent optional field is None (never "" or 0, which are real values);
* `tags` is a list of strings or None.

A TypedDict per table documents the keys; `total=False` because a row is built up field by
field, but writers fill every key (None where absent) before a row reaches a store.
"""

from __future__ import annotations

from typing import Any, TypedDict

MIN_TIME_NS = 0
MAX_TIME_NS = 2**63 - 1
"""The times every store can hold: int64 nanoseconds from the Unix epoch (1970-01-01 to
2262-04-11), the range of SQLite's and PostgreSQL's BIGINT and ClickHouse's DateTime64(9)."""


def storable_time(value: int) -> bool:
    """Whether every store can hold this time (`MIN_TIME_NS` to `MAX_TIME_NS`)."""
    return MIN_TIME_NS <= value <= MAX_TIME_NS


class CorrelationColumns(TypedDict, total=False):
    """Correlation, flattened: on every signal row."""

    project: str
    environment: str | None
    service_name: str | None
    service_version: str | None
    session_id: str | None
    thread_id: str | None
    user_id: str | None  # always the keyed hash by the time a row reaches a store
    resource_id: str | None
    run_id: str | None
    request_id: str | None
    experiment_id: str | None
    release: str | None


class UsageColumns(TypedDict, total=False):
    """TokenUsage: totals as columns, details as JSON."""

    input_tokens: int | None
    output_tokens: int | None
    total_tokens: int | None
    usage_details: dict[str, dict[str, int]] | None


class CostColumns(TypedDict, total=False):
    """Cost, flattened; all None when the row carries no cost."""

    cost_currency: str | None
    input_cost: float | None
    output_cost: float | None
    total_cost: float | None
    cost_price_book: str | None
    cost_is_estimated: bool | None


class SpanRow(CorrelationColumns, UsageColumns, CostColumns, total=False):
    """A row of `spans`."""

    trace_id: str
    span_id: str
    parent_span_id: str | None
    external_parent_span_id: str | None
    name: str
    kind: str
    status: str
    start_time: int
    end_time: int | None
    duration_ns: int | None
    is_root: bool
    is_event: bool
    entity_kind: str | None
    entity_id: str | None
    entity_name: str | None
    input: Any
    output: Any
    attributes: Any
    metadata: Any
    model_parameters: dict[str, Any] | None
    error: dict[str, Any] | None
    links: list[dict[str, Any]] | None
    tags: list[str] | None
    model: str | None
    provider: str | None
    received_at: int
    ingest_key: str | None


SESSION_SPAN_COLUMNS: tuple[str, ...] = (
    "project",
    "trace_id",
    "span_id",
    "parent_span_id",
    "name",
    "kind",
    "status",
    "start_time",
    "end_time",
    "is_root",
    "is_event",
    "entity_name",
    "input",
    "output",
    "error",
    "model",
    "service_name",
    "session_id",
)
"""The columns of the trace sessions' read-back of a trace's spans: what a trace's session is
made of (`services.ingest.trace_sessions`). Not
the attributes, the rendered head or the usage: a read-back may hold thousands of spans, and
reading every column of each would cost more than mapping them."""


class TraceRow(CorrelationColumns, UsageColumns, CostColumns, total=False):
    """A row of `traces`: the projection of a trace's spans (see `projection`)."""

    trace_id: str
    root_span_id: str | None
    name: str
    kind: str
    status: str
    start_time: int
    end_time: int | None
    duration_ns: int | None
    span_count: int
    error_count: int
    model_count: int
    tool_count: int
    tags: list[str] | None
    score_summary: dict[str, Any] | None
    feedback_summary: dict[str, Any] | None
    is_complete: bool
    received_at: int


class LogRow(CorrelationColumns, total=False):
    """A row of `logs`."""

    log_id: str
    trace_id: str | None
    span_id: str | None
    timestamp: int
    level: str
    message: str
    fields: Any
    logger: str | None
    received_at: int


class MetricRow(CorrelationColumns, total=False):
    """A row of `metrics`."""

    metric_id: str
    name: str
    kind: str
    value: float
    unit: str | None
    timestamp: int
    labels: dict[str, Any] | None
    buckets: Any
    trace_id: str | None
    span_id: str | None
    received_at: int


class ScoreRow(CorrelationColumns, CostColumns, total=False):
    """A row of `scores`."""

    score_id: str
    trace_id: str | None
    span_id: str | None
    scorer_id: str
    scorer_version: str | None
    source: str
    value: float
    min: float | None
    max: float | None
    label: str | None
    reason: str | None
    score_trace_id: str | None
    metadata: Any
    timestamp: int
    received_at: int


class FeedbackRow(CorrelationColumns, total=False):
    """A row of `feedback`."""

    feedback_id: str
    trace_id: str | None
    span_id: str | None
    kind: str
    value: Any
    comment: str | None
    author_id: str | None
    author_kind: str | None
    timestamp: int
    metadata: Any
    received_at: int


class AspectNoteRow(CorrelationColumns, total=False):
    """A row of `aspect_notes`."""

    note_id: str
    trace_id: str
    aspect: str
    text: str
    definition_version: int
    model: str | None
    created_at: int
    received_at: int
    # Filed when written (`mcpd.signals.notes`); the stored sketch (`mcpd.themes.encode`).
    entity_kind: str | None
    entity_name: str | None
    sketch: bytes | None
