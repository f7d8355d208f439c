"""Span rows: ids, times, status and errors, links, correlation, attributes, and refusals."""

from __future__ import annotations

import base64
import json

import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue
from opentelemetry.trace import Link, SpanContext, SpanKind, Status, StatusCode, Tracer

from mcpd.model.v1 import enums_pb2, telemetry_pb2
from mcpd.signals.rows import SpanRow
from services.ingest.otlp import map_traces
from services.ingest.otlp._values import any_value
from services.ingest.tests.otlp.producers import (
    SpanRecorder,
    export_spans,
    rows_by_name,
    span_row,
    trace_request,
)

SCOPE = {"otel.scope.name": "test.instrumentation"}
SPAN_COLUMNS = SpanRow.__required_keys__ | SpanRow.__optional_keys__


def test_a_row_has_every_column_and_the_ids_and_times_of_its_span() -> None:
    def record(tracer: Tracer) -> None:
        with tracer.start_as_current_span("root"), tracer.start_as_current_span("child"):
            pass

    recorder = SpanRecorder()
    record(recorder.tracer())
    child, root = recorder.spans()
    rows = rows_by_name(map_traces(export_spans(recorder)))
    for row in rows.values():
        assert set(row) == SPAN_COLUMNS
        assert row["received_at"] is None  # the pipeline stamps it
        assert row["is_event"] is False
        assert row["project"] == ""  # no mcpd.project: the caller's own
        assert row["external_parent_span_id"] is None
        assert row["ingest_key"] is None
    assert child.context is not None
    assert root.context is not None
    assert rows["child"]["trace_id"] == f"{child.context.trace_id:032x}"
    assert rows["child"]["span_id"] == f"{child.context.span_id:016x}"
    assert rows["child"]["parent_span_id"] == f"{root.context.span_id:016x}"
    assert rows["child"]["is_root"] is False
    assert rows["root"]["parent_span_id"] is None
    assert rows["root"]["is_root"] is True
    assert (rows["child"]["start_time"], rows["child"]["end_time"]) == (
        child.start_time,
        child.end_time,
    )
    assert child.end_time is not None
    assert child.start_time is not None
    assert rows["child"]["duration_ns"] == child.end_time - child.start_time
    assert rows["child"]["status"] == "unset"
    assert rows["child"]["error"] is None


def test_a_span_still_running_has_no_end() -> None:
    request = trace_request(lambda tracer: tracer.start_span("op").end())
    request.resource_spans[0].scope_spans[0].spans[0].end_time_unix_nano = 0
    [(_, row)] = map_traces(request).spans
    assert (row["end_time"], row["duration_ns"]) == (None, None)


def test_ok_status() -> None:
    def record(tracer: Tracer) -> None:
        with tracer.start_as_current_span("op") as span:
            span.set_status(Status(StatusCode.OK))

    [(_, row)] = map_traces(trace_request(record)).spans
    assert (row["status"], row["error"]) == ("ok", None)


def test_error_from_the_status_and_the_exception_event() -> None:
    def record(tracer: Tracer) -> None:
        # The SDK records the exception event and sets ERROR "ValueError: bad city".
        with tracer.start_as_current_span("op"):
            raise ValueError("bad city")

    recorder = SpanRecorder()
    with pytest.raises(ValueError, match="bad city"):
        record(recorder.tracer())
    [(_, row)] = map_traces(export_spans(recorder)).spans
    assert row["status"] == "error"
    error = row["error"]
    assert error is not None
    assert (error["message"], error["kind"]) == ("ValueError: bad city", "ValueError")
    assert 'raise ValueError("bad city")' in error["stack"]
    assert set(error) == {"message", "kind", "stack"}
    assert row["attributes"] == SCOPE  # the exception event became the error


def test_error_message_falls_back_to_the_exception_then_error_type() -> None:
    def exception_only(tracer: Tracer) -> None:
        with tracer.start_as_current_span("op", record_exception=False) as span:
            span.record_exception(TimeoutError("upstream took 30s"))
            span.set_status(Status(StatusCode.ERROR))

    [(_, row)] = map_traces(trace_request(exception_only)).spans
    assert row["error"] is not None
    assert (row["error"]["message"], row["error"]["kind"]) == (
        "upstream took 30s",
        "TimeoutError",
    )

    def error_type_only(tracer: Tracer) -> None:
        with tracer.start_as_current_span("op", attributes={"error.type": "rate_limited"}) as s:
            s.set_status(Status(StatusCode.ERROR))

    [(_, row)] = map_traces(trace_request(error_type_only)).spans
    assert row["error"] == {"message": "rate_limited", "kind": "rate_limited"}
    assert row["attributes"] == SCOPE

    def nothing(tracer: Tracer) -> None:
        with tracer.start_as_current_span("op") as span:
            span.set_status(Status(StatusCode.ERROR))

    [(_, row)] = map_traces(trace_request(nothing)).spans
    assert row["error"] == {
        "message": "the span ended in error and the producer recorded no message"
    }


