"""OTLP/HTTP through the gateway: HTTP client -> ASGI app -> real gRPC collector -> answer back."""

from __future__ import annotations

import asyncio
import gzip
import json
import time
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

import grpc.aio
import httpx
import pytest
from google.protobuf import json_format
from google.rpc import code_pb2, error_details_pb2, status_pb2
from opentelemetry.proto.collector.logs.v1 import logs_service_pb2
from opentelemetry.proto.collector.metrics.v1 import metrics_service_pb2
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2
from opentelemetry.proto.trace.v1 import trace_pb2
from starlette.types import Message

import gateway.otlp
from gateway.app import create_app
from gateway.otlp import LOGS, METRICS, SIGNALS, TRACES
from gateway.tests.otlp_collector import Upstream, running_collector
from gateway.tests.otlp_samples import CHILD_ID, ROOT_ID, TRACE_ID, json_traces, otlp_json, traces

PROTOBUF = {"content-type": "application/x-protobuf"}
JSON = {"content-type": "application/json"}
LIMIT = 64 * 1024


@pytest.fixture
async def otlp_upstream() -> AsyncIterator[Upstream]:
    async with running_collector() as upstream:
        yield upstream


@pytest.fixture
async def client(otlp_upstream: Upstream) -> AsyncIterator[httpx.AsyncClient]:
    app = otlp_upstream.app(default_deadline_s=5.0, otlp_max_body_bytes=LIMIT)
    transport = httpx.ASGITransport(app=app, client=("203.0.113.9", 4711))
    async with httpx.AsyncClient(transport=transport, base_url="http://gateway") as client:
        yield client


def assert_status(
    response: httpx.Response, http: int, code: int, reason: str | None = None
) -> status_pb2.Status:
    """The response is a google.rpc.Status in the request's encoding; returns it."""
    assert response.status_code == http, response.content
    if response.headers["content-type"] == "application/json":
        status = json_format.Parse(response.content, status_pb2.Status())
    else:
        assert response.headers["content-type"] == "application/x-protobuf"
        status = status_pb2.Status.FromString(response.content)
    assert status.code == code
    assert status.message
    if reason is not None:
        assert error_info(status).reason == reason
    return status


def error_info(status: status_pb2.Status) -> error_details_pb2.ErrorInfo:
    for detail in status.details:
        if detail.Is(error_details_pb2.ErrorInfo.DESCRIPTOR):
            info = error_details_pb2.ErrorInfo()
            detail.Unpack(info)
            return info
    raise AssertionError(f"no ErrorInfo in {status}")


def bad_request(status: status_pb2.Status) -> error_details_pb2.BadRequest:
    for detail in status.details:
        if detail.Is(error_details_pb2.BadRequest.DESCRIPTOR):
            found = error_details_pb2.BadRequest()
            detail.Unpack(found)
            return found
    raise AssertionError(f"no BadRequest in {status}")


def test_public_names() -> None:
    assert set(gateway.otlp.__all__) == {
        "LOGS",
        "MAX_BODY_BYTES",
        "METRICS",
        "OPENAPI_PATHS",
        "SERVICES",
        "SIGNALS",
        "TRACES",
        "OtlpReceiver",
        "Signal",
    }
    assert gateway.otlp.SERVICES == (
        "opentelemetry.proto.collector.trace.v1.TraceService",
        "opentelemetry.proto.collector.logs.v1.LogsService",
        "opentelemetry.proto.collector.metrics.v1.MetricsService",
    )
    assert gateway.otlp.MAX_BODY_BYTES == 20 * 1024 * 1024


async def test_protobuf_goes_upstream_as_sent(
    client: httpx.AsyncClient, otlp_upstream: Upstream
) -> None:
    sent = traces("chat gpt-4o", "execute_tool search")
    response = await client.post("/v1/traces", content=sent.SerializeToString(), headers=PROTOBUF)
    assert response.status_code == 200, response.content
    assert response.headers["content-type"] == "application/x-protobuf"
    answer = trace_service_pb2.ExportTraceServiceResponse.FromString(response.content)
    assert not answer.HasField("partial_success")
    assert otlp_upstream.collector.last(TRACES) == sent
    assert otlp_upstream.asked_for == ["opentelemetry.proto.collector.trace.v1.TraceService"]


