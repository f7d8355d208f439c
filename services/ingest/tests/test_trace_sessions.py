"""Sessions from ingested traces: the span-to-event mapping (both GenAI message shapes, tool-call
parts, the OTLP attribute forms), and the incremental path's pure half (a turn recomputed from
its stored events and span facts equals the turn computed from all its spans)."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pytest

from mcpd.sessions.model import EventType, ParsedEvent
from mcpd.signals.rows import SpanRow
from services.ingest.tests.otlp.producers import span_row
from services.ingest.trace_sessions import (
    NeedSpans,
    SessionName,
    assemble_turn,
    read_span,
    session_sources,
    span_text,
    trace_of_spans,
    trace_of_state,
)
from tests.libs.signals.samples import MS, T0, span

SESSION = "s-1"


def _span(span_id: str, at_ms: int, end_ms: int | None, **extra: Any) -> SpanRow:
    fields: dict[str, Any] = {
        "trace_id": "t1",
        "session_id": SESSION,
        "service_name": "support-bot",
        "start_time": T0 + at_ms * MS,
        "end_time": None if end_ms is None else T0 + end_ms * MS,
        "duration_ns": None if end_ms is None else (end_ms - at_ms) * MS,
    }
    return span(span_id, **{**fields, **extra})


def _at(ms: int) -> datetime:
    nanos = T0 + ms * MS
    moment = datetime.fromtimestamp(nanos // 1_000_000_000, UTC)
    return moment.replace(microsecond=nanos % 1_000_000_000 // 1000)


def support_trace(trace_id: str = "t1", at_ms: int = 0, **root: Any) -> list[SpanRow]:
    """An agent run: a prompt, a model call that asks for a tool, the tool, a failing
    retrieval, a second model call with the answer, and the root's output."""
    base = at_ms
    fields: dict[str, Any] = {
        "kind": "agent_run",
        "name": "answer_ticket",
        "is_root": True,
        "input": {
            "messages": [
                {"role": "system", "content": "You are a support agent."},
                {"role": "user", "content": "Where is my order A1?"},
            ]
        },
        "output": "Order A1 shipped yesterday.",
        **root,
    }
    return [
        _span("root", base, base + 100, trace_id=trace_id, **fields),
        _span(
            "model-1",
            base + 10,
            base + 20,
            trace_id=trace_id,
            parent_span_id="root",
            kind="model_inference",
            model="claude-sonnet-4-5",
            output=[{"type": "text", "text": "Let me look that up."}, {"type": "tool_use"}],
        ),
        _span(
            "tool-1",
            base + 20,
            base + 40,
            trace_id=trace_id,
            parent_span_id="root",
            kind="tool_call",
            name="lookup",
            entity_name="lookup_order",
            input={"order_id": "A1"},
            output={"status": "shipped"},
        ),
        _span(
            "retrieval",
            base + 41,
            base + 45,
            trace_id=trace_id,
            parent_span_id="root",
            kind="retrieval",
            name="faq_search",
            status="error",
            error={"message": "index offline", "kind": "Unavailable"},
        ),
        _span(
            "model-2",
            base + 50,
            base + 90,
            trace_id=trace_id,
            parent_span_id="root",
            kind="model_inference",
            model="claude-sonnet-4-5",
            output={"role": "assistant", "content": "Order A1 shipped yesterday."},
        ),
    ]


def _shape(events: list[ParsedEvent]) -> list[tuple[Any, ...]]:
    return [
        (
            e.type.value,
            e.text,
            e.tool_name,
            e.model,
            e.timestamp,
            e.starts_turn,
            e.terminal,
            e.completes_turn,
        )
        for e in events
    ]


def _events(spans: list[SpanRow], trace_id: str = "t1") -> list[ParsedEvent]:
    """A trace's events, numbered as a turn numbers them."""
    events = trace_of_spans(trace_id, spans).events()
    for line, event in enumerate(events, start=1):
        event.line = line
    return events


# --- the mapping -------------------------------------------------------------------------------


