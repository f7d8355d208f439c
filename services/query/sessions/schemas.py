"""What the MCP server declares for each tool: a description, an input schema that rejects
unknown fields, and an output schema of the envelope (success or error).

The schemas describe; the tools validate. A transport should not let an SDK reject arguments
against these schemas first, or callers would get SDK errors instead of the spec's envelopes.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from mcpd.sessions.model import HARNESSES
from services.query.sessions import attention, listing, search
from services.query.sessions.common import DEFAULT_EVENT_TYPES, SEARCHABLE_TYPES
from services.query.sessions.envelope import ERROR_SCHEMA_VERSION, schema_version
from services.query.sessions.errors import ERROR_CODES

TOOLS = ("search_sessions", "open", "list_sessions", "file_attention")
DEFAULT_MAX_RESULTS = 50


def tool_descriptions(sources: Sequence[str]) -> dict[str, str]:
    """The tool descriptions, naming this server's configured source names."""
    harnesses = ", ".join(HARNESSES)
    configured = ", ".join(sources) if sources else "(none configured)"
    filters = (
        f" Optional exact, case-sensitive filters: harness (one of {harnesses}) and source "
        f"(configured sources: {configured}); both must match when both are given."
    )
    return {
        "search_sessions": (
            "Search past coding-agent sessions and return ranked event handles (not full "
            "content). Results carry event, turn and session ids to pass to open. Searches "
            f"{' and '.join(DEFAULT_EVENT_TYPES)} events by default; add reasoning, tool_call "
            "or tool_response to event_types for raw tool evidence. within_id narrows to one "
            "session or turn id. n_hits is 1-50 (default 10)." + filters
        ),
        "open": (
            "Open a session, turn or event id from search_sessions, list_sessions, "
            "file_attention or open. A session or turn id alone returns a summary with "
            "traversal ids; add limit to page its turns or events and follow next_cursor "
            "(pass cursor alone) until null. An event id returns its full content."
        ),
        "list_sessions": (
            "List sessions overlapping a time range (start_datetime inclusive, end_datetime "
            "exclusive, RFC 3339 with a timezone). Returns compact metadata and session ids "
            "for open, newest first by default (sort asc|desc); follow next_cursor with the "
            "same filters for more. mode: web_search, mcp_internal, tool_calling or chat." + filters
        ),
        "file_attention": (
            "Which sessions touched a file: tool calls naming the path, unified by "
            "repo-relative tail across the main checkout and worktrees, with root buckets that "
            "show ambiguity. granularity sessions (rollups) or events (timeline); scope "
            "project (the launch project) or all; tool (case-insensitive), mutations_only and "
            "a millisecond-precision datetime range narrow it." + filters
        ),
    }


TOOL_DESCRIPTIONS: dict[str, str] = tool_descriptions(())


def _nullable(schema: dict[str, Any]) -> dict[str, Any]:
    kind = schema["type"]
    return {**schema, "type": [kind, "null"]}


def _filters(sources: Sequence[str]) -> dict[str, Any]:
    source: dict[str, Any] = {"type": ["string", "null"], "minLength": 1}
    if sources:
        source["description"] = f"Configured ingest source: {', '.join(sources)}."
    return {
        "harness": {
            "type": ["string", "null"],
            "minLength": 1,
            "description": f"Normalized harness: {', '.join(HARNESSES)}.",
        },
        "source": source,
    }


def _object(properties: dict[str, Any], required: Sequence[str] = ()) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": properties,
        "required": list(required),
        "additionalProperties": False,
    }