def test_an_exception_on_a_span_that_did_not_fail_is_kept_as_an_event() -> None:
    def record(tracer: Tracer) -> None:
        with tracer.start_as_current_span("op") as span:
            span.record_exception(KeyError("retry 1"))
            span.set_status(Status(StatusCode.OK))

    [(_, row)] = map_traces(trace_request(record)).spans
    assert (row["status"], row["error"]) == ("ok", None)
    assert row["attributes"] is not None
    [event] = row["attributes"]["otel.events"]
    assert event["name"] == "exception"
    assert event["attributes"]["exception.type"] == "KeyError"


def test_an_explicit_status() -> None:
    row = span_row({"mcpd.span.status": "cancelled"})
    assert (row["status"], row["error"]) == ("cancelled", None)
    assert row["attributes"] == SCOPE
    row = span_row({"mcpd.span.status": "error"})
    assert row["error"] == {
        "message": "the span ended in error and the producer recorded no message"
    }


def test_links() -> None:
    linked = SpanContext(trace_id=0xABC, span_id=0xDEF, is_remote=True)

    def record(tracer: Tracer) -> None:
        links = [
            Link(linked, {"mcpd.link.kind": "retry_of", "attempt": 2}),
            Link(SpanContext(trace_id=0x1, span_id=0x2, is_remote=True)),
        ]
        with tracer.start_as_current_span("op", links=links):
            pass

    [(_, row)] = map_traces(trace_request(record)).spans
    assert row["links"] == [
        {
            "trace_id": f"{0xABC:032x}",
            "span_id": f"{0xDEF:016x}",
            "kind": "retry_of",
            "attributes": {"attempt": 2},
        },
        # No kind: OpenTelemetry does not say why a link exists, and mcpd does not guess.
        {"trace_id": f"{0x1:032x}", "span_id": f"{0x2:016x}"},
    ]


def test_correlation_from_the_resource() -> None:
    row = span_row(
        {},
        {
            "service.name": "support-agent",
            "service.version": "1.4.2",
            "deployment.environment": "staging",
            "mcpd.project": "shop",
            "mcpd.release": "9f1c2e7",
            "mcpd.run_id": "run-1",
            "mcpd.thread_id": "t-1",
            "mcpd.request_id": "req-1",
            "mcpd.experiment_id": "exp-1",
            "mcpd.resource_id": "tenant-9",
            "mcpd.tags": ("beta", "eu"),
            "user.id": "u-1",
            "session.id": "s-1",
            "host.name": "worker-3",
        },
    )
    assert {column: row[column] for column in CORRELATION} == {  # type: ignore[literal-required]
        "project": "shop",
        "environment": "staging",
        "service_name": "support-agent",
        "service_version": "1.4.2",
        "session_id": "s-1",
        "thread_id": "t-1",
        "user_id": "u-1",
        "resource_id": "tenant-9",
        "run_id": "run-1",
        "request_id": "req-1",
        "experiment_id": "exp-1",
        "release": "9f1c2e7",
    }
    assert row["tags"] == ["beta", "eu"]
    assert row["attributes"] == SCOPE  # resource attributes are never stored on spans