def test_a_trace_maps_to_one_turn_of_exact_events() -> None:
    # Spans arrive in any order; the mapping sorts them.
    events = _events(support_trace()[::-1])

    model = "claude-sonnet-4-5"
    assert _shape(events) == [
        ("user_input", "Where is my order A1?", None, None, _at(0), False, False, False),
        ("assistant_response", "Let me look that up.", None, model, _at(20), False, False, False),
        ("tool_call", 'lookup_order(order_id="A1")', "lookup_order", None, _at(20), *[False] * 3),
        ("tool_response", '{"status":"shipped"}', "lookup_order", None, _at(40), *[False] * 3),
        (
            "runtime",
            "faq_search failed: Unavailable: index offline",
            None,
            None,
            _at(45),
            *[False] * 3,
        ),
        # The root's output repeats the last model response: that response is the final one.
        (
            "assistant_response",
            "Order A1 shipped yesterday.",
            None,
            model,
            _at(90),
            False,
            True,
            True,
        ),
    ]
    assert [e.key for e in events] == [
        "t1/root/input",
        "t1/model-1/output",
        "t1/tool-1/call",
        "t1/tool-1/result",
        "t1/retrieval/error",
        "t1/model-2/output",
    ]
    call, response = events[2], events[3]
    assert call.payload == {"arguments": {"order_id": "A1"}, "trace_id": "t1", "span_id": "tool-1"}
    assert call.call_id == response.call_id == "tool-1"
    assert events[4].payload == {
        "trace_id": "t1",
        "span_id": "retrieval",
        "error": {"message": "index offline", "kind": "Unavailable"},
    }


def test_a_root_output_that_says_something_new_is_its_own_final_response() -> None:
    events = _events(support_trace(output={"answer": "Shipped.", "n": 1}))

    final = events[-1]
    assert (final.type, final.text, final.key) == (
        EventType.ASSISTANT_RESPONSE,
        '{"answer":"Shipped.","n":1}',
        "t1/root/output",
    )
    assert (final.timestamp, final.terminal, final.completes_turn) == (_at(100), True, True)
    # The model's own answer stays, not terminal.
    assert events[-2].text == "Order A1 shipped yesterday."
    assert not events[-2].terminal


def test_a_failed_root_ends_its_turn_uncompleted() -> None:
    spans = support_trace(
        status="error", output=None, error={"message": "budget exceeded", "kind": "Budget"}
    )
    events = _events(spans)

    end = events[-1]
    assert (end.type, end.text, end.key) == (
        EventType.RUNTIME,
        "answer_ticket failed: Budget: budget exceeded",
        "t1/root/end",
    )
    assert (end.terminal, end.completes_turn) == (True, False)
    assert not any(e.terminal for e in events[:-1])
    assembled = assemble_turn(SessionName("p", SESSION, "support-bot"), "t1", events, 1)
    assert assembled.turn.completed is False


def test_a_running_trace_has_no_terminal_event_and_a_running_tool_no_response() -> None:
    spans = [
        _span("root", 0, None, kind="agent_run", is_root=True, input="Refund order B2"),
        _span("tool", 5, None, parent_span_id="root", kind="mcp_tool_call", name="refund"),
    ]
    assert _shape(_events(spans)) == [
        ("user_input", "Refund order B2", None, None, _at(0), False, False, False),
        ("tool_call", "refund()", "refund", None, _at(5), False, False, False),
    ]


def test_a_failed_tool_reports_its_error_in_the_response() -> None:
    spans = [
        _span("root", 0, 50, kind="agent_run", is_root=True, input="hi"),
        _span(
            "tool",
            5,
            9,
            parent_span_id="root",
            kind="tool_call",
            name="fetch",
            status="error",
            error={"message": "timed out"},
        ),
    ]
    events = _events(spans)

    types = [(e.type.value, e.text) for e in events]
    assert types == [
        ("user_input", "hi"),
        ("tool_call", "fetch()"),
        ("tool_response", "error: timed out"),
        # A root that ended without output or model answer: a runtime end completes the turn.
        ("runtime", "span root ended"),
    ]
    assert events[2].payload is not None
    assert events[2].payload["status"] == "error"
    assert (events[-1].terminal, events[-1].completes_turn) == (True, True)


def test_only_the_most_specific_model_span_with_output_speaks() -> None:
    spans = [
        _span("root", 0, 50, kind="agent_run", is_root=True, input="hi", output="Hello!"),
        _span("gen", 1, 40, parent_span_id="root", kind="model_generation", output="Hello!"),
        _span("step", 2, 30, parent_span_id="gen", kind="model_step", output="Hello!"),
        _span("inf", 3, 20, parent_span_id="step", kind="model_inference", output="Hello!"),
        # A generation whose inference recorded no output speaks for itself.
        _span("gen2", 41, 45, parent_span_id="root", kind="model_generation", output="Bye"),
        _span("inf2", 42, 44, parent_span_id="gen2", kind="model_inference"),
    ]
    assert [(e.key, e.text) for e in _events(spans)] == [
        ("t1/root/input", "hi"),
        ("t1/inf/output", "Hello!"),
        ("t1/gen2/output", "Bye"),
        ("t1/root/output", "Hello!"),
    ]


