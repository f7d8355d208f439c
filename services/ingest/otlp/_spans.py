"""OTLP spans -> span rows (`map_traces`). The hot path of OTLP ingest: see docs/otlp.md."""

from __future__ import annotations

from typing import Any, cast

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.trace.v1.trace_pb2 import Span, Status

from mcpd.model.v1 import enums_pb2
from mcpd.signals.rows import SpanRow
from services.ingest.incoming import IncomingBatch, refusal
from services.ingest.otlp._correlation import ResourceContext, record_columns, resource_context
from services.ingest.otlp._kinds import entity, model_and_provider, span_kind
from services.ingest.otlp._messages import (
    CHOICE_EVENT,
    DETAILS_EVENT,
    MESSAGE_EVENTS,
    event_message,
    payloads,
)
from services.ingest.otlp._usage import model_parameters, reported_cost, token_usage
from services.ingest.otlp._values import (
    RecordError,
    as_strings,
    as_text,
    attributes,
    optional_span_id,
    parse_json,
    span_id_hex,
    trace_id_hex,
)

SPAN_STATUSES = frozenset(
    value.name.removeprefix("SPAN_STATUS_").lower()
    for value in enums_pb2.SpanStatus.DESCRIPTOR.values
    if value.number != 0
)
_OTLP_STATUS = {
    Status.STATUS_CODE_UNSET: "unset",
    Status.STATUS_CODE_OK: "ok",
    Status.STATUS_CODE_ERROR: "error",
}
# OTLP span kinds worth keeping (internal and unspecified say nothing).
_OTLP_KINDS = {
    Span.SPAN_KIND_SERVER: "server",
    Span.SPAN_KIND_CLIENT: "client",
    Span.SPAN_KIND_PRODUCER: "producer",
    Span.SPAN_KIND_CONSUMER: "consumer",
}

EXPLICIT_STATUS = "mcpd.span.status"
LINK_KIND = "mcpd.link.kind"
EVENTS_KEY = "otel.events"
SPAN_KIND_KEY = "otel.span.kind"
SCOPE_KEY = "otel.scope.name"
# What the mapping adds to a span's attributes from the span itself (docs/otlp.md).
ADDED_ATTRIBUTES = frozenset({EVENTS_KEY, SPAN_KIND_KEY, SCOPE_KEY})
ERROR_TYPE = "error.type"
NO_MESSAGE = "the span ended in error and the producer recorded no message"

_TAG_KEYS = ("mcpd.tags", "tag.tags")
_METADATA_KEYS = ("mcpd.metadata", "metadata")
_EXTRA_KEYS = frozenset({*_TAG_KEYS, *_METADATA_KEYS})

_SPAN = enums_pb2.SIGNAL_TYPE_SPAN


def map_traces(request: ExportTraceServiceRequest) -> IncomingBatch:
    """Every span of an OTLP trace export as a span row, or as a refusal naming its index.

    The index of a span is its position counting across every resource and scope group in
    order, which is what the sender's partial-success bookkeeping counts too.
    """
    batch = IncomingBatch()
    rows = batch.spans
    index = 0
    for resource_spans in request.resource_spans:
        context = resource_context(resource_spans.resource)
        for scope_spans in resource_spans.scope_spans:
            scope = scope_spans.scope.name or None
            for span in scope_spans.spans:
                try:
                    rows.append((index, _row(span, context, scope)))
                except RecordError as reason:
                    batch.refused.append(refusal(_SPAN, index, reason))
                index += 1
    return batch


def _row(span: Span, context: ResourceContext, scope: str | None) -> SpanRow:
    trace_id = trace_id_hex(span.trace_id, "trace_id")
    span_id = span_id_hex(span.span_id, "span_id")
    parent_span_id = optional_span_id(span.parent_span_id, "parent_span_id")
    start = span.start_time_unix_nano
    if not start:
        raise RecordError("start_time_unix_nano is missing: a span needs the time it began")
    end: int | None = span.end_time_unix_nano or None
    duration = None
    if end is not None:
        if end < start:
            raise RecordError(
                f"end_time_unix_nano ({end}) is before start_time_unix_nano ({start})"
            )
        duration = end - start

    attrs = attributes(span.attributes)
    kind = span_kind(attrs)
    model, provider = model_and_provider(attrs)
    input_tokens, output_tokens, total_tokens, usage_details = token_usage(attrs)
    parameters = model_parameters(attrs)
    cost = reported_cost(attrs)
    value_in, value_out = payloads(attrs)

    otlp_status = span.status
    status_message = otlp_status.message
    status = _OTLP_STATUS.get(otlp_status.code, "unset")
    explicit_status = attrs.get(EXPLICIT_STATUS)
    if isinstance(explicit_status, str) and explicit_status.lower() in SPAN_STATUSES:
        status = explicit_status.lower()
        del attrs[EXPLICIT_STATUS]

    error = None
    kept_events: list[dict[str, Any]] | None = None
    if span.events:
        kept_events, error, event_in, event_out = _events(span, status == "error")
        if value_in is None:
            value_in = event_in
        if value_out is None:
            value_out = event_out
    if status == "error":
        error = _error(attrs, status_message, error)

    entity_kind, entity_id, entity_name = entity(attrs, kind, model)
    columns = record_columns(attrs, context)
    if attrs.keys().isdisjoint(_EXTRA_KEYS):
        tags, metadata = context.tags, None
    else:
        tags, metadata = _tags(attrs, context), _metadata(attrs)
    links = _links(span) if span.links else None

    if kept_events:
        attrs[EVENTS_KEY] = kept_events
    otlp_kind = _OTLP_KINDS.get(span.kind)
    if otlp_kind is not None:
        attrs[SPAN_KIND_KEY] = otlp_kind
    if scope is not None:
        attrs[SCOPE_KEY] = scope

    row: dict[str, Any] = {
        "project": context.project,
        **columns,
        "trace_id": trace_id,
        "span_id": span_id,
        "parent_span_id": parent_span_id,
        "external_parent_span_id": None,
        "name": span.name,
        "kind": kind,
        "status": status,
        "start_time": start,
        "end_time": end,
        "duration_ns": duration,
        "is_root": parent_span_id is None,
        "is_event": False,
        "entity_kind": entity_kind,
        "entity_id": entity_id,
        "entity_name": entity_name,
        "input": value_in,
        "output": value_out,
        "attributes": attrs or None,
        "metadata": metadata,
        "input_tokens": input_tokens,
        "output_tokens": output_tokens,
        "total_tokens": total_tokens,
        "usage_details": usage_details,
        **cost,
        "model_parameters": parameters,
        "error": error,
        "links": links,
        "tags": tags,
        "model": model,
        "provider": provider,
        "received_at": None,  # the pipeline stamps it
        "ingest_key": None,
    }
    return cast(SpanRow, row)


