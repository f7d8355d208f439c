"""The MCP session tools' domain logic (spec/mcp-search-interface.md): validation, canonical
requests, store calls, response shapes, cursors and envelopes. Transports call `SessionTools`."""

from services.query.sessions.common import DEFAULT_EVENT_TYPES, SEARCHABLE_TYPES
from services.query.sessions.envelope import ToolResult
from services.query.sessions.paths import LaunchContext, discover_launch_context
from services.query.sessions.schemas import (
    INPUT_SCHEMAS,
    OUTPUT_SCHEMAS,
    TOOL_DESCRIPTIONS,
    TOOLS,
    input_schemas,
    output_schema,
    tool_descriptions,
)
from services.query.sessions.tools import SessionTools

__all__ = [
    "DEFAULT_EVENT_TYPES",
    "INPUT_SCHEMAS",
    "OUTPUT_SCHEMAS",
    "SEARCHABLE_TYPES",
    "TOOLS",
    "TOOL_DESCRIPTIONS",
    "LaunchContext",
    "SessionTools",
    "ToolResult",
    "discover_launch_context",
    "input_schemas",
    "output_schema",
    "tool_descriptions",
]