async def test_caller_headers_are_forwarded_as_the_rest_gateway_does(
    client: httpx.AsyncClient, otlp_upstream: Upstream
) -> None:
    traceparent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
    headers = {
        **PROTOBUF,
        "authorization": "Bearer mcpd_k_123",
        "traceparent": traceparent,
        "x-forwarded-for": "198.51.100.1",
    }
    response = await client.post("/v1/logs", content=b"", headers=headers)
    assert response.status_code == 200, response.content
    metadata = otlp_upstream.collector.exports[-1].metadata
    assert metadata["authorization"] == "Bearer mcpd_k_123"
    assert metadata["traceparent"] == traceparent
    # The gateway states the address it sees, never one the caller claims.
    assert metadata["x-forwarded-for"] == "203.0.113.9"


async def test_an_empty_export_succeeds(client: httpx.AsyncClient, otlp_upstream: Upstream) -> None:
    for signal in SIGNALS:
        response = await client.post(signal.path, content=b"", headers=PROTOBUF)
        assert response.status_code == 200, response.content
        assert signal.response_class.FromString(response.content) == signal.response_class()
        response = await client.post(signal.path, content=b"{}", headers=JSON)
        assert response.status_code == 200, response.content
        assert response.json() == {}
        assert otlp_upstream.collector.last(signal) == signal.request_class()


async def test_json_ids_are_hex_and_arrive_as_bytes(
    client: httpx.AsyncClient, otlp_upstream: Upstream
) -> None:
    response = await client.post("/v1/traces", content=json.dumps(json_traces()), headers=JSON)
    assert response.status_code == 200, response.content
    assert response.headers["content-type"] == "application/json"
    assert response.json() == {}
    request = otlp_upstream.collector.last(TRACES)
    root, child = request.resource_spans[0].scope_spans[0].spans
    assert (root.trace_id, root.span_id, root.parent_span_id) == (TRACE_ID, ROOT_ID, b"")
    assert (child.trace_id, child.span_id, child.parent_span_id) == (TRACE_ID, CHILD_ID, ROOT_ID)
    assert child.links[0].trace_id == (1).to_bytes(16, "big")
    assert child.links[0].span_id == (2).to_bytes(8, "big")
    assert root.kind == trace_pb2.Span.SPAN_KIND_INTERNAL
    assert child.kind == trace_pb2.Span.SPAN_KIND_CLIENT
    assert root.start_time_unix_nano == 1_777_000_000_000_000_000
    assert root.end_time_unix_nano == 1_777_000_002_000_000_000
    assert root.status.code == trace_pb2.Status.STATUS_CODE_OK
    attributes = {kv.key: kv.value for kv in child.attributes}
    assert attributes["gen_ai.request.model"].string_value == "gpt-4o"
    assert attributes["gen_ai.usage.input_tokens"].int_value == 1200
    assert attributes["gen_ai.usage.output_tokens"].int_value == 85
    assert attributes["temperature"].double_value == 0.2
    assert child.events[0].time_unix_nano == 5


