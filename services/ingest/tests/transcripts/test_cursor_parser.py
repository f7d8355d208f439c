"""The cursor parser beyond the shared fixture contract (test_parsers_other.py)."""

from __future__ import annotations

import json

from mcpd.sessions.model import EventType
from services.ingest.tests.transcripts.test_parsers_other import by_line, parse_fixture
from services.ingest.transcripts.parsers.cursor import CursorParser

U, A, R = EventType.USER_INPUT, EventType.ASSISTANT_RESPONSE, EventType.REASONING
CALL, RESP, RUN = EventType.TOOL_CALL, EventType.TOOL_RESPONSE, EventType.RUNTIME


def test_cursor_details() -> None:
    session = parse_fixture("cursor")
    call = next(e for e in session.events if e.type is CALL)
    assert call.call_id == "cursor-tool-fixture"
    assert call.file_paths == ["/workspace/src/main.rs"]
    assert not call.mutation
    response = next(e for e in session.events if e.type is RESP)
    assert response.call_id == "cursor-tool-fixture"
    assert response.text == 'fn main() { println!("cursor fixture"); }'
    assert session.model == "cursor-small"
    assert by_line(session, 5) == []  # an empty assistant message says nothing


def test_cursor_string_content_user_query_and_file_stem() -> None:
    lines = [
        json.dumps({"role": "user", "message": {"content": "<user_query>\nfix it\n</user_query>"}}),
        json.dumps(
            {
                "role": "assistant",
                "message": {
                    "content": [
                        {
                            "type": "tool_use",
                            "id": "t",
                            "name": "StrReplace",
                            "input": {"path": "a.rs"},
                        }
                    ]
                },
            }
        ),
    ]
    session = CursorParser().parse(
        [line + "\n" for line in lines], path="/c/agent-transcripts/abc.jsonl"
    )
    assert session.session_key == "abc"
    assert [(e.type, e.text) for e in session.events][:1] == [(U, "fix it")]
    assert (session.events[1].mutation, session.events[1].terminal) == (True, False)
