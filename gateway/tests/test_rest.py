"""The REST transcoder end to end: HTTP client -> gateway -> real gRPC server -> JSON back."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from typing import Any

import grpc.aio
import httpx
import pytest
from starlette.applications import Starlette
from starlette.types import Message

from gateway.app import create_app
from gateway.tests.conftest import CAPABILITIES, Upstream, trace_json
from mcpd import codec
from mcpd.model.v1 import enums_pb2
from mcpd.query.v1 import query_service_pb2

ERROR_KEYS = {"code", "status", "reason", "message"}


def assert_error(
    response: httpx.Response, http: int, status: str, reason: str | None = None
) -> dict[str, Any]:
    """The response is the one error shape with these values; returns the inner object."""
    assert response.status_code == http, response.text
    assert response.headers["content-type"] == "application/json"
    body = response.json()
    assert set(body) == {"error"}
    error = body["error"]
    assert ERROR_KEYS <= set(error) <= ERROR_KEYS | {"field"}
    assert error["code"] == http
    assert error["status"] == status
    if reason is not None:
        assert error["reason"] == reason
    assert isinstance(error["message"], str)
    assert error["message"]
    return dict(error)


async def test_capabilities_are_the_codec_encoding(
    client: httpx.AsyncClient, upstream: Upstream
) -> None:
    response = await client.get("/v1/api/capabilities")
    assert response.status_code == 200
    body = response.json()
    assert body == codec.encode(CAPABILITIES)
    assert body["text_search"] == "words"
    assert body["partitioning"] == "none"
    assert upstream.asked_for == ["mcpd.query.v1.QueryService"]


async def test_healthz_is_the_annotated_get_health(client: httpx.AsyncClient) -> None:
    response = await client.get("/healthz")
    assert response.status_code == 200
    assert response.json()["status"] == "ok"


async def test_path_and_repeated_query_binding(
    client: httpx.AsyncClient, upstream: Upstream
) -> None:
    response = await client.get(
        "/v1/api/traces/abc%2F123", params=[("include", "logs,scores"), ("include", "feedback")]
    )
    assert response.status_code == 200, response.text
    request = upstream.seen.requests[-1]
    assert isinstance(request, query_service_pb2.GetTraceRequest)
    # An encoded slash stays inside its segment.
    assert request.trace_id == "abc/123"
    assert list(request.include) == ["logs", "scores", "feedback"]
    assert response.json()["trace"] == {
        "trace_id": "abc/123",
        "span_count": 0,
        "error_count": 0,
        "model_count": 0,
        "tool_count": 0,
        "tags": ["logs", "scores", "feedback"],
        "name": "",
        "is_complete": False,
    }


async def test_http_body_passes_through_unchanged(client: httpx.AsyncClient) -> None:
    response = await client.get("/v1/api/traces/t1", params={"include": "logs"})
    assert response.status_code == 200, response.text
    assert response.headers["content-type"] == "application/json"
    assert response.content == trace_json("t1", ["logs"])


async def test_http_body_without_content_type_is_octet_stream(client: httpx.AsyncClient) -> None:
    response = await client.get("/v1/api/traces/raw")
    assert response.status_code == 200, response.text
    assert response.headers["content-type"] == "application/octet-stream"
    assert response.content == b"\x00raw"


async def test_query_binding_of_enums_timestamps_and_optionals(
    client: httpx.AsyncClient, upstream: Upstream
) -> None:
    response = await client.get(
        "/v1/api/traces",
        params={
            "from": "2026-04-29T20:42:31.5+02:00",
            "kind": "agent_run,tool_call",
            "status": "error",
            "tags": "a,b",
            "limit": "25",
            "min_cost": "0.5",
            "q": "refund",
        },
    )
    assert response.status_code == 200, response.text
    request = upstream.seen.requests[-1]
    assert isinstance(request, query_service_pb2.ListTracesRequest)
    assert list(request.kind) == [enums_pb2.SPAN_KIND_AGENT_RUN, enums_pb2.SPAN_KIND_TOOL_CALL]
    assert list(request.status) == [enums_pb2.SPAN_STATUS_ERROR]
    assert list(request.tags) == ["a", "b"]
    assert request.HasField("limit")
    assert request.limit == 25
    assert request.min_cost == 0.5
    assert request.q == "refund"
    assert not request.HasField("cursor")
    # The offset is normalised to UTC; the echo comes back at millisecond precision.
    trace = response.json()["traces"][0]
    assert trace["start_time"] == "2026-04-29T18:42:31.500Z"
    assert trace["kind"] == "agent_run"


@pytest.mark.parametrize(
    ("query", "field"),
    [
        ({"limit": "ten"}, "limit"),
        ({"limit": "-1"}, "limit"),
        ({"kind": "agent_run,unspecified"}, "kind[1]"),
        ({"from": "yesterday"}, "from"),
        ({"min_cost": "nan"}, "min_cost"),
    ],
)
async def test_bad_query_values_name_the_parameter(
    client: httpx.AsyncClient, query: dict[str, str], field: str
) -> None:
    response = await client.get("/v1/api/traces", params=query)
    error = assert_error(response, 400, "INVALID_ARGUMENT")
    assert error["field"] == field
    assert field in error["message"]


async def test_unknown_query_parameter_is_refused(
    client: httpx.AsyncClient, upstream: Upstream
) -> None:
    response = await client.get("/v1/api/traces", params={"limit": "5", "lmit": "5"})
    error = assert_error(response, 400, "INVALID_ARGUMENT", "UNKNOWN_PARAMETER")
    assert error["field"] == "lmit"
    assert "lmit" in error["message"]
    assert upstream.seen.requests == []


async def test_path_bound_field_is_not_a_query_parameter(client: httpx.AsyncClient) -> None:
    response = await client.get("/v1/api/traces/abc", params={"trace_id": "other"})
    assert_error(response, 400, "INVALID_ARGUMENT", "UNKNOWN_PARAMETER")


async def test_single_valued_parameter_given_twice(client: httpx.AsyncClient) -> None:
    response = await client.get("/v1/api/traces", params=[("limit", "1"), ("limit", "2")])
    assert assert_error(response, 400, "INVALID_ARGUMENT")["field"] == "limit"


async def test_ingest_body_is_decoded_with_the_codec(
    client: httpx.AsyncClient, upstream: Upstream
) -> None:
    span = {
        "trace_id": "0" * 32,
        "span_id": "1" * 16,
        "name": "root",
        "kind": "agent_run",
        "start_time": "2026-04-29T18:42:31.125Z",
        "input": {"messages": [{"role": "user", "content": "hi"}]},
        "duration_ns": "1500000000",
    }
    response = await client.post("/v1/api/ingest", json={"spans": [span]})
    assert response.status_code == 200, response.text
    assert response.json() == {"accepted": 1, "rejected": 0, "duplicate": 0, "errors": []}
    batch = upstream.seen.requests[-1]
    assert batch.spans[0].kind == enums_pb2.SPAN_KIND_AGENT_RUN
    assert batch.spans[0].duration_ns == 1_500_000_000
    assert batch.spans[0].input.struct_value["messages"][0]["content"] == "hi"


async def test_wrong_typed_body_field_names_its_path(
    client: httpx.AsyncClient, upstream: Upstream
) -> None:
    response = await client.post("/v1/api/ingest", json={"spans": [{"start_time": 5}]})
    error = assert_error(response, 400, "INVALID_ARGUMENT", "INVALID_FIELD")
    assert error["field"] == "spans[0].start_time"
    assert "spans[0].start_time" in error["message"]
    assert "RFC 3339" in error["message"]
    assert upstream.seen.requests == []


async def test_unknown_body_field_is_refused(client: httpx.AsyncClient) -> None:
    response = await client.post("/v1/api/ingest", json={"spans": [{"span_idd": "x"}]})
    error = assert_error(response, 400, "INVALID_ARGUMENT", codec.UNKNOWN_FIELD)
    assert error["field"] == "spans[0].span_idd"


@pytest.mark.parametrize(
    "body",
    [
        b"{",
        b"[1,",
        b'{"spans": NaN}',
        b'{"a": 1, "a": 2}',
        b"\xff",
        # A lone surrogate escape: valid JSON, not Unicode text.
        b'{"spans": [{"name": "a\\ud800b"}]}',
    ],
)
async def test_malformed_json_is_400(client: httpx.AsyncClient, body: bytes) -> None:
    response = await client.post("/v1/api/ingest", content=body)
    assert_error(response, 400, "INVALID_ARGUMENT", "MALFORMED_JSON")


async def test_an_escaped_surrogate_pair_is_text(client: httpx.AsyncClient) -> None:
    response = await client.post(
        "/v1/api/ingest", content=b'{"spans": [{"name": "smile \\ud83d\\ude00"}]}'
    )
    assert response.status_code == 200, response.text


async def test_empty_body_refused_when_the_body_has_required_fields(
    client: httpx.AsyncClient,
) -> None:
    # IngestBatch's arrays are always-present fields, so an empty POST is not an empty batch.
    response = await client.post("/v1/api/ingest")
    assert_error(response, 400, "INVALID_ARGUMENT", "BODY_REQUIRED")


async def test_body_on_a_method_without_body_rule(
    client: httpx.AsyncClient, upstream: Upstream
) -> None:
    response = await client.post("/v1/api/runs/r1/cancel", json={"reason": "x"})
    assert_error(response, 400, "INVALID_ARGUMENT", "BODY_NOT_ALLOWED")
    # `{}` and nothing are both fine, and reach the (unimplemented) upstream.
    for content in (b"{}", b"", b" \n"):
        response = await client.post("/v1/api/runs/r1/cancel", content=content)
        assert_error(response, 501, "UNIMPLEMENTED")


async def test_unknown_path_is_404_in_the_error_shape(client: httpx.AsyncClient) -> None:
    for path in ("/v1/api/nope", "/v1/api/traces/a/b/c", "/v1/api/traces/", "/"):
        response = await client.get(path)
        assert_error(response, 404, "NOT_FOUND", "ROUTE_NOT_FOUND")


async def test_wrong_method_is_405_with_allow(client: httpx.AsyncClient) -> None:
    response = await client.put("/v1/api/traces/abc")
    assert_error(response, 405, "UNIMPLEMENTED", "METHOD_NOT_ALLOWED")
    assert response.headers["allow"] == "DELETE, GET"
    response = await client.post("/v1/api/openapi.json")
    assert_error(response, 405, "UNIMPLEMENTED", "METHOD_NOT_ALLOWED")


async def test_literal_segment_wins_over_variable(
    client: httpx.AsyncClient, upstream: Upstream
) -> None:
    response = await client.get(
        "/v1/api/experiments/compare", params={"baseline": "a", "candidate": "b"}
    )
    assert response.status_code == 200, response.text
    assert response.json()["baseline"] == "a"
    response = await client.get("/v1/api/experiments/exp-1")
    assert response.status_code == 200, response.text
    assert response.json()["experiment_id"] == "exp-1"
    kinds = [type(r).__name__ for r in upstream.seen.requests]
    assert kinds == ["CompareExperimentsRequest", "GetExperimentRequest"]


async def test_upstream_error_keeps_reason_and_field(client: httpx.AsyncClient) -> None:
    # GetTraceJson answers an HttpBody: its errors still come back in the one error shape.
    response = await client.get("/v1/api/traces/missing")
    error = assert_error(response, 404, "NOT_FOUND", "TRACE_NOT_FOUND")
    assert error["field"] == "trace_id"
    assert error["message"] == "no trace missing in this project"


async def test_an_upstream_retry_delay_is_a_retry_after(client: httpx.AsyncClient) -> None:
    response = await client.post("/v1/api/ingest", json={"spans": [], "ingest_key": "busy"})
    assert_error(response, 429, "RESOURCE_EXHAUSTED")
    assert response.headers["retry-after"] == "2"  # 1.5 s, in whole seconds rounded up
    answered = await client.post("/v1/api/ingest", json={"spans": []})
    assert answered.status_code == 200
    assert "retry-after" not in answered.headers


async def test_unimplemented_rpc_is_501(client: httpx.AsyncClient) -> None:
    response = await client.get("/v1/api/runs")
    error = assert_error(response, 501, "UNIMPLEMENTED")
    assert "field" not in error


async def test_headers_are_forwarded_as_metadata(
    client: httpx.AsyncClient, upstream: Upstream
) -> None:
    traceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
    response = await client.get(
        "/v1/api/capabilities",
        headers={
            "Authorization": "Bearer mcpd_k_secret",
            "traceparent": traceparent,
            "tracestate": "vendor=1",
            "x-not-forwarded": "1",
        },
    )
    assert response.status_code == 200
    metadata = upstream.seen.metadata[-1]
    assert metadata["authorization"] == "Bearer mcpd_k_secret"
    assert metadata["traceparent"] == traceparent
    assert metadata["tracestate"] == "vendor=1"
    assert "x-not-forwarded" not in metadata


async def test_deadline_defaults_and_is_capped(
    client: httpx.AsyncClient, upstream: Upstream
) -> None:
    await client.get("/v1/api/capabilities")
    await client.get("/v1/api/capabilities", headers={"X-Mcpd-Timeout": "0.75"})
    await client.get("/v1/api/capabilities", headers={"X-Mcpd-Timeout": "100000"})
    default, short, capped = upstream.seen.deadlines
    # What the servicer sees is the deadline less the time in flight, and grpc rounds the
    # timeout up to its wire unit (up to a second at this size): compare with slack.
    assert default is not None
    assert 0 < default < 8.0
    assert short is not None
    assert 0 < short < 1.0
    assert capped is not None
    assert 8.0 < capped < 302.0


@pytest.mark.parametrize("value", ["soon", "0", "-1", "inf", "nan"])
async def test_bad_timeout_header_is_400(client: httpx.AsyncClient, value: str) -> None:
    response = await client.get("/v1/api/capabilities", headers={"X-Mcpd-Timeout": value})
    error = assert_error(response, 400, "INVALID_ARGUMENT", "INVALID_HEADER")
    assert "x-mcpd-timeout" in error["message"]


def no_upstream(service: str) -> grpc.aio.Channel:
    raise LookupError(service)


@pytest.fixture
def closed_port() -> Iterator[int]:
    # Bound but never listening: connecting is refused, and no other test can take the port.
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        yield sock.getsockname()[1]


async def test_unreachable_upstream_is_503(closed_port: int) -> None:
    channel = grpc.aio.insecure_channel(f"127.0.0.1:{closed_port}")
    try:
        app = create_app(lambda service: channel)
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://gateway") as client:
            response = await client.get("/v1/api/capabilities")
    finally:
        await channel.close()
    assert_error(response, 503, "UNAVAILABLE", "UNAVAILABLE")


async def test_unconfigured_upstream_is_503() -> None:
    app = create_app(no_upstream)
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://gateway") as client:
        response = await client.get("/v1/api/capabilities")
    error = assert_error(response, 503, "UNAVAILABLE", "UPSTREAM_NOT_CONFIGURED")
    assert "mcpd.query.v1.QueryService" in error["message"]


async def test_oversized_body_is_413() -> None:
    app = create_app(no_upstream, max_body_bytes=16)
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://gateway") as client:
        response = await client.post(
            "/v1/api/ingest", json={"spans": [], "logs": [], "metrics": []}
        )
    assert_error(response, 413, "RESOURCE_EXHAUSTED", "BODY_TOO_LARGE")


INGEST = "/mcpd.ingest.v1.IngestService/Ingest"


async def test_a_body_is_read_only_after_the_credential_is_checked(
    client: httpx.AsyncClient, upstream: Upstream
) -> None:
    # Not JSON at all: a caller without a valid key is refused for the key, not the body.
    for key, http, status in (("wrong", 401, "UNAUTHENTICATED"), ("forbidden", 403, None)):
        response = await client.post(
            "/v1/api/ingest", content=b"{not json", headers={"authorization": f"Bearer {key}"}
        )
        assert_error(response, http, status or "PERMISSION_DENIED")
    assert upstream.access.checks == [INGEST, INGEST]
    assert upstream.seen.requests == []
    # A granted key is checked once, then its calls go through; a body of a granted key that is
    # not JSON is the gateway's 400, as before.
    granted = {"authorization": "Bearer granted"}
    for _ in range(2):
        response = await client.post("/v1/api/ingest", json={"spans": []}, headers=granted)
        assert response.status_code == 200, response.text
    response = await client.post("/v1/api/ingest", content=b"{not json", headers=granted)
    assert_error(response, 400, "INVALID_ARGUMENT", "MALFORMED_JSON")
    assert upstream.access.checks == [INGEST, INGEST, INGEST]
    assert len(upstream.seen.requests) == 2


async def test_a_request_without_a_body_is_not_checked_separately(
    client: httpx.AsyncClient, upstream: Upstream
) -> None:
    response = await client.get("/v1/api/capabilities", headers={"authorization": "Bearer x"})
    assert response.status_code == 200
    assert upstream.access.checks == []  # the call itself is checked by the service


async def test_absurdly_nested_json_is_400_not_500(client: httpx.AsyncClient) -> None:
    body = b'{"spans": [{"input": ' + b"[" * 200_000 + b"]" * 200_000 + b"}]}"
    response = await client.post("/v1/api/ingest", content=body)
    assert_error(response, 400, "INVALID_ARGUMENT", "MALFORMED_JSON")


# --- refusals quote a few hundred characters at most --------------------------------------------

HUGE = "x" * 2_000_000
# Far less than what the refusals below would be if they echoed the value.
SMALL_BODY = 2048


async def _get_raw(app: Starlette, path: str, query: bytes) -> httpx.Response:
    """GET through the ASGI app itself: HTTP clients refuse to build a URL this long."""
    sent: list[Message] = []

    async def receive() -> Message:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: Message) -> None:
        sent.append(message)

    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "GET",
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "root_path": "",
        "query_string": query,
        "headers": [(b"host", b"gateway")],
        "client": ("127.0.0.1", 50000),
        "server": ("gateway", 80),
    }
    await app(scope, receive, send)
    (start,) = (message for message in sent if message["type"] == "http.response.start")
    body = b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")
    return httpx.Response(start["status"], headers=start["headers"], content=body)


@pytest.mark.parametrize(
    ("parameter", "field"), [("from", "from"), ("status", "status[0]"), ("limit", "limit")]
)
async def test_a_huge_query_value_is_quoted_not_echoed(
    app: Starlette, parameter: str, field: str
) -> None:
    response = await _get_raw(app, "/v1/api/traces", f"{parameter}={HUGE}".encode())

    error = assert_error(response, 400, "INVALID_ARGUMENT")
    assert len(response.content) < SMALL_BODY
    assert error["field"] == field
    assert error["message"].startswith(f"{field}: ")


async def test_a_huge_unknown_query_parameter_is_not_echoed(app: Starlette) -> None:
    response = await _get_raw(app, "/v1/api/traces", f"{HUGE}=1".encode())

    error = assert_error(response, 400, "INVALID_ARGUMENT", "UNKNOWN_PARAMETER")
    assert len(response.content) < SMALL_BODY
    assert error["field"].startswith("xxxx")


@pytest.mark.parametrize(
    ("span", "field"),
    [
        ({"start_time": HUGE}, "spans[0].start_time"),
        ({"kind": HUGE}, "spans[0].kind"),
        ({"duration_ns": HUGE}, "spans[0].duration_ns"),
    ],
    ids=["timestamp", "enum", "integer"],
)
async def test_a_huge_value_in_a_json_body_is_quoted_not_echoed(
    client: httpx.AsyncClient, span: dict[str, Any], field: str
) -> None:
    response = await client.post("/v1/api/ingest", json={"spans": [span]})

    error = assert_error(response, 400, "INVALID_ARGUMENT")
    assert len(response.content) < SMALL_BODY
    assert error["field"] == field
    assert error["message"].startswith(f"{field}: ")


async def test_a_huge_unknown_body_field_is_not_echoed(client: httpx.AsyncClient) -> None:
    response = await client.post("/v1/api/ingest", json={"spans": [{HUGE: 1}]})

    error = assert_error(response, 400, "INVALID_ARGUMENT", codec.UNKNOWN_FIELD)
    assert len(response.content) < SMALL_BODY
    assert error["field"].startswith("spans[0].xxxx")
