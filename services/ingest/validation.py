"""Per-record checks: what makes a row storable, and the normalisation done on the way.

Each `check_*` takes one row of `mcpd.signals.rows`, normalises it in place (lowercase hex
ids, derived fields such as `duration_ns` and `is_root`) and returns None, or raises
`InvalidRecordError` with a message the sender can act on: it names the field, says what was
expected and what came. Validation is per record, so one bad record never costs the others
their place.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping
from typing import Any

from mcpd.runtime.errors import InvalidArgument, quoted
from mcpd.signals.rows import (
    AspectNoteRow,
    FeedbackRow,
    LogRow,
    MetricRow,
    ScoreRow,
    SpanRow,
    storable_time,
)
from mcpd.storage.aspect_records import AspectRecord

_HEX32 = re.compile(r"[0-9a-f]{32}")
_HEX16 = re.compile(r"[0-9a-f]{16}")
_ZERO32 = "0" * 32
_ZERO16 = "0" * 16
MAX_ID_LENGTH = 256
MAX_NAME_LENGTH = 1024
MAX_TAGS = 64

# Label keys that identify one request, user or run. Each would make a series per value, so
# the cardinality filter refuses them on sight (they stay queryable on the signal itself).
UNBOUNDED_LABEL_KEYS = frozenset(
    {
        "user_id",
        "user.id",
        "enduser.id",
        "session_id",
        "session.id",
        "request_id",
        "request.id",
        "trace_id",
        "span_id",
        "run_id",
        "thread_id",
        "conversation_id",
        "gen_ai.conversation.id",
        "http.url",
        "url.full",
    }
)
# How many distinct values one label key may take in a project before new values are refused.
MAX_LABEL_VALUES = 1000
MAX_LABELS = 32


class InvalidRecordError(InvalidArgument):
    """One record cannot be stored: `field` names the field at fault (`trace_id`,
    `labels.user_id`), and the message, which starts with it, is for the sender."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message, field=field)


def _require(condition: bool, field: str, message: str) -> None:
    if not condition:
        raise InvalidRecordError(field, message)


def _trace_id(value: str | None, field: str, *, required: bool) -> str | None:
    # Messages are built only on failure: this runs for every id of every record.
    if value is None or value == "":
        if required:
            raise InvalidRecordError(field, f"{field} is required (32 hex characters)")
        return None
    lowered = value.lower()
    if _HEX32.fullmatch(lowered) is None:
        raise InvalidRecordError(
            field, f"{field} must be 32 hex characters (a 128-bit trace id), got {quoted(value)}"
        )
    if lowered == _ZERO32:
        raise InvalidRecordError(field, f"{field} must not be all zeros")
    return lowered


def _span_id(value: str | None, field: str, *, required: bool) -> str | None:
    if value is None or value == "":
        if required:
            raise InvalidRecordError(field, f"{field} is required (16 hex characters)")
        return None
    lowered = value.lower()
    if _HEX16.fullmatch(lowered) is None:
        raise InvalidRecordError(
            field, f"{field} must be 16 hex characters (a 64-bit span id), got {quoted(value)}"
        )
    if lowered == _ZERO16:
        raise InvalidRecordError(field, f"{field} must not be all zeros")
    return lowered


def _identifier(value: str | None, field: str) -> None:
    _require(bool(value), field, f"{field} is required")
    assert value is not None
    _require(
        len(value) <= MAX_ID_LENGTH, field, f"{field} is longer than {MAX_ID_LENGTH} characters"
    )


def _present(value: object, field: str) -> None:
    _require(value is not None, field, f"{field} is required")


def _time(value: int | None, field: str) -> int:
    _present(value, field)
    assert value is not None
    _require(
        storable_time(value), field, f"{field} must be between 1970-01-01 and 2262-04-11 (UTC)"
    )
    return value


def _finite(value: float | None, field: str) -> None:
    _present(value, field)
    assert value is not None
    _require(math.isfinite(value), field, f"{field} must be a finite number, got {quoted(value)}")


