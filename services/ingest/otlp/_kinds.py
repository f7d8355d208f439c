"""What a span is: its SpanKind, the model and provider it used, and the entity that produced it.

SpanKind precedence, first match wins (docs/otlp.md has the full table):

1. `mcpd.span.kind`, when it is a spec SpanKind value;
2. `openinference.span.kind`;
3. `gen_ai.operation.name` (with `execute_tool` under `mcp.method.name` = `tools/call` read as
   an MCP tool call, because the MCP conventions put both on the same span);
4. `mcp.method.name` = `tools/call`;
5. a tool name (`gen_ai.tool.name`, `tool.name`) -> tool_call;
6. a model name (`gen_ai.request.model`, `gen_ai.response.model`, `llm.model_name`) ->
   model_inference;
7. generic.
"""

from __future__ import annotations

from typing import Any

from mcpd.model.v1 import enums_pb2
from services.ingest.otlp._values import as_text

SPAN_KINDS = frozenset(
    value.name.removeprefix("SPAN_KIND_").lower()
    for value in enums_pb2.SpanKind.DESCRIPTOR.values
    if value.number != 0
)
ENTITY_KINDS = frozenset(
    value.name.removeprefix("ENTITY_KIND_").lower()
    for value in enums_pb2.EntityKind.DESCRIPTOR.values
    if value.number != 0
)

EXPLICIT_KIND = "mcpd.span.kind"
OPENINFERENCE_KIND = "openinference.span.kind"
OPERATION = "gen_ai.operation.name"
MCP_METHOD = "mcp.method.name"

# OpenInference span kinds (upper case on the wire). UNKNOWN is absent: it falls through.
OPENINFERENCE_KINDS = {
    "LLM": "model_inference",
    "CHAIN": "workflow_step",
    "AGENT": "agent_run",
    "TOOL": "tool_call",
    "RETRIEVER": "retrieval",
    "EMBEDDING": "rag_embedding",
    "RERANKER": "rag_action",
    "GUARDRAIL": "guardrail",
    "EVALUATOR": "scorer_run",
    "PROMPT": "mapping",
}

# OpenTelemetry GenAI `gen_ai.operation.name` values. plan and fetch_response are absent: they
# fall through to the attribute rules.
OPERATIONS = {
    "chat": "model_inference",
    "text_completion": "model_inference",
    "generate_content": "model_inference",
    "invoke_agent": "agent_run",
    "create_agent": "agent_run",
    "execute_tool": "tool_call",
    "embeddings": "rag_embedding",
    "retrieval": "retrieval",
    "invoke_workflow": "workflow_run",
    "search_memory": "memory_operation",
    "create_memory": "memory_operation",
    "update_memory": "memory_operation",
    "upsert_memory": "memory_operation",
    "delete_memory": "memory_operation",
    "create_memory_store": "memory_operation",
    "delete_memory_store": "memory_operation",
}

TOOL_NAME_KEYS = ("gen_ai.tool.name", "tool.name")
MODEL_KEYS = ("gen_ai.response.model", "gen_ai.request.model", "llm.model_name")
PROVIDER_KEYS = ("gen_ai.provider.name", "gen_ai.system", "llm.provider", "llm.system")

KIND_KEYS = frozenset(
    {EXPLICIT_KIND, OPENINFERENCE_KIND, OPERATION, MCP_METHOD, *TOOL_NAME_KEYS, *MODEL_KEYS}
)
MODEL_PROVIDER_KEYS = frozenset({*MODEL_KEYS, *PROVIDER_KEYS})

TOOL_KINDS = frozenset({"tool_call", "client_tool_call", "provider_tool_call", "mcp_tool_call"})
MODEL_KINDS = frozenset({"model_generation", "model_step", "model_inference", "rag_embedding"})


