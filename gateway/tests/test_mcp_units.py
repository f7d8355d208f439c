"""The MCP edge's pieces on their own: error mapping, catalogue, caller, endpoint guards."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import grpc
import grpc.aio
import httpx
import pytest
from starlette.requests import Request

from cli.roles import cursor_key, tool_catalog
from gateway.app import create_app
from gateway.mcp import ToolCatalog, caller_from_request
from gateway.mcp.envelopes import ERROR_SCHEMA_VERSION, failure_answer, in_spec_order
from gateway.mcp.server import tool_result
from gateway.mcp.upstream import envelope_of
from gateway.tests.mcp_stub import CATALOG
from mcpd.runtime.errors import FailedPrecondition
from mcpd.runtime.errors_grpc import RpcFailure
from services.query import servicer
from services.query.sessions import (
    INPUT_SCHEMAS,
    OUTPUT_SCHEMAS,
    TOOLS,
    LaunchContext,
    ToolResult,
    tool_descriptions,
)


@pytest.mark.parametrize(
    ("status", "code"),
    [
        (grpc.StatusCode.INVALID_ARGUMENT, "invalid_request"),
        (grpc.StatusCode.FAILED_PRECONDITION, "invalid_request"),
        (grpc.StatusCode.OUT_OF_RANGE, "invalid_request"),
        (grpc.StatusCode.UNAUTHENTICATED, "invalid_request"),
        (grpc.StatusCode.PERMISSION_DENIED, "invalid_request"),
        (grpc.StatusCode.NOT_FOUND, "not_found"),
        (grpc.StatusCode.RESOURCE_EXHAUSTED, "busy"),
        (grpc.StatusCode.UNAVAILABLE, "backend_failure"),
        (grpc.StatusCode.DEADLINE_EXCEEDED, "deadline_exceeded"),
        (grpc.StatusCode.CANCELLED, "cancelled"),
        (grpc.StatusCode.UNIMPLEMENTED, "internal_error"),
        (grpc.StatusCode.INTERNAL, "internal_error"),
        (grpc.StatusCode.UNKNOWN, "internal_error"),
    ],
)
def test_grpc_status_to_error_code(status: grpc.StatusCode, code: str) -> None:
    failure = RpcFailure(status, "why", status.name)
    answer = failure_answer("open", {"id": "x"}, failure, elapsed_ms=7)
    assert answer.is_error
    assert answer.envelope == {
        "schema_version": ERROR_SCHEMA_VERSION,
        "tool": "open",
        "request": {"id": "x"},
        "error": {
            "code": code,
            "message": "why",
            "details": answer.envelope["error"]["details"],
        },
        "warnings": [],
        "performance": {"elapsed_ms": 7},
    }
    details = answer.envelope["error"]["details"]
    assert details["grpc_status"] == status.name
    assert "grpc_reason" not in details  # the reason equals the status name: nothing to add


def test_auth_refusals_say_why_and_name_the_field() -> None:
    denied = RpcFailure(
        grpc.StatusCode.PERMISSION_DENIED, "", "PROJECT_NOT_GRANTED", field="project"
    )
    details = failure_answer("open", {}, denied, elapsed_ms=0).envelope["error"]
    assert details == {
        "code": "invalid_request",
        "message": "the query service answered PERMISSION_DENIED",
        "details": {
            "grpc_status": "PERMISSION_DENIED",
            "grpc_reason": "PROJECT_NOT_GRANTED",
            "reason": "permission_denied",
            "field": "project",
        },
    }
    unauthenticated = RpcFailure(grpc.StatusCode.UNAUTHENTICATED, "no key", "UNKNOWN_KEY")
    error = failure_answer("open", {}, unauthenticated, elapsed_ms=0).envelope["error"]
    assert error["details"]["reason"] == "unauthenticated"


def test_retryable_failures_say_so() -> None:
    for status in (grpc.StatusCode.RESOURCE_EXHAUSTED, grpc.StatusCode.UNAVAILABLE):
        answer = failure_answer("open", {}, RpcFailure(status, "", status.name), elapsed_ms=0)
        assert answer.envelope["error"]["details"]["retryable"] is True


def test_envelope_fields_in_spec_order() -> None:
    shuffled = {"performance": {}, "data": {}, "zzz": 1, "tool": "t", "schema_version": "s"}
    assert list(in_spec_order(shuffled)) == ["schema_version", "tool", "data", "performance", "zzz"]


def test_tool_result_carries_the_envelope_twice() -> None:
    answer = failure_answer(
        "open", {"id": "é"}, RpcFailure(grpc.StatusCode.NOT_FOUND, "gone", "X"), elapsed_ms=1
    )
    result = tool_result(answer)
    assert result.is_error is True
    assert result.structured_content == answer.envelope
    text = result.content[0]
    assert text.type == "text"
    assert '"id":"é"' in text.text  # compact, non-ASCII kept


def test_the_catalogue_publishes_the_tools_own_schemas() -> None:
    catalog = tool_catalog(["codex", "claude"])
    assert [tool.name for tool in catalog.tools] == list(TOOLS)
    for tool in catalog.tools:
        assert tool.input_schema == INPUT_SCHEMAS[tool.name]
        assert tool.input_schema["additionalProperties"] is False
        assert tool.output_schema == OUTPUT_SCHEMAS[tool.name]
    descriptions = tool_descriptions(["codex", "claude"])
    assert [tool.description for tool in catalog.tools] == [descriptions[t] for t in TOOLS]
    assert "codex, claude" in (catalog.tools[0].description or "")
    assert catalog.input_schema("nope") is None
    assert "open" in catalog
    assert "nope" not in catalog


def test_a_catalogue_missing_a_tool_is_refused() -> None:
    partial: dict[str, dict[str, Any]] = {name: {} for name in TOOLS if name != "open"}
    with pytest.raises(ValueError, match="open"):
        ToolCatalog({name: "" for name in TOOLS}, partial, partial)


def _request(headers: dict[str, str], client: tuple[str, int] | None = ("10.1.2.3", 5)) -> Request:
    scope: dict[str, Any] = {
        "type": "http",
        "method": "POST",
        "path": "/mcp",
        "headers": [(k.lower().encode(), v.encode()) for k, v in headers.items()],
        "client": client,
    }
    return Request(scope)


def test_the_caller_carries_credentials_trace_context_address_and_project() -> None:
    caller = caller_from_request(
        _request(
            {
                "Authorization": "Bearer k",
                "traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
                "X-Forwarded-For": "203.0.113.9",
                "X-Mcpd-Project": " shop ",
                "Cookie": "a=b",
            }
        )
    )
    assert caller.project == "shop"
    assert dict(caller.metadata) == {
        "authorization": "Bearer k",
        "traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
        # The address the gateway saw, never the caller's own X-Forwarded-For.
        "x-forwarded-for": "10.1.2.3",
    }
    assert caller_from_request(None).metadata == ()
    assert caller_from_request(_request({}, client=None)).metadata == ()


async def test_the_endpoint_answers_503_until_its_lifespan_runs() -> None:
    def no_upstream(service: str) -> grpc.aio.Channel:
        raise LookupError(service)

    # ASGITransport runs no lifespan: the session manager never started.
    transport = httpx.ASGITransport(app=create_app(no_upstream, mcp_tools=lambda: CATALOG))
    async with httpx.AsyncClient(transport=transport, base_url="http://gateway") as client:
        response = await client.post("/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "ping"})
    assert response.status_code == 503
    assert response.json()["error"]["code"] == -32600


def test_the_cursor_key_is_made_once_private_and_kept(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    first = cursor_key(data_dir)
    assert len(first) == 32
    assert cursor_key(data_dir) == first
    assert (data_dir / "mcp-cursor.key").stat().st_mode & 0o777 == 0o600
    assert [p.name for p in data_dir.iterdir()] == ["mcp-cursor.key"]  # no temporary left


def test_a_short_cursor_key_is_refused(tmp_path: Path) -> None:
    (tmp_path / "mcp-cursor.key").write_bytes(b"short")
    with pytest.raises(FailedPrecondition, match="32"):
        cursor_key(tmp_path)


@pytest.mark.parametrize("json_envelope", [False, True])
def test_an_envelope_that_cannot_be_sent_becomes_an_internal_error(json_envelope: bool) -> None:
    deep: dict[str, Any] = {}
    level = deep
    for _ in range(300):  # past the Struct codec's depth and the JSON encoder's
        level["x"] = {}
        level = level["x"]
    envelope = {
        "schema_version": "moraine.mcp.open.v1",
        "tool": "open",
        "request": {"id": "e"},
        "data": deep,
        "warnings": [],
        "performance": {"elapsed_ms": 3},
    }
    response = servicer._tool_response(
        "open", ToolResult(envelope, is_error=False), json_envelope=json_envelope
    )
    assert response.is_error is True
    assert response.HasField("envelope") is not json_envelope
    got = envelope_of(response)
    assert got["error"]["code"] == "internal_error"
    assert got["request"] == {"id": "e"}
    assert got["performance"] == {"elapsed_ms": 3}


def test_the_json_envelope_carries_what_the_struct_does() -> None:
    envelope = {
        "schema_version": "moraine.mcp.search_sessions.v1",
        "tool": "search_sessions",
        "request": {"query": "déjà vu 索引", "limit": 10},
        "data": {"results": [{"rank": 1, "score": 0.5, "open": None}], "truncated": True},
        "warnings": [],
        "performance": {"elapsed_ms": 12},
    }
    result = ToolResult(envelope, is_error=False)
    as_json = servicer._tool_response("search_sessions", result, json_envelope=True)
    as_struct = servicer._tool_response("search_sessions", result, json_envelope=False)
    assert not as_json.HasField("envelope")
    assert not as_struct.HasField("envelope_json")
    assert envelope_of(as_json) == envelope_of(as_struct) == envelope


def test_the_launch_context_metadata_is_read_and_malformed_values_ignored() -> None:
    good = json.dumps({"cwd": "/w/é", "git_root": "/w", "git_common_dir": None}).encode()
    assert servicer._launch_context([(servicer.LAUNCH_METADATA, good)]) == LaunchContext(
        "/w/é", "/w", None
    )
    for bad in (b"{", b"[]", b'{"cwd": ""}', b'{"git_root": "/w"}'):
        assert servicer._launch_context([(servicer.LAUNCH_METADATA, bad)]) is None
    assert servicer._launch_context([("authorization", "Bearer k")]) is None
    assert servicer._launch_context(None) is None
