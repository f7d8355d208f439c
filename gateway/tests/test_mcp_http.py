"""MCP over Streamable HTTP at /mcp: the official MCP client against the gateway on a real
uvicorn, forwarding to a real gRPC query server."""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator
from typing import Any

import grpc.aio
import httpx
import httpx2
import mcp_types as types
import pytest
from mcp.client import Client, ClientSession
from mcp.client.streamable_http import streamable_http_client

from cli.http_server import HttpServer
from gateway.app import create_app
from gateway.mcp.http import MAX_BODY_BYTES
from gateway.tests.mcp_stub import CATALOG, TOOLS, Gateway, stub_gateway


@pytest.fixture
async def gateway() -> AsyncIterator[Gateway]:
    async with stub_gateway() as running:
        yield running


@pytest.fixture(params=[False, True], ids=["json envelope", "struct envelope"])
async def either_gateway(request: pytest.FixtureRequest) -> AsyncIterator[Gateway]:
    """The gateway before a query service that sends the envelope as JSON, or (as one that
    predates `json_envelope`) as a Struct."""
    async with stub_gateway(struct_only=request.param) as running:
        yield running


@contextlib.asynccontextmanager
async def session(
    url: str, headers: dict[str, str] | dict[bytes, bytes] | None = None
) -> AsyncIterator[ClientSession]:
    """The official client over Streamable HTTP, initialized (the 2025 handshake era)."""
    async with (
        httpx2.AsyncClient(headers=headers or {}, timeout=30) as http,
        streamable_http_client(url, http_client=http) as (read, write),
        ClientSession(read, write) as client,
    ):
        await client.initialize()
        yield client


def _text(result: types.CallToolResult) -> Any:
    assert len(result.content) == 1
    block = result.content[0]
    assert isinstance(block, types.TextContent)
    return json.loads(block.text)


async def test_lists_the_four_tools_with_their_schemas(gateway: Gateway) -> None:
    async with session(gateway.url) as client:
        listed = await client.list_tools()
    assert [tool.name for tool in listed.tools] == list(TOOLS)
    for tool in listed.tools:
        assert tool.input_schema["additionalProperties"] is False
        assert tool.output_schema is not None
        assert tool.output_schema["type"] == "object"
        assert tool.annotations is not None
        assert tool.annotations.read_only_hint is True


async def test_a_call_returns_the_envelope_as_structured_content(either_gateway: Gateway) -> None:
    async with session(either_gateway.url) as client:
        result = await client.call_tool("search_sessions", {"query": "tantivy"})
    assert result.is_error is False
    envelope = result.structured_content
    assert envelope["schema_version"] == "moraine.mcp.search_sessions.v1"
    assert envelope["request"] == {"query": "tantivy"}
    # Integral numbers come back as integers although a Struct carries doubles.
    assert envelope["data"] == {"results": [], "score": 1, "count": 3}
    assert isinstance(envelope["data"]["count"], int)
    assert list(envelope) == [
        "schema_version",
        "tool",
        "request",
        "data",
        "warnings",
        "performance",
    ]
    assert _text(result) == envelope
    (call,) = either_gateway.servicer.calls
    assert call.rpc == "SearchSessions"
    assert call.arguments == {"query": "tantivy"}


@pytest.mark.parametrize(
    ("tool", "rpc"),
    [("open", "Open"), ("list_sessions", "ListSessions"), ("file_attention", "FileAttention")],
)
async def test_each_tool_reaches_its_rpc(gateway: Gateway, tool: str, rpc: str) -> None:
    async with session(gateway.url) as client:
        result = await client.call_tool(tool, {"id": "x"})
    assert result.structured_content["tool"] == tool
    assert [call.rpc for call in gateway.servicer.calls] == [rpc]


async def test_an_error_envelope_is_an_in_band_error(gateway: Gateway) -> None:
    async with session(gateway.url) as client:
        result = await client.call_tool("search_sessions", {"query": "refuse"})
    assert result.is_error is True
    assert result.structured_content["error"]["code"] == "invalid_request"
    assert _text(result) == result.structured_content


async def test_credentials_project_and_client_address_reach_the_grpc_metadata(
    gateway: Gateway,
) -> None:
    headers = {"Authorization": "Bearer mcpd_k_secret", "X-Mcpd-Project": "shop"}
    async with session(gateway.url, headers) as client:
        await client.call_tool("open", {"id": "x"})
    (call,) = gateway.servicer.calls
    assert call.metadata["authorization"] == "Bearer mcpd_k_secret"
    assert call.metadata["x-forwarded-for"] == "127.0.0.1"
    assert call.project == "shop"


@pytest.mark.parametrize(
    ("key", "code", "details"),
    [
        (
            "wrong",
            "invalid_request",
            {
                "reason": "unauthenticated",
                "grpc_status": "UNAUTHENTICATED",
                "grpc_reason": "UNKNOWN_KEY",
            },
        ),
        (
            "other-project",
            "invalid_request",
            {"reason": "permission_denied", "grpc_status": "PERMISSION_DENIED", "field": "project"},
        ),
        ("busy", "busy", {"grpc_status": "RESOURCE_EXHAUSTED", "retryable": True}),
    ],
)
async def test_grpc_refusals_become_in_band_error_envelopes(
    gateway: Gateway, key: str, code: str, details: dict[str, Any]
) -> None:
    async with session(gateway.url, {"Authorization": f"Bearer {key}"}) as client:
        result = await client.call_tool("search_sessions", {"query": "q"})
    assert result.is_error is True
    envelope = result.structured_content
    assert envelope["schema_version"] == "moraine.mcp.error.v1"
    assert envelope["tool"] == "search_sessions"
    assert envelope["request"] == {"query": "q"}
    assert envelope["error"]["code"] == code
    assert {k: envelope["error"]["details"].get(k) for k in details} == details
    assert envelope["warnings"] == []
    assert isinstance(envelope["performance"]["elapsed_ms"], int)


