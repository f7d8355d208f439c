"""Timestamps on the way in, and values read from URLs (decode_query_param)."""

from __future__ import annotations

from typing import Any

import pytest
from google.protobuf.timestamp_pb2 import Timestamp

from mcpd import codec
from mcpd.model.v1 import enums_pb2, telemetry_pb2
from mcpd.query.v1 import query_service_pb2

LIST_TRACES = query_service_pb2.ListTracesRequest.DESCRIPTOR.fields_by_name


@pytest.mark.parametrize(
    ("text", "seconds", "nanos"),
    [
        ("2026-04-29T18:42:31.125Z", 1_777_488_151, 125_000_000),
        ("2026-04-29T18:42:31Z", 1_777_488_151, 0),
        ("2026-04-29t18:42:31z", 1_777_488_151, 0),
        ("2026-04-29T20:42:31.125+02:00", 1_777_488_151, 125_000_000),
        ("2026-04-29T13:12:31.125-05:30", 1_777_488_151, 125_000_000),
        ("2026-04-30T00:12:31.125123456+05:30", 1_777_488_151, 125_123_456),
        ("2026-04-29T18:42:31.1-00:00", 1_777_488_151, 100_000_000),
    ],
)
def test_any_offset_is_normalised_to_utc(text: str, seconds: int, nanos: int) -> None:
    span = codec.decode({"start_time": text}, telemetry_pb2.Span)
    assert (span.start_time.seconds, span.start_time.nanos) == (seconds, nanos)


@pytest.mark.parametrize(
    "text",
    [
        "2026-04-29",
        "2026-04-29T18:42Z",
        "2026-04-29T18:42:31.Z",
        "2026-04-29T18:42:31.1234567890Z",
        "2026-04-29T24:00:00Z",
        "2026-13-01T00:00:00Z",
        "2026-04-29T18:42:31+2:00",
        "2026-04-29T18:42:31+24:00",
        "0000-12-31T23:59:59Z",
        "0001-01-01T00:00:00+00:01",
        "１９７０-01-01T00:00:00Z",
    ],
)
def test_bad_timestamps_are_refused(text: str) -> None:
    with pytest.raises(codec.CodecError) as caught:
        codec.decode({"start_time": text}, telemetry_pb2.Span)
    assert caught.value.field == "start_time"


@pytest.mark.parametrize(
    ("field", "raw", "value"),
    [
        ("limit", "25", 25),
        ("limit", "4294967295", 4294967295),
        ("min_duration_ms", "18446744073709551615", 2**64 - 1),
        ("min_cost", "0.5", 0.5),
        ("min_cost", "-3", -3.0),
        ("min_cost", "1e3", 1000.0),
        ("kind", "agent_run", enums_pb2.SPAN_KIND_AGENT_RUN),
        ("status", "cancelled", enums_pb2.SPAN_STATUS_CANCELLED),
        ("name", "with spaces, and commas", "with spaces, and commas"),
        ("name", "", ""),
        ("from", "2026-04-29T18:42:31.125Z", Timestamp(seconds=1_777_488_151, nanos=125_000_000)),
    ],
)
def test_query_values(field: str, raw: str, value: Any) -> None:
    assert codec.decode_query_param(LIST_TRACES[field], raw, field) == value


@pytest.mark.parametrize(
    ("field", "raw", "expected"),
    [
        ("limit", "-1", "out of range"),
        ("limit", "4294967296", "out of range"),
        ("limit", "2.0", "integer (uint32)"),
        ("limit", "", "integer (uint32)"),
        ("limit", "+5", "integer (uint32)"),
        ("min_cost", "nan", "finite"),
        ("min_cost", "Infinity", "finite"),
        ("min_cost", "-inf", "finite"),
        ("min_cost", "1E+400", "finite"),
        ("min_cost", "1_000", "finite decimal"),
        ("min_cost", "１", "finite decimal"),
        ("limit", "１", "integer (uint32)"),
        ("min_cost", " 1", "finite"),
        ("min_cost", "cheap", "finite decimal"),
        ("kind", "AGENT_RUN", "one of"),
        ("kind", "unspecified", "one of"),
        ("from", "now", "RFC 3339"),
    ],
)
def test_bad_query_values(field: str, raw: str, expected: str) -> None:
    with pytest.raises(codec.CodecError) as caught:
        codec.decode_query_param(LIST_TRACES[field], raw, f"q.{field}")
    assert caught.value.field == f"q.{field}"
    assert expected in caught.value.message


def test_query_bools() -> None:
    field = telemetry_pb2.Span.DESCRIPTOR.fields_by_name["is_root"]
    assert codec.decode_query_param(field, "true", "is_root") is True
    assert codec.decode_query_param(field, "false", "is_root") is False
    for bad in ("True", "1", "yes", ""):
        with pytest.raises(codec.CodecError):
            codec.decode_query_param(field, bad, "is_root")


def test_what_a_url_can_carry() -> None:
    span = telemetry_pb2.Span.DESCRIPTOR.fields_by_name
    assert codec.query_bindable(span["start_time"])
    assert codec.query_bindable(span["tags"])
    assert not codec.query_bindable(span["usage"])
    assert not codec.query_bindable(span["input"])
    with pytest.raises(TypeError):
        codec.decode_query_param(span["usage"], "{}", "usage")
