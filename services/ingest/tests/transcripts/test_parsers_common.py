"""The shared parser helpers: JSON lines, timestamps, block text, keys, turn starts."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from mcpd.sessions.model import EventType, ParsedEvent, ParseError
from services.ingest.transcripts.parsers._common import (
    UniqueKeys,
    block_text,
    feed_records,
    mark_turn_start,
    parse_timestamp,
    read_json_lines,
    tool_call_event,
)


def test_read_json_lines_numbers_lines_and_turns_bad_lines_into_errors() -> None:
    lines = ['{"a": 1}', "", "{broken", "[1, 2]", '"text"', '\ufeff{"b": 2}\n', "null"]
    assert list(read_json_lines(lines)) == [
        (1, {"a": 1}),
        ParseError(
            3, "invalid JSON: Expecting property name enclosed in double quotes at column 2"
        ),
        ParseError(4, "expected a JSON object, got an array"),
        ParseError(5, "expected a JSON object, got a string"),
        (6, {"b": 2}),
        ParseError(7, "expected a JSON object, got null"),
    ]


def test_feed_records_turns_unreadable_records_into_errors() -> None:
    seen: list[int] = []

    def handle(line: int, record: dict[str, object]) -> None:
        if "boom" in record:
            raise TypeError("bad shape")
        seen.append(line)

    errors = feed_records(['{"ok": 1}', "oops", '{"boom": 1}', '{"ok": 2}'], handle)
    assert seen == [1, 4]
    assert errors == [
        ParseError(2, "invalid JSON: Expecting value at column 1"),
        ParseError(3, "unreadable record: TypeError('bad shape')"),
    ]


def test_read_json_lines_counts_from_start_line() -> None:
    assert list(read_json_lines(["{}", "1"], start_line=41)) == [
        (41, {}),
        ParseError(42, "expected a JSON object, got a number"),
    ]


def test_read_json_lines_never_raises_on_deep_nesting() -> None:
    (error,) = list(read_json_lines(["[" * 100_000]))
    assert isinstance(error, ParseError)
    assert error.line == 1


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("2026-02-15T03:50:40.000Z", datetime(2026, 2, 15, 3, 50, 40, tzinfo=UTC)),
        ("2026-02-15T03:50:40.123456789Z", datetime(2026, 2, 15, 3, 50, 40, 123456, tzinfo=UTC)),
        ("2026-02-15T05:50:40+02:00", datetime(2026, 2, 15, 3, 50, 40, tzinfo=UTC)),
        ("2026-02-15 03:50:40", datetime(2026, 2, 15, 3, 50, 40, tzinfo=UTC)),
        (1771127440, datetime(2026, 2, 15, 3, 50, 40, tzinfo=UTC)),
        (1771127440123, datetime(2026, 2, 15, 3, 50, 40, 123000, tzinfo=UTC)),
        (1771127440.5, datetime(2026, 2, 15, 3, 50, 40, 500000, tzinfo=UTC)),
        ("1771127440123", datetime(2026, 2, 15, 3, 50, 40, 123000, tzinfo=UTC)),
        ("", None),
        ("yesterday", None),
        (True, None),
        (None, None),
        (float("nan"), None),
        (10**30, None),
        ({"t": 1}, None),
    ],
)
def test_parse_timestamp(value: object, expected: datetime | None) -> None:
    parsed = parse_timestamp(value)
    assert parsed == expected
    if parsed is not None:
        assert parsed.utcoffset() == timedelta(0)


def test_block_text_reads_strings_and_text_blocks() -> None:
    assert block_text("plain") == "plain"
    assert block_text(None) == ""
    assert (
        block_text(
            [
                {"type": "input_text", "text": "one"},
                {"type": "image", "source": {}},
                "two",
                {"type": "tool_result", "content": [{"type": "text", "text": "three"}]},
                {"type": "output_text", "text": "four"},
                7,
            ]
        )
        == "one\ntwo\nthree\nfour"
    )


def test_unique_keys_number_repeats() -> None:
    keys = UniqueKeys()
    assert [keys.claim(k) for k in ["a", "b", "a", "a"]] == ["a", "b", "a#1", "a#2"]


def _event(kind: EventType, *, terminal: bool = False) -> ParsedEvent:
    return ParsedEvent(key=str(kind), line=1, type=kind, text="", terminal=terminal)


def test_mark_turn_start_pulls_in_setup_events_before_the_prompt() -> None:
    events = [
        _event(EventType.ASSISTANT_RESPONSE),
        _event(EventType.RUNTIME, terminal=True),
        _event(EventType.RUNTIME),
        _event(EventType.SYSTEM),
        _event(EventType.USER_INPUT),
    ]
    events[4].starts_turn = True
    mark_turn_start(events, 4, setup_from=2)
    assert [e.starts_turn for e in events] == [False, False, True, False, False]


def test_mark_turn_start_stops_at_terminal_and_content_events() -> None:
    events = [
        _event(EventType.TOOL_CALL),
        _event(EventType.SYSTEM),
        _event(EventType.RUNTIME, terminal=True),
        _event(EventType.SYSTEM),
        _event(EventType.USER_INPUT),
    ]
    mark_turn_start(events, 4, setup_from=0)
    assert [e.starts_turn for e in events] == [False, False, False, True, False]
    for event in events:
        event.starts_turn = False
    mark_turn_start(events, 4, setup_from=None)
    assert [e.starts_turn for e in events] == [False, False, False, False, True]


def test_tool_call_event_fills_text_paths_and_self_flag() -> None:
    moment = datetime(2026, 1, 1, tzinfo=UTC)
    edit = tool_call_event(
        key="k",
        line=3,
        name="Edit",
        arguments={"file_path": "src/a.py", "old_string": "x", "new_string": "y"},
        call_id="c1",
        timestamp=moment,
        model="m",
        cwd="/repo",
        payload={"block_type": "tool_use"},
    )
    assert edit == ParsedEvent(
        key="k",
        line=3,
        type=EventType.TOOL_CALL,
        text='Edit(file_path="src/a.py", old_string="x", new_string="y")',
        timestamp=moment,
        tool_name="Edit",
        call_id="c1",
        model="m",
        payload={
            "arguments": {"file_path": "src/a.py", "old_string": "x", "new_string": "y"},
            "block_type": "tool_use",
        },
        cwd="/repo",
        file_paths=["src/a.py"],
        mutation=True,
    )
    search = tool_call_event(
        key="k2",
        line=4,
        name="mcp__mcpd__file_attention",
        arguments={"path": "src/a.py"},
        call_id=None,
        timestamp=None,
    )
    assert search.payload == {
        "arguments": {"path": "src/a.py"},
        "self_tool": True,
        "canonical_tool": "file_attention",
    }
    assert search.file_paths == []
    shell = tool_call_event(
        key="k3",
        line=5,
        name="exec_command",
        arguments={"cmd": "cat a.txt", "workdir": "sub"},
        call_id=None,
        timestamp=None,
        cwd="/repo",
    )
    assert (shell.cwd, shell.file_paths, shell.mutation) == ("/repo/sub", ["a.txt"], False)
