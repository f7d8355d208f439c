"""The whole MCP path with nothing stubbed: the official client, Streamable HTTP on a real
uvicorn, the gateway, a real gRPC server with the auth interceptor (local mode), the real
QueryServicer, SessionTools, and the SQLite session store with its tantivy index."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx2
import pytest
from mcp.client import ClientSession
from mcp.client.streamable_http import streamable_http_client

import services.query
from cli.http_server import HttpServer
from cli.roles import tool_catalog
from cli.security import build_security
from gateway.app import create_app
from mcpd.redaction import Redactor
from mcpd.runtime.channels import open_channel
from mcpd.runtime.clock import SystemClock
from mcpd.runtime.config import GrpcSettings, SecuritySettings
from mcpd.runtime.server import GrpcServer
from mcpd.storage import Stores, open_stores
from mcpd.testing.templates import SqliteTemplates
from services.query.sessions import SessionTools
from services.query.tests.sessions.builders import answer, build, event_id, session_id, user

PROJECT = "default"  # local mode: the anonymous caller's project
SOURCES = ["codex", "claude"]


@pytest.fixture
def stores(tmp_path: Path, sqlite_templates: SqliteTemplates) -> Iterator[Stores]:
    data_dir = sqlite_templates.data_dir(tmp_path)
    with open_stores("sqlite", data_dir=data_dir, postgres_url=None, clickhouse_url=None) as opened:
        opened.sessions.write_session(
            PROJECT,
            build(
                "mig",
                [
                    [user("why does the alembic migration lock the table"), answer("use batch")],
                    [user("and the tantivy index?"), answer("rebuild it from the read model")],
                ],
                project=PROJECT,
            ),
        )
        yield opened


@pytest.fixture
async def mcp_url(stores: Stores) -> AsyncIterator[str]:
    clock = SystemClock()
    tools = SessionTools(
        stores.sessions, clock=clock, cursor_key=b"k" * 32, sources=SOURCES, max_results=50
    )
    registrations = services.query.registrations(
        stores.trace,
        stores.control,
        storage="sqlite",
        signup=False,
        clock=clock,
        sessions=tools,
        hash_user=Redactor(key=b"k" * 32).hash_identifier,
    )
    security = await build_security(SecuritySettings(), stores.control, clock, ["127.0.0.1:0"])
    async with contextlib.AsyncExitStack() as stack:
        stack.push_async_callback(security.close)
        server = await stack.enter_async_context(
            GrpcServer(
                "127.0.0.1:0", registrations, GrpcSettings(), interceptors=[security.interceptor]
            )
        )
        channel = open_channel(f"127.0.0.1:{server.port}", GrpcSettings())
        stack.push_async_callback(channel.close)
        catalog = tool_catalog(SOURCES)
        app = create_app(lambda service: channel, mcp_tools=lambda: catalog)
        http = await stack.enter_async_context(HttpServer(app, "127.0.0.1:0"))
        yield f"http://127.0.0.1:{http.port}/mcp"


@contextlib.asynccontextmanager
async def session(url: str) -> AsyncIterator[ClientSession]:
    async with (
        httpx2.AsyncClient(timeout=30) as http,
        streamable_http_client(url, http_client=http) as (read, write),
        ClientSession(read, write) as client,
    ):
        await client.initialize()
        yield client


async def _call(client: ClientSession, tool: str, arguments: dict[str, Any]) -> Any:
    # The client validates structured content against the tool's output schema on success.
    result = await client.call_tool(tool, arguments)
    return result.structured_content, result.is_error


async def test_descriptions_name_the_configured_sources(mcp_url: str) -> None:
    async with session(mcp_url) as client:
        listed = await client.list_tools()
    search = next(tool for tool in listed.tools if tool.name == "search_sessions")
    assert "codex, claude" in (search.description or "")


async def test_search_then_open_through_every_layer(mcp_url: str) -> None:
    async with session(mcp_url) as client:
        found, found_error = await _call(client, "search_sessions", {"query": "tantivy"})
        hit = found["data"]["results"][0]
        opened, opened_error = await _call(client, "open", {"id": hit["open"]["event_id"]})
    assert found_error is False
    assert found["schema_version"] == "moraine.mcp.search_sessions.v1"
    assert hit["id"] == event_id("mig", 2, 1)
    assert hit["open"]["session_id"] == session_id("mig")
    assert opened_error is False
    assert opened["schema_version"] == "moraine.mcp.open.v1"


async def test_cursors_signed_by_the_service_continue_over_mcp(mcp_url: str) -> None:
    async with session(mcp_url) as client:
        first, _ = await _call(client, "open", {"id": session_id("mig"), "limit": 1})
        cursor = first["data"]["next_cursor"]
        second, is_error = await _call(client, "open", {"cursor": cursor})
    assert isinstance(cursor, str)
    assert is_error is False
    assert second["schema_version"] == "moraine.mcp.open.v1"
    # limit crossed gRPC as a double and came back an integer in the canonical request.
    assert first["request"]["limit"] == 1
    assert isinstance(first["request"]["limit"], int)


async def test_unknown_argument_and_malformed_id_are_refused_in_band(mcp_url: str) -> None:
    async with session(mcp_url) as client:
        unknown, unknown_error = await _call(client, "open", {"id": "x", "depth": 2})
        malformed, malformed_error = await _call(client, "open", {"id": "not an id"})
    assert unknown_error is True
    assert unknown["error"]["code"] == "invalid_request"
    assert unknown["error"]["details"]["field"] == "depth"
    assert malformed_error is True
    assert malformed["error"]["code"] == "invalid_id"
