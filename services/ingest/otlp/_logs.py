"""OTLP log records -> log rows (`map_logs`)."""

from __future__ import annotations

from typing import Any, cast

from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.logs.v1.logs_pb2 import LogRecord

from mcpd.model.v1 import enums_pb2
from mcpd.runtime.ids import new_id
from mcpd.signals.rows import LogRow
from services.ingest.incoming import IncomingBatch, refusal
from services.ingest.otlp._correlation import ResourceContext, record_columns, resource_context
from services.ingest.otlp._values import (
    RecordError,
    any_value,
    as_text,
    attributes,
    json_text,
    optional_span_id,
    optional_trace_id,
)

LOG_ID_KEY = "log.record.uid"
EVENT_NAME_KEY = "event.name"

# OTLP severity_number ranges: 1-4 TRACE, 5-8 DEBUG, 9-12 INFO, 13-16 WARN, 17-20 ERROR,
# 21-24 FATAL. Index by (number - 1) // 4.
_LEVELS = ("trace", "debug", "info", "warn", "error", "fatal")
_SEVERITY_TEXT = {
    "trace": "trace",
    "debug": "debug",
    "info": "info",
    "information": "info",
    "notice": "info",
    "warn": "warn",
    "warning": "warn",
    "error": "error",
    "err": "error",
    "fatal": "fatal",
    "critical": "fatal",
    "crit": "fatal",
    "emergency": "fatal",
    "alert": "fatal",
}

_LOG = enums_pb2.SIGNAL_TYPE_LOG


def level_of(severity_number: int, severity_text: str) -> str:
    """The spec LogLevel of an OTLP severity; number 0 falls back to the text, then info."""
    if 1 <= severity_number <= 24:
        return _LEVELS[(severity_number - 1) // 4]
    return _SEVERITY_TEXT.get(severity_text.strip().lower(), "info")


def map_logs(request: ExportLogsServiceRequest) -> IncomingBatch:
    """Every OTLP log record as a log row, or as a refusal naming its index."""
    batch = IncomingBatch()
    index = 0
    for resource_logs in request.resource_logs:
        context = resource_context(resource_logs.resource)
        for scope_logs in resource_logs.scope_logs:
            logger = scope_logs.scope.name or None
            for record in scope_logs.log_records:
                try:
                    batch.logs.append((index, _row(record, context, logger)))
                except RecordError as reason:
                    batch.refused.append(refusal(_LOG, index, reason))
                index += 1
    return batch


def _row(record: LogRecord, context: ResourceContext, logger: str | None) -> LogRow:
    timestamp = record.time_unix_nano or record.observed_time_unix_nano
    if not timestamp:
        raise RecordError(
            "the record has neither time_unix_nano nor observed_time_unix_nano: "
            "a log line needs the time it was emitted"
        )
    trace_id = optional_trace_id(record.trace_id, "trace_id")
    span_id = optional_span_id(record.span_id, "span_id")
    fields = attributes(record.attributes)
    log_id = as_text(fields.pop(LOG_ID_KEY, None)) or new_id()
    message = _message(any_value(record.body))
    event_name = record.event_name
    if event_name:
        fields.setdefault(EVENT_NAME_KEY, event_name)
        message = message or event_name
    columns = record_columns(fields, context)
    row: dict[str, Any] = {
        "project": context.project,
        **columns,
        "log_id": log_id,
        "trace_id": trace_id,
        "span_id": span_id,
        "timestamp": timestamp,
        "level": level_of(record.severity_number, record.severity_text),
        "message": message,
        "fields": fields or None,
        "logger": logger,
        "received_at": None,  # the pipeline stamps it
    }
    return cast(LogRow, row)


def _message(body: Any) -> str:
    """The rendered message: a string body as is, any other body as compact JSON text."""
    if body is None:
        return ""
    if isinstance(body, str):
        return body
    return json_text(body)
