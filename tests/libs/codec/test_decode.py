"""decode is strict: each refusal is an InvalidArgument naming the field path and what it wanted."""

from __future__ import annotations

from typing import Any

import pytest

from mcpd import codec
from mcpd.model.v1 import enums_pb2, query_pb2, runs_pb2, telemetry_pb2
from mcpd.runtime.errors import InvalidArgument


def refused(data: Any, message_type: type[Any], **kwargs: str) -> codec.CodecError:
    with pytest.raises(codec.CodecError) as caught:
        codec.decode(data, message_type, **kwargs)
    return caught.value


@pytest.mark.parametrize(
    ("document", "field", "expected"),
    [
        ({"spans": [{"start_time": 5}]}, "spans[0].start_time", "RFC 3339"),
        ({"spans": [{}, {"end_time": "2026-04-29 18:42:31Z"}]}, "spans[1].end_time", "RFC 3339"),
        ({"spans": [{"start_time": "2026-02-30T00:00:00Z"}]}, "spans[0].start_time", "valid date"),
        ({"spans": [{"start_time": "2026-04-29T23:59:60Z"}]}, "spans[0].start_time", "valid date"),
        ({"spans": [{"start_time": "2026-04-29T18:42:31"}]}, "spans[0].start_time", "RFC 3339"),
        ({"spans": [{"name": 5}]}, "spans[0].name", "a string"),
        ({"spans": [{"is_root": "true"}]}, "spans[0].is_root", "true or false"),
        ({"spans": [{"is_root": 1}]}, "spans[0].is_root", "true or false"),
        ({"spans": [{"duration_ns": 1.5}]}, "spans[0].duration_ns", "integer (uint64)"),
        ({"spans": [{"duration_ns": 2.0}]}, "spans[0].duration_ns", "integer (uint64)"),
        ({"spans": [{"duration_ns": True}]}, "spans[0].duration_ns", "integer (uint64)"),
        ({"spans": [{"duration_ns": -1}]}, "spans[0].duration_ns", "out of range"),
        ({"spans": [{"duration_ns": 2**64}]}, "spans[0].duration_ns", "out of range"),
        ({"spans": [{"duration_ns": "1e3"}]}, "spans[0].duration_ns", "integer (uint64)"),
        ({"spans": [{"duration_ns": " 12"}]}, "spans[0].duration_ns", "integer (uint64)"),
        ({"spans": [{"kind": "AGENT_RUN"}]}, "spans[0].kind", "agent_run"),
        ({"spans": [{"kind": "SPAN_KIND_AGENT_RUN"}]}, "spans[0].kind", "one of"),
        ({"spans": [{"kind": "unspecified"}]}, "spans[0].kind", "one of"),
        ({"spans": [{"kind": 1}]}, "spans[0].kind", "SpanKind name"),
        ({"spans": [{"tags": "a"}]}, "spans[0].tags", "a JSON array"),
        ({"spans": [{"tags": ["a", 1]}]}, "spans[0].tags[1]", "a string"),
        ({"spans": [{"tags": None}]}, "spans[0].tags", "a JSON array"),
        ({"spans": [{"name": None}]}, "spans[0].name", "a string"),
        ({"spans": [{"usage": "lots"}]}, "spans[0].usage", "a JSON object (TokenUsage)"),
        ({"spans": [{"usage": {"input_tokens": 2**64}}]}, "spans[0].usage.input_tokens", "range"),
        ({"spans": [{"input": {"x": [1, float("nan")]}}]}, "spans[0].input.x[1]", "finite"),
        ({"spans": [{"cost": {"total_cost": float("inf")}}]}, "spans[0].cost.total_cost", "finite"),
        ({"spans": [{"cost": {"total_cost": "1.5"}}]}, "spans[0].cost.total_cost", "a number"),
        ({"spans": [{"cost": {"total_cost": 10**400}}]}, "spans[0].cost.total_cost", "range"),
        ({"spans": {"0": {}}}, "spans", "a JSON array"),
        ({"ingest_key": ["k"]}, "ingest_key", "a string"),
    ],
)
def test_refusals_name_the_path(document: Any, field: str, expected: str) -> None:
    err = refused(document, telemetry_pb2.IngestBatch)
    assert isinstance(err, InvalidArgument)
    assert err.field == field
    assert err.message.startswith(f"{field}: ")
    assert expected in err.message
    assert err.reason == "INVALID_FIELD"


