"""Claude Code transcript parsing (docs/sessions.md: Claude Code)."""

from __future__ import annotations

from typing import Any

from mcpd.sessions.model import EventType, ParseError
from services.ingest.tests.transcripts.transcript_lines import fixture_lines, jsonl, summary
from services.ingest.transcripts.parsers.claude_code import ClaudeCodeParser

SID = "0b5c1a1e-2222-4333-8444-555555555555"
PATH = f"/home/u/.claude/projects/-w/{SID}.jsonl"


def user(uuid: str, content: Any, **extra: Any) -> dict[str, Any]:
    return {
        "type": "user",
        "sessionId": SID,
        "uuid": uuid,
        "cwd": "/w",
        "timestamp": "2026-03-01T10:00:00.000Z",
        "message": {"role": "user", "content": content},
        **extra,
    }


def assistant(
    uuid: str, *blocks: dict[str, Any], stop: str | None = None, **extra: Any
) -> dict[str, Any]:
    message = {
        "id": extra.pop("message_id", f"msg-{uuid}"),
        "model": "claude-x",
        "role": "assistant",
        "content": list(blocks),
        "stop_reason": stop,
    }
    return {
        "type": "assistant",
        "sessionId": SID,
        "uuid": uuid,
        "cwd": "/w",
        "timestamp": "2026-03-01T10:00:01.000Z",
        "message": message,
        **extra,
    }


def text(value: str) -> dict[str, Any]:
    return {"type": "text", "text": value}