def check_span(row: SpanRow) -> None:
    """A storable span: ids, name, kind, times; derives duration, is_root and status."""
    # The hot path of every span: checks inline, messages built only when one fails.
    row["trace_id"] = _trace_id(row.get("trace_id"), "trace_id", required=True) or ""
    row["span_id"] = span_id = _span_id(row.get("span_id"), "span_id", required=True) or ""
    row["parent_span_id"] = parent = _span_id(
        row.get("parent_span_id"), "parent_span_id", required=False
    )
    if parent == span_id:
        raise InvalidRecordError("parent_span_id", "parent_span_id must differ from span_id")
    name = row.get("name")
    if not name:
        raise InvalidRecordError("name", "name is required")
    if len(name) > MAX_NAME_LENGTH:
        raise InvalidRecordError("name", f"name is longer than {MAX_NAME_LENGTH} characters")
    if row.get("kind") is None:
        raise InvalidRecordError("kind", "kind is required")
    if row.get("status") is None:
        # The spec's `unset` is "the producer never said".
        row["status"] = "unset"
    start = _time(row.get("start_time"), "start_time")
    end = row.get("end_time")
    if end is not None:
        _time(end, "end_time")
    is_event = row.get("is_event")
    if is_event:
        if not (end is None or end == start):
            raise InvalidRecordError(
                "end_time", "end_time must be absent on an event span (is_event)"
            )
        row["end_time"] = None
        row["duration_ns"] = None
    elif end is not None:
        if not end >= start:
            raise InvalidRecordError("end_time", "end_time is before start_time")
        row["duration_ns"] = end - start
    else:
        row["duration_ns"] = None
    row["is_root"] = parent is None
    row["is_event"] = bool(is_event)
    error = row.get("error")
    if error is not None and not error.get("message"):
        raise InvalidRecordError("error.message", "error.message is required when error is set")
    tags = row.get("tags")
    if tags is not None and len(tags) > MAX_TAGS:
        raise InvalidRecordError("tags", f"tags: at most {MAX_TAGS} tags")
    links = row.get("links")
    if links:
        for position, link in enumerate(links):
            link["trace_id"] = _trace_id(
                link.get("trace_id"), f"links[{position}].trace_id", required=True
            )
            if link.get("span_id") is not None:
                link["span_id"] = _span_id(
                    link.get("span_id"), f"links[{position}].span_id", required=False
                )
    if row.get("total_cost") is not None:
        _check_cost(row)


def _check_cost(row: SpanRow | ScoreRow, *, keep_estimate: bool = False) -> None:
    total = row.get("total_cost")
    if total is None:
        return
    _finite(total, "cost.total_cost")
    _require(total >= 0, "cost.total_cost", "cost.total_cost must not be negative")
    _require(
        bool(row.get("cost_currency")),
        "cost.currency",
        "cost.currency is required when cost is set",
    )
    # A cost the producer sends is the producer's figure, never an estimate, unless an mcpd
    # service priced it from the price book as ingest would have (`keep_estimate`).
    if not keep_estimate:
        row["cost_is_estimated"] = False


_LEVELS = ("trace", "debug", "info", "warn", "error", "fatal")


def check_log(row: LogRow) -> None:
    """A storable log record."""
    _identifier(row.get("log_id"), "log_id")
    row["trace_id"] = _trace_id(row.get("trace_id"), "trace_id", required=False)
    row["span_id"] = _span_id(row.get("span_id"), "span_id", required=False)
    _time(row.get("timestamp"), "timestamp")
    _present(row.get("level"), "level")
    _require(row.get("message") is not None, "message", "message is required")


def check_metric(row: MetricRow, label_values_seen: Callable[[str], int]) -> None:
    """A storable metric point; labels pass the cardinality filter.

    `label_values_seen(key)` is how many distinct values the project already holds for a label
    key; a key past MAX_LABEL_VALUES is refused, so one unbounded label cannot blow up every
    series read.
    """
    _identifier(row.get("metric_id"), "metric_id")
    _require(bool(row.get("name")), "name", "name is required")
    _present(row.get("kind"), "kind")
    _finite(row.get("value"), "value")
    _time(row.get("timestamp"), "timestamp")
    row["trace_id"] = _trace_id(row.get("trace_id"), "trace_id", required=False)
    row["span_id"] = _span_id(row.get("span_id"), "span_id", required=False)
    labels = row.get("labels")
    if labels is None:
        return
    _require(isinstance(labels, Mapping), "labels", "labels must be an object of key/value pairs")
    _require(len(labels) <= MAX_LABELS, "labels", f"labels: at most {MAX_LABELS} keys")
    for key, value in labels.items():
        _check_label(key, value, label_values_seen)