def _events(
    span: Span, is_error: bool
) -> tuple[list[dict[str, Any]], dict[str, Any] | None, Any, Any]:
    """(events to keep, the exception that explains an error, input, output) from span events.

    GenAI message events become the input/output (when the attributes carried none); the last
    `exception` event of a failed span becomes its error; every other event is kept.
    """
    kept: list[dict[str, Any]] = []
    exception_at: int | None = None
    messages_in: list[Any] = []
    messages_out: list[Any] = []
    details_in: Any = None
    details_out: Any = None
    for event in span.events:
        name = event.name
        event_attrs = attributes(event.attributes)
        if name in MESSAGE_EVENTS:
            messages_in.append(event_message(name, event_attrs))
            continue
        if name == CHOICE_EVENT:
            messages_out.append(event_message(name, event_attrs))
            continue
        if name == DETAILS_EVENT:
            found_in, found_out = payloads(event_attrs)
            if found_in is not None or found_out is not None:
                details_in = details_in if found_in is None else found_in
                details_out = details_out if found_out is None else found_out
                continue
        if name == "exception" and is_error:
            exception_at = len(kept)
        kept.append(
            {
                "name": name,
                "time_unix_nano": event.time_unix_nano,
                "attributes": event_attrs or None,
            }
        )
    exception = None
    if exception_at is not None:
        exception = kept.pop(exception_at)["attributes"] or {}
    value_in = details_in if details_in is not None else (messages_in or None)
    value_out = details_out if details_out is not None else (messages_out or None)
    return kept, exception, value_in, value_out


def _error(
    attrs: dict[str, Any], status_message: str, exception: dict[str, Any] | None
) -> dict[str, Any]:
    """SpanError: the status message (else the exception's), its type, and its stack."""
    exception = exception or {}
    message = status_message or as_text(exception.get("exception.message"))
    kind = as_text(exception.get("exception.type"))
    if kind is None:
        kind = as_text(attrs.get(ERROR_TYPE))
        if kind is not None:
            del attrs[ERROR_TYPE]
    error: dict[str, Any] = {"message": message or kind or NO_MESSAGE}
    if kind is not None:
        error["kind"] = kind
    stack = as_text(exception.get("exception.stacktrace"))
    if stack is not None:
        error["stack"] = stack
    return error


def _links(span: Span) -> list[dict[str, Any]] | None:
    """SpanLinks. A link whose trace id is not a valid trace id is left out."""
    links: list[dict[str, Any]] = []
    for link in span.links:
        try:
            trace_id = trace_id_hex(link.trace_id, "link trace_id")
            span_id = optional_span_id(link.span_id, "link span_id")
        except RecordError:
            continue
        entry: dict[str, Any] = {"trace_id": trace_id}
        if span_id is not None:
            entry["span_id"] = span_id
        link_attrs = attributes(link.attributes)
        kind = as_text(link_attrs.pop(LINK_KIND, None))
        if kind is not None:
            entry["kind"] = kind
        if link_attrs:
            entry["attributes"] = link_attrs
        links.append(entry)
    return links or None


def _tags(attrs: dict[str, Any], context: ResourceContext) -> list[str] | None:
    for key in _TAG_KEYS:
        if key in attrs:
            tags = as_strings(attrs[key])
            if tags is not None:
                del attrs[key]
                return tags
    return context.tags


def _metadata(attrs: dict[str, Any]) -> Any:
    for key in _METADATA_KEYS:
        if key in attrs:
            value = parse_json(attrs[key])
            if isinstance(value, dict):
                del attrs[key]
                return value
    return None
