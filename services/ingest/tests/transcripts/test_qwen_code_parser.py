"""The qwen-code parser beyond the shared fixture contract (test_parsers_other.py)."""

from __future__ import annotations

import json

from mcpd.sessions.model import EventType
from services.ingest.tests.transcripts.test_parsers_other import parse_fixture
from services.ingest.transcripts.parsers.qwen_code import QwenCodeParser

U, A, R = EventType.USER_INPUT, EventType.ASSISTANT_RESPONSE, EventType.REASONING
CALL, RESP, RUN = EventType.TOOL_CALL, EventType.TOOL_RESPONSE, EventType.RUNTIME


def test_qwen_details() -> None:
    session = parse_fixture("qwen-code")
    assert session.title == "Qwen Fixture Contract"
    assert (session.cwd, session.model) == ("/workspace/qwen-demo", "qwen3-coder-plus")
    calls = [(e.call_id, e.payload) for e in session.events if e.type is CALL]
    assert [c[0] for c in calls] == ["qwen-call-search", "qwen-call-fail", "qwen-r3"]
    assert calls[0][1] == {
        "arguments": {"query": "fixture behavior", "limit": 3},
        "self_tool": True,
        "canonical_tool": "search_sessions",
    }
    responses = [e for e in session.events if e.type is RESP]
    # callId beats the functionResponse id; then that id; then the record's own uuid.
    assert [e.call_id for e in responses] == ["qwen-call-search", "qwen-call-fail", "qwen-r3"]
    assert [e.text for e in responses][:2] == [
        "Three matching sessions.",
        "command exited with status 1",
    ]
    assert [(e.payload or {}).get("is_error") for e in responses] == [False, True, False]
    assert (responses[0].payload or {}).get("self_tool") is True
    texts = " ".join(e.text for e in session.events)
    assert "Replay-only" not in texts
    assert "SNAPSHOT_RAW_ONLY" not in texts
    assert session.events[-1].timestamp is None  # "not-a-timestamp": kept, time unknown
    assert all(e.model == "qwen3-coder-plus" for e in session.events if e.type in (A, R, CALL))


def test_qwen_without_session_id_uses_the_file_stem() -> None:
    record = {"uuid": "u1", "type": "user", "message": {"parts": [{"text": "hello"}]}}
    session = QwenCodeParser().parse([json.dumps(record) + "\n"], path="/q/chats/chat-7.jsonl")
    assert session.session_key == "chat-7"
    assert [(e.key, e.type, e.starts_turn) for e in session.events] == [("u1", U, True)]
