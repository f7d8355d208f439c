"""Complete rows for tests: every key present, as a store receives them, with overrides."""

from __future__ import annotations

from typing import Any, cast

from mcpd.signals.rows import (
    AspectNoteRow,
    FeedbackRow,
    LogRow,
    MetricRow,
    ScoreRow,
    SpanRow,
)

# 2026-01-01T00:00:00Z plus a nanosecond tail, so a lossy time conversion would show.
T0 = 1_767_225_600_000_000_123
MS = 1_000_000

CORRELATION: dict[str, Any] = {
    "environment": None,
    "service_name": None,
    "service_version": None,
    "session_id": None,
    "thread_id": None,
    "user_id": None,
    "resource_id": None,
    "run_id": None,
    "request_id": None,
    "experiment_id": None,
    "release": None,
}
NO_USAGE: dict[str, Any] = {
    "input_tokens": None,
    "output_tokens": None,
    "total_tokens": None,
    "usage_details": None,
}
NO_COST: dict[str, Any] = {
    "cost_currency": None,
    "input_cost": None,
    "output_cost": None,
    "total_cost": None,
    "cost_price_book": None,
    "cost_is_estimated": None,
}


def span(span_id: str, **overrides: Any) -> SpanRow:
    """A span of trace `t1` in project `p`, started at T0 and ended 10 ms later."""
    row: dict[str, Any] = {
        "project": "p",
        **CORRELATION,
        **NO_USAGE,
        **NO_COST,
        "trace_id": "t1",
        "span_id": span_id,
        "parent_span_id": None,
        "external_parent_span_id": None,
        "name": f"span {span_id}",
        "kind": "generic",
        "status": "ok",
        "start_time": T0,
        "end_time": T0 + 10 * MS,
        "duration_ns": 10 * MS,
        "is_root": False,
        "is_event": False,
        "entity_kind": None,
        "entity_id": None,
        "entity_name": None,
        "input": None,
        "output": None,
        "attributes": None,
        "metadata": None,
        "model_parameters": None,
        "error": None,
        "links": None,
        "tags": None,
        "model": None,
        "provider": None,
        "received_at": T0 + 50 * MS,
        "ingest_key": None,
    }
    row.update(overrides)
    return cast(SpanRow, row)


def log(log_id: str, **overrides: Any) -> LogRow:
    """A log line of trace `t1` in project `p`."""
    row: dict[str, Any] = {
        "project": "p",
        **CORRELATION,
        "log_id": log_id,
        "trace_id": "t1",
        "span_id": None,
        "timestamp": T0,
        "level": "info",
        "message": f"log {log_id}",
        "fields": None,
        "logger": None,
        "received_at": T0 + 50 * MS,
    }
    row.update(overrides)
    return cast(LogRow, row)


def metric(metric_id: str, **overrides: Any) -> MetricRow:
    """A gauge point in project `p`."""
    row: dict[str, Any] = {
        "project": "p",
        **CORRELATION,
        "metric_id": metric_id,
        "name": "queue.depth",
        "kind": "gauge",
        "value": 3.0,
        "unit": None,
        "timestamp": T0,
        "labels": None,
        "buckets": None,
        "trace_id": None,
        "span_id": None,
        "received_at": T0 + 50 * MS,
    }
    row.update(overrides)
    return cast(MetricRow, row)


def score(score_id: str, **overrides: Any) -> ScoreRow:
    """A live score of trace `t1` in project `p`."""
    row: dict[str, Any] = {
        "project": "p",
        **CORRELATION,
        **NO_COST,
        "score_id": score_id,
        "trace_id": "t1",
        "span_id": None,
        "scorer_id": "relevance",
        "scorer_version": None,
        "source": "live",
        "value": 0.5,
        "min": None,
        "max": None,
        "label": None,
        "reason": None,
        "score_trace_id": None,
        "metadata": None,
        "timestamp": T0,
        "received_at": T0 + 50 * MS,
    }
    row.update(overrides)
    return cast(ScoreRow, row)


def feedback(feedback_id: str, **overrides: Any) -> FeedbackRow:
    """A thumbs-up on trace `t1` in project `p`."""
    row: dict[str, Any] = {
        "project": "p",
        **CORRELATION,
        "feedback_id": feedback_id,
        "trace_id": "t1",
        "span_id": None,
        "kind": "thumbs",
        "value": "up",
        "comment": None,
        "author_id": None,
        "author_kind": None,
        "timestamp": T0,
        "metadata": None,
        "received_at": T0 + 50 * MS,
    }
    row.update(overrides)
    return cast(FeedbackRow, row)


def aspect_note(note_id: str, **overrides: Any) -> AspectNoteRow:
    """A goal note on trace `t1` in project `p`."""
    row: dict[str, Any] = {
        "project": "p",
        **CORRELATION,
        "note_id": note_id,
        "trace_id": "t1",
        "aspect": "goal",
        "text": "The user wanted a refund.",
        "definition_version": 1,
        "model": None,
        "created_at": T0,
        "received_at": T0 + 50 * MS,
        "sketch": None,
    }
    row.update(overrides)
    return cast(AspectNoteRow, row)