async def test_json_log_and_exemplar_ids_are_hex(
    client: httpx.AsyncClient, otlp_upstream: Upstream
) -> None:
    logs = {
        "resourceLogs": [
            {
                "scopeLogs": [
                    {
                        "logRecords": [
                            {
                                "timeUnixNano": "1777000000000000000",
                                "severityNumber": 9,
                                "severityText": "INFO",
                                "body": {"stringValue": "tool call finished"},
                                "traceId": TRACE_ID.hex(),
                                "spanId": CHILD_ID.hex(),
                            }
                        ]
                    }
                ]
            }
        ]
    }
    response = await client.post("/v1/logs", content=json.dumps(logs), headers=JSON)
    assert response.status_code == 200, response.content
    record = otlp_upstream.collector.last(LOGS).resource_logs[0].scope_logs[0].log_records[0]
    assert (record.trace_id, record.span_id) == (TRACE_ID, CHILD_ID)
    assert record.body.string_value == "tool call finished"
    assert record.severity_number == 9

    exemplar = {"asInt": "3", "traceId": TRACE_ID.hex(), "spanId": CHILD_ID.hex()}
    metrics = {
        "resourceMetrics": [
            {
                "scopeMetrics": [
                    {
                        "metrics": [
                            {
                                "name": "gen_ai.client.operation.count",
                                "sum": {
                                    "aggregationTemporality": 2,
                                    "isMonotonic": True,
                                    "dataPoints": [{"asInt": "3", "exemplars": [exemplar]}],
                                },
                            },
                            {
                                "name": "gen_ai.client.token.usage",
                                "unit": "{token}",
                                "histogram": {
                                    "aggregationTemporality": 2,
                                    "dataPoints": [
                                        {
                                            "count": "2",
                                            "sum": 1285.0,
                                            "bucketCounts": ["0", "1", "1"],
                                            "explicitBounds": [100, 1000],
                                            "exemplars": [exemplar],
                                        }
                                    ],
                                },
                            },
                        ]
                    }
                ]
            }
        ]
    }
    response = await client.post("/v1/metrics", content=json.dumps(metrics), headers=JSON)
    assert response.status_code == 200, response.content
    counter, histogram = (
        otlp_upstream.collector.last(METRICS).resource_metrics[0].scope_metrics[0].metrics
    )
    assert counter.sum.data_points[0].exemplars[0].trace_id == TRACE_ID
    assert counter.sum.data_points[0].exemplars[0].span_id == CHILD_ID
    point = histogram.histogram.data_points[0]
    assert (point.count, list(point.bucket_counts)) == (2, [0, 1, 1])
    assert point.exemplars[0].span_id == CHILD_ID


@pytest.mark.parametrize(
    ("value", "path"),
    [
        ("not-hex", "resourceSpans[0].scopeSpans[0].spans[1].spanId"),
        ("00f0 67aa0ba902b7", "resourceSpans[0].scopeSpans[0].spans[1].spanId"),
        (12, "resourceSpans[0].scopeSpans[0].spans[1].spanId"),
        # base64, as protobuf's own JSON mapping would write the id: OTLP/JSON says hex.
        ("APBnqguqArc=", "resourceSpans[0].scopeSpans[0].spans[1].spanId"),
    ],
)
async def test_an_id_that_is_not_hex_is_a_400_naming_it(
    client: httpx.AsyncClient, otlp_upstream: Upstream, value: object, path: str
) -> None:
    document = json_traces()
    document["resourceSpans"][0]["scopeSpans"][0]["spans"][1]["spanId"] = value
    response = await client.post("/v1/traces", content=json.dumps(document), headers=JSON)
    status = assert_status(response, 400, code_pb2.INVALID_ARGUMENT, "INVALID_ID")
    assert error_info(status).metadata["field"] == path
    assert bad_request(status).field_violations[0].field == path
    assert otlp_upstream.collector.exports == []


@pytest.mark.parametrize(
    "body",
    [
        b"{",
        b"[]",
        b'{"resourceSpans": 3}',
        b'{"resourceSpans": [{"scopeSpans": [{"spans": [{"startTimeUnixNano": "soon"}]}]}]}',
    ],
)
async def test_json_that_is_not_an_export_is_a_400(
    client: httpx.AsyncClient, otlp_upstream: Upstream, body: bytes
) -> None:
    response = await client.post("/v1/traces", content=body, headers=JSON)
    assert_status(response, 400, code_pb2.INVALID_ARGUMENT, "MALFORMED_JSON")
    assert otlp_upstream.collector.exports == []


async def test_bytes_that_are_not_an_export_are_a_400(
    client: httpx.AsyncClient, otlp_upstream: Upstream
) -> None:
    # Passed on as it came: the service is the one that parses it, and refuses it.
    response = await client.post("/v1/traces", content=b"\xff\xff\xff", headers=PROTOBUF)
    status = assert_status(response, 400, code_pb2.INVALID_ARGUMENT, "MALFORMED_PROTOBUF")
    assert "not a valid protobuf message" in status.message
    assert otlp_upstream.collector.exports == []