def input_schemas(
    sources: Sequence[str] = (), max_results: int = DEFAULT_MAX_RESULTS
) -> dict[str, dict[str, Any]]:
    """JSON Schemas (2020-12) of the four tools' arguments."""
    when = {"type": "string", "format": "date-time"}
    limit = {"type": "integer", "minimum": 1, "maximum": max_results}
    return {
        "search_sessions": _object(
            {
                "query": {"type": "string", "minLength": 1, "maxLength": search.MAX_QUERY_CHARS},
                "within_id": {"type": ["string", "null"], "description": "session or turn id"},
                "event_types": {
                    "type": ["array", "null"],
                    "items": {"type": "string", "enum": list(SEARCHABLE_TYPES)},
                    "minItems": 1,
                    "default": list(DEFAULT_EVENT_TYPES),
                },
                **_filters(sources),
                "n_hits": {
                    "type": ["integer", "null"],
                    "minimum": 1,
                    "maximum": search.MAX_HITS,
                    "default": search.DEFAULT_HITS,
                },
            },
            ["query"],
        ),
        "open": _object(
            {
                "id": {"type": ["string", "null"], "minLength": 1},
                "limit": _nullable(limit),
                "cursor": {"type": ["string", "null"], "minLength": 1},
            }
        ),
        "list_sessions": _object(
            {
                "start_datetime": when,
                "end_datetime": when,
                "limit": {**_nullable(limit), "default": min(20, max_results)},
                "cursor": {"type": ["string", "null"]},
                "mode": {"type": ["string", "null"], "enum": [*listing.MODES, None]},
                **_filters(sources),
                "sort": {"type": ["string", "null"], "enum": [*listing.SORTS, None]},
            },
            ["start_datetime", "end_datetime"],
        ),
        "file_attention": _object(
            {
                "path": {"type": "string", "minLength": 1},
                "scope": {"type": ["string", "null"], "enum": [*attention.SCOPES, None]},
                "granularity": {
                    "type": ["string", "null"],
                    "enum": [*attention.GRANULARITIES, None],
                },
                "start_datetime": _nullable(when),
                "end_datetime": _nullable(when),
                "tool": {"type": ["string", "null"], "minLength": 1},
                **_filters(sources),
                "mutations_only": {"type": ["boolean", "null"], "default": False},
                "limit": {**_nullable(limit), "default": min(50, max_results)},
            },
            ["path"],
        ),
    }


_DATA_REQUIRED = {
    "search_sessions": ["result_count", "limit", "truncated", "results"],
    "open": ["kind"],
    "list_sessions": ["result_count", "limit", "truncated", "sessions", "next_cursor"],
    "file_attention": ["path", "tail", "summary", "roots", "result_count", "limit", "truncated"],
}


def output_schema(tool: str) -> dict[str, Any]:
    """The envelope of one tool: `data` on success, `error` on failure, never both."""
    return {
        "type": "object",
        "required": ["schema_version", "tool", "request", "warnings", "performance"],
        "properties": {
            "schema_version": {"enum": [schema_version(tool), ERROR_SCHEMA_VERSION]},
            "tool": {"const": tool},
            "request": {"type": "object"},
            "data": {"type": "object", "required": _DATA_REQUIRED[tool]},
            "error": {
                "type": "object",
                "required": ["code", "message", "details"],
                "properties": {
                    "code": {"enum": list(ERROR_CODES)},
                    "message": {"type": "string"},
                    "details": {"type": "object"},
                },
            },
            "warnings": {"type": "array", "items": {"type": "object"}},
            "performance": {
                "type": "object",
                "required": ["elapsed_ms"],
                "properties": {"elapsed_ms": {"type": "integer", "minimum": 0}},
            },
        },
        "oneOf": [
            {
                "required": ["data"],
                "not": {"required": ["error"]},
                "properties": {"schema_version": {"const": schema_version(tool)}},
            },
            {
                "required": ["error"],
                "not": {"required": ["data"]},
                "properties": {"schema_version": {"const": ERROR_SCHEMA_VERSION}},
            },
        ],
    }


INPUT_SCHEMAS: dict[str, dict[str, Any]] = input_schemas()
OUTPUT_SCHEMAS: dict[str, dict[str, Any]] = {tool: output_schema(tool) for tool in TOOLS}
