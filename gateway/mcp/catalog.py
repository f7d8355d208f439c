"""The four session-search tools as MCP `Tool`s, and the query-service RPC behind each.

The schemas and descriptions are the tools' own (`services.query.sessions`), handed over by the
composition root: the edge only publishes them. Each input schema rejects unknown fields
(`additionalProperties: false`); the tool enforces its schema itself, so a call answers the same
over MCP, stdio and REST.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import mcp_types as types

# Tool name -> the QueryService RPC that serves it.
TOOL_RPCS: Mapping[str, str] = {
    "search_sessions": "SearchSessions",
    "open": "Open",
    "list_sessions": "ListSessions",
    "file_attention": "FileAttention",
}

_TITLES: Mapping[str, str] = {
    "search_sessions": "Search agent sessions",
    "open": "Open a session, turn or event",
    "list_sessions": "List agent sessions",
    "file_attention": "Tool calls that touched a file",
}


class ToolCatalog:
    """The tools one MCP server lists, with their input and output schemas."""

    def __init__(
        self,
        descriptions: Mapping[str, str],
        input_schemas: Mapping[str, Mapping[str, Any]],
        output_schemas: Mapping[str, Mapping[str, Any]],
    ) -> None:
        missing = [
            name
            for name in TOOL_RPCS
            if name not in descriptions or name not in input_schemas or name not in output_schemas
        ]
        if missing:
            raise ValueError(f"no description or schema for tool(s) {', '.join(missing)}")
        self._input_schemas = {name: dict(input_schemas[name]) for name in TOOL_RPCS}
        self.tools = [
            types.Tool(
                name=name,
                title=_TITLES[name],
                description=descriptions[name],
                input_schema=dict(input_schemas[name]),
                output_schema=dict(output_schemas[name]),
                annotations=types.ToolAnnotations(
                    title=_TITLES[name],
                    read_only_hint=True,
                    open_world_hint=False,
                ),
            )
            for name in TOOL_RPCS
        ]

    def __contains__(self, name: object) -> bool:
        return name in self._input_schemas

    def input_schema(self, name: str) -> Mapping[str, Any] | None:
        """The input schema of tool `name`, None for a tool this catalogue does not have."""
        return self._input_schemas.get(name)
