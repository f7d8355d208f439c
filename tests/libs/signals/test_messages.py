"""Spec messages to rows and back: every field of every kind survives the round trip, and the
row follows `mcpd.signals.rows`' conventions."""

from __future__ import annotations

from typing import Any

import pytest
from google.protobuf import struct_pb2, timestamp_pb2

from mcpd.model.v1 import enums_pb2, telemetry_pb2
from mcpd.signals.messages import (
    aspect_note_message,
    aspect_note_row,
    feedback_message,
    feedback_row,
    log_message,
    log_row,
    metric_message,
    metric_row,
    python_of,
    score_message,
    score_row,
    span_message,
    span_row,
    trace_message,
    value_of,
)
from mcpd.signals.rows import TraceRow

START = 1_767_225_600_123_456_789
END = START + 2_500_000_000


def ts(nanos: int) -> timestamp_pb2.Timestamp:
    return timestamp_pb2.Timestamp(seconds=nanos // 1_000_000_000, nanos=nanos % 1_000_000_000)


def correlation() -> telemetry_pb2.Correlation:
    return telemetry_pb2.Correlation(
        project="shop",
        environment="production",
        service_name="checkout",
        service_version="1.4.2",
        session_id="sess-1",
        thread_id="thread-1",
        user_id="u-digest",
        resource_id="res-1",
        run_id="run-1",
        request_id="req-1",
        experiment_id="exp-1",
        release="2026.01",
    )


CORRELATION_COLUMNS = {
    "project": "shop",
    "environment": "production",
    "service_name": "checkout",
    "service_version": "1.4.2",
    "session_id": "sess-1",
    "thread_id": "thread-1",
    "user_id": "u-digest",
    "resource_id": "res-1",
    "run_id": "run-1",
    "request_id": "req-1",
    "experiment_id": "exp-1",
    "release": "2026.01",
}
DOCUMENT = {"messages": [{"role": "user", "content": "hi"}], "n": 3, "ok": True, "none": None}


def full_span() -> telemetry_pb2.Span:
    return telemetry_pb2.Span(
        trace_id="t1",
        span_id="s2",
        parent_span_id="s1",
        external_parent_span_id="ext-9",
        name="call model",
        kind=enums_pb2.SPAN_KIND_MODEL_INFERENCE,
        status=enums_pb2.SPAN_STATUS_ERROR,
        start_time=ts(START),
        end_time=ts(END),
        duration_ns=END - START,
        is_root=True,
        is_event=True,
        entity_kind=enums_pb2.ENTITY_KIND_MODEL,
        entity_id="m-1",
        entity_name="gpt",
        input=value_of(DOCUMENT),
        output=value_of("plain text"),
        attributes=value_of({"http.status": 500, "ratio": 0.25}),
        metadata=value_of([1, "two", [3]]),
        usage=telemetry_pb2.TokenUsage(
            input_tokens=100,
            output_tokens=20,
            total_tokens=120,
            input_details=telemetry_pb2.InputTokenDetails(
                text=70,
                cache_read=30,
                cache_write=0,
                cache_write_5m=1,
                cache_write_1h=2,
                audio=3,
                image=4,
            ),
            output_details=telemetry_pb2.OutputTokenDetails(text=15, reasoning=5, audio=0, image=1),
        ),
        cost=telemetry_pb2.Cost(
            currency="USD",
            input_cost=0.001,
            output_cost=0.002,
            total_cost=0.003,
            price_book="default-2026",
            is_estimated=True,
        ),
        model_parameters=telemetry_pb2.ModelParameters(
            temperature=0.2,
            top_p=0.9,
            top_k=40,
            max_tokens=512,
            seed=-7,
            stop_sequences=["\n\n", "END"],
            has_response_format=True,
        ),
        error=telemetry_pb2.SpanError(
            message="rate limited",
            kind="RateLimit",
            stack="Traceback ...",
            domain="provider",
            retryable=True,
            details=value_of({"retry_after_ms": 1200}),
        ),
        links=[
            telemetry_pb2.SpanLink(
                trace_id="t0", span_id="s9", kind="follows_from", attributes=value_of({"a": 1})
            ),
            telemetry_pb2.SpanLink(trace_id="t8"),
        ],
        tags=["beta", "eu"],
        correlation=correlation(),
        model="gpt-4o",
        provider="openai",
        received_at=ts(END + 1),
        ingest_key="key-1",
    )


def test_span_row_follows_the_row_conventions() -> None:
    row = span_row(full_span())

    assert row == {
        **CORRELATION_COLUMNS,
        "trace_id": "t1",
        "span_id": "s2",
        "parent_span_id": "s1",
        "external_parent_span_id": "ext-9",
        "name": "call model",
        "kind": "model_inference",
        "status": "error",
        "start_time": START,
        "end_time": END,
        "duration_ns": END - START,
        "is_root": True,
        "is_event": True,
        "entity_kind": "model",
        "entity_id": "m-1",
        "entity_name": "gpt",
        "input": DOCUMENT,
        "output": "plain text",
        "attributes": {"http.status": 500, "ratio": 0.25},
        "metadata": [1, "two", [3]],
        "input_tokens": 100,
        "output_tokens": 20,
        "total_tokens": 120,
        "usage_details": {
            "input": {
                "text": 70,
                "cache_read": 30,
                "cache_write": 0,
                "cache_write_5m": 1,
                "cache_write_1h": 2,
                "audio": 3,
                "image": 4,
            },
            "output": {"text": 15, "reasoning": 5, "audio": 0, "image": 1},
        },
        "cost_currency": "USD",
        "input_cost": 0.001,
        "output_cost": 0.002,
        "total_cost": 0.003,
        "cost_price_book": "default-2026",
        "cost_is_estimated": True,
        "model_parameters": {
            "temperature": 0.2,
            "top_p": 0.9,
            "top_k": 40,
            "max_tokens": 512,
            "seed": -7,
            "stop_sequences": ["\n\n", "END"],
            "has_response_format": True,
        },
        "error": {
            "message": "rate limited",
            "kind": "RateLimit",
            "stack": "Traceback ...",
            "domain": "provider",
            "retryable": True,
            "details": {"retry_after_ms": 1200},
        },
        "links": [
            {"trace_id": "t0", "span_id": "s9", "kind": "follows_from", "attributes": {"a": 1}},
            {"trace_id": "t8"},
        ],
        "tags": ["beta", "eu"],
        "model": "gpt-4o",
        "provider": "openai",
        "received_at": END + 1,
        "ingest_key": "key-1",
    }
    # Whole numbers inside documents come back as ints, not floats.
    assert isinstance(row["attributes"]["http.status"], int)


def test_span_round_trips_every_field() -> None:
    message = full_span()
    assert span_message(span_row(message)) == message


def test_an_empty_span_has_every_key_and_none_for_what_is_absent() -> None:
    row = span_row(telemetry_pb2.Span(trace_id="t1", span_id="s1"))

    assert len(row) == len(span_row(full_span()))
    assert row["kind"] is None  # UNSPECIFIED: the validator says "kind is required"
    assert row["status"] is None
    assert row["start_time"] is None
    assert row["received_at"] is None
    assert row["project"] == ""
    assert row["input"] is None
    assert row["usage_details"] is None
    assert row["cost_currency"] is None
    assert row["cost_is_estimated"] is None
    assert row["tags"] is None
    assert row["links"] is None
    assert row["is_root"] is False
    assert all(row[name] is None for name in CORRELATION_COLUMNS if name != "project")
    assert span_message(row) == telemetry_pb2.Span(
        trace_id="t1", span_id="s1", correlation=telemetry_pb2.Correlation()
    )


def test_usage_details_hold_only_the_fields_set() -> None:
    message = telemetry_pb2.Span(
        usage=telemetry_pb2.TokenUsage(
            output_tokens=9,
            input_details=telemetry_pb2.InputTokenDetails(cache_read=0),
            output_details=telemetry_pb2.OutputTokenDetails(),
        )
    )
    row = span_row(message)
    assert row["usage_details"] == {"input": {"cache_read": 0}}
    assert (row["input_tokens"], row["output_tokens"], row["total_tokens"]) == (None, 9, None)


def test_a_cost_with_only_a_currency_keeps_its_flag() -> None:
    row = span_row(telemetry_pb2.Span(cost=telemetry_pb2.Cost(currency="EUR")))
    assert (row["cost_currency"], row["total_cost"], row["cost_is_estimated"]) == (
        "EUR",
        None,
        False,
    )


def test_trace_message_carries_every_projection_column() -> None:
    row: TraceRow = {
        **CORRELATION_COLUMNS,  # type: ignore[typeddict-item]
        "trace_id": "t1",
        "root_span_id": "s1",
        "name": "agent",
        "kind": "agent_run",
        "status": "ok",
        "start_time": START,
        "end_time": END,
        "duration_ns": END - START,
        "span_count": 7,
        "error_count": 1,
        "model_count": 2,
        "tool_count": 3,
        "input_tokens": 10,
        "output_tokens": 5,
        "total_tokens": 15,
        "usage_details": {"input": {"cache_read": 4}},
        "cost_currency": "USD",
        "input_cost": 0.5,
        "output_cost": 0.25,
        "total_cost": 0.75,
        "cost_price_book": "pb",
        "cost_is_estimated": False,
        "tags": ["a"],
        "score_summary": {"relevance": 0.75},
        "feedback_summary": {"thumbs": {"up": 2}},
        "is_complete": True,
        "received_at": END + 5,
    }

    assert trace_message(row) == telemetry_pb2.Trace(
        trace_id="t1",
        root_span_id="s1",
        name="agent",
        kind=enums_pb2.SPAN_KIND_AGENT_RUN,
        status=enums_pb2.SPAN_STATUS_OK,
        start_time=ts(START),
        end_time=ts(END),
        duration_ns=END - START,
        span_count=7,
        error_count=1,
        usage=telemetry_pb2.TokenUsage(
            input_tokens=10,
            output_tokens=5,
            total_tokens=15,
            input_details=telemetry_pb2.InputTokenDetails(cache_read=4),
        ),
        cost=telemetry_pb2.Cost(
            currency="USD",
            input_cost=0.5,
            output_cost=0.25,
            total_cost=0.75,
            price_book="pb",
            is_estimated=False,
        ),
        model_count=2,
        tool_count=3,
        tags=["a"],
        correlation=correlation(),
        score_summary=value_of({"relevance": 0.75}),
        feedback_summary=value_of({"thumbs": {"up": 2}}),
        is_complete=True,
        received_at=ts(END + 5),
    )


def test_log_round_trips_every_field() -> None:
    message = telemetry_pb2.LogRecord(
        log_id="l1",
        trace_id="t1",
        span_id="s1",
        timestamp=ts(START),
        level=enums_pb2.LOG_LEVEL_WARN,
        message="slow",
        fields=value_of({"ms": 812}),
        logger="app.db",
        correlation=correlation(),
        received_at=ts(END),
    )
    row = log_row(message)
    assert (row["level"], row["timestamp"], row["fields"], row["received_at"]) == (
        "warn",
        START,
        {"ms": 812},
        END,
    )
    assert log_message(row) == message


def test_metric_round_trips_every_field() -> None:
    message = telemetry_pb2.MetricPoint(
        metric_id="m1",
        name="latency",
        kind=enums_pb2.METRIC_KIND_HISTOGRAM,
        value=12.5,
        unit="ms",
        timestamp=ts(START),
        labels=value_of({"route": "/pay", "code": 200}),
        buckets=value_of([{"le": 10, "count": 3}, {"le": 100, "count": 9}]),
        trace_id="t1",
        span_id="s1",
        correlation=correlation(),
        received_at=ts(END),
    )
    row = metric_row(message)
    assert (row["kind"], row["labels"], row["unit"]) == (
        "histogram",
        {"route": "/pay", "code": 200},
        "ms",
    )
    assert metric_message(row) == message


def test_score_round_trips_every_field() -> None:
    message = telemetry_pb2.Score(
        score_id="sc1",
        trace_id="t1",
        span_id="s1",
        scorer_id="relevance",
        scorer_version="3",
        source=enums_pb2.SCORE_SOURCE_OFFLINE,
        value=0.0,
        min=0.0,
        max=1.0,
        label="irrelevant",
        reason="off topic",
        score_trace_id="t-judge",
        cost=telemetry_pb2.Cost(currency="USD", total_cost=0.01, is_estimated=True),
        metadata=value_of({"judge": "gpt"}),
        timestamp=ts(START),
        correlation=correlation(),
    )
    row = score_row(message)
    assert (row["source"], row["min"], row["value"]) == ("offline", 0.0, 0.0)
    assert row.get("received_at") is None
    assert (row["cost_currency"], row["total_cost"], row["input_cost"]) == ("USD", 0.01, None)
    assert score_message(row) == message


def test_feedback_round_trips_every_field() -> None:
    message = telemetry_pb2.Feedback(
        feedback_id="f1",
        trace_id="t1",
        span_id="s1",
        kind=enums_pb2.FEEDBACK_KIND_RATING,
        value=value_of(4),
        comment="good",
        author_id="a1",
        author_kind="end_user",
        timestamp=ts(START),
        metadata=value_of({"ui": "web"}),
        correlation=correlation(),
    )
    row = feedback_row(message)
    assert (row["kind"], row["value"]) == ("rating", 4)
    assert row.get("received_at") is None
    assert feedback_message(row) == message


def test_aspect_note_round_trips_every_field() -> None:
    message = telemetry_pb2.AspectNote(
        note_id="n1",
        trace_id="t1",
        aspect="goal",
        text="Wanted a refund.",
        definition_version=3,
        model="small",
        created_at=ts(START),
        correlation=correlation(),
    )
    row = aspect_note_row(message)
    assert (row["definition_version"], row["created_at"]) == (3, START)
    assert row.get("received_at") is None
    assert aspect_note_message(row) == message


def test_values_convert_both_ways() -> None:
    documents: list[Any] = [None, True, False, 0, -3, 2.5, "", "x", [], {}, [None, {"a": []}]]
    for document in documents:
        value = value_of(document)
        assert python_of(value) == document
        assert type(python_of(value)) is type(document)
    assert value_of({}).WhichOneof("kind") == "struct_value"
    assert value_of([]).WhichOneof("kind") == "list_value"
    assert python_of(struct_pb2.Value()) is None
    assert python_of(value_of(2.0**60)) == 2.0**60  # beyond 2**53: stays a float


def test_an_unknown_json_type_is_refused() -> None:
    with pytest.raises(TypeError, match="object is not a JSON value"):
        value_of({"when": object()})
