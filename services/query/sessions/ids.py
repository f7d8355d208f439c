"""Typed MCP ids (`session:...`, `turn:...`, `event:...`) and the server's own tool names.

Ids are opaque to callers, but a well-formed one is a known kind, a colon, and a body of
URL-safe characters; anything else is `invalid_id`, so a typo never reads as "not found".
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Literal

from services.query.sessions.errors import INVALID_ID, ToolError

Kind = Literal["session", "turn", "event"]

_ID = re.compile(r"(session|turn|event):[A-Za-z0-9_.~=+/-]{1,200}")

# The four tools of this server: their own calls are not search hits nor file touches
# (ARCHITECTURE 8; spec file_attention: "calls do not report themselves").
OWN_TOOLS = frozenset({"search_sessions", "open", "list_sessions", "file_attention"})
# Server names under which agents register this server. `open` is generic enough that a bare or
# foreign `open` is ours only when ingest flagged the call (`payload.self_tool`, set when the
# arguments are mcpd-shaped).
_OWN_SERVERS = ("mcpd", "moraine")


def id_kind(raw: str, field: str) -> Kind:
    """The kind of a well-formed id, or `invalid_id` naming the argument."""
    match = _ID.fullmatch(raw)
    if match is None:
        raise ToolError(INVALID_ID, f"{field} is not a valid Moraine MCP ID", field=field)
    kind: Kind = match.group(1)  # type: ignore[assignment]  # the regex allows only these
    return kind


def is_own_tool(tool_name: str | None, payload: Mapping[str, Any] | None = None) -> bool:
    """Whether a recorded tool call or response is one of this server's tools: flagged so by
    ingest, or named so however the harness qualified it (`mcp__mcpd__search_sessions`,
    `mcpd.open`, `moraine/list_sessions`)."""
    if payload is not None and payload.get("self_tool") is True:
        return True
    if not tool_name:
        return False
    name = tool_name.strip().lower()
    server: str | None = None
    if name.startswith("mcp__") and name.count("__") >= 2:
        _, server, name = name.split("__", 2)
    else:
        for separator in ("__", "/", "."):
            if separator in name:
                server, name = name.rsplit(separator, 1)
                break
    if name not in OWN_TOOLS:
        return False
    if name == "open":
        return server is not None and any(own in server for own in _OWN_SERVERS)
    return True
