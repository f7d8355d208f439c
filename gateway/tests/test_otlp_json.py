"""OTLP/JSON reading: the fast reader agrees with json_format wherever it does not decline, and
declines everything json_format refuses."""

from __future__ import annotations

import copy
import json
import random
from typing import Any

import pytest
from google.protobuf.message import Message
from opentelemetry.proto.collector.logs.v1 import logs_service_pb2
from opentelemetry.proto.collector.metrics.v1 import metrics_service_pb2
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2

from gateway.otlp import _json, _json_fast
from gateway.tests.otlp_samples import json_traces, otlp_json, rich_logs, rich_metrics, rich_traces
from mcpd.runtime.errors import InvalidArgument

TRACES = trace_service_pb2.ExportTraceServiceRequest


def reference(message_class: type[Message], document: dict[str, Any]) -> Message:
    return _json.parse_reference(message_class, copy.deepcopy(document))


@pytest.mark.parametrize("sample", [rich_traces, rich_logs, rich_metrics])
def test_what_exporters_write_is_read_fast_and_exactly(sample: Any) -> None:
    message = sample()
    document = json.loads(otlp_json(message))
    fast = _json_fast.read(type(message), copy.deepcopy(document))
    assert fast == message
    assert reference(type(message), document) == message


def test_the_fast_reader_leaves_the_document_alone() -> None:
    document = json.loads(otlp_json(rich_traces()))
    before = copy.deepcopy(document)
    _json_fast.read(TRACES, document)
    assert document == before


def span_with(**fields: Any) -> dict[str, Any]:
    span = {"traceId": "00" * 16, "spanId": "11" * 8, "name": "s", **fields}
    return {"resourceSpans": [{"scopeSpans": [{"spans": [span]}]}]}


def attribute(value: dict[str, Any]) -> dict[str, Any]:
    return span_with(attributes=[{"key": "k", "value": value}])


# Forms json_format reads and the fast reader leaves to it: the same message either way.
DECLINED_BUT_VALID = [
    span_with(kind=2**40),  # json_format drops an enum value out of range; upb refuses it
    span_with(kind="SPAN_KIND_SERVER"),
    span_with(startTimeUnixNano=1.0),
    span_with(startTimeUnixNano="1e3"),
    span_with(status={"code": "STATUS_CODE_OK"}),
    attribute({"doubleValue": "NaN"}),
    attribute({"doubleValue": "Infinity"}),
    attribute({"doubleValue": "1.5"}),
    attribute({"bytesValue": "_-8="}),  # URL-safe base64
]
# Forms both read, checked to agree.
FAST = [
    json_traces(),
    span_with(start_time_unix_nano="18446744073709551615"),  # proto names are accepted too
    span_with(kind=2, droppedEventsCount=0, futureField={"nested": [1, 2]}),
    span_with(parentSpanId=""),
    span_with(spanId="00" * 8, span_id="11" * 8),  # both spellings: the last one wins
    span_with(traceState=None),
    attribute({"intValue": -5}),
    attribute({"intValue": "-9223372036854775808"}),
    attribute({"doubleValue": 3}),
    attribute({"bytesValue": ""}),
    attribute({"arrayValue": {}}),
]
INVALID = [
    span_with(spanId="xyz"),
    span_with(spanId=12),
    span_with(spanId="0" * 15),
    span_with(droppedAttributesCount=-1),
    span_with(droppedAttributesCount="1.5"),
    span_with(startTimeUnixNano="-1"),
    span_with(startTimeUnixNano=True),
    span_with(name=5),
    span_with(events="not a list"),
    span_with(events=[None]),
    span_with(links=[3]),
    attribute({"boolValue": "true"}),
    attribute({"stringValue": "a", "intValue": 1}),
    attribute({"bytesValue": "not base64!"}),
    {"resourceSpans": {"scopeSpans": []}},
]


@pytest.mark.parametrize("document", DECLINED_BUT_VALID)
def test_unusual_forms_are_left_to_json_format(document: dict[str, Any]) -> None:
    with pytest.raises(_json_fast.DeclinedError):
        _json_fast.read(TRACES, copy.deepcopy(document))
    assert _json.parse(TRACES, json.dumps(document).encode()) == reference(TRACES, document)


