"""What the MCP server declares: descriptions naming the sources, input schemas that reject
unknown fields, output schemas that every envelope satisfies."""

from __future__ import annotations

import jsonschema
import pytest

from mcpd.sessions.model import HARNESSES
from services.query.sessions import (
    INPUT_SCHEMAS,
    OUTPUT_SCHEMAS,
    TOOL_DESCRIPTIONS,
    TOOLS,
    input_schemas,
    tool_descriptions,
)


def test_every_tool_is_declared() -> None:
    assert set(TOOLS) == set(INPUT_SCHEMAS) == set(OUTPUT_SCHEMAS) == set(TOOL_DESCRIPTIONS)
    assert TOOLS == ("search_sessions", "open", "list_sessions", "file_attention")


@pytest.mark.parametrize("tool", ["search_sessions", "open", "list_sessions", "file_attention"])
def test_schemas_are_valid_and_closed(tool: str) -> None:
    jsonschema.Draft202012Validator.check_schema(INPUT_SCHEMAS[tool])
    jsonschema.Draft202012Validator.check_schema(OUTPUT_SCHEMAS[tool])
    assert INPUT_SCHEMAS[tool]["additionalProperties"] is False
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({"surprise": 1}, INPUT_SCHEMAS[tool])


@pytest.mark.parametrize(
    ("tool", "arguments"),
    [
        ("search_sessions", {"query": "x", "event_types": ["tool_call"], "n_hits": 5}),
        ("search_sessions", {"query": "x", "within_id": None, "harness": None}),
        ("open", {"id": "session:ses_x", "limit": 3}),
        ("open", {"cursor": "abc"}),
        (
            "list_sessions",
            {
                "start_datetime": "2026-04-30T09:00:00-04:00",
                "end_datetime": "2026-04-30T13:00:00Z",
                "sort": "asc",
            },
        ),
        (
            "file_attention",
            {"path": "a.rs", "scope": "all", "granularity": "events", "mutations_only": True},
        ),
    ],
)
def test_valid_arguments_pass_the_schema(tool: str, arguments: dict[str, object]) -> None:
    jsonschema.validate(arguments, INPUT_SCHEMAS[tool])


def test_descriptions_list_configured_sources_and_harnesses() -> None:
    described = tool_descriptions(["codex", "claude-cowork", "prime-agent-subagents"])
    for tool in ("search_sessions", "list_sessions", "file_attention"):
        assert "codex, claude-cowork, prime-agent-subagents" in described[tool]
        assert all(harness in described[tool] for harness in HARNESSES)
    assert "next_cursor" in described["open"]
    assert "(none configured)" in TOOL_DESCRIPTIONS["search_sessions"]
    schemas = input_schemas(["codex", "pi"], max_results=20)
    assert "codex, pi" in schemas["search_sessions"]["properties"]["source"]["description"]
    assert schemas["open"]["properties"]["limit"]["maximum"] == 20


def test_output_schema_separates_success_and_error() -> None:
    schema = OUTPUT_SCHEMAS["open"]
    common = {"tool": "open", "request": {}, "warnings": [], "performance": {"elapsed_ms": 1}}
    jsonschema.validate(
        {**common, "schema_version": "moraine.mcp.open.v1", "data": {"kind": "event"}}, schema
    )
    error = {"code": "busy", "message": "m", "details": {}}
    jsonschema.validate(
        {**common, "schema_version": "moraine.mcp.error.v1", "error": error}, schema
    )
    for bad in (
        {**common, "schema_version": "moraine.mcp.open.v1", "error": error},
        {**common, "schema_version": "moraine.mcp.error.v1", "data": {"kind": "event"}},
        {**common, "schema_version": "moraine.mcp.error.v1", "error": {**error, "code": "oops"}},
    ):
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate(bad, schema)
