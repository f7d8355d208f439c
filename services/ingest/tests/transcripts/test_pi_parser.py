"""The Pi-family parsers (pi-coding-agent, prime-agent) beyond the fixture contract of
test_parsers_other.py."""

from __future__ import annotations

import json
from typing import Any

import pytest

from mcpd.sessions.model import EventType
from services.ingest.tests.transcripts.test_parsers_other import by_line, parse_fixture
from services.ingest.transcripts.parsers.pi import PiParser

U, A, R = EventType.USER_INPUT, EventType.ASSISTANT_RESPONSE, EventType.REASONING
CALL, RESP, RUN = EventType.TOOL_CALL, EventType.TOOL_RESPONSE, EventType.RUNTIME


def test_pi_details() -> None:
    session = parse_fixture("pi")
    assert session.title == "Pi fixture manifest review"
    assert (session.cwd, session.model) == ("/work/pi-demo", "Arcee AI/Trinity Large Thinking")
    read = next(e for e in session.events if e.type is CALL)
    assert (read.key, read.call_id, read.file_paths) == (
        "pi-assistant-1:2",
        "pi-tool-1",
        ["Cargo.toml"],
    )
    assert read.model == "Arcee AI/Trinity Large Thinking"
    assert read.cwd == "/work/pi-demo"
    bash = by_line(session, 7)
    assert [(e.key, e.type, e.call_id) for e in bash] == [
        ("pi-bash-1:0", CALL, "pi-bash-1"),
        ("pi-bash-1:1", RESP, "pi-bash-1"),
    ]
    assert bash[0].text == 'bash(command="cargo metadata --no-deps")'
    assert (bash[0].payload or {}).get("user_initiated") is True
    assert bash[1].text == '{"packages":[]}'


def test_prime_hidden_records_stay_out_of_text() -> None:
    session = parse_fixture("prime-agent")
    assert session.title == "Prime ingestion demo"
    assert "HIDDEN" not in " ".join(e.text for e in session.events)
    image = by_line(session, 7)[0]
    assert image.type is U
    assert not image.starts_turn


def _pi_lines(*records: dict[str, Any]) -> list[str]:
    head = {"type": "session", "version": 3, "id": "s1", "cwd": "/r"}
    return [json.dumps(r) + "\n" for r in (head, *records)]


def _pi_message(ident: str, **message: Any) -> dict[str, Any]:
    return {"type": "message", "id": ident, "timestamp": "2026-05-08T02:00:00Z", "message": message}


@pytest.mark.parametrize(
    ("reason", "completes"), [("stop", True), ("aborted", False), ("length", False)]
)
def test_pi_stop_reason_ends_the_turn(reason: str, completes: bool) -> None:
    lines = _pi_lines(
        _pi_message("u", role="user", content="hi"),
        _pi_message(
            "a", role="assistant", content=[{"type": "text", "text": "x"}], stopReason=reason
        ),
        _pi_message("u2", role="user", content=[{"type": "text", "text": "next"}]),
        {"type": "title", "id": "t", "title": "omp title"},
    )
    session = PiParser().parse(lines, path="/p/2026_s1.jsonl")
    assert [(e.terminal, e.completes_turn, e.starts_turn) for e in session.events] == [
        (False, False, True),
        (True, completes, False),
        (False, False, True),
    ]
    assert session.title == "omp title"


def test_pi_aborted_empty_response_and_edits() -> None:
    edit = {"type": "toolCall", "id": "c1", "name": "edit", "arguments": {"path": "a.py"}}
    lines = _pi_lines(
        _pi_message("u", role="user", content="hi"),
        _pi_message("a", role="assistant", content=[edit], stopReason="toolUse"),
        _pi_message("a2", role="assistant", content=[], stopReason="aborted", errorMessage="esc"),
    )
    events = PiParser().parse(lines, path="/p/s.jsonl").events
    assert (events[1].file_paths, events[1].mutation, events[1].terminal) == (["a.py"], True, False)
    assert (events[2].type, events[2].text) == (RUN, "assistant stopped: aborted: esc")
    assert (events[2].terminal, events[2].completes_turn) == (True, False)
