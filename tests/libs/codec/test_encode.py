"""encode writes the spec's JSON, not proto3's default mapping."""

from __future__ import annotations

import pytest
from google.protobuf import json_format
from google.protobuf.timestamp_pb2 import Timestamp

from mcpd import codec
from mcpd.model.v1 import enums_pb2, query_pb2, telemetry_pb2


def test_names_enums_and_presence() -> None:
    span = telemetry_pb2.Span(
        trace_id="t", span_id="s", name="n", kind=enums_pb2.SPAN_KIND_AGENT_RUN, duration_ns=0
    )
    encoded = codec.encode(span)
    assert encoded == {
        "trace_id": "t",
        "span_id": "s",
        "name": "n",
        "kind": "agent_run",
        # Present with presence, so written even though zero.
        "duration_ns": 0,
        # Always written: scalars without presence and repeated fields.
        "is_root": False,
        "is_event": False,
        "links": [],
        "tags": [],
    }
    # proto3's own mapping differs on every one of these points; that is why the codec exists.
    default = json_format.MessageToDict(span)
    assert default["kind"] == "SPAN_KIND_AGENT_RUN"
    assert "traceId" in default


def test_unspecified_enum_is_never_written() -> None:
    assert "kind" not in codec.encode(telemetry_pb2.Span())
    # Also not inside repeated enums and not on an optional enum explicitly set to zero.
    logs = codec.encode(telemetry_pb2.Span(entity_kind=enums_pb2.ENTITY_KIND_UNSPECIFIED))
    assert "entity_kind" not in logs


def test_unknown_enum_number_is_an_encode_error() -> None:
    caps = query_pb2.StoreCapabilities()
    caps.text_search = 99  # type: ignore[assignment]
    with pytest.raises(codec.EncodeError) as caught:
        codec.encode(caps)
    assert caught.value.field == "text_search"


@pytest.mark.parametrize(
    ("seconds", "nanos", "text"),
    [
        (1_777_488_151, 125_000_000, "2026-04-29T18:42:31.125Z"),
        # Finer precision is truncated, never rounded up into the next millisecond.
        (1_777_488_151, 125_999_999, "2026-04-29T18:42:31.125Z"),
        (1_777_488_151, 0, "2026-04-29T18:42:31.000Z"),
        (0, 1_000_000, "1970-01-01T00:00:00.001Z"),
        (-1, 0, "1969-12-31T23:59:59.000Z"),
        (-62_135_596_800, 0, "0001-01-01T00:00:00.000Z"),
        (253_402_300_799, 999_999_999, "9999-12-31T23:59:59.999Z"),
    ],
)
def test_timestamps_are_utc_milliseconds(seconds: int, nanos: int, text: str) -> None:
    span = telemetry_pb2.Span(start_time=Timestamp(seconds=seconds, nanos=nanos))
    assert codec.encode(span)["start_time"] == text
    assert codec.nanos_to_json(seconds * 1_000_000_000 + nanos, "start_time") == text


def test_timestamp_out_of_range_is_an_encode_error() -> None:
    span = telemetry_pb2.Span(start_time=Timestamp(seconds=253_402_300_800))
    with pytest.raises(codec.EncodeError, match="start_time"):
        codec.encode(span)
    with pytest.raises(codec.EncodeError, match="end_time"):
        codec.nanos_to_json(253_402_300_800 * 1_000_000_000, "end_time")


def test_64_bit_integers_are_numbers() -> None:
    health = query_pb2.HealthStatus(uptime_seconds=2**64 - 1)
    assert codec.encode(health)["uptime_seconds"] == 18446744073709551615


def test_json_fields_are_plain_json() -> None:
    span = telemetry_pb2.Span()
    span.input.struct_value.update({"n": 3, "half": 0.5, "big": 2.0**60, "list": [True, None, "x"]})
    encoded = codec.encode(span)["input"]
    # An integral double goes out as an integer when it is one exactly.
    assert encoded == {"n": 3, "half": 0.5, "big": 2.0**60, "list": [True, None, "x"]}
    assert isinstance(encoded["n"], int)
    assert isinstance(encoded["big"], float)


def test_non_finite_doubles_are_an_encode_error() -> None:
    span = telemetry_pb2.Span()
    span.cost.total_cost = float("nan")
    with pytest.raises(codec.EncodeError) as caught:
        codec.encode(span)
    assert caught.value.field == "cost.total_cost"
    span = telemetry_pb2.Span()
    span.metadata.struct_value.update({"x": float("inf")})
    with pytest.raises(codec.EncodeError, match=r"metadata\.x"):
        codec.encode(span)
