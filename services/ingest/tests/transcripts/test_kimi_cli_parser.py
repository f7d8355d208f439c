"""The kimi-cli parser beyond the shared fixture contract (test_parsers_other.py)."""

from __future__ import annotations

import json
from typing import Any

from mcpd.sessions.model import EventType
from services.ingest.tests.transcripts.test_parsers_other import parse_fixture
from services.ingest.transcripts.parsers.kimi_cli import KimiCliParser

U, A, R = EventType.USER_INPUT, EventType.ASSISTANT_RESPONSE, EventType.REASONING
CALL, RESP, RUN = EventType.TOOL_CALL, EventType.TOOL_RESPONSE, EventType.RUNTIME


def test_kimi_details() -> None:
    session = parse_fixture("kimi-cli")
    call = next(e for e in session.events if e.type is CALL)
    assert (call.call_id, call.payload) == ("tool_abc", {"arguments": {"path": "manifest.json"}})
    assert call.file_paths == ["manifest.json"]
    response = next(e for e in session.events if e.type is RESP)
    assert (response.call_id, response.text) == ("tool_abc", '{"ok":true}')
    assert session.events[0].timestamp is not None
    assert session.events[0].timestamp.isoformat() == "2026-04-12T00:32:24.549974+00:00"
    assert "sub-agent echo" not in " ".join(e.text for e in session.events)


def _kimi_lines(*messages: tuple[str, dict[str, Any]]) -> list[str]:
    return [
        json.dumps({"timestamp": 1775953944.5 + i, "message": {"type": t, "payload": p}}) + "\n"
        for i, (t, p) in enumerate(messages)
    ]


def test_kimi_turn_end_interrupt_and_writes() -> None:
    arguments = json.dumps({"path": "out.txt", "content": "x"})
    write = {
        "type": "function",
        "id": "w1",
        "function": {"name": "WriteFile", "arguments": arguments},
    }
    lines = _kimi_lines(
        ("TurnBegin", {"user_input": "one"}),
        ("ContentPart", {"type": "text", "text": "done"}),
        ("TurnEnd", {}),
        ("TurnBegin", {"user_input": [{"type": "text", "text": "two"}]}),
        ("ToolCall", write),
        ("StepInterrupted", {}),
        ("TurnEnd", {}),
    )
    session = KimiCliParser().parse(lines, path="/k/sessions/h/abc-123/wire.jsonl")
    assert session.session_key == "abc-123"
    flags = [(e.type, e.terminal, e.completes_turn, e.starts_turn) for e in session.events]
    assert flags == [
        (U, False, False, True),
        (A, False, False, False),
        (RUN, True, True, False),
        (U, False, False, True),
        (CALL, False, False, False),
        (RUN, True, False, False),
        (RUN, True, False, False),
    ]
    assert (session.events[4].file_paths, session.events[4].mutation) == (["out.txt"], True)
