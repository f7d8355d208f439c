"""Spec protobuf entities to rows (`mcpd.signals.rows`) and back.

Message to row (`span_row`, `log_row`, ...) is what the native ingest receiver calls on every
record, so it is written for speed: plain attribute reads, `HasField` for presence, and a
hand-written `google.protobuf.Value` walk (`json_format.ParseDict` and `MessageToDict` do the
same work through a generic descriptor walk, which is slower). The rules:

* every key of the row is present; a field the message does not carry is None, including a
  required one (a missing `start_time`, an UNSPECIFIED `kind`), so the validator that runs next
  can say "kind is required" rather than find a zero value it cannot tell from a real one;
* `project` is `correlation.project` as sent ('' when the producer left it to the caller's key);
* `received_at` is None when the message has none (Score, Feedback and AspectNote never do;
  ingest stamps the arrival time);
* `usage_details` holds only the InputTokenDetails / OutputTokenDetails fields that are set, and
  is None when neither is;
* a Cost that is present fills every cost column it has (`cost_currency` may then be '', which
  is what was sent); an absent Cost leaves all six None;
* `model_parameters`, `error` and `links` (nested messages without columns of their own) are
  the spec's JSON of the message (`mcpd.codec.encode`), so they read in SQL, REST and the spec
  alike;
* numbers inside JSON documents that are whole come back as ints (as `mcpd.codec` does), so a
  producer's `42` is not returned as `42.0`.

Row to message (`span_message`, `trace_message`, ...) is the read path's inverse: None leaves a
field unset.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar, cast

from google.protobuf import struct_pb2, timestamp_pb2

from mcpd.codec import decode, encode, enum_names
from mcpd.model.v1 import enums_pb2, telemetry_pb2
from mcpd.signals.rows import (
    AspectNoteRow,
    CorrelationColumns,
    CostColumns,
    FeedbackRow,
    LogRow,
    MetricRow,
    ScoreRow,
    SpanRow,
    TraceRow,
    UsageColumns,
)

T = TypeVar("T")

# Correlation's optional fields, which are also the row's column names (after `project`).
CORRELATION_FIELDS = (
    "environment",
    "service_name",
    "service_version",
    "session_id",
    "thread_id",
    "user_id",
    "resource_id",
    "run_id",
    "request_id",
    "experiment_id",
    "release",
)

_NANOS_PER_SECOND = 1_000_000_000
# Whole doubles below this bound are integers exactly (see `mcpd.codec`).
_EXACT_INT_BOUND = 2.0**53

_SPAN_KIND = enum_names(enums_pb2.SpanKind.DESCRIPTOR)
_SPAN_STATUS = enum_names(enums_pb2.SpanStatus.DESCRIPTOR)
_ENTITY_KIND = enum_names(enums_pb2.EntityKind.DESCRIPTOR)
_LOG_LEVEL = enum_names(enums_pb2.LogLevel.DESCRIPTOR)
_METRIC_KIND = enum_names(enums_pb2.MetricKind.DESCRIPTOR)
_SCORE_SOURCE = enum_names(enums_pb2.ScoreSource.DESCRIPTOR)
_FEEDBACK_KIND = enum_names(enums_pb2.FeedbackKind.DESCRIPTOR)


# --- JSON values -----------------------------------------------------------------------------


def python_of(value: struct_pb2.Value) -> Any:
    """The Python object of a `google.protobuf.Value` (None for an unset Value or JSON null)."""
    kind = value.WhichOneof("kind")
    if kind == "string_value":
        return value.string_value
    if kind == "number_value":
        number = value.number_value
        return int(number) if number.is_integer() and abs(number) < _EXACT_INT_BOUND else number
    if kind == "struct_value":
        return {key: python_of(item) for key, item in value.struct_value.fields.items()}
    if kind == "list_value":
        return [python_of(item) for item in value.list_value.values]
    if kind == "bool_value":
        return value.bool_value
    return None


def value_of(document: Any) -> struct_pb2.Value:
    """A `google.protobuf.Value` holding a Python JSON object (dict, list, str, number, bool,
    None); TypeError for anything else."""
    value = struct_pb2.Value()
    _fill(value, document)
    return value


def _fill(value: struct_pb2.Value, document: Any) -> None:
    if isinstance(document, str):
        value.string_value = document
    elif document is True or document is False:
        value.bool_value = document
    elif isinstance(document, int | float):
        value.number_value = document
    elif isinstance(document, Mapping):
        fields = value.struct_value.fields
        if not document:
            value.struct_value.SetInParent()
        for key, item in document.items():
            _fill(fields[key], item)
    elif isinstance(document, list | tuple):
        values = value.list_value.values
        if not document:
            value.list_value.SetInParent()
        for item in document:
            _fill(values.add(), item)
    elif document is None:
        value.null_value = struct_pb2.NULL_VALUE
    else:
        raise TypeError(f"a {type(document).__name__} is not a JSON value")


# --- scalars ---------------------------------------------------------------------------------


def nanos_of(ts: timestamp_pb2.Timestamp) -> int:
    """A Timestamp as int nanoseconds since the Unix epoch."""
    return ts.seconds * _NANOS_PER_SECOND + ts.nanos


def timestamp_of(value: int) -> timestamp_pb2.Timestamp:
    """Int nanoseconds since the Unix epoch as a Timestamp."""
    seconds, remainder = divmod(value, _NANOS_PER_SECOND)
    return timestamp_pb2.Timestamp(seconds=seconds, nanos=remainder)


def _unvalidated(value: T | None) -> T:
    """A required field as the message carries it, None when it was left out.

    Rows are typed as they are once validated; the validator, not this module, refuses the
    None. Only the row builders below use this.
    """
    return cast(T, value)


def _enum_name(by_number: Mapping[int, str], number: int) -> str | None:
    # 0 is UNSPECIFIED: not a value, so absent. An unknown number (a newer producer) is too.
    return by_number.get(number) if number else None


# --- shared parts ----------------------------------------------------------------------------


def _correlation_columns(correlation: telemetry_pb2.Correlation) -> CorrelationColumns:
    has = correlation.HasField
    return {
        "project": correlation.project,
        "environment": correlation.environment if has("environment") else None,
        "service_name": correlation.service_name if has("service_name") else None,
        "service_version": correlation.service_version if has("service_version") else None,
        "session_id": correlation.session_id if has("session_id") else None,
        "thread_id": correlation.thread_id if has("thread_id") else None,
        "user_id": correlation.user_id if has("user_id") else None,
        "resource_id": correlation.resource_id if has("resource_id") else None,
        "run_id": correlation.run_id if has("run_id") else None,
        "request_id": correlation.request_id if has("request_id") else None,
        "experiment_id": correlation.experiment_id if has("experiment_id") else None,
        "release": correlation.release if has("release") else None,
    }


def _correlation_message(row: Mapping[str, Any]) -> telemetry_pb2.Correlation:
    fields = {name: row[name] for name in CORRELATION_FIELDS if row.get(name) is not None}
    return telemetry_pb2.Correlation(project=row.get("project") or "", **fields)


_NO_USAGE: UsageColumns = {
    "input_tokens": None,
    "output_tokens": None,
    "total_tokens": None,
    "usage_details": None,
}


def _usage_columns(usage: telemetry_pb2.TokenUsage) -> UsageColumns:
    has = usage.HasField
    details: dict[str, dict[str, int]] = {}
    if has("input_details"):
        found = {field.name: value for field, value in usage.input_details.ListFields()}
        if found:
            details["input"] = found
    if has("output_details"):
        found = {field.name: value for field, value in usage.output_details.ListFields()}
        if found:
            details["output"] = found
    return {
        "input_tokens": usage.input_tokens if has("input_tokens") else None,
        "output_tokens": usage.output_tokens if has("output_tokens") else None,
        "total_tokens": usage.total_tokens if has("total_tokens") else None,
        "usage_details": details or None,
    }


def _usage_message(row: Mapping[str, Any]) -> telemetry_pb2.TokenUsage | None:
    details = row.get("usage_details") or {}
    totals = {
        name: row[name]
        for name in ("input_tokens", "output_tokens", "total_tokens")
        if row.get(name) is not None
    }
    if not totals and not details:
        return None
    usage = telemetry_pb2.TokenUsage(**totals)
    if details.get("input"):
        usage.input_details.CopyFrom(telemetry_pb2.InputTokenDetails(**details["input"]))
    if details.get("output"):
        usage.output_details.CopyFrom(telemetry_pb2.OutputTokenDetails(**details["output"]))
    return usage


_NO_COST: CostColumns = {
    "cost_currency": None,
    "input_cost": None,
    "output_cost": None,
    "total_cost": None,
    "cost_price_book": None,
    "cost_is_estimated": None,
}


def _cost_columns(cost: telemetry_pb2.Cost) -> CostColumns:
    has = cost.HasField
    return {
        "cost_currency": cost.currency,
        "input_cost": cost.input_cost if has("input_cost") else None,
        "output_cost": cost.output_cost if has("output_cost") else None,
        "total_cost": cost.total_cost if has("total_cost") else None,
        "cost_price_book": cost.price_book if has("price_book") else None,
        "cost_is_estimated": cost.is_estimated,
    }


_COST_FIELDS = (
    ("input_cost", "input_cost"),
    ("output_cost", "output_cost"),
    ("total_cost", "total_cost"),
    ("cost_price_book", "price_book"),
)


def _cost_message(row: Mapping[str, Any]) -> telemetry_pb2.Cost | None:
    present = {field: row[column] for column, field in _COST_FIELDS if row.get(column) is not None}
    currency = row.get("cost_currency")
    estimated = row.get("cost_is_estimated")
    if not present and currency is None and estimated is None:
        return None
    return telemetry_pb2.Cost(currency=currency or "", is_estimated=bool(estimated), **present)


def _json_or_none(message: Any, name: str) -> Any:
    return python_of(getattr(message, name)) if message.HasField(name) else None


def _set_json(kwargs: dict[str, Any], name: str, document: Any) -> None:
    if document is not None:
        kwargs[name] = value_of(document)


def _set_time(kwargs: dict[str, Any], name: str, value: int | None) -> None:
    if value is not None:
        kwargs[name] = timestamp_of(value)


def _set_present(kwargs: dict[str, Any], row: Mapping[str, Any], names: tuple[str, ...]) -> None:
    for name in names:
        value = row.get(name)
        if value is not None:
            kwargs[name] = value


# --- spans and traces ------------------------------------------------------------------------


def span_row(msg: telemetry_pb2.Span) -> SpanRow:
    """The row of a Span (see the module docstring for the rules)."""
    has = msg.HasField
    row: SpanRow = {
        **_correlation_columns(msg.correlation),
        **(_usage_columns(msg.usage) if has("usage") else _NO_USAGE),
        **(_cost_columns(msg.cost) if has("cost") else _NO_COST),
        "trace_id": msg.trace_id,
        "span_id": msg.span_id,
        "parent_span_id": msg.parent_span_id if has("parent_span_id") else None,
        "external_parent_span_id": (
            msg.external_parent_span_id if has("external_parent_span_id") else None
        ),
        "name": msg.name,
        "kind": _unvalidated(_enum_name(_SPAN_KIND.by_number, msg.kind)),
        "status": _unvalidated(_enum_name(_SPAN_STATUS.by_number, msg.status)),
        "start_time": _unvalidated(nanos_of(msg.start_time) if has("start_time") else None),
        "end_time": nanos_of(msg.end_time) if has("end_time") else None,
        "duration_ns": msg.duration_ns if has("duration_ns") else None,
        "is_root": msg.is_root,
        "is_event": msg.is_event,
        "entity_kind": (
            _enum_name(_ENTITY_KIND.by_number, msg.entity_kind) if has("entity_kind") else None
        ),
        "entity_id": msg.entity_id if has("entity_id") else None,
        "entity_name": msg.entity_name if has("entity_name") else None,
        "input": _json_or_none(msg, "input"),
        "output": _json_or_none(msg, "output"),
        "attributes": _json_or_none(msg, "attributes"),
        "metadata": _json_or_none(msg, "metadata"),
        "model_parameters": encode(msg.model_parameters) if has("model_parameters") else None,
        "error": encode(msg.error) if has("error") else None,
        "links": [encode(link) for link in msg.links] or None,
        "tags": list(msg.tags) or None,
        "model": msg.model if has("model") else None,
        "provider": msg.provider if has("provider") else None,
        "received_at": _unvalidated(nanos_of(msg.received_at) if has("received_at") else None),
        "ingest_key": msg.ingest_key if has("ingest_key") else None,
    }
    return row


_SPAN_OPTIONAL_TEXT = (
    "parent_span_id",
    "external_parent_span_id",
    "duration_ns",
    "entity_id",
    "entity_name",
    "model",
    "provider",
    "ingest_key",
)


def span_message(row: SpanRow) -> telemetry_pb2.Span:
    """The Span of a row."""
    kwargs: dict[str, Any] = {
        "trace_id": row["trace_id"],
        "span_id": row["span_id"],
        "name": row.get("name") or "",
        "is_root": bool(row.get("is_root")),
        "is_event": bool(row.get("is_event")),
        "correlation": _correlation_message(row),
    }
    _set_present(kwargs, row, _SPAN_OPTIONAL_TEXT)
    if row.get("kind") is not None:
        kwargs["kind"] = _SPAN_KIND.by_name[row["kind"]]
    if row.get("status") is not None:
        kwargs["status"] = _SPAN_STATUS.by_name[row["status"]]
    entity_kind = row.get("entity_kind")
    if entity_kind is not None:
        kwargs["entity_kind"] = _ENTITY_KIND.by_name[entity_kind]
    _set_time(kwargs, "start_time", row.get("start_time"))
    _set_time(kwargs, "end_time", row.get("end_time"))
    _set_time(kwargs, "received_at", row.get("received_at"))
    for name in ("input", "output", "attributes", "metadata"):
        _set_json(kwargs, name, row.get(name))
    usage = _usage_message(row)
    if usage is not None:
        kwargs["usage"] = usage
    cost = _cost_message(row)
    if cost is not None:
        kwargs["cost"] = cost
    if row.get("model_parameters") is not None:
        kwargs["model_parameters"] = decode(row["model_parameters"], telemetry_pb2.ModelParameters)
    if row.get("error") is not None:
        kwargs["error"] = decode(row["error"], telemetry_pb2.SpanError)
    if row.get("links"):
        kwargs["links"] = [decode(link, telemetry_pb2.SpanLink) for link in row["links"] or ()]
    if row.get("tags"):
        kwargs["tags"] = row["tags"]
    return telemetry_pb2.Span(**kwargs)


def trace_message(row: TraceRow) -> telemetry_pb2.Trace:
    """The Trace of a projection row."""
    kwargs: dict[str, Any] = {
        "trace_id": row["trace_id"],
        "name": row.get("name") or "",
        "span_count": row.get("span_count") or 0,
        "error_count": row.get("error_count") or 0,
        "model_count": row.get("model_count") or 0,
        "tool_count": row.get("tool_count") or 0,
        "is_complete": bool(row.get("is_complete")),
        "correlation": _correlation_message(row),
    }
    _set_present(kwargs, row, ("root_span_id", "duration_ns"))
    if row.get("kind") is not None:
        kwargs["kind"] = _SPAN_KIND.by_name[row["kind"]]
    if row.get("status") is not None:
        kwargs["status"] = _SPAN_STATUS.by_name[row["status"]]
    _set_time(kwargs, "start_time", row.get("start_time"))
    _set_time(kwargs, "end_time", row.get("end_time"))
    _set_time(kwargs, "received_at", row.get("received_at"))
    usage = _usage_message(row)
    if usage is not None:
        kwargs["usage"] = usage
    cost = _cost_message(row)
    if cost is not None:
        kwargs["cost"] = cost
    if row.get("tags"):
        kwargs["tags"] = row["tags"]
    _set_json(kwargs, "score_summary", row.get("score_summary"))
    _set_json(kwargs, "feedback_summary", row.get("feedback_summary"))
    return telemetry_pb2.Trace(**kwargs)


# --- logs and metrics ------------------------------------------------------------------------


def log_row(msg: telemetry_pb2.LogRecord) -> LogRow:
    """The row of a LogRecord."""
    has = msg.HasField
    row: LogRow = {
        **_correlation_columns(msg.correlation),
        "log_id": msg.log_id,
        "trace_id": msg.trace_id if has("trace_id") else None,
        "span_id": msg.span_id if has("span_id") else None,
        "timestamp": _unvalidated(nanos_of(msg.timestamp) if has("timestamp") else None),
        "level": _unvalidated(_enum_name(_LOG_LEVEL.by_number, msg.level)),
        "message": msg.message,
        "fields": _json_or_none(msg, "fields"),
        "logger": msg.logger if has("logger") else None,
        "received_at": _unvalidated(nanos_of(msg.received_at) if has("received_at") else None),
    }
    return row


def log_message(row: LogRow) -> telemetry_pb2.LogRecord:
    """The LogRecord of a row."""
    kwargs: dict[str, Any] = {
        "log_id": row["log_id"],
        "message": row.get("message") or "",
        "correlation": _correlation_message(row),
    }
    _set_present(kwargs, row, ("trace_id", "span_id", "logger"))
    if row.get("level") is not None:
        kwargs["level"] = _LOG_LEVEL.by_name[row["level"]]
    _set_time(kwargs, "timestamp", row.get("timestamp"))
    _set_time(kwargs, "received_at", row.get("received_at"))
    _set_json(kwargs, "fields", row.get("fields"))
    return telemetry_pb2.LogRecord(**kwargs)


def metric_row(msg: telemetry_pb2.MetricPoint) -> MetricRow:
    """The row of a MetricPoint."""
    has = msg.HasField
    row: MetricRow = {
        **_correlation_columns(msg.correlation),
        "metric_id": msg.metric_id,
        "name": msg.name,
        "kind": _unvalidated(_enum_name(_METRIC_KIND.by_number, msg.kind)),
        "value": msg.value,
        "unit": msg.unit if has("unit") else None,
        "timestamp": _unvalidated(nanos_of(msg.timestamp) if has("timestamp") else None),
        "labels": _json_or_none(msg, "labels"),
        "buckets": _json_or_none(msg, "buckets"),
        "trace_id": msg.trace_id if has("trace_id") else None,
        "span_id": msg.span_id if has("span_id") else None,
        "received_at": _unvalidated(nanos_of(msg.received_at) if has("received_at") else None),
    }
    return row


def metric_message(row: MetricRow) -> telemetry_pb2.MetricPoint:
    """The MetricPoint of a row."""
    kwargs: dict[str, Any] = {
        "metric_id": row["metric_id"],
        "name": row.get("name") or "",
        "value": row.get("value") or 0.0,
        "correlation": _correlation_message(row),
    }
    _set_present(kwargs, row, ("unit", "trace_id", "span_id"))
    if row.get("kind") is not None:
        kwargs["kind"] = _METRIC_KIND.by_name[row["kind"]]
    _set_time(kwargs, "timestamp", row.get("timestamp"))
    _set_time(kwargs, "received_at", row.get("received_at"))
    _set_json(kwargs, "labels", row.get("labels"))
    _set_json(kwargs, "buckets", row.get("buckets"))
    return telemetry_pb2.MetricPoint(**kwargs)


# --- evaluations -----------------------------------------------------------------------------


def score_row(msg: telemetry_pb2.Score) -> ScoreRow:
    """The row of a Score (`received_at` None: a Score carries no arrival time)."""
    has = msg.HasField
    row: ScoreRow = {
        **_correlation_columns(msg.correlation),
        **(_cost_columns(msg.cost) if has("cost") else _NO_COST),
        "score_id": msg.score_id,
        "trace_id": msg.trace_id if has("trace_id") else None,
        "span_id": msg.span_id if has("span_id") else None,
        "scorer_id": msg.scorer_id,
        "scorer_version": msg.scorer_version if has("scorer_version") else None,
        "source": _unvalidated(_enum_name(_SCORE_SOURCE.by_number, msg.source)),
        "value": msg.value,
        "min": msg.min if has("min") else None,
        "max": msg.max if has("max") else None,
        "label": msg.label if has("label") else None,
        "reason": msg.reason if has("reason") else None,
        "score_trace_id": msg.score_trace_id if has("score_trace_id") else None,
        "metadata": _json_or_none(msg, "metadata"),
        "timestamp": _unvalidated(nanos_of(msg.timestamp) if has("timestamp") else None),
        "received_at": _unvalidated(None),
    }
    return row


_SCORE_OPTIONAL = ("trace_id", "span_id", "scorer_version", "min", "max", "label", "reason")


def score_message(row: ScoreRow) -> telemetry_pb2.Score:
    """The Score of a row."""
    kwargs: dict[str, Any] = {
        "score_id": row["score_id"],
        "scorer_id": row.get("scorer_id") or "",
        "value": row.get("value") or 0.0,
        "correlation": _correlation_message(row),
    }
    _set_present(kwargs, row, (*_SCORE_OPTIONAL, "score_trace_id"))
    if row.get("source") is not None:
        kwargs["source"] = _SCORE_SOURCE.by_name[row["source"]]
    cost = _cost_message(row)
    if cost is not None:
        kwargs["cost"] = cost
    _set_json(kwargs, "metadata", row.get("metadata"))
    _set_time(kwargs, "timestamp", row.get("timestamp"))
    return telemetry_pb2.Score(**kwargs)


def feedback_row(msg: telemetry_pb2.Feedback) -> FeedbackRow:
    """The row of a Feedback (`received_at` None: Feedback carries no arrival time)."""
    has = msg.HasField
    row: FeedbackRow = {
        **_correlation_columns(msg.correlation),
        "feedback_id": msg.feedback_id,
        "trace_id": msg.trace_id if has("trace_id") else None,
        "span_id": msg.span_id if has("span_id") else None,
        "kind": _unvalidated(_enum_name(_FEEDBACK_KIND.by_number, msg.kind)),
        "value": _json_or_none(msg, "value"),
        "comment": msg.comment if has("comment") else None,
        "author_id": msg.author_id if has("author_id") else None,
        "author_kind": msg.author_kind if has("author_kind") else None,
        "timestamp": _unvalidated(nanos_of(msg.timestamp) if has("timestamp") else None),
        "metadata": _json_or_none(msg, "metadata"),
        "received_at": _unvalidated(None),
    }
    return row


def feedback_message(row: FeedbackRow) -> telemetry_pb2.Feedback:
    """The Feedback of a row."""
    kwargs: dict[str, Any] = {
        "feedback_id": row["feedback_id"],
        "correlation": _correlation_message(row),
    }
    _set_present(kwargs, row, ("trace_id", "span_id", "comment", "author_id", "author_kind"))
    if row.get("kind") is not None:
        kwargs["kind"] = _FEEDBACK_KIND.by_name[row["kind"]]
    _set_json(kwargs, "value", row.get("value"))
    _set_json(kwargs, "metadata", row.get("metadata"))
    _set_time(kwargs, "timestamp", row.get("timestamp"))
    return telemetry_pb2.Feedback(**kwargs)


def aspect_note_row(msg: telemetry_pb2.AspectNote) -> AspectNoteRow:
    """The row of an AspectNote (`received_at` None: a note carries no arrival time)."""
    has = msg.HasField
    row: AspectNoteRow = {
        **_correlation_columns(msg.correlation),
        "note_id": msg.note_id,
        "trace_id": msg.trace_id,
        "aspect": msg.aspect,
        "text": msg.text,
        "definition_version": msg.definition_version,
        "model": msg.model if has("model") else None,
        "created_at": _unvalidated(nanos_of(msg.created_at) if has("created_at") else None),
        "received_at": _unvalidated(None),
        # Filed and sketched on the way in (`mcpd.signals.notes`, the ingest pipeline).
        "entity_kind": None,
        "entity_name": None,
        "sketch": None,
    }
    return row


def aspect_note_message(row: AspectNoteRow) -> telemetry_pb2.AspectNote:
    """The AspectNote of a row."""
    kwargs: dict[str, Any] = {
        "note_id": row["note_id"],
        "trace_id": row.get("trace_id") or "",
        "aspect": row.get("aspect") or "",
        "text": row.get("text") or "",
        "definition_version": row.get("definition_version") or 0,
        "correlation": _correlation_message(row),
    }
    _set_present(kwargs, row, ("model",))
    _set_time(kwargs, "created_at", row.get("created_at"))
    return telemetry_pb2.AspectNote(**kwargs)