@pytest.mark.parametrize("headers", [PROTOBUF, JSON])
async def test_gzip(
    client: httpx.AsyncClient, otlp_upstream: Upstream, headers: dict[str, str]
) -> None:
    sent = traces("chat gpt-4o")
    body = otlp_json(sent) if headers is JSON else sent.SerializeToString()
    response = await client.post(
        "/v1/traces", content=gzip.compress(body), headers={**headers, "content-encoding": "GZIP"}
    )
    assert response.status_code == 200, response.content
    assert otlp_upstream.collector.last(TRACES) == sent


async def test_concatenated_gzip_members_are_one_body(
    client: httpx.AsyncClient, otlp_upstream: Upstream
) -> None:
    sent = traces("a", "b", "c").SerializeToString()
    body = gzip.compress(sent[:10]) + gzip.compress(sent[10:])
    headers = {**PROTOBUF, "content-encoding": "gzip"}
    response = await client.post("/v1/traces", content=body, headers=headers)
    assert response.status_code == 200, response.content
    assert otlp_upstream.collector.last(TRACES).SerializeToString() == sent


@pytest.mark.parametrize(
    ("body", "headers"),
    [
        (b"not gzip at all", PROTOBUF),
        # truncated; mtime fixed so that the test id is the same in every xdist worker
        (gzip.compress(b"\x0a\x00" * 100, mtime=0)[:-12], PROTOBUF),
        (b"", JSON),
    ],
)
async def test_bad_gzip_is_a_400(
    client: httpx.AsyncClient, otlp_upstream: Upstream, body: bytes, headers: dict[str, str]
) -> None:
    response = await client.post(
        "/v1/traces", content=body, headers={**headers, "content-encoding": "gzip"}
    )
    assert response.headers["content-type"] == headers["content-type"]
    assert_status(response, 400, code_pb2.INVALID_ARGUMENT, "MALFORMED_GZIP")
    assert otlp_upstream.collector.exports == []


@pytest.mark.parametrize("content_type", ["text/plain", "application/xml", None])
async def test_an_unsupported_content_type_is_a_415(
    client: httpx.AsyncClient, otlp_upstream: Upstream, content_type: str | None
) -> None:
    headers = {} if content_type is None else {"content-type": content_type}
    response = await client.post("/v1/metrics", content=b"{}", headers=headers)
    # Neither encoding was asked for: the Status is written in JSON, readable by whoever sent it.
    assert response.headers["content-type"] == "application/json"
    assert_status(response, 415, code_pb2.INVALID_ARGUMENT, "UNSUPPORTED_MEDIA_TYPE")
    assert otlp_upstream.collector.exports == []


async def test_content_type_parameters_and_case_are_ignored(client: httpx.AsyncClient) -> None:
    headers = {"content-type": "Application/JSON; charset=utf-8"}
    response = await client.post("/v1/metrics", content=b"{}", headers=headers)
    assert response.status_code == 200, response.content
    assert response.headers["content-type"] == "application/json"
    response = await client.post(
        "/v1/metrics", content=b"", headers={"content-type": "application/protobuf"}
    )
    assert response.status_code == 200, response.content
    assert response.headers["content-type"] == "application/protobuf"


@pytest.mark.parametrize("coding", ["br", "deflate", "gzip, gzip", "zstd"])
async def test_an_unsupported_content_encoding_is_a_415(
    client: httpx.AsyncClient, otlp_upstream: Upstream, coding: str
) -> None:
    headers = {**PROTOBUF, "content-encoding": coding}
    response = await client.post("/v1/traces", content=b"\x00", headers=headers)
    assert_status(response, 415, code_pb2.INVALID_ARGUMENT, "UNSUPPORTED_CONTENT_ENCODING")
    assert response.headers["accept-encoding"] == "gzip, identity"
    assert otlp_upstream.collector.exports == []


async def test_identity_encoding_is_no_encoding(client: httpx.AsyncClient) -> None:
    headers = {**PROTOBUF, "content-encoding": "identity"}
    response = await client.post("/v1/traces", content=b"", headers=headers)
    assert response.status_code == 200, response.content