def span_kind(attrs: dict[str, Any]) -> str:
    """The spec SpanKind of a span with these attributes (consumes a valid `mcpd.span.kind`)."""
    if attrs.keys().isdisjoint(KIND_KEYS):
        return "generic"
    explicit = attrs.get(EXPLICIT_KIND)
    if isinstance(explicit, str) and explicit.lower() in SPAN_KINDS:
        del attrs[EXPLICIT_KIND]
        return explicit.lower()
    openinference = attrs.get(OPENINFERENCE_KIND)
    if isinstance(openinference, str):
        kind = OPENINFERENCE_KINDS.get(openinference.upper())
        if kind is not None:
            return kind
    operation = attrs.get(OPERATION)
    if isinstance(operation, str):
        kind = OPERATIONS.get(operation.lower())
        if kind is not None:
            if kind == "tool_call" and attrs.get(MCP_METHOD) == "tools/call":
                return "mcp_tool_call"
            return kind
    if attrs.get(MCP_METHOD) == "tools/call":
        return "mcp_tool_call"
    for key in TOOL_NAME_KEYS:
        if key in attrs:
            return "tool_call"
    for key in MODEL_KEYS:
        if key in attrs:
            return "model_inference"
    return "generic"


def pop_first_text(attrs: dict[str, Any], keys: tuple[str, ...]) -> str | None:
    """The first of `keys` holding a non-empty string; that attribute is consumed."""
    for key in keys:
        if key in attrs:
            value = as_text(attrs[key])
            if value is not None:
                del attrs[key]
                return value
    return None


def model_and_provider(attrs: dict[str, Any]) -> tuple[str | None, str | None]:
    """The model (response, else request, else OpenInference) and the provider, lower case."""
    if attrs.keys().isdisjoint(MODEL_PROVIDER_KEYS):
        return None, None
    model = pop_first_text(attrs, MODEL_KEYS)
    provider = pop_first_text(attrs, PROVIDER_KEYS)
    return model, provider.lower() if provider is not None else None


_ENTITY_NAME_KEYS = {
    "tool": TOOL_NAME_KEYS,
    "agent": ("gen_ai.agent.name", "agent.name"),
    "workflow": ("gen_ai.workflow.name",),
    "scorer": ("gen_ai.evaluation.name",),
}
_ENTITY_ID_KEYS = {"agent": ("gen_ai.agent.id",)}
_KIND_ENTITIES = {
    "agent_run": "agent",
    "workflow_run": "workflow",
    "scorer_run": "scorer",
    **dict.fromkeys(TOOL_KINDS, "tool"),
    **dict.fromkeys(MODEL_KINDS, "model"),
}


def entity(
    attrs: dict[str, Any], kind: str, model: str | None
) -> tuple[str | None, str | None, str | None]:
    """(entity_kind, entity_id, entity_name) of the thing that produced the span.

    Explicit `mcpd.entity.kind` / `.id` / `.name` win; otherwise the span kind decides the
    entity kind (tool spans -> tool, agent_run -> agent, model spans -> model, ...), and a span
    of any other kind that names an agent (`gen_ai.agent.name`) belongs to that agent.
    """
    explicit = attrs.get("mcpd.entity.kind")
    if isinstance(explicit, str) and explicit.lower() in ENTITY_KINDS:
        del attrs["mcpd.entity.kind"]
        return (
            explicit.lower(),
            pop_first_text(attrs, ("mcpd.entity.id",)),
            pop_first_text(attrs, ("mcpd.entity.name",)),
        )
    entity_kind = _KIND_ENTITIES.get(kind)
    if entity_kind is None:
        if "gen_ai.agent.name" not in attrs:
            return None, None, None
        entity_kind = "agent"
    if entity_kind == "model":
        return ("model", None, model) if model is not None else (None, None, None)
    id_keys = _ENTITY_ID_KEYS.get(entity_kind)
    return (
        entity_kind,
        pop_first_text(attrs, id_keys) if id_keys else None,
        pop_first_text(attrs, _ENTITY_NAME_KEYS[entity_kind]),
    )