async def test_an_unknown_tool_is_refused_in_band(gateway: Gateway) -> None:
    async with session(gateway.url) as client:
        result = await client.call_tool("drop_everything", {})
    assert result.is_error is True
    assert result.structured_content["error"]["code"] == "invalid_request"
    assert result.structured_content["error"]["details"] == {"field": "name"}
    assert gateway.servicer.calls == []


async def test_a_header_that_cannot_travel_as_metadata_is_refused_in_band(
    gateway: Gateway,
) -> None:
    # Sent as Latin-1 bytes, which HTTP allows and gRPC metadata does not.
    headers = {b"Authorization": "Bearer caf\u00e9".encode("latin-1")}
    async with session(gateway.url, headers) as client:
        result = await client.call_tool("open", {"id": "x"})
    assert result.is_error is True
    assert result.structured_content["error"]["code"] == "invalid_request"
    assert result.structured_content["error"]["details"]["field"] == "authorization"
    assert gateway.servicer.calls == []


async def test_a_body_over_the_limit_is_refused_before_it_is_parsed(gateway: Gateway) -> None:
    call = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "open"}}
    oversized = json.dumps({**call, "padding": "x" * MAX_BODY_BYTES})
    headers = {"content-type": "application/json", "accept": "application/json, text/event-stream"}
    async with httpx.AsyncClient(timeout=30) as http:
        response = await http.post(gateway.url, content=oversized, headers=headers)
        assert response.status_code == 413
        assert response.json()["error"]["message"] == (
            f"the request body exceeds {MAX_BODY_BYTES} bytes"
        )
        # Within the limit, the same transport serves the same call: only this one went upstream.
        response = await http.post(gateway.url, content=json.dumps(call), headers=headers)
        assert response.status_code == 200, response.text
    assert [c.rpc for c in gateway.servicer.calls] == ["Open"]


async def test_an_unreachable_query_service_is_a_backend_failure() -> None:
    channel = grpc.aio.insecure_channel("127.0.0.1:1")
    app = create_app(lambda service: channel, mcp_tools=lambda: CATALOG, default_deadline_s=2.0)
    try:
        async with HttpServer(app, "127.0.0.1:0") as http:
            url = f"http://127.0.0.1:{http.port}/mcp"
            async with session(url) as client:
                result = await client.call_tool("open", {"id": "x"})
    finally:
        await channel.close()
    assert result.is_error is True
    assert result.structured_content["error"]["code"] == "backend_failure"
    assert result.structured_content["error"]["details"]["retryable"] is True


async def test_the_modern_protocol_client_works_too(gateway: Gateway) -> None:
    # `Client` probes server/discover and speaks the 2026-07-28 per-request envelope.
    headers = {"Authorization": "Bearer modern", "X-Mcpd-Project": "shop"}
    async with (
        httpx2.AsyncClient(headers=headers, timeout=30) as http,
        Client(streamable_http_client(gateway.url, http_client=http)) as client,
    ):
        assert client.session.protocol_version == "2026-07-28"
        listed = await client.list_tools()
        result = await client.call_tool("search_sessions", {"query": "q"})
    assert len(listed.tools) == 4
    assert result.structured_content["tool"] == "search_sessions"
    (call,) = gateway.servicer.calls
    assert call.metadata["authorization"] == "Bearer modern"
    assert call.metadata["x-forwarded-for"] == "127.0.0.1"
    assert call.project == "shop"


async def test_stateless_no_session_id_and_no_get_stream(gateway: Gateway) -> None:
    initialize = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "t", "version": "0"},
        },
    }
    accept = {"Accept": "application/json, text/event-stream"}
    async with httpx.AsyncClient(timeout=10) as http:
        answer = await http.post(gateway.url, json=initialize, headers=accept)
        stream = await http.get(gateway.url, headers={"Accept": "text/event-stream"})
        delete = await http.delete(gateway.url)
    assert answer.status_code == 200
    assert answer.headers["content-type"].startswith("application/json")
    assert "mcp-session-id" not in answer.headers
    assert answer.json()["result"]["serverInfo"]["name"] == "mcpd"
    assert stream.status_code == delete.status_code == 405
    assert stream.headers["allow"] == "POST"


async def test_a_browser_origin_is_refused_on_loopback(gateway: Gateway) -> None:
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
    accept = {"Accept": "application/json, text/event-stream"}
    async with httpx.AsyncClient(timeout=10) as http:
        foreign = await http.post(
            gateway.url, json=body, headers={**accept, "Origin": "http://evil.example:8080"}
        )
        local = await http.post(
            gateway.url, json=body, headers={**accept, "Origin": "http://localhost:3000"}
        )
    assert foreign.status_code == 403
    assert local.status_code != 403


async def test_rest_routes_still_answer_beside_mcp(gateway: Gateway) -> None:
    base = gateway.url.removesuffix("/mcp")
    async with httpx.AsyncClient(timeout=10) as http:
        openapi = await http.get(f"{base}/v1/api/openapi.json")
        slash = await http.post(f"{base}/mcp/", json={})
    assert openapi.status_code == 200
    assert slash.status_code == 404
    assert slash.json()["error"]["reason"] == "ROUTE_NOT_FOUND"
