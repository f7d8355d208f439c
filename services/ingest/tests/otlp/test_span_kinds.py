"""SpanKind precedence, one row of docs/otlp.md at a time, and the entity each kind implies."""

from __future__ import annotations

from typing import Any

import pytest

from services.ingest.tests.otlp.producers import span_row


@pytest.mark.parametrize(
    ("attributes", "kind"),
    [
        # 1. An explicit mcpd.span.kind wins over everything.
        (
            {
                "mcpd.span.kind": "guardrail",
                "openinference.span.kind": "LLM",
                "gen_ai.operation.name": "chat",
            },
            "guardrail",
        ),
        ({"mcpd.span.kind": "WORKFLOW_LOOP"}, "workflow_loop"),
        # ... but only a spec value: anything else falls through to the next rule.
        ({"mcpd.span.kind": "banana", "openinference.span.kind": "LLM"}, "model_inference"),
        # 2. openinference.span.kind, over gen_ai.operation.name.
        ({"openinference.span.kind": "LLM"}, "model_inference"),
        ({"openinference.span.kind": "CHAIN"}, "workflow_step"),
        ({"openinference.span.kind": "AGENT"}, "agent_run"),
        ({"openinference.span.kind": "TOOL"}, "tool_call"),
        ({"openinference.span.kind": "RETRIEVER"}, "retrieval"),
        ({"openinference.span.kind": "EMBEDDING"}, "rag_embedding"),
        ({"openinference.span.kind": "RERANKER"}, "rag_action"),
        ({"openinference.span.kind": "GUARDRAIL"}, "guardrail"),
        ({"openinference.span.kind": "EVALUATOR"}, "scorer_run"),
        ({"openinference.span.kind": "PROMPT"}, "mapping"),
        ({"openinference.span.kind": "llm"}, "model_inference"),
        (
            {"openinference.span.kind": "TOOL", "gen_ai.operation.name": "chat"},
            "tool_call",
        ),
        (
            {"openinference.span.kind": "UNKNOWN", "gen_ai.operation.name": "chat"},
            "model_inference",
        ),
        # 3. gen_ai.operation.name, over mcp.method.name and the attribute rules.
        ({"gen_ai.operation.name": "chat"}, "model_inference"),
        ({"gen_ai.operation.name": "text_completion"}, "model_inference"),
        ({"gen_ai.operation.name": "generate_content"}, "model_inference"),
        ({"gen_ai.operation.name": "invoke_agent"}, "agent_run"),
        ({"gen_ai.operation.name": "create_agent"}, "agent_run"),
        ({"gen_ai.operation.name": "execute_tool"}, "tool_call"),
        ({"gen_ai.operation.name": "embeddings"}, "rag_embedding"),
        ({"gen_ai.operation.name": "retrieval"}, "retrieval"),
        ({"gen_ai.operation.name": "invoke_workflow"}, "workflow_run"),
        ({"gen_ai.operation.name": "search_memory"}, "memory_operation"),
        ({"gen_ai.operation.name": "upsert_memory"}, "memory_operation"),
        (
            {"gen_ai.operation.name": "chat", "mcp.method.name": "tools/call"},
            "model_inference",
        ),
        # The MCP conventions put execute_tool on a tools/call span: that is an MCP tool call.
        (
            {
                "gen_ai.operation.name": "execute_tool",
                "mcp.method.name": "tools/call",
                "gen_ai.tool.name": "search",
            },
            "mcp_tool_call",
        ),
        # An operation mcpd has no kind for falls through.
        ({"gen_ai.operation.name": "plan", "gen_ai.request.model": "o3"}, "model_inference"),
        # 4. mcp.method.name: tools/call is an MCP tool call; other methods fall through.
        ({"mcp.method.name": "tools/call"}, "mcp_tool_call"),
        ({"mcp.method.name": "tools/call", "gen_ai.request.model": "m"}, "mcp_tool_call"),
        ({"mcp.method.name": "resources/read"}, "generic"),
        ({"mcp.method.name": "tools/list", "gen_ai.tool.name": "x"}, "tool_call"),
        # 5. A tool name, over a model name.
        ({"gen_ai.tool.name": "search"}, "tool_call"),
        ({"tool.name": "search"}, "tool_call"),
        ({"tool.name": "search", "llm.model_name": "gpt-4o"}, "tool_call"),
        # 6. A model name.
        ({"gen_ai.request.model": "gpt-4o"}, "model_inference"),
        ({"gen_ai.response.model": "gpt-4o-2024-08-06"}, "model_inference"),
        ({"llm.model_name": "claude-sonnet-4"}, "model_inference"),
        # 7. Nothing known.
        ({"http.request.method": "GET"}, "generic"),
        ({}, "generic"),
    ],
)
def test_kind_precedence(attributes: dict[str, Any], kind: str) -> None:
    assert span_row(attributes)["kind"] == kind


