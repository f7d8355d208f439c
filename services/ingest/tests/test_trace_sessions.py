"""Sessions from ingested traces: the span-to-event mapping, and rebuilding over real SQLite
trace and session stores."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from mcpd.runtime.clock import ManualClock
from mcpd.sessions.model import EventType, ParsedEvent
from mcpd.sessions.store import SearchQuery, SessionListQuery
from mcpd.signals.batch import SignalBatch
from mcpd.signals.rows import SpanRow
from mcpd.storage import Stores, open_stores
from mcpd.testing.eventually import eventually_async
from mcpd.testing.templates import SqliteTemplates
from services.ingest.trace_sessions import (
    TraceSessions,
    parse_trace_session,
    session_sources,
    span_text,
)
from services.ingest.transcripts.assemble import assemble
from services.ingest.transcripts.keys import session_id as mcp_session_id
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


# --- the mapping -------------------------------------------------------------------------------


def test_a_trace_maps_to_one_turn_of_exact_events() -> None:
    # Spans arrive in any order; the mapping sorts them.
    parsed = parse_trace_session(SESSION, support_trace()[::-1])

    assert parsed.harness == "mcpd"
    assert parsed.session_key == SESSION
    model = "claude-sonnet-4-5"
    assert _shape(parsed.events) == [
        ("user_input", "Where is my order A1?", None, None, _at(0), True, False, False),
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
    assert [e.line for e in parsed.events] == [1, 2, 3, 4, 5, 6]
    assert [e.key for e in parsed.events] == [
        "t1/root/input",
        "t1/model-1/output",
        "t1/tool-1/call",
        "t1/tool-1/result",
        "t1/retrieval/error",
        "t1/model-2/output",
    ]
    call, response = parsed.events[2], parsed.events[3]
    assert call.payload == {"arguments": {"order_id": "A1"}, "trace_id": "t1", "span_id": "tool-1"}
    assert call.call_id == response.call_id == "tool-1"
    assert parsed.events[4].payload == {
        "trace_id": "t1",
        "span_id": "retrieval",
        "error": {"message": "index offline", "kind": "Unavailable"},
    }


def test_a_root_output_that_says_something_new_is_its_own_final_response() -> None:
    parsed = parse_trace_session(SESSION, support_trace(output={"answer": "Shipped.", "n": 1}))

    final = parsed.events[-1]
    assert (final.type, final.text, final.key) == (
        EventType.ASSISTANT_RESPONSE,
        '{"answer":"Shipped.","n":1}',
        "t1/root/output",
    )
    assert (final.timestamp, final.terminal, final.completes_turn) == (_at(100), True, True)
    # The model's own answer stays, not terminal.
    assert parsed.events[-2].text == "Order A1 shipped yesterday."
    assert not parsed.events[-2].terminal


def test_a_failed_root_ends_its_turn_uncompleted() -> None:
    spans = support_trace(
        status="error", output=None, error={"message": "budget exceeded", "kind": "Budget"}
    )
    parsed = parse_trace_session(SESSION, spans)

    end = parsed.events[-1]
    assert (end.type, end.text, end.key) == (
        EventType.RUNTIME,
        "answer_ticket failed: Budget: budget exceeded",
        "t1/root/end",
    )
    assert (end.terminal, end.completes_turn) == (True, False)
    assert not any(e.terminal for e in parsed.events[:-1])
    assembled = assemble(parsed, source="support-bot", project="p", path="x")
    assert [turn.completed for turn in assembled.turns] == [False]
    assert assembled.session.completed is False


def test_a_running_trace_has_no_terminal_event_and_a_running_tool_no_response() -> None:
    spans = [
        _span("root", 0, None, kind="agent_run", is_root=True, input="Refund order B2"),
        _span("tool", 5, None, parent_span_id="root", kind="mcp_tool_call", name="refund"),
    ]
    parsed = parse_trace_session(SESSION, spans)

    assert _shape(parsed.events) == [
        ("user_input", "Refund order B2", None, None, _at(0), True, False, False),
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
    parsed = parse_trace_session(SESSION, spans)

    types = [(e.type.value, e.text) for e in parsed.events]
    assert types == [
        ("user_input", "hi"),
        ("tool_call", "fetch()"),
        ("tool_response", "error: timed out"),
        # A root that ended without output or model answer: a runtime end completes the turn.
        ("runtime", "span root ended"),
    ]
    assert parsed.events[2].payload is not None
    assert parsed.events[2].payload["status"] == "error"
    assert (parsed.events[-1].terminal, parsed.events[-1].completes_turn) == (True, True)


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
    parsed = parse_trace_session(SESSION, spans)

    assert [(e.key, e.text) for e in parsed.events] == [
        ("t1/root/input", "hi"),
        ("t1/inf/output", "Hello!"),
        ("t1/gen2/output", "Bye"),
        ("t1/root/output", "Hello!"),
    ]


def test_traces_are_turns_in_root_start_order_and_rootless_traces_have_no_prompt() -> None:
    second = support_trace("t2", at_ms=1000, input="And order A2?", output="A2 is packed.")
    first = support_trace("t1", at_ms=0)
    # A third trace whose root has not arrived yet: its earliest span orders it.
    orphan = [
        _span(
            "model-x",
            2000,
            2010,
            trace_id="t3",
            parent_span_id="missing",
            kind="model_inference",
            output="thinking about A3",
        )
    ]
    parsed = parse_trace_session(SESSION, [*orphan, *second, *first])

    starts = [e for e in parsed.events if e.starts_turn]
    assert [e.key for e in starts] == ["t1/root/input", "t2/root/input", "t3/model-x/output"]
    assembled = assemble(parsed, source="support-bot", project="p", path="x")
    assert [(t.ordinal, t.completed) for t in assembled.turns] == [(1, True), (2, True), (3, False)]
    assert [t.user_input_event_id is not None for t in assembled.turns] == [True, True, False]
    assert assembled.session.title == "Where is my order A1?"
    assert assembled.session.harness == "mcpd"
    assert assembled.session.mode == "tool_calling"


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


# --- rebuilding over real stores ---------------------------------------------------------------


@pytest.fixture
def stores(tmp_path: Path, sqlite_templates: SqliteTemplates) -> Iterator[Stores]:
    data_dir = sqlite_templates.data_dir(tmp_path)
    with open_stores("sqlite", data_dir=data_dir, postgres_url=None, clickhouse_url=None) as opened:
        yield opened


def _batch(spans: list[SpanRow], project: str = "p") -> SignalBatch:
    return SignalBatch(key_project=project, ingest_key=None, received_at=T0, spans=spans)


def _store(stores: Stores, spans: list[SpanRow]) -> SignalBatch:
    batch = _batch(spans)
    assert stores.trace.write_batches([batch]) == [True]
    return batch


def _sessions(stores: Stores, clock: ManualClock, **extra: Any) -> TraceSessions:
    return TraceSessions(stores.trace, stores.sessions, clock, **extra)


def test_rebuild_writes_the_session_to_the_read_model(stores: Stores) -> None:
    _store(stores, [*support_trace("t1"), *support_trace("t2", at_ms=1000, input="Refund A2")])
    trace_sessions = _sessions(stores, ManualClock())

    assert trace_sessions.rebuild("p", SESSION) is True

    sid = mcp_session_id("support-bot", SESSION)
    session = stores.sessions.get_session("p", sid)
    assert session is not None
    assert (session.harness, session.source, session.session_key) == (
        "mcpd",
        "support-bot",
        SESSION,
    )
    assert (session.title, session.turn_count, session.event_count) == (
        "Where is my order A1?",
        2,
        12,
    )
    assert session.completed is True
    assert session.started_at == _at(0)
    assert session.updated_at == _at(1090)
    turns = stores.sessions.list_turns("p", sid, after_ordinal=0, limit=10)
    assert [t.tools_called for t in turns] == [("lookup_order",), ("lookup_order",)]
    events = stores.sessions.list_events("p", turns[1].id, after_ordinal=0, limit=20)
    assert events[0].text == "Refund A2"
    assert events[0].type is EventType.USER_INPUT
    assert events[-1].id == turns[1].final_response_event_id
    # Searchable like a transcript session, with the harness and source filters.
    result = stores.sessions.search(
        SearchQuery(
            project="p",
            text="refund",
            event_types=["user_input"],
            limit=5,
            harness="mcpd",
            source="support-bot",
        )
    )
    assert [hit.event.text for hit in result.hits] == ["Refund A2"]

    # Rebuilding unchanged spans changes nothing.
    snapshot = stores.sessions.snapshot("p")
    assert trace_sessions.rebuild("p", SESSION) is True
    assert stores.sessions.snapshot("p") == snapshot


def test_a_session_keeps_its_source_when_an_earlier_root_names_another_service(
    stores: Stores,
) -> None:
    _store(stores, support_trace("t2", at_ms=1000))
    _sessions(stores, ManualClock()).rebuild("p", SESSION)
    # A new process (no memory), and an earlier trace from another service arrives.
    _store(stores, support_trace("t1", at_ms=0, service_name="gateway"))
    _sessions(stores, ManualClock()).rebuild("p", SESSION)

    listed = stores.sessions.list_sessions(
        SessionListQuery(
            project="p",
            start=datetime(2000, 1, 1, tzinfo=UTC),
            end=datetime(2100, 1, 1, tzinfo=UTC),
            limit=10,
        )
    )
    assert [(s.source, s.turn_count) for s in listed] == [("support-bot", 2)]


def test_notice_and_flush_rebuild_each_noticed_session_once(stores: Stores) -> None:
    trace_sessions = _sessions(stores, ManualClock())
    batch = _store(stores, support_trace("t1"))
    other = [
        _span("o", 0, 9, trace_id="t9", is_root=True, session_id="s-2", input="hello", output="hi"),
        _span("n", 0, 9, trace_id="t8", is_root=True, session_id=None, input="no session"),
    ]
    _store(stores, other)

    trace_sessions.notice(batch)
    trace_sessions.notice(_batch(other))
    trace_sessions.notice(batch)
    assert trace_sessions.pending() == 2

    assert trace_sessions.flush() == 2
    assert trace_sessions.pending() == 0
    assert trace_sessions.flush() == 0
    for key in (SESSION, "s-2"):
        assert stores.sessions.session_of_key("p", "support-bot", key) is not None


def test_a_busy_session_is_rebuilt_at_most_once_per_gap(stores: Stores) -> None:
    clock = ManualClock()
    trace_sessions = _sessions(stores, clock, min_gap_s=5.0)
    trace_sessions.notice(_store(stores, support_trace("t1")))
    assert trace_sessions.flush() == 1

    # More spans of the session a second later: noticed, but not rebuilt until 5 s have passed.
    trace_sessions.notice(_store(stores, support_trace("t2", at_ms=1000, input="Refund A2")))
    clock.advance(1.0)
    assert trace_sessions.flush() == 0
    assert trace_sessions.pending() == 1
    session = stores.sessions.session_of_key("p", "support-bot", SESSION)
    assert session is not None
    assert session.turn_count == 1

    clock.advance(4.0)
    assert trace_sessions.flush() == 1
    session = stores.sessions.session_of_key("p", "support-bot", SESSION)
    assert session is not None
    assert session.turn_count == 2


def test_flushing_everything_ignores_the_gap(stores: Stores) -> None:
    trace_sessions = _sessions(stores, ManualClock(), min_gap_s=5.0)
    trace_sessions.notice(_store(stores, support_trace("t1")))
    assert trace_sessions.flush() == 1
    trace_sessions.notice(_store(stores, support_trace("t2", at_ms=1000, input="Refund A2")))
    assert trace_sessions.flush() == 0
    assert trace_sessions.flush(everything=True) == 1
    assert trace_sessions.pending() == 0


def test_a_failed_rebuild_is_retried_on_the_next_pass(stores: Stores) -> None:
    class FlakyTraces:
        failures = 1

        def session_spans(self, project: str, session_id: str, *, limit: int) -> list[SpanRow]:
            if self.failures:
                self.failures -= 1
                raise OSError("database went away")
            return stores.trace.session_spans(project, session_id, limit=limit)

    batch = _store(stores, support_trace("t1"))
    trace_sessions = TraceSessions(FlakyTraces(), stores.sessions, ManualClock())
    trace_sessions.notice(batch)

    assert trace_sessions.flush() == 0
    assert trace_sessions.pending() == 1
    assert trace_sessions.flush() == 1
    assert stores.sessions.session_of_key("p", "support-bot", SESSION) is not None


def test_a_long_pass_delays_the_next_one_to_keep_within_its_share(stores: Stores) -> None:
    clock = ManualClock()

    class SlowSessions:
        """The session store, with every write taking `seconds` of the manual clock."""

        seconds = 2.0

        def write_session(self, project: str, assembled: Any) -> None:
            clock.advance(self.seconds)
            stores.sessions.write_session(project, assembled)

        def session_of_key(self, project: str, source: str, session_key: str) -> Any:
            return stores.sessions.session_of_key(project, source, session_key)

    slow = SlowSessions()
    trace_sessions = TraceSessions(
        stores.trace, slow, clock, interval_s=1.0, min_gap_s=0.0, max_share=0.2
    )
    assert trace_sessions.next_wait() == 1.0

    trace_sessions.notice(_store(stores, support_trace("t1")))
    assert trace_sessions.flush() == 1
    # A 2 s pass may be a fifth of the time: 8 s more before the next one.
    assert trace_sessions.next_wait() == pytest.approx(8.0)

    slow.seconds = 0.1
    trace_sessions.notice(_store(stores, support_trace("t2", at_ms=1000, input="Refund A2")))
    assert trace_sessions.flush() == 1
    assert trace_sessions.next_wait() == 1.0
    with pytest.raises(ValueError, match="max_share"):
        TraceSessions(stores.trace, slow, clock, max_share=0.0)


def test_past_max_spans_the_newest_spans_make_the_session(stores: Stores) -> None:
    _store(stores, [*support_trace("t1"), *support_trace("t2", at_ms=1000, input="Refund A2")])
    _sessions(stores, ManualClock(), max_spans=5).rebuild("p", SESSION)

    session = stores.sessions.session_of_key("p", "support-bot", SESSION)
    assert session is not None
    assert (session.turn_count, session.title) == (1, "Refund A2")


async def test_the_background_task_rebuilds_noticed_sessions_and_close_flushes(
    stores: Stores,
) -> None:
    trace_sessions = _sessions(stores, ManualClock(), interval_s=0.01)
    trace_sessions.start()
    try:
        trace_sessions.notice(_store(stores, support_trace("t1")))

        def rebuilt() -> None:
            assert stores.sessions.session_of_key("p", "support-bot", SESSION) is not None

        await eventually_async(rebuilt, timeout=5)
    finally:
        await trace_sessions.close()

    # Noticed after the task stopped: rebuilt by close.
    slow = _sessions(stores, ManualClock(), interval_s=3600)
    slow.start()
    slow.notice(_store(stores, support_trace("t2", at_ms=1000, input="Refund A2")))
    await slow.close()
    await slow.close()  # idempotent
    session = stores.sessions.session_of_key("p", "support-bot", SESSION)
    assert session is not None
    assert session.turn_count == 2