async def test_a_body_over_the_limit_is_a_413(
    client: httpx.AsyncClient, otlp_upstream: Upstream
) -> None:
    big = traces(*(f"span {i}" for i in range(2000))).SerializeToString()
    assert len(big) > LIMIT
    response = await client.post("/v1/traces", content=big, headers=PROTOBUF)
    assert_status(response, 413, code_pb2.RESOURCE_EXHAUSTED, "BODY_TOO_LARGE")

    async def stream() -> AsyncIterator[bytes]:
        for start in range(0, len(big), 4096):
            yield big[start : start + 4096]

    # Chunked, so no Content-Length tells in advance.
    response = await client.post("/v1/traces", content=stream(), headers=PROTOBUF)
    assert_status(response, 413, code_pb2.RESOURCE_EXHAUSTED, "BODY_TOO_LARGE")
    assert otlp_upstream.collector.exports == []


async def test_a_gzip_bomb_is_a_413_after_inflating_no_more_than_the_limit(
    client: httpx.AsyncClient, otlp_upstream: Upstream
) -> None:
    bomb = gzip.compress(b"\x00" * (64 * 1024 * 1024))
    assert len(bomb) < LIMIT
    response = await client.post(
        "/v1/traces", content=bomb, headers={**JSON, "content-encoding": "gzip"}
    )
    status = assert_status(response, 413, code_pb2.RESOURCE_EXHAUSTED, "BODY_TOO_LARGE")
    assert "inflated" in status.message
    assert otlp_upstream.collector.exports == []


async def test_a_large_body_is_decoded_off_the_event_loop(
    client: httpx.AsyncClient, otlp_upstream: Upstream, monkeypatch: pytest.MonkeyPatch
) -> None:
    offloaded: list[str] = []
    to_thread = asyncio.to_thread

    async def counting(function: Callable[..., Any], /, *args: Any) -> Any:
        offloaded.append(function.__name__)
        return await to_thread(function, *args)

    monkeypatch.setattr(asyncio, "to_thread", counting)
    sent = traces(*(f"span {i}" for i in range(150)))
    small = traces("chat")
    for body in (otlp_json(sent), otlp_json(small)):
        response = await client.post("/v1/traces", content=body, headers=JSON)
        assert response.status_code == 200, response.content
    assert [e.request for e in otlp_upstream.collector.exports] == [sent, small]
    assert offloaded == ["_decode"]  # the large one only; the 150 spans are under the limit


async def test_the_credential_is_checked_before_the_body_is_read(
    client: httpx.AsyncClient, otlp_upstream: Upstream
) -> None:
    # A body that is not gzip at all: a caller without a valid key learns only that.
    headers = {**PROTOBUF, "content-encoding": "gzip", "authorization": "Bearer wrong"}
    response = await client.post("/v1/traces", content=b"not gzip at all", headers=headers)
    assert_status(response, 401, code_pb2.UNAUTHENTICATED, "UNKNOWN_KEY")
    assert otlp_upstream.access.checks == [TRACES.grpc_path]
    assert otlp_upstream.collector.exports == []


async def test_a_granted_credential_is_checked_once_per_interval(
    client: httpx.AsyncClient, otlp_upstream: Upstream
) -> None:
    for key in ("one", "one", "two", "one"):
        headers = {**PROTOBUF, "authorization": f"Bearer {key}"}
        response = await client.post("/v1/traces", content=b"", headers=headers)
        assert response.status_code == 200, response.content
    response = await client.post("/v1/logs", content=b"", headers=PROTOBUF)
    assert response.status_code == 200, response.content
    # Per method and credential; the exports themselves all went through.
    assert otlp_upstream.access.checks == [TRACES.grpc_path, TRACES.grpc_path, LOGS.grpc_path]
    assert len(otlp_upstream.collector.exports) == 5