def tool_use(call_id: str, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    return {"type": "tool_use", "id": call_id, "name": name, "input": arguments}


def result(call_id: str, content: Any, *, error: bool = False) -> list[dict[str, Any]]:
    return [{"type": "tool_result", "tool_use_id": call_id, "content": content, "is_error": error}]


def system(uuid: str, subtype: str, **extra: Any) -> dict[str, Any]:
    return {
        "type": "system",
        "subtype": subtype,
        "uuid": uuid,
        "sessionId": SID,
        "timestamp": "2026-03-01T10:00:02.000Z",
        **extra,
    }


def parse(*records: dict[str, Any], path: str = PATH) -> Any:
    return ClaudeCodeParser().parse(jsonl(*records), path=path)


def flags(parsed: Any) -> list[tuple[str, str, bool, bool, bool]]:
    return [
        (e.type.value, e.text, e.starts_turn, e.terminal, e.completes_turn) for e in parsed.events
    ]


def test_claude_code_fixture() -> None:
    parsed = ClaudeCodeParser().parse(
        fixture_lines("claude-code/session.jsonl"), path="claude-code/session.jsonl"
    )
    assert parsed.errors == []
    assert (parsed.harness, parsed.session_key) == (
        "claude-code",
        "7c666c01-d38e-4658-8650-854ffb5b626e",
    )
    assert (parsed.title, parsed.cwd, parsed.model) == (
        None,
        "/work/claude-demo",
        "claude-opus-4-5-20251101",
    )
    assert summary(parsed) == [
        ("user_input", "user-1#0", "Please inspect the sample project."),
        ("reasoning", "assistant-1#0", "I should inspect files first."),
        ("tool_call", "assistant-1#1", 'Read(path="Cargo.toml")'),
        ("assistant_response", "assistant-1#2", "I will read the manifest."),
        ("tool_response", "user-2#0", "workspace = true"),
        ("runtime", "progress-1#0", "progress search_results_received query=moraine"),
    ]
    call, response = parsed.events[2], parsed.events[4]
    assert (call.call_id, call.tool_name, call.file_paths, call.model) == (
        "toolu_1",
        "Read",
        ["Cargo.toml"],
        "claude-opus-4-5-20251101",
    )
    assert (response.call_id, response.tool_name, response.payload) == (
        "toolu_1",
        "Read",
        {"is_error": False},
    )
    thinking = parsed.events[1].payload
    assert thinking is not None
    assert thinking["usage"]["input_tokens"] == 9
    assert [e.starts_turn for e in parsed.events] == [True, False, False, False, False, False]
    assert not any(e.terminal for e in parsed.events)


def test_claude_cowork_fixture() -> None:
    name = "claude-cowork/aaaaaaaa-1111-4333-8444-555555555555.jsonl"
    parsed = ClaudeCodeParser().parse(fixture_lines(name), path=name)
    assert parsed.errors == []
    assert (parsed.session_key, parsed.title) == (
        "aaaaaaaa-1111-4333-8444-555555555555",
        "Stale transcript title",
    )
    queue_key = parsed.events[0].key
    assert queue_key.startswith("h:")
    assert summary(parsed) == [
        ("runtime", queue_key, "queue-operation enqueue: synthetic"),
        ("user_input", "user-cowork-1#0", "Inspect the synthetic project."),
        ("system", "attachment-cowork-1#0", "attachment fixture.txt"),
        ("reasoning", "assistant-cowork-1#0", "I should inspect the fixture."),
        (
            "tool_call",
            "assistant-cowork-1#1",
            'Read(file_path="/sessions/synthetic-cowork/fixture.txt")',
        ),
        ("assistant_response", "assistant-cowork-1#2", "I will inspect the file."),
        ("tool_response", "tool-result-cowork-1#0", "synthetic file contents"),
        ("system", "system-cowork-1#0", "turn_duration 3000 ms"),
    ]
    assert "PRIVATE_ATTACHMENT_SENTINEL" not in "".join(e.text for e in parsed.events)
    assert [e.starts_turn for e in parsed.events] == [True] + [False] * 7
    done = parsed.events[-1]
    assert (done.terminal, done.completes_turn) == (True, True)


def test_end_turn_completes_and_turn_duration_then_adds_nothing() -> None:
    parsed = parse(
        user("u1", "Explain the bug"),
        assistant("a1", text("It is an off-by-one."), stop="end_turn"),
        system("s1", "stop_hook_summary"),
        system("s2", "turn_duration", durationMs=1200),
        {"type": "file-history-snapshot", "messageId": "u2", "snapshot": {}},
        user("u2", "Thanks"),
    )
    assert flags(parsed) == [
        ("user_input", "Explain the bug", True, False, False),
        ("assistant_response", "It is an off-by-one.", False, True, True),
        ("system", "stop_hook_summary", False, False, False),
        ("system", "turn_duration 1200 ms", False, False, False),
        ("user_input", "Thanks", True, False, False),
    ]


def test_interrupt_is_terminal_but_not_completed() -> None:
    parsed = parse(
        user("u1", "Refactor it"),
        assistant("a1", tool_use("t1", "Bash", {"command": "make"}), stop="tool_use"),
        user(
            "r1", result("t1", "The user doesn't want to proceed with this tool use.", error=True)
        ),
        user("i1", [text("[Request interrupted by user for tool use]")]),
        system("s1", "turn_duration"),
        user("u2", "Do something else"),
    )
    assert flags(parsed) == [
        ("user_input", "Refactor it", True, False, False),
        ("tool_call", 'Bash(command="make")', False, False, False),
        (
            "tool_response",
            "The user doesn't want to proceed with this tool use.",
            False,
            False,
            False,
        ),
        ("runtime", "[Request interrupted by user for tool use]", False, True, False),
        ("system", "turn_duration", False, False, False),
        ("user_input", "Do something else", True, False, False),
    ]
    assert parsed.events[2].payload == {"is_error": True}


def test_a_final_text_completes_the_turn_when_the_next_prompt_arrives() -> None:
    parsed = parse(
        user("u1", "one"),
        assistant("a1", text("Let me look."), message_id="m1"),
        assistant("a2", tool_use("t1", "Read", {"file_path": "a.py"}), message_id="m1"),
        user("r1", result("t1", "x = 1")),
        assistant("a3", text("a.py sets x.")),
        user("u2", "two"),
        assistant("a4", text("Checking."), message_id="m4"),
        assistant("a5", tool_use("t2", "Read", {"file_path": "b.py"}), message_id="m4"),
        user("u3", "three"),
    )
    assert [(e.text, e.terminal, e.completes_turn) for e in parsed.events if e.terminal] == [
        ("a.py sets x.", True, True),
    ]
    assert [e.text for e in parsed.events if e.starts_turn] == ["one", "two", "three"]
    # One API response split over two records: one event per block, the message id on both.
    first, second = parsed.events[1], parsed.events[2]
    assert (first.key, first.payload) == ("a1#0", {"message_id": "m1"})
    assert (second.key, second.payload) == (
        "a2#0",
        {"message_id": "m1", "block_type": "tool_use", "arguments": {"file_path": "a.py"}},
    )


def test_usage_is_recorded_once_per_api_response() -> None:
    usage = {"input_tokens": 3, "output_tokens": 4}
    first = assistant(
        "a1", {"type": "thinking", "thinking": "hmm", "signature": "s"}, message_id="m"
    )
    second = assistant("a2", text("Answer"), message_id="m")
    first["message"]["usage"] = usage
    second["message"]["usage"] = usage
    parsed = parse(first, second)
    assert [e.payload for e in parsed.events] == [
        {"message_id": "m", "usage": usage},
        {"message_id": "m"},
    ]
    assert [e.key for e in parsed.events] == ["a1#0", "a2#0"]


def test_injected_user_records_are_system() -> None:
    parsed = parse(
        user(
            "m1",
            "Caveat: The messages below were generated by the user while running local commands.",
            isMeta=True,
        ),
        user("c1", "<command-name>/clear</command-name>\n<command-message>clear</command-message>"),
        user("c2", "<local-command-stdout></local-command-stdout>"),
        user("c3", [text("<system-reminder>be careful</system-reminder>")]),
        user("k1", "Summary of the earlier conversation", isCompactSummary=True),
        system(
            "b1",
            "compact_boundary",
            content="Conversation compacted",
            compactMetadata={"trigger": "auto"},
        ),
        user("p1", [text("Now the real question"), {"type": "image", "source": {}}]),
    )
    assert [(e.type.value, e.payload) for e in parsed.events] == [
        ("system", {"meta": True}),
        ("system", None),
        ("system", None),
        ("system", None),
        ("compaction", {"compact_summary": True}),
        ("compaction", {"subtype": "compact_boundary", "compact_metadata": {"trigger": "auto"}}),
        ("user_input", {"images": 1}),
    ]
    assert [e.starts_turn for e in parsed.events] == [False] * 6 + [True]


def test_reasoning_blocks_and_redaction() -> None:
    parsed = parse(
        assistant(
            "a1",
            {"type": "thinking", "thinking": "", "signature": "sig"},
            {"type": "redacted_thinking", "data": "opaque"},
            {"type": "thinking", "thinking": "visible thought"},
            {"type": "mystery", "x": 1},
        )
    )
    assert [(e.type.value, e.text, e.key) for e in parsed.events] == [
        ("reasoning", "[encrypted reasoning omitted]", "a1#0"),
        ("reasoning", "[encrypted reasoning omitted]", "a1#1"),
        ("reasoning", "visible thought", "a1#2"),
        ("unknown", '{"type":"mystery","x":1}', "a1#3"),
    ]
    assert [e.model for e in parsed.events] == ["claude-x"] * 4


def test_inline_sidechain_records_never_drive_turns() -> None:
    parsed = parse(
        user("u1", "Delegate it"),
        assistant("a1", tool_use("task", "Task", {"prompt": "look"})),
        user("s1", "look", isSidechain=True),
        assistant("s2", text("found it"), isSidechain=True, stop="end_turn"),
        user("s3", "[Request interrupted by user]", isSidechain=True),
        user("r1", result("task", "found it")),
        assistant("a2", text("Done: found it.")),
        user("u2", "next"),
    )
    assert flags(parsed) == [
        ("user_input", "Delegate it", True, False, False),
        ("tool_call", 'Task(prompt="look")', False, False, False),
        ("system", "look", False, False, False),
        ("assistant_response", "found it", False, False, False),
        ("runtime", "[Request interrupted by user]", False, False, False),
        ("tool_response", "found it", False, False, False),
        ("assistant_response", "Done: found it.", False, True, True),
        ("user_input", "next", True, False, False),
    ]
    assert parsed.events[3].payload == {"sidechain": True, "message_id": "msg-s2"}
    assert parsed.events[4].payload == {"interrupt": True, "sidechain": True}


def test_subagent_files_treat_their_task_prompt_as_the_prompt() -> None:
    path = "/home/u/.claude/projects/-w/parent/subagents/agent-a1b2.jsonl"
    parsed = parse(
        user("s1", "look", isSidechain=True),
        assistant("s2", text("found"), isSidechain=True, stop="end_turn"),
        path=path,
    )
    assert flags(parsed) == [
        ("user_input", "look", True, False, False),
        ("assistant_response", "found", False, True, True),
    ]
    assert parsed.session_key == f"{SID}/agent-a1b2"


def test_titles_prefer_custom_then_ai_title_then_summary() -> None:
    records = [
        {"type": "summary", "summary": "Fixing the parser", "leafUuid": "x"},
        {"type": "ai-title", "sessionId": SID, "aiTitle": "Parser fix"},
        {"type": "custom-title", "sessionId": SID, "customTitle": "My name"},
    ]
    assert parse(*records).title == "My name"
    assert parse(*records[:2]).title == "Parser fix"
    only_summary = parse(records[0])
    assert (only_summary.title, only_summary.summary, only_summary.events) == (
        "Fixing the parser",
        "Fixing the parser",
        [],
    )


def test_self_tool_calls_are_flagged() -> None:
    parsed = parse(
        assistant("a1", tool_use("t1", "mcp__moraine__search_sessions", {"query": "retry"})),
        user("r1", result("t1", [text("3 hits")])),
    )
    call, output = parsed.events
    assert call.payload == {
        "message_id": "msg-a1",
        "block_type": "tool_use",
        "arguments": {"query": "retry"},
        "self_tool": True,
        "canonical_tool": "search_sessions",
    }
    assert output.payload == {
        "is_error": False,
        "self_tool": True,
        "canonical_tool": "search_sessions",
    }


def test_failed_shell_results_carry_the_exit_code() -> None:
    parsed = parse(
        assistant("a1", tool_use("t1", "Bash", {"command": "pytest"})),
        user("r1", result("t1", "Exit code 1\nFAILED test_x", error=True)),
    )
    assert parsed.events[1].payload == {"is_error": True, "exit_code": 1}


def test_api_errors_end_the_turn_uncompleted() -> None:
    error = assistant("e1", text("API Error: overloaded"), isApiErrorMessage=True)
    parsed = parse(user("u1", "go"), error)
    assert flags(parsed)[1] == ("runtime", "API Error: overloaded", False, True, False)


def test_bad_lines_unknown_records_and_session_keys() -> None:
    lines = ["nope", *jsonl(user("u1", "hi"), {"type": "brand-new", "sessionId": SID})]
    parsed = ClaudeCodeParser().parse(lines, path="/p/transcript.jsonl")
    assert parsed.errors == [ParseError(1, "invalid JSON: Expecting value at column 1")]
    assert [e.type for e in parsed.events] == [EventType.USER_INPUT, EventType.UNKNOWN]
    assert parsed.session_key == SID
    assert ClaudeCodeParser().parse([], path="/p/empty.jsonl").session_key == "empty"


def test_a_repeated_record_stays_two_events_with_distinct_keys() -> None:
    same = assistant("a1", text("again"))
    parsed = parse(same, same)
    assert [(e.key, e.line) for e in parsed.events] == [("a1#0", 1), ("a1#0#1", 2)]
