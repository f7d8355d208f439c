"""The MCP server of the session tools, whichever transport carries it (Streamable HTTP, stdio).

Built on the official SDK's low-level `Server`: `tools/list` publishes the catalogue, and
`tools/call` hands the call to a `ToolBackend` (the query service over gRPC, or the tools in
process for `mcpd mcp` without a daemon) and returns its envelope as the spec wants it: in
`structuredContent`, with a compact JSON rendering in `content` and `isError` when it is an error
envelope. Every failure becomes such an in-band error result; none becomes a JSON-RPC error.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import time
from collections.abc import Callable, Mapping
from typing import Any, Protocol

import mcp_types as types
from mcp.server import Server, ServerRequestContext
from starlette.requests import Request

from gateway.mcp.catalog import ToolCatalog
from gateway.mcp.envelopes import (
    ToolAnswer,
    elapsed_since,
    error_answer,
    failure_answer,
    in_spec_order,
)
from mcpd.runtime.errors import McpdError, quoted
from mcpd.runtime.errors_grpc import RpcFailure
from mcpd.version import mcpd_version

log = logging.getLogger("mcpd.mcp")

SERVER_NAME = "mcpd"

INSTRUCTIONS = (
    "Search and open past coding-agent sessions (Codex, Claude Code, ...) recorded by mcpd. "
    "Start with search_sessions (or list_sessions, or file_attention for a file), then open a "
    "hit's session, turn or event id; follow next_cursor to page through what open returns."
)


@dataclasses.dataclass(frozen=True, slots=True)
class Caller:
    """Who calls, as the transport saw them: gRPC metadata to forward and a project selector."""

    metadata: tuple[tuple[str, str | bytes], ...] = ()
    project: str = ""


class ToolBackend(Protocol):
    """Runs one tool call and answers with its envelope (never raises for a refused call)."""

    async def call(self, tool: str, arguments: dict[str, Any], caller: Caller) -> ToolAnswer:
        """The envelope `tool` answers to `arguments`, on behalf of `caller`."""
        ...


CallerOf = Callable[[Request | None], Caller]
"""The caller of one request, from its HTTP request (None on stdio). May raise `McpdError`
(a header that cannot travel as gRPC metadata), which answers `invalid_request`."""


def anonymous_caller(request: Request | None) -> Caller:
    """No metadata and no project selector: what a local, unauthenticated caller sends."""
    return Caller()


def build_server(
    catalog: ToolCatalog, backend: ToolBackend, *, caller_of: CallerOf = anonymous_caller
) -> Server[Any]:
    """A low-level MCP server listing `catalog` and answering calls through `backend`."""

    async def list_tools(
        ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        return types.ListToolsResult(tools=list(catalog.tools))

    async def call_tool(
        ctx: ServerRequestContext[Any, Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        began = time.monotonic()
        arguments = dict(params.arguments or {})
        try:
            if params.name not in catalog:
                names = ", ".join(tool.name for tool in catalog.tools)
                answer = error_answer(
                    params.name,
                    arguments,
                    "invalid_request",
                    f"unknown tool {quoted(params.name)}; this server has {names}",
                    details={"field": "name"},
                    elapsed_ms=elapsed_since(began),
                )
            else:
                request = ctx.request if isinstance(ctx.request, Request) else None
                answer = await backend.call(params.name, arguments, caller_of(request))
        except McpdError as err:
            failure = RpcFailure(err.code, err.message, err.reason, err.field)
            answer = failure_answer(
                params.name, arguments, failure, elapsed_ms=elapsed_since(began)
            )
        except Exception:
            log.exception("MCP tool %s failed", params.name)
            answer = error_answer(
                params.name,
                arguments,
                "internal_error",
                "internal error",
                elapsed_ms=elapsed_since(began),
            )
        return tool_result(answer)

    return Server(
        SERVER_NAME,
        version=mcpd_version(),
        title="mcpd agent sessions",
        instructions=INSTRUCTIONS,
        get_tool_input_schema=catalog.input_schema,
        on_list_tools=list_tools,
        on_call_tool=call_tool,
    )


def tool_result(answer: ToolAnswer) -> types.CallToolResult:
    """The MCP result of `answer`: the envelope as structured content and as compact JSON text."""
    envelope = in_spec_order(answer.envelope)
    return types.CallToolResult(
        content=[types.TextContent(text=render(envelope))],
        structured_content=envelope,
        is_error=answer.is_error,
    )


def render(envelope: Mapping[str, Any]) -> str:
    """Compact JSON, non-ASCII text kept as is."""
    return json.dumps(envelope, ensure_ascii=False, separators=(",", ":"))