def many_empty_members(size: int) -> bytes:
    member = gzip.compress(b"")
    return member * (size // len(member))


@pytest.mark.parametrize("key", ["wrong", "right"])
async def test_many_gzip_members_at_the_size_limit_are_refused_cheaply(
    otlp_upstream: Upstream, key: str
) -> None:
    limit = gateway.otlp.MAX_BODY_BYTES
    body = many_empty_members(limit)
    app = otlp_upstream.app(default_deadline_s=5.0)
    transport = httpx.ASGITransport(app=app)
    headers = {**PROTOBUF, "content-encoding": "gzip", "authorization": f"Bearer {key}"}
    async with httpx.AsyncClient(transport=transport, base_url="http://gateway") as client:
        began = time.process_time()
        response = await client.post("/v1/traces", content=body, headers=headers)
        spent = time.process_time() - began
    if key == "wrong":
        assert_status(response, 401, code_pb2.UNAUTHENTICATED, "UNKNOWN_KEY")
    else:
        status = assert_status(response, 400, code_pb2.INVALID_ARGUMENT, "MALFORMED_GZIP")
        assert "more than 64 members" in status.message
    # CPU of this process (the gateway is in it), not wall time: inflating member after member
    # by copying the rest of the body each time took minutes at this size.
    assert spent < 2.0, spent
    assert otlp_upstream.collector.exports == []


@pytest.mark.parametrize("headers", [PROTOBUF, JSON])
async def test_unauthenticated_is_a_401_with_the_status(
    client: httpx.AsyncClient, headers: dict[str, str]
) -> None:
    response = await client.post(
        "/v1/traces",
        content=b"" if headers is PROTOBUF else b"{}",
        headers={**headers, "authorization": "Bearer wrong"},
    )
    assert response.headers["content-type"] == headers["content-type"]
    status = assert_status(response, 401, code_pb2.UNAUTHENTICATED, "UNKNOWN_KEY")
    assert status.message == "unknown key"
    assert error_info(status).domain == "mcpd"
    assert "retry-after" not in response.headers


@pytest.mark.parametrize(
    ("key", "http", "code", "retry_after"),
    [
        ("forbidden", 403, code_pb2.PERMISSION_DENIED, None),
        ("invalid", 400, code_pb2.INVALID_ARGUMENT, None),
        ("busy", 429, code_pb2.RESOURCE_EXHAUSTED, "7"),
        ("overloaded", 503, code_pb2.UNAVAILABLE, "3"),
    ],
)
async def test_upstream_failures_map_like_the_rest_gateway(
    client: httpx.AsyncClient, key: str, http: int, code: int, retry_after: str | None
) -> None:
    headers = {**PROTOBUF, "authorization": f"Bearer {key}"}
    response = await client.post("/v1/logs", content=b"", headers=headers)
    status = assert_status(response, http, code)
    assert response.headers.get("retry-after") == retry_after
    if key == "invalid":
        assert error_info(status).metadata["field"] == "resource_spans[0].resource"
    if key == "overloaded":
        # The service's own status goes back untouched, RetryInfo included.
        assert status.details[0].Is(error_details_pb2.RetryInfo.DESCRIPTOR)


async def test_no_upstream_is_a_503() -> None:
    def nowhere(service: str) -> Any:
        raise LookupError(service)

    transport = httpx.ASGITransport(app=create_app(nowhere))
    async with httpx.AsyncClient(transport=transport, base_url="http://gateway") as client:
        response = await client.post("/v1/traces", content=b"", headers=PROTOBUF)
    assert_status(response, 503, code_pb2.UNAVAILABLE, "UPSTREAM_NOT_CONFIGURED")


async def test_partial_success_round_trips_in_protobuf(client: httpx.AsyncClient) -> None:
    sent = traces("chat ok", "reject me", "reject me too")
    response = await client.post("/v1/traces", content=sent.SerializeToString(), headers=PROTOBUF)
    assert response.status_code == 200, response.content
    answer = trace_service_pb2.ExportTraceServiceResponse.FromString(response.content)
    assert answer.partial_success.rejected_spans == 2
    assert answer.partial_success.error_message == "2 traces items named reject..."


async def test_partial_success_round_trips_in_json(client: httpx.AsyncClient) -> None:
    logs = {
        "resourceLogs": [
            {"scopeLogs": [{"logRecords": [{"body": {"stringValue": "reject this"}}, {}]}]}
        ]
    }
    response = await client.post("/v1/logs", content=json.dumps(logs), headers=JSON)
    assert response.status_code == 200, response.content
    # proto3 JSON: lowerCamelCase, int64 as a string.
    assert response.json() == {
        "partialSuccess": {
            "rejectedLogRecords": "1",
            "errorMessage": "1 logs items named reject...",
        }
    }
    metrics = metrics_service_pb2.ExportMetricsServiceRequest()
    metrics.resource_metrics.add().scope_metrics.add().metrics.add(name="reject.me")
    response = await client.post(
        "/v1/metrics", content=json_format.MessageToJson(metrics), headers=JSON
    )
    answer = json_format.Parse(response.content, metrics_service_pb2.ExportMetricsServiceResponse())
    assert answer.partial_success.rejected_data_points == 1


async def test_only_post_is_served(client: httpx.AsyncClient) -> None:
    response = await client.get("/v1/traces")
    assert response.status_code == 405
    assert response.headers["allow"] == "POST"


async def test_a_header_grpc_cannot_carry_is_a_400(
    client: httpx.AsyncClient, otlp_upstream: Upstream
) -> None:
    headers = [("content-type", "application/json"), ("authorization", "Bearer \u00e9t\u00e9")]
    response = await client.post(
        "/v1/traces", content=b"{}", headers=[(k.encode(), v.encode()) for k, v in headers]
    )
    assert_status(response, 400, code_pb2.INVALID_ARGUMENT, "INVALID_HEADER")
    assert otlp_upstream.collector.exports == []


async def test_openapi_lists_the_otlp_paths(client: httpx.AsyncClient) -> None:
    document = (await client.get("/v1/api/openapi.json")).json()
    for signal in SIGNALS:
        operation = document["paths"][signal.path]["post"]
        assert operation["tags"] == ["OTLP"]
        assert set(operation["requestBody"]["content"]) == {
            "application/x-protobuf",
            "application/json",
        }
    pytest.importorskip("openapi_spec_validator").validate(document)


def test_logs_request_class() -> None:
    assert LOGS.request_class is logs_service_pb2.ExportLogsServiceRequest


async def test_a_client_that_hangs_up_mid_body_is_not_an_error(
    otlp_upstream: Upstream, caplog: pytest.LogCaptureFixture
) -> None:
    messages: Iterator[Message] = iter(
        [
            {"type": "http.request", "body": b"\x0a\x02", "more_body": True},
            {"type": "http.disconnect"},
        ]
    )
    sent: list[Message] = []

    async def receive() -> Message:
        return next(messages)

    async def send(message: Message) -> None:
        sent.append(message)

    scope = {
        "type": "http",
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": "/v1/traces",
        "raw_path": b"/v1/traces",
        "root_path": "",
        "query_string": b"",
        "headers": [(b"content-type", b"application/x-protobuf")],
        "client": ("127.0.0.1", 5000),
        "server": ("gateway", 80),
    }
    await otlp_upstream.app()(scope, receive, send)
    assert sent[0]["status"] == 400
    status = status_pb2.Status.FromString(sent[1]["body"])
    assert error_info(status).reason == "BODY_INCOMPLETE"
    assert otlp_upstream.collector.exports == []
    assert not [r for r in caplog.records if r.levelname == "ERROR"]


async def test_a_service_without_the_collector_is_a_501_with_grpcs_status() -> None:
    server = grpc.aio.server()
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    channel = grpc.aio.insecure_channel(f"127.0.0.1:{port}")
    try:
        transport = httpx.ASGITransport(app=create_app(lambda service: channel))
        async with httpx.AsyncClient(transport=transport, base_url="http://gateway") as client:
            response = await client.post("/v1/metrics", content=b"{}", headers=JSON)
    finally:
        await channel.close()
        await server.stop(None)
    assert response.status_code == 501
    status = json_format.Parse(response.content, status_pb2.Status())
    assert status.code == code_pb2.UNIMPLEMENTED
    assert list(status.details) == []  # grpc's own status carries none