CORRELATION = (
    "project",
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


def test_span_attributes_fill_what_the_resource_left_out_and_mcpd_ones_override() -> None:
    resource = {
        "service.name": "svc",
        "deployment.environment.name": "production",
        "user.id": "resource-user",
        "mcpd.session_id": "resource-session",
    }
    row = span_row(
        {
            "gen_ai.conversation.id": "conv-7",  # the resource's explicit session wins
            "user.id": "span-user",  # the resource's user.id wins ...
            "mcpd.user_id": "explicit-user",  # ... over which an explicit span value wins
            "enduser.id": "end-user",
            "mcpd.environment": "canary",
            "mcpd.tags": ["vip"],
        },
        resource,
    )
    assert (row["session_id"], row["user_id"], row["environment"]) == (
        "resource-session",
        "explicit-user",
        "canary",
    )
    assert row["tags"] == ["vip"]
    assert row["attributes"] == {
        "gen_ai.conversation.id": "conv-7",
        "user.id": "span-user",
        "enduser.id": "end-user",
        **SCOPE,
    }
    row = span_row({"session.id": "s-9", "enduser.id": 42})
    assert (row["session_id"], row["user_id"]) == ("s-9", "42")
    assert row["attributes"] == SCOPE


def test_the_sdk_placeholder_service_name_is_no_service_name() -> None:
    # Resource.create fills service.name with "unknown_service" when the producer set none.
    assert span_row({})["service_name"] is None


def test_openinference_tags_and_metadata() -> None:
    row = span_row({"tag.tags": ["a", "b"], "metadata": '{"customer_tier": "gold"}'})
    assert (row["tags"], row["metadata"]) == (["a", "b"], {"customer_tier": "gold"})
    row = span_row({"mcpd.metadata": '{"k": 1}', "metadata": '{"k": 2}'})
    assert row["metadata"] == {"k": 1}
    assert row["attributes"] == {"metadata": '{"k": 2}', **SCOPE}


def test_remaining_attributes_keep_their_types_with_otlp_context() -> None:
    def record(tracer: Tracer) -> None:
        with tracer.start_as_current_span(
            "GET /orders",
            kind=SpanKind.CLIENT,
            attributes={
                "http.request.method": "GET",
                "http.response.status_code": 200,
                "retry": False,
                "ratio": 0.25,
                "url.template": "/orders/{id}",
                "tags": ("x", "y"),
            },
        ):
            pass

    [(_, row)] = map_traces(trace_request(record)).spans
    assert row["attributes"] == {
        "http.request.method": "GET",
        "http.response.status_code": 200,
        "retry": False,
        "ratio": 0.25,
        "url.template": "/orders/{id}",
        "tags": ["x", "y"],
        "otel.span.kind": "client",
        **SCOPE,
    }


def test_any_value_kvlist_array_and_bytes() -> None:
    value = AnyValue()
    pair = value.kvlist_value.values.add()
    pair.key = "blob"
    pair.value.bytes_value = b"\x00\xff"
    pair = value.kvlist_value.values.add()
    pair.key = "list"
    pair.value.array_value.values.add().int_value = 1
    pair.value.array_value.values.add().string_value = "two"
    pair.value.array_value.values.add()  # an empty AnyValue is null
    pair = value.kvlist_value.values.add()
    pair.key = "empty"
    pair.value.string_value = ""
    assert any_value(value) == {
        "blob": base64.b64encode(b"\x00\xff").decode(),
        "list": [1, "two", None],
        "empty": "",
    }


def _mixed_request() -> ExportTraceServiceRequest:
    first, second = SpanRecorder({"service.name": "a"}), SpanRecorder({"service.name": "b"})
    for name in ("s0", "s1", "s2"):
        first.tracer("scope.one").start_span(name).end()
    first.tracer("scope.two").start_span("s3").end()
    for name in ("s4", "s5", "s6"):
        second.tracer().start_span(name).end()
    return export_spans(first, second)


def test_refused_spans_are_named_by_their_index_across_resources_and_scopes() -> None:
    request = _mixed_request()
    one, two = request.resource_spans
    assert [[len(scope.spans) for scope in rs.scope_spans] for rs in (one, two)] == [[3, 1], [3]]
    one.scope_spans[0].spans[1].trace_id = b"\x01\x02\x03"
    one.scope_spans[1].spans[0].span_id = bytes(8)
    two.scope_spans[0].spans[0].start_time_unix_nano = 0
    two.scope_spans[0].spans[1].end_time_unix_nano = (
        two.scope_spans[0].spans[1].start_time_unix_nano - 1
    )
    two.scope_spans[0].spans[2].parent_span_id = b"\x01"
    batch = map_traces(request)
    assert [(index, row["name"]) for index, row in batch.spans] == [(0, "s0"), (2, "s2")]
    span = enums_pb2.SIGNAL_TYPE_SPAN
    start = two.scope_spans[0].spans[1].start_time_unix_nano
    assert list(batch.refused) == [
        telemetry_pb2.IngestError(
            signal=span,
            index=1,
            message="trace_id must be 16 bytes (32 hex characters), got 3 bytes",
        ),
        telemetry_pb2.IngestError(
            signal=span,
            index=3,
            message="span_id is all zeros, which OpenTelemetry defines as invalid",
        ),
        telemetry_pb2.IngestError(
            signal=span,
            index=4,
            message="start_time_unix_nano is missing: a span needs the time it began",
        ),
        telemetry_pb2.IngestError(
            signal=span,
            index=5,
            message=(f"end_time_unix_nano ({start - 1}) is before start_time_unix_nano ({start})"),
        ),
        telemetry_pb2.IngestError(
            signal=span,
            index=6,
            message="parent_span_id must be 8 bytes (16 hex characters), got 1 bytes",
        ),
    ]


def test_an_all_zero_trace_id_is_refused_and_an_all_zero_parent_is_no_parent() -> None:
    request = _mixed_request()
    spans = request.resource_spans[0].scope_spans[0].spans
    spans[0].trace_id = bytes(16)
    spans[1].parent_span_id = bytes(8)
    batch = map_traces(request)
    assert [(error.index, error.message) for error in batch.refused] == [
        (0, "trace_id is all zeros, which OpenTelemetry defines as invalid")
    ]
    assert dict(batch.spans)[1]["is_root"] is True


def test_an_empty_request() -> None:
    batch = map_traces(ExportTraceServiceRequest())
    assert (batch.spans, list(batch.refused)) == ([], [])


def test_rows_are_json_documents() -> None:
    row = span_row(
        {
            "gen_ai.operation.name": "chat",
            "gen_ai.request.model": "gpt-4o",
            "gen_ai.usage.input_tokens": 3,
            "gen_ai.input.messages": '[{"role": "user", "parts": []}]',
        }
    )
    json.dumps(row)  # every value is JSON-able: no protobuf objects leak into a row