def test_span_text() -> None:
    assert span_text(None) == ""
    assert span_text("plain") == "plain"
    assert span_text({"role": "assistant", "content": "hi"}) == "hi"
    messages = [
        {"role": "user", "content": "first"},
        {"role": "assistant", "content": [{"type": "text", "text": "reply"}]},
        {"role": "user", "content": [{"type": "text", "text": "second"}]},
    ]
    assert span_text(messages) == "first\nreply\nsecond"
    assert span_text(messages, prompt=True) == "second"
    assert span_text({"messages": messages}, prompt=True) == "second"
    assert span_text({"choices": [{"message": {"role": "assistant", "content": "ok"}}]}) == "ok"
    # An MCP tool result, and a content-block list.
    assert span_text({"content": [{"type": "text", "text": "42 rows"}], "isError": False}) == (
        "42 rows"
    )
    assert span_text([{"type": "text", "text": "a"}, "b"]) == "a\nb"
    assert span_text({"text": "said"}) == "said"
    # Anything else: compact JSON, keys sorted.
    assert span_text({"b": [1, 2], "a": "é"}) == '{"a":"é","b":[1,2]}'
    assert span_text(3) == "3"
    assert span_text([]) == "[]"


def test_session_sources_prefer_root_service_names() -> None:
    spans = [
        _span("child", 0, 5, service_name="tools-svc"),
        _span("root", 1, 9, is_root=True, service_name="support-bot"),
        _span("late", 2, 3, service_name=None),
    ]
    assert session_sources(spans) == ["support-bot", "tools-svc", "mcpd"]
    assert session_sources([_span("x", 0, 1, service_name=None)]) == ["mcpd"]


# --- the OpenTelemetry GenAI message shape -----------------------------------------------------

USER_PARTS = [
    {"role": "system", "parts": [{"type": "text", "content": "You are a support agent."}]},
    {"role": "user", "parts": [{"type": "text", "content": "Where is my order A1?"}]},
]
CALLING_OUTPUT = [
    {
        "role": "assistant",
        "parts": [
            {"type": "text", "content": "Let me look that up."},
            {
                "type": "tool_call",
                "id": "call_1",
                "name": "lookup_order",
                "arguments": {"order_id": "A1"},
            },
        ],
        "finish_reason": "tool_call",
    }
]


def test_parts_messages_read_as_text_with_tool_calls_as_calls() -> None:
    assert span_text(USER_PARTS, prompt=True) == "Where is my order A1?"
    assert span_text(USER_PARTS) == "You are a support agent.\nWhere is my order A1?"
    assert span_text(CALLING_OUTPUT) == 'Let me look that up.\nlookup_order(order_id="A1")'
    # Arguments as a JSON string, as some instrumentations send them.
    as_text = [{"type": "tool_call", "name": "search", "arguments": '{"q": "late parcel"}'}]
    assert span_text([{"role": "assistant", "parts": as_text}]) == 'search(q="late parcel")'
    # A tool's answer in the next request: its response's text.
    tool_turn = [
        {
            "role": "tool",
            "parts": [
                {"type": "tool_call_response", "id": "call_1", "response": {"status": "late"}}
            ],
        }
    ]
    assert span_text(tool_turn) == '{"status":"late"}'
    # One message, and parts given as plain text.
    assert span_text({"role": "assistant", "parts": [{"type": "text", "content": "ok"}]}) == "ok"
    assert span_text([{"role": "system", "parts": "Be brief."}]) == "Be brief."
    # Media and reasoning parts add nothing; a message with nothing readable is JSON.
    mixed = [
        {"type": "reasoning", "content": "the user wants..."},
        {"type": "blob", "modality": "image", "content": "aGVsbG8="},
        {"type": "text", "content": "Here it is."},
    ]
    assert span_text([{"role": "assistant", "parts": mixed}]) == "Here it is."
    assert span_text([{"role": "assistant", "parts": []}]) == '[{"parts":[],"role":"assistant"}]'
    # Both shapes in one message are both read.
    both = {"role": "user", "content": "first", "parts": [{"type": "text", "content": "second"}]}
    assert span_text(both) == "first\nsecond"


def _otlp_spans(input_attrs: dict[str, Any], output_attrs: dict[str, Any]) -> list[SpanRow]:
    """A root (an agent run) and a chat span whose payloads were mapped from OTLP attributes."""
    root = span_row({"gen_ai.operation.name": "invoke_agent", **input_attrs}, name="agent")
    chat = span_row({"gen_ai.operation.name": "chat", **output_attrs}, name="chat")
    assert (root["kind"], chat["kind"]) == ("agent_run", "model_inference")
    # The mapped payloads, on a root and its child of one trace.
    root = _span("root", 0, 3, input=root["input"], kind="agent_run", is_root=True)
    chat = _span("chat", 1, 2, output=chat["output"], kind="model_inference", parent_span_id="root")
    return [root, chat]