@pytest.mark.parametrize("document", FAST)
def test_the_fast_reading_is_json_formats(document: dict[str, Any]) -> None:
    fast = _json_fast.read(TRACES, copy.deepcopy(document))
    assert fast == reference(TRACES, document)


@pytest.mark.parametrize("document", INVALID)
def test_what_json_format_refuses_the_fast_reader_declines(document: dict[str, Any]) -> None:
    with pytest.raises(_json_fast.DeclinedError):
        _json_fast.read(TRACES, copy.deepcopy(document))
    with pytest.raises(InvalidArgument):
        _json.parse(TRACES, json.dumps(document).encode())


def nested(depth: int) -> bytes:
    """A span attribute whose value is arrays in arrays, `depth` deep."""
    value = '{"arrayValue":{"values":[' * depth + '{"stringValue":"leaf"}' + "]}}" * depth
    span = '{"attributes":[{"key":"k","value":' + value + "}]}"
    return ('{"resourceSpans":[{"scopeSpans":[{"spans":[' + span + "]}]}]}").encode()


def test_nesting_within_reason_is_read_fast() -> None:
    document = json.loads(nested(20))
    assert _json_fast.read(TRACES, copy.deepcopy(document)) == reference(TRACES, document)


def test_deeper_nesting_is_left_to_json_format() -> None:
    body = nested(40)
    with pytest.raises(_json_fast.DeclinedError):
        _json_fast.read(TRACES, json.loads(body))
    assert _json.parse(TRACES, body) == reference(TRACES, json.loads(body))


@pytest.mark.parametrize("depth", [60, 5000])
def test_too_deep_is_refused_not_a_crash(depth: int) -> None:
    with pytest.raises(InvalidArgument):
        _json.parse(TRACES, nested(depth))


def test_responses_are_proto3_json() -> None:
    response = logs_service_pb2.ExportLogsServiceResponse(
        partial_success=logs_service_pb2.ExportLogsPartialSuccess(
            rejected_log_records=2**40, error_message="x"
        )
    )
    assert json.loads(_json.encode(response)) == {
        "partialSuccess": {"rejectedLogRecords": str(2**40), "errorMessage": "x"}
    }
    assert _json.encode(metrics_service_pb2.ExportMetricsServiceResponse()) == b"{}"


ODD_VALUES: list[Any] = [
    None, True, 0, -1, 1.5, 2**64, "", "x", "-3", "1e3", "NaN", "AAAA", "00ff", "0" * 32,
    [], [1], [None], [{}], {}, {"a": 1}, "\ud800",
]  # fmt: skip


def mutated(document: dict[str, Any], rng: random.Random) -> dict[str, Any]:
    """`document` with one to three values somewhere replaced by odd ones."""
    document = copy.deepcopy(document)
    for _ in range(rng.randint(1, 3)):
        node: Any = document
        while True:
            keys = list(node) if isinstance(node, dict) else list(range(len(node)))
            if not keys:
                break
            key = rng.choice(keys)
            child = node[key]
            if not isinstance(child, dict | list) or not child or rng.random() < 0.2:
                node[key] = copy.deepcopy(rng.choice(ODD_VALUES))
                break
            node = child
    # Through JSON and back, as a body arrives.
    loaded: dict[str, Any] = json.loads(json.dumps(document))
    return loaded


@pytest.mark.parametrize("sample", [rich_traces, rich_logs, rich_metrics])
def test_mutated_documents_are_read_alike_or_refused(sample: Any) -> None:
    message_class = type(sample())
    base = json.loads(otlp_json(sample()))
    rng = random.Random(20260429)
    read_fast = 0
    for _ in range(300):
        document = mutated(base, rng)
        try:
            expected: Message | None = reference(message_class, document)
        except InvalidArgument:
            expected = None
        try:
            fast = _json_fast.read(message_class, copy.deepcopy(document))
        except _json_fast.DeclinedError:
            fast = None
        if fast is not None:
            read_fast += 1
            assert fast == expected, json.dumps(document)
        try:
            assert _json.parse(message_class, json.dumps(document).encode()) == expected
        except InvalidArgument:
            assert expected is None
    assert read_fast > 0