def _check_label(key: str, value: Any, label_values_seen: Callable[[str], int]) -> None:
    field = f"labels.{key}"
    _require(
        key.lower() not in UNBOUNDED_LABEL_KEYS,
        field,
        f"labels.{key}: high-cardinality key refused by the cardinality filter "
        "(one series per value); put it on the span or log instead",
    )
    _require(
        isinstance(value, str | int | float | bool),
        field,
        f"labels.{key}: label values must be strings, numbers or booleans",
    )
    _require(
        label_values_seen(key) < MAX_LABEL_VALUES,
        field,
        f"labels.{key}: this key already has {MAX_LABEL_VALUES} distinct values in the project;"
        " the cardinality filter refuses more",
    )


def check_score(row: ScoreRow, *, from_service: bool = False) -> None:
    """A storable score: it names its target, scorer and value. A cost sent by an mcpd service
    (`from_service`: the evaluation service pricing its judge's calls) keeps its `is_estimated`;
    any other producer's cost is its own figure."""
    _identifier(row.get("score_id"), "score_id")
    row["trace_id"] = _trace_id(row.get("trace_id"), "trace_id", required=True)
    row["span_id"] = _span_id(row.get("span_id"), "span_id", required=False)
    _identifier(row.get("scorer_id"), "scorer_id")
    _present(row.get("source"), "source")
    _finite(row.get("value"), "value")
    low, high = row.get("min"), row.get("max")
    if low is not None and high is not None:
        _require(low <= high, "min", "min must not be greater than max")
    _time(row.get("timestamp"), "timestamp")
    _check_cost(row, keep_estimate=from_service)


_THUMBS = ("up", "down")


def check_feedback(row: FeedbackRow) -> None:
    """A storable feedback record; `value` has the shape its kind asks for."""
    _identifier(row.get("feedback_id"), "feedback_id")
    row["trace_id"] = _trace_id(row.get("trace_id"), "trace_id", required=True)
    row["span_id"] = _span_id(row.get("span_id"), "span_id", required=False)
    kind = row.get("kind")
    _present(kind, "kind")
    value = row.get("value")
    _present(value, "value")
    match kind:
        case "thumbs":
            _require(
                value in _THUMBS,
                "value",
                f"value: thumbs feedback is 'up' or 'down', got {quoted(value)}",
            )
        case "rating":
            _require(
                isinstance(value, int | float) and not isinstance(value, bool),
                "value",
                f"value: rating feedback is a number, got {quoted(value)}",
            )
        case "correction" | "tag" | "comment":
            _require(
                isinstance(value, str),
                "value",
                f"value: {kind} feedback is text, got {quoted(value)}",
            )
    _time(row.get("timestamp"), "timestamp")


def check_aspect_note(row: AspectNoteRow, aspects: Mapping[str, AspectRecord]) -> None:
    """A storable aspect note, filed under an enabled aspect of `aspects` (its project's
    catalogue, by name) at a version of it that is stored."""
    _identifier(row.get("note_id"), "note_id")
    row["trace_id"] = _trace_id(row.get("trace_id"), "trace_id", required=True) or ""
    _require(bool(row.get("aspect")), "aspect", "aspect is required")
    _filed_under(row["aspect"], row.get("definition_version"), aspects)
    _require(bool(row.get("text")), "text", "text is required")
    _time(row.get("created_at"), "created_at")


def _filed_under(name: str, version: int | None, aspects: Mapping[str, AspectRecord]) -> None:
    aspect = aspects.get(name)
    if aspect is None:
        raise InvalidRecordError(
            "aspect",
            f"aspect: {quoted(name)} is not an aspect of this project"
            f" (it has {', '.join(aspects)})",
        )
    if not aspect.enabled:
        raise InvalidRecordError("aspect", f"aspect: {name} is switched off in this project")
    # Versions count from 1 without gaps, so every one up to the newest is stored.
    if version is None or not 1 <= version <= aspect.version:
        stored = "version 1" if aspect.version == 1 else f"versions 1 to {aspect.version}"
        raise InvalidRecordError(
            "definition_version", f"definition_version: {name} has {stored}, got {version or 0}"
        )
