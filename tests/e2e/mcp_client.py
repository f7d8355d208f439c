"""The official MCP client against a real mcpd, shared by the MCP end-to-end tests: sessions over
Streamable HTTP (`/mcp` on the gateway) and over stdio (`mcpd mcp` as a subprocess), and
`McpTools`, the in-process `SessionTools` call surface served by an MCP client session, so the
query service's unit case tables run unchanged over a transport."""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator, Mapping
from pathlib import Path
from typing import Any

import httpx2
import jsonschema
import mcp_types as types
from mcp.client import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client

from mcpd.testing.daemon import DaemonProcess, mcpd_executable
from services.query.sessions import LaunchContext, ToolResult

TOOLS = ["search_sessions", "open", "list_sessions", "file_attention"]
FIXTURES = Path(__file__).parents[1] / "fixtures" / "transcripts"
# No transcript sources: the read model stays empty whatever this machine's home holds.
QUIET = {"MCPD_SESSIONS_ENABLED": "false", "MCPD_LOG_FORMAT": "text"}


@contextlib.asynccontextmanager
async def http_session(
    daemon: DaemonProcess, headers: dict[str, str] | None = None
) -> AsyncIterator[ClientSession]:
    """An initialized MCP client session on the daemon's Streamable HTTP endpoint."""
    async with (
        httpx2.AsyncClient(headers=headers or {}, timeout=30) as http,
        streamable_http_client(f"{daemon.http_url}/mcp", http_client=http) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        yield session


@contextlib.asynccontextmanager
async def stdio_session(
    env: dict[str, str], args: list[str], log: Path
) -> AsyncIterator[ClientSession]:
    """An initialized MCP client session on `mcpd mcp ARGS` launched with `env`; its stderr
    goes to `log`."""
    server = StdioServerParameters(command=str(mcpd_executable()), args=["mcp", *args], env=env)
    with log.open("w") as errlog:
        async with (
            stdio_client(server, errlog=errlog) as (read, write),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            yield session


def envelope_of(result: object) -> dict[str, Any]:
    """The envelope of a tool result, after checking the MCP wrapper around it: a clean
    CallToolResult (errors are in-band, never JSON-RPC failures) whose `structuredContent` is
    the envelope, whose one text block is the same envelope as JSON, and whose `isError` is set
    exactly for the error envelope."""
    assert isinstance(result, types.CallToolResult), result
    envelope = result.structured_content
    assert isinstance(envelope, dict), result
    assert len(result.content) == 1
    text = result.content[0]
    assert isinstance(text, types.TextContent)
    assert json.loads(text.text) == envelope
    failed = envelope["schema_version"] == "moraine.mcp.error.v1"
    assert failed == ("error" in envelope) == ("data" not in envelope), envelope
    if not failed:
        assert envelope["schema_version"] == f"moraine.mcp.{envelope['tool']}.v1"
    assert result.is_error is failed, envelope
    assert isinstance(envelope["warnings"], list)
    assert isinstance(envelope["performance"]["elapsed_ms"], int)
    return envelope


def error_of_result(result: object) -> dict[str, Any]:
    """The `error` object of an in-band error result."""
    envelope = envelope_of(result)
    assert "error" in envelope, envelope
    error: dict[str, Any] = envelope["error"]
    return error


class McpTools:
    """`SessionTools`' call surface (`await tools.<tool>(project, arguments)` -> ToolResult),
    every call made by the official MCP client through `session`.

    The daemon answers for the project of the caller's credentials, not for a project named in
    the call, so these tools serve exactly one project name (`project`, the name the case
    tables use) and refuse others rather than silently answering for the wrong one."""

    def __init__(self, session: ClientSession, project: str) -> None:
        self._session = session
        self._project = project
        self._output_schemas: dict[str, dict[str, Any]] = {}

    async def call(self, tool: str, project: str, arguments: Mapping[str, Any]) -> ToolResult:
        """One `tools/call`, its envelope checked by `envelope_of` and, error envelopes too
        (the client validates only successes), against the output schema the server lists."""
        if project != self._project:
            raise AssertionError(f"these tools serve project {self._project!r}, not {project!r}")
        if not self._output_schemas:
            listed = await self._session.list_tools()
            self._output_schemas = {t.name: t.output_schema or {} for t in listed.tools}
        result = await self._session.call_tool(tool, dict(arguments))
        envelope = envelope_of(result)
        jsonschema.validate(envelope, self._output_schemas[tool])
        return ToolResult(envelope=envelope, is_error="error" in envelope)

    async def search_sessions(self, project: str, arguments: Mapping[str, Any]) -> ToolResult:
        return await self.call("search_sessions", project, arguments)

    async def open(self, project: str, arguments: Mapping[str, Any]) -> ToolResult:
        return await self.call("open", project, arguments)

    async def list_sessions(self, project: str, arguments: Mapping[str, Any]) -> ToolResult:
        return await self.call("list_sessions", project, arguments)

    async def file_attention(
        self,
        project: str,
        arguments: Mapping[str, Any],
        *,
        launch: LaunchContext | None = None,
    ) -> ToolResult:
        # Over HTTP the launch directory is the gateway's business, not the caller's.
        if launch is not None:
            raise AssertionError("a launch context cannot be sent over Streamable HTTP")
        return await self.call("file_attention", project, arguments)