@pytest.mark.parametrize(
    ("input_attrs", "output_attrs"),
    [
        pytest.param(
            {
                "gen_ai.system_instructions": json.dumps(
                    [{"type": "text", "content": "You are a support agent."}]
                ),
                "gen_ai.input.messages": json.dumps(USER_PARTS[1:]),
            },
            {"gen_ai.output.messages": json.dumps(CALLING_OUTPUT)},
            id="gen_ai.input.messages parts",
        ),
        pytest.param(
            {
                "gen_ai.prompt.0.role": "system",
                "gen_ai.prompt.0.content": "You are a support agent.",
                "gen_ai.prompt.1.role": "user",
                "gen_ai.prompt.1.content": "Where is my order A1?",
            },
            {
                "gen_ai.completion.0.role": "assistant",
                "gen_ai.completion.0.content": 'Let me look that up.\nlookup_order(order_id="A1")',
            },
            id="gen_ai.prompt.N flattened",
        ),
        pytest.param(
            {"gen_ai.prompt": json.dumps([{"role": "user", "content": "Where is my order A1?"}])},
            {
                "gen_ai.completion": json.dumps(
                    [
                        {
                            "role": "assistant",
                            "content": 'Let me look that up.\nlookup_order(order_id="A1")',
                        }
                    ]
                )
            },
            id="gen_ai.prompt content",
        ),
    ],
)
def test_every_otlp_message_form_reaches_the_session_as_text(
    input_attrs: dict[str, Any], output_attrs: dict[str, Any]
) -> None:
    events = _events(_otlp_spans(input_attrs, output_attrs))

    assert [(e.type.value, e.text) for e in events] == [
        ("user_input", "Where is my order A1?"),
        ("assistant_response", 'Let me look that up.\nlookup_order(order_id="A1")'),
    ]
    assert (events[-1].terminal, events[-1].completes_turn) == (True, True)


# --- a turn recomputed from what a write stored ------------------------------------------------


def _stored(spans: list[SpanRow]) -> tuple[dict[str, Any], list[Any]]:
    """What the store keeps of a trace after a write of `spans`: its facts and its events."""
    turn = trace_of_spans("t1", spans)
    events = turn.events()
    if not events:
        return turn.facts_json(), []
    return turn.facts_json(), assemble_turn(SessionName("p", SESSION, "x"), "t1", events, 1).events


def _keys_and_flags(events: list[ParsedEvent]) -> list[tuple[Any, ...]]:
    return [(e.key, *_shape([e])[0]) for e in events]


def _silencing_trace() -> list[SpanRow]:
    return [
        _span("root", 0, 50, kind="agent_run", is_root=True, input="hi", output="Hello!"),
        _span("gen", 1, 40, parent_span_id="root", kind="model_generation", output="Hello!"),
        _span("inf", 3, 20, parent_span_id="gen", kind="model_inference", output="Hello!"),
        _span("late", 45, 49, parent_span_id="root", kind="model_inference", output="And bye."),
        _span(
            "edit",
            21,
            30,
            parent_span_id="root",
            kind="tool_call",
            name="write_file",
            input={"path": "/srv/app/main.py", "content": "print()"},
        ),
    ]


@pytest.mark.parametrize("trace", [support_trace, _silencing_trace])
@pytest.mark.parametrize("cut", [1, 2, 3, 4])
@pytest.mark.parametrize("reverse", [False, True])
def test_a_turn_recomputed_from_its_stored_events_equals_the_whole_mapping(
    trace: Any, cut: int, reverse: bool
) -> None:
    spans = trace()[::-1] if reverse else trace()
    facts, stored = _stored(spans[:cut])
    new = {s["span_id"]: read_span("t1", s) for s in spans[cut:]}

    again = trace_of_state("t1", facts, stored, new).events()

    assert _keys_and_flags(again) == _keys_and_flags(trace_of_spans("t1", spans).events())
    assert [e.payload for e in again] == [e.payload for e in trace_of_spans("t1", spans).events()]


def test_what_the_stored_events_cannot_answer_asks_for_the_spans() -> None:
    spans = _silencing_trace()
    facts, stored = _stored(spans)
    # The inference that spoke for its generation is sent again without output: the
    # generation speaks again, and its words were never stored.
    quiet = _span("inf", 3, 20, parent_span_id="gen", kind="model_inference")
    with pytest.raises(NeedSpans):
        trace_of_state("t1", facts, stored, {"inf": read_span("t1", quiet)})
    # Another root that starts earlier: the stored root becomes an ordinary span.
    earlier = _span("first", -5, 60, kind="agent_run", is_root=True, input="hello")
    with pytest.raises(NeedSpans):
        trace_of_state("t1", facts, stored, {"first": read_span("t1", earlier)})
    # Neither is needed for what the state does know.
    extra = _span("more", 46, 47, parent_span_id="root", kind="retrieval")
    assert trace_of_state("t1", facts, stored, {"more": read_span("t1", extra)}).events()