def test_unknown_fields_are_refused_with_their_own_reason() -> None:
    err = refused({"spans": [{"trace_id": "t", "traceId": "t"}]}, telemetry_pb2.IngestBatch)
    assert err.field == "spans[0].traceId"
    assert err.reason == codec.UNKNOWN_FIELD
    assert "Span" in err.message


def test_top_level_must_be_an_object() -> None:
    err = refused([], telemetry_pb2.IngestBatch)
    assert err.field == ""
    assert "a JSON object (IngestBatch)" in err.message


def test_path_prefix_is_prepended() -> None:
    err = refused({"kind": "bogus"}, telemetry_pb2.Span, path="signal")
    assert err.field == "signal.kind"


def test_unsigned_32_bit_bounds() -> None:
    assert codec.decode({"span_count": 2**32 - 1}, telemetry_pb2.Trace).span_count == 2**32 - 1
    assert refused({"span_count": 2**32}, telemetry_pb2.Trace).field == "span_count"
    # Only 64-bit integers may travel as strings.
    assert "uint32" in refused({"span_count": "5"}, telemetry_pb2.Trace).message


def test_64_bit_integers_accept_numbers_and_integer_strings() -> None:
    health = codec.decode({"uptime_seconds": "18446744073709551615"}, query_pb2.HealthStatus)
    assert health.uptime_seconds == 2**64 - 1
    assert codec.decode({"uptime_seconds": 12}, query_pb2.HealthStatus).uptime_seconds == 12
    for bad in ("-1", "18446744073709551616", "0x10", "012", "", "1.0"):
        err = refused({"uptime_seconds": bad}, query_pb2.HealthStatus)
        assert err.field == "uptime_seconds", bad


def test_doubles_accept_integers() -> None:
    run = codec.decode({"cost_usd": 3}, runs_pb2.Run)
    assert run.cost_usd == 3.0


def test_null_means_absent_only_where_absence_exists() -> None:
    span = codec.decode(
        {"parent_span_id": None, "usage": None, "end_time": None}, telemetry_pb2.Span
    )
    assert not span.HasField("parent_span_id")
    assert not span.HasField("usage")
    assert not span.HasField("end_time")
    # A json field takes null as its value, which is not the same as absent.
    span = codec.decode({"output": None}, telemetry_pb2.Span)
    assert span.HasField("output")
    assert span.output.WhichOneof("kind") == "null_value"
    assert codec.encode(span)["output"] is None


def test_optional_zero_values_are_present() -> None:
    health = codec.decode({"signup": False, "storage": ""}, query_pb2.HealthStatus)
    assert health.HasField("signup")
    assert health.HasField("storage")
    encoded = codec.encode(health)
    assert encoded["signup"] is False
    assert encoded["storage"] == ""


def test_enum_names_decode_to_numbers() -> None:
    caps = codec.decode(
        {"text_search": "none", "partitioning": "month"}, query_pb2.StoreCapabilities
    )
    assert caps.text_search == enums_pb2.TEXT_SEARCH_NONE
    assert caps.partitioning == enums_pb2.PARTITIONING_MONTH
    err = refused({"text_search": "fuzzy"}, query_pb2.StoreCapabilities)
    assert "none, substring, words" in err.message


def nested(depth: int) -> object:
    # Objects are the costly case: Value, Struct and a map entry per level.
    value: object = ["leaf"]
    for _ in range(depth - 1):
        value = {"a": value}
    return value


def test_json_depth_is_bounded_where_protobuf_would_choke() -> None:
    # Accepted depth must survive a protobuf round trip inside a batch (what the upstream parses).
    batch = codec.decode({"spans": [{"input": nested(24)}]}, telemetry_pb2.IngestBatch)
    assert telemetry_pb2.IngestBatch.FromString(batch.SerializeToString()) == batch
    err = refused({"spans": [{"input": nested(25)}]}, telemetry_pb2.IngestBatch)
    assert err.field is not None
    assert err.field.startswith("spans[0].input")
    assert "deeper than 24" in err.message


def test_a_key_protobuf_cannot_name_is_an_unknown_field() -> None:
    # `json.loads` makes a lone surrogate of the escape "\ud800"; such a key is no field name
    # (upb's own lookup by name used to fail on it with a SystemError, an internal error).
    lone_surrogate = "\ud800"
    with pytest.raises(codec.CodecError) as caught:
        codec.decode({"spans": [{lone_surrogate: 1}]}, telemetry_pb2.IngestBatch)
    assert caught.value.field == f"spans[0].{lone_surrogate}"
    assert caught.value.reason == codec.UNKNOWN_FIELD
