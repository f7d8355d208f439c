"""The MCP surface: the four session-search tools over Streamable HTTP (`/mcp`) and stdio.

`build_server` makes the SDK server from a `ToolCatalog` and a `ToolBackend`; `UpstreamTools` is
the backend that forwards each call to the query service over gRPC (the gateway, and
`mcpd mcp` beside a running daemon); `McpHttpEndpoint` serves a server at `/mcp`.
"""

from gateway.mcp.catalog import TOOL_RPCS, ToolCatalog
from gateway.mcp.envelopes import ERROR_SCHEMA_VERSION, ToolAnswer, error_answer
from gateway.mcp.http import PROJECT_HEADER, McpHttpEndpoint, caller_from_request
from gateway.mcp.server import Caller, ToolBackend, build_server, tool_result
from gateway.mcp.upstream import QUERY_SERVICE, UpstreamTools
from gateway.paths import MCP_PATH

__all__ = [
    "ERROR_SCHEMA_VERSION",
    "MCP_PATH",
    "PROJECT_HEADER",
    "QUERY_SERVICE",
    "TOOL_RPCS",
    "Caller",
    "McpHttpEndpoint",
    "ToolAnswer",
    "ToolBackend",
    "ToolCatalog",
    "UpstreamTools",
    "build_server",
    "caller_from_request",
    "error_answer",
    "tool_result",
]
