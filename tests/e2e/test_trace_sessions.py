"""Ingested traces that carry a session id become a searchable session (harness `mcpd`, source
= the service name) in a real daemon, on every storage backend: native REST ingest in and the
session tools' REST mirror out; and the OpenTelemetry SDK's own OTLP exporter in (GenAI messages
in the current `parts` shape, the session id on the root span alone, the children exported
first) and the MCP tools, through the official MCP client, out."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from mcp.client import ClientSession
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor

from mcpd.testing.daemon import DaemonProcess
from mcpd.testing.eventually import eventually_async
from tests.e2e.conftest import BACKENDS, PROCESSES, storage_env
from tests.e2e.ingest_payloads import new_span_id, new_trace_id
from tests.e2e.mcp_client import envelope_of, http_session

pytestmark = pytest.mark.e2e

SESSION = "s-1"
SERVICE = "support-bot"
FIRST_PROMPT = "Where is my zephyrine order?"
SECOND_PROMPT = "Can the quillwort parcel be refunded?"
WAIT_S = 30.0


@pytest.fixture(params=BACKENDS)
async def daemon(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[DaemonProcess]:
    env = storage_env(request.param, tmp_path, request)
    async with DaemonProcess(extra_env=env, processes=PROCESSES) as running:
        yield running


def conversation_turn(prompt: str, answer: str, second: int) -> dict[str, Any]:
    """One trace of session s-1: an agent run with a model call and a tool call."""
    trace_id, root, model, tool = new_trace_id(), new_span_id(), new_span_id(), new_span_id()
    correlation = {"project": "", "service_name": SERVICE, "session_id": SESSION}

    def at(offset_ms: int) -> str:
        return f"2026-11-29T10:00:{second:02d}.{offset_ms:03d}Z"

    def child(span_id: str, **fields: Any) -> dict[str, Any]:
        return {
            "trace_id": trace_id,
            "span_id": span_id,
            "parent_span_id": root,
            "status": "ok",
            "correlation": correlation,
            **fields,
        }

    return {
        "spans": [
            {
                "trace_id": trace_id,
                "span_id": root,
                "name": "answer_ticket",
                "kind": "agent_run",
                "status": "ok",
                "start_time": at(0),
                "end_time": at(900),
                "input": {"messages": [{"role": "user", "content": prompt}]},
                "output": answer,
                "correlation": correlation,
            },
            child(
                model,
                name="chat",
                kind="model_inference",
                start_time=at(100),
                end_time=at(400),
                model="claude-sonnet-4-5",
                output=[{"type": "text", "text": "Checking the order."}],
            ),
            child(
                tool,
                name="lookup_order",
                kind="tool_call",
                start_time=at(400),
                end_time=at(800),
                input={"order_id": "A1"},
                output={"status": "shipped"},
            ),
        ]
    }


async def _post(http: httpx.AsyncClient, path: str, body: dict[str, Any]) -> dict[str, Any]:
    response = await http.post(path, json=body)
    assert response.status_code == 200, response.text
    answer: dict[str, Any] = response.json()
    return answer


async def _search(http: httpx.AsyncClient, query: str) -> list[dict[str, Any]]:
    envelope = (await _post(http, "/v1/api/sessions/search", {"query": query}))["envelope"]
    assert envelope.get("error") is None, envelope
    hits: list[dict[str, Any]] = envelope["data"]["results"]
    return hits


async def _eventually_hits(http: httpx.AsyncClient, query: str) -> list[dict[str, Any]]:
    async def hits() -> list[dict[str, Any]]:
        found = await _search(http, query)
        assert found, f"{query!r} not searchable"
        return found

    return await eventually_async(hits, timeout=WAIT_S)


async def test_a_traced_session_is_searchable_and_listed(daemon: DaemonProcess) -> None:
    async with httpx.AsyncClient(base_url=daemon.http_url, timeout=30) as http:
        for body in (
            conversation_turn(FIRST_PROMPT, "It shipped yesterday.", 1),
            conversation_turn(SECOND_PROMPT, "Yes, refund issued.", 5),
        ):
            result = await _post(http, "/v1/api/ingest", body)
            assert result == {"accepted": 3, "rejected": 0, "duplicate": 0, "errors": []}

        (first,) = await _eventually_hits(http, "zephyrine")
        # The second trace may land in a later rebuild than the first.
        (second,) = await _eventually_hits(http, "quillwort")
        listed = await _post(
            http,
            "/v1/api/sessions/list",
            {
                "start_datetime": "2026-11-29T00:00:00Z",
                "end_datetime": "2026-11-30T00:00:00Z",
                "harness": "mcpd",
            },
        )
        by_source = await _search_with(http, "zephyrine", harness="mcpd", source=SERVICE)
        elsewhere = await _search_with(http, "zephyrine", harness="codex", source=None)

    assert first["event"]["type"] == "user_input"
    assert first["snippet"]["text"] == FIRST_PROMPT
    assert first["turn"]["ordinal"] == 1
    assert first["turn"]["completed"] is True
    assert first["session"]["harness"] == "mcpd"
    assert first["session"]["source"] == SERVICE
    assert first["session"]["title"] == FIRST_PROMPT
    assert second["turn"]["ordinal"] == 2
    assert second["session"]["id"] == first["session"]["id"]

    sessions = listed["envelope"]["data"]["sessions"]
    assert len(sessions) == 1, sessions
    session = sessions[0]["session"]
    assert sessions[0]["open"] == {"session_id": first["session"]["id"]}
    assert session["id"] == first["session"]["id"]
    assert (session["harness"], session["source"]) == ("mcpd", SERVICE)
    assert session["turn_count"] == 2
    # Per turn: the prompt, the model's note, the tool call and response, the final answer.
    assert session["event_count"] == 10
    assert session["completed"] is True
    assert session["mode"] == "tool_calling"
    assert session["started_at"] == "2026-11-29T10:00:01.000Z"
    assert session["updated_at"] == "2026-11-29T10:00:05.900Z"

    assert [hit["id"] for hit in by_source] == [first["id"]]
    assert elsewhere == []


async def _search_with(
    http: httpx.AsyncClient, query: str, *, harness: str, source: str | None
) -> list[dict[str, Any]]:
    body: dict[str, Any] = {"query": query, "harness": harness}
    if source is not None:
        body["source"] = source
    envelope = (await _post(http, "/v1/api/sessions/search", body))["envelope"]
    assert envelope.get("error") is None, envelope
    hits: list[dict[str, Any]] = envelope["data"]["results"]
    return hits


# --- the OpenTelemetry SDK in, the MCP tools out -------------------------------------------------

OTEL_SERVICE = "otel-support-agent"
OTEL_PROMPT = "Has my marzipan order left the warehouse?"
OTEL_ANSWER = "Yes: the marzipan order shipped this morning."


def _parts(role: str, *parts: dict[str, Any]) -> str:
    return json.dumps([{"role": role, "parts": list(parts)}])


def _text(content: str) -> dict[str, Any]:
    return {"type": "text", "content": content}


def export_agent_trace(endpoint: str) -> None:
    """One agent run through the SDK's OTLP/HTTP exporter, each span exported as it ends (the
    model call and the tool before the root). Only the root carries the conversation id."""
    provider = TracerProvider(resource=Resource.create({"service.name": OTEL_SERVICE}))
    provider.add_span_processor(SimpleSpanProcessor(OTLPSpanExporter(endpoint=endpoint)))
    tracer = provider.get_tracer("support-agent")
    call = {"type": "tool_call", "id": "call_1", "name": "lookup_order", "arguments": {"id": "M7"}}
    root_attributes = {
        "gen_ai.operation.name": "invoke_agent",
        "gen_ai.conversation.id": "otel-conversation-1",
        "gen_ai.system_instructions": json.dumps([_text("You are a support agent.")]),
        "gen_ai.input.messages": _parts("user", _text(OTEL_PROMPT)),
        "gen_ai.output.messages": _parts("assistant", _text(OTEL_ANSWER)),
    }
    with tracer.start_as_current_span("invoke_agent support", attributes=root_attributes):
        chat = {
            "gen_ai.operation.name": "chat",
            "gen_ai.request.model": "claude-sonnet-4-5",
            "gen_ai.input.messages": _parts("user", _text(OTEL_PROMPT)),
            "gen_ai.output.messages": _parts("assistant", _text("Let me look."), call),
        }
        with tracer.start_as_current_span("chat claude-sonnet-4-5", attributes=chat):
            pass
        tool = {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": "lookup_order",
            "gen_ai.tool.call.id": "call_1",
            "gen_ai.tool.call.arguments": json.dumps({"id": "M7"}),
            "gen_ai.tool.call.result": json.dumps({"status": "shipped"}),
        }
        with tracer.start_as_current_span("execute_tool lookup_order", attributes=tool):
            pass
    provider.shutdown()


async def _search_mcp(session: ClientSession, query: str) -> list[dict[str, Any]]:
    deadline = time.monotonic() + WAIT_S
    while True:
        found = envelope_of(await session.call_tool("search_sessions", {"query": query}))
        hits: list[dict[str, Any]] = found["data"]["results"]
        if hits:
            return hits
        assert time.monotonic() < deadline, f"{query!r} not searchable within {WAIT_S} s"
        await asyncio.sleep(0.1)


async def test_an_sdk_trace_with_its_session_on_the_root_alone_is_one_session_over_mcp(
    daemon: DaemonProcess,
) -> None:
    await asyncio.to_thread(export_agent_trace, f"{daemon.http_url}/v1/traces")

    async with http_session(daemon) as session:
        hits = await _search_mcp(session, "marzipan warehouse")
        hit = next(hit for hit in hits if hit["event"]["type"] == "user_input")
        opened = envelope_of(await session.call_tool("open", {"id": hit["open"]["session_id"]}))
        turn = envelope_of(
            await session.call_tool("open", {"id": hit["open"]["turn_id"], "limit": 20})
        )
        model_event = turn["data"]["events"][1]["id"]
        model = envelope_of(await session.call_tool("open", {"id": model_event}))

    # The prompt and the answer, both of the one session.
    assert {h["open"]["session_id"] for h in hits} == {hit["open"]["session_id"]}
    described = opened["data"]["session"]
    assert (described["title"], described["source"]) == (OTEL_PROMPT, OTEL_SERVICE)
    assert (described["turn_count"], described["completed"]) == (1, True)
    events = [(e["type"], e["tool_name"], e["model"]) for e in turn["data"]["events"]]
    assert events == [
        ("user_input", None, None),
        ("assistant_response", None, "claude-sonnet-4-5"),
        ("tool_call", "lookup_order", None),
        ("tool_response", "lookup_order", None),
        ("assistant_response", None, None),
    ]
    summaries = [e["summary"] for e in turn["data"]["events"]]
    assert summaries[0] == OTEL_PROMPT
    assert summaries[2:] == ['lookup_order(id="M7")', '{"status":"shipped"}', OTEL_ANSWER]
    assert turn["data"]["events"][-1]["terminal"] is True
    # The child model span's output, its tool-call part read as the call it asks for.
    assert model["data"]["content"]["text"] == 'Let me look.\nlookup_order(id="M7")'
