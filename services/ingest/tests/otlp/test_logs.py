"""Log rows from OTLP log records emitted through the SDK."""

from __future__ import annotations

import json
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry._logs import SeverityNumber
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.sdk._logs import LoggerProvider

from mcpd.model.v1 import enums_pb2, telemetry_pb2
from mcpd.runtime.ids import ID_LENGTH
from mcpd.signals.rows import LogRow
from services.ingest.otlp import map_logs
from services.ingest.tests.otlp.producers import SpanRecorder, log_request

LOG_COLUMNS = LogRow.__required_keys__ | LogRow.__optional_keys__
T0 = 1_767_225_600_000_000_000  # 2026-01-01T00:00:00Z


def one_row(request: ExportLogsServiceRequest) -> LogRow:
    batch = map_logs(request)
    assert list(batch.refused) == []
    [(index, row)] = batch.logs
    assert index == 0
    return row


def emit(**record: Any) -> ExportLogsServiceRequest:
    return log_request(
        lambda provider: provider.get_logger("checkout.worker").emit(**record),
        {"service.name": "checkout", "deployment.environment.name": "prod", "mcpd.project": "p"},
    )


def test_a_log_row() -> None:
    recorder = SpanRecorder()
    with recorder.tracer().start_as_current_span("op") as span:
        request = emit(
            timestamp=T0,
            observed_timestamp=T0 + 5,
            severity_number=SeverityNumber.WARN,
            severity_text="WARNING",
            body="card declined",
            attributes={"order.id": "o-1", "attempt": 2, "session.id": "s-1"},
        )
    row = one_row(request)
    assert set(row) == LOG_COLUMNS
    context = span.get_span_context()
    assert row["trace_id"] == f"{context.trace_id:032x}"
    assert row["span_id"] == f"{context.span_id:016x}"
    assert (row["timestamp"], row["level"], row["message"], row["logger"]) == (
        T0,
        "warn",
        "card declined",
        "checkout.worker",
    )
    assert row["fields"] == {"order.id": "o-1", "attempt": 2}
    assert (row["project"], row["service_name"], row["environment"], row["session_id"]) == (
        "p",
        "checkout",
        "prod",
        "s-1",
    )
    assert row["received_at"] is None
    assert len(row["log_id"]) == ID_LENGTH  # a fresh ULID


def test_a_record_outside_a_span_has_no_trace() -> None:
    with trace.use_span(trace.INVALID_SPAN):
        row = one_row(emit(timestamp=T0, body="boot"))
    assert (row["trace_id"], row["span_id"], row["fields"]) == (None, None, None)


@pytest.mark.parametrize(
    ("number", "level"),
    [
        (1, "trace"),
        (4, "trace"),
        (5, "debug"),
        (8, "debug"),
        (9, "info"),
        (12, "info"),
        (13, "warn"),
        (16, "warn"),
        (17, "error"),
        (20, "error"),
        (21, "fatal"),
        (24, "fatal"),
    ],
)
def test_severity_number_ranges(number: int, level: str) -> None:
    row = one_row(emit(timestamp=T0, severity_number=SeverityNumber(number), body="x"))
    assert row["level"] == level


@pytest.mark.parametrize(
    ("text", "level"),
    [
        ("ERROR", "error"),
        ("warning", "warn"),
        ("Critical", "fatal"),
        ("verbose", "info"),
        ("", "info"),
    ],
)
def test_without_a_number_the_text_decides(text: str, level: str) -> None:
    row = one_row(emit(timestamp=T0, severity_text=text, body="x"))
    assert row["level"] == level


def test_structured_bodies_become_json_text() -> None:
    body = {"event": "refund", "amount": 12.5, "items": ["a", "b"]}
    row = one_row(emit(timestamp=T0, body=body))
    assert json.loads(row["message"]) == body
    assert one_row(emit(timestamp=T0, body=42))["message"] == "42"
    assert one_row(emit(timestamp=T0))["message"] == ""


def test_an_event_name_and_a_producer_log_id() -> None:
    row = one_row(
        emit(
            timestamp=T0,
            event_name="gen_ai.user.message",
            attributes={"log.record.uid": "01JXYZ", "mcpd.user_id": "u-7"},
        )
    )
    assert (row["log_id"], row["message"], row["user_id"]) == (
        "01JXYZ",
        "gen_ai.user.message",
        "u-7",
    )
    assert row["fields"] == {"event.name": "gen_ai.user.message"}


def test_the_observed_time_stands_in_for_a_missing_time() -> None:
    request = emit(timestamp=T0, observed_timestamp=T0 + 9, body="x")
    request.resource_logs[0].scope_logs[0].log_records[0].time_unix_nano = 0
    assert one_row(request)["timestamp"] == T0 + 9


def test_refused_records_are_named_by_index() -> None:
    def emit_three(provider: LoggerProvider) -> None:
        for body in ("a", "b", "c"):
            provider.get_logger("x").emit(timestamp=T0, body=body)

    request = log_request(emit_three)
    records = request.resource_logs[0].scope_logs[0].log_records
    records[0].time_unix_nano = records[0].observed_time_unix_nano = 0
    records[2].trace_id = b"\x01" * 15
    batch = map_logs(request)
    assert [(index, row["message"]) for index, row in batch.logs] == [(1, "b")]
    log = enums_pb2.SIGNAL_TYPE_LOG
    assert list(batch.refused) == [
        telemetry_pb2.IngestError(
            signal=log,
            index=0,
            message=(
                "the record has neither time_unix_nano nor observed_time_unix_nano: "
                "a log line needs the time it was emitted"
            ),
        ),
        telemetry_pb2.IngestError(
            signal=log,
            index=2,
            message="trace_id must be 16 bytes (32 hex characters), got 15 bytes",
        ),
    ]