def test_a_valid_explicit_kind_is_consumed_and_an_invalid_one_kept() -> None:
    row = span_row({"mcpd.span.kind": "guardrail", "openinference.span.kind": "LLM"})
    assert row["attributes"] == {
        "openinference.span.kind": "LLM",
        "otel.scope.name": "test.instrumentation",
    }
    row = span_row({"mcpd.span.kind": "banana"})
    assert row["attributes"] == {
        "mcpd.span.kind": "banana",
        "otel.scope.name": "test.instrumentation",
    }


@pytest.mark.parametrize(
    ("attributes", "entity"),
    [
        (
            {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "get_weather"},
            ("tool", None, "get_weather"),
        ),
        ({"openinference.span.kind": "TOOL", "tool.name": "search"}, ("tool", None, "search")),
        (
            {"mcp.method.name": "tools/call", "gen_ai.tool.name": "read_file"},
            ("tool", None, "read_file"),
        ),
        (
            {
                "gen_ai.operation.name": "invoke_agent",
                "gen_ai.agent.name": "planner",
                "gen_ai.agent.id": "asst_1",
            },
            ("agent", "asst_1", "planner"),
        ),
        ({"openinference.span.kind": "AGENT", "agent.name": "triage"}, ("agent", None, "triage")),
        (
            {"gen_ai.operation.name": "invoke_workflow", "gen_ai.workflow.name": "refunds"},
            ("workflow", None, "refunds"),
        ),
        (
            {"gen_ai.operation.name": "chat", "gen_ai.request.model": "gpt-4o"},
            ("model", None, "gpt-4o"),
        ),
        # A span of another kind that names its agent belongs to that agent.
        (
            {"openinference.span.kind": "RETRIEVER", "gen_ai.agent.name": "researcher"},
            ("agent", None, "researcher"),
        ),
        (
            {
                "mcpd.entity.kind": "pipeline",
                "mcpd.entity.id": "p-1",
                "mcpd.entity.name": "ingest docs",
            },
            ("pipeline", "p-1", "ingest docs"),
        ),
        ({"http.request.method": "GET"}, (None, None, None)),
    ],
)
def test_entity(attributes: dict[str, Any], entity: tuple[str | None, ...]) -> None:
    row = span_row(attributes)
    assert (row["entity_kind"], row["entity_id"], row["entity_name"]) == entity


def test_entity_attributes_are_consumed() -> None:
    row = span_row(
        {
            "gen_ai.operation.name": "invoke_agent",
            "gen_ai.agent.name": "planner",
            "gen_ai.agent.id": "asst_1",
            "gen_ai.agent.description": "plans",
        }
    )
    assert row["attributes"] == {
        "gen_ai.operation.name": "invoke_agent",
        "gen_ai.agent.description": "plans",
        "otel.scope.name": "test.instrumentation",
    }


@pytest.mark.parametrize(
    ("attributes", "model", "provider", "kept"),
    [
        (
            {
                "gen_ai.request.model": "gpt-4o",
                "gen_ai.response.model": "gpt-4o-2024-08-06",
                "gen_ai.provider.name": "openai",
                "gen_ai.system": "OpenAI",
            },
            "gpt-4o-2024-08-06",
            "openai",
            # The request model and the older system name lost the precedence: kept.
            {"gen_ai.request.model": "gpt-4o", "gen_ai.system": "OpenAI"},
        ),
        ({"gen_ai.request.model": "gpt-4o", "gen_ai.system": "OpenAI"}, "gpt-4o", "openai", {}),
        (
            {"llm.model_name": "claude-sonnet-4", "llm.provider": "Anthropic", "llm.system": "x"},
            "claude-sonnet-4",
            "anthropic",
            {"llm.system": "x"},
        ),
        ({"llm.system": "AzureOpenAI"}, None, "azureopenai", {}),
    ],
)
def test_model_and_provider(
    attributes: dict[str, Any], model: str | None, provider: str | None, kept: dict[str, Any]
) -> None:
    row = span_row(attributes)
    assert (row["model"], row["provider"]) == (model, provider)
    assert row["attributes"] == {**kept, "otel.scope.name": "test.instrumentation"}
