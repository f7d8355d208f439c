"""Codex rollout parsing (docs/sessions.md: Codex)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from mcpd.sessions.model import EventType, ParseError
from services.ingest.tests.transcripts.transcript_lines import fixture_lines, jsonl, summary
from services.ingest.transcripts.parsers.codex import CodexParser

PATH = (
    "/home/u/.codex/sessions/2026/02/15/"
    "rollout-2026-02-15T03-50-40-019c5f6a-49bd-7920-ac67-1dd8e33b0e95.jsonl"
)


def rec(kind: str, payload: dict[str, Any], second: int = 0) -> dict[str, Any]:
    return {"timestamp": f"2026-03-01T10:00:{second:02d}.000Z", "type": kind, "payload": payload}


def msg(role: str, *texts: str, **extra: Any) -> dict[str, Any]:
    content = [
        {"type": "input_text" if role == "user" else "output_text", "text": t} for t in texts
    ]
    return rec("response_item", {"type": "message", "role": role, "content": content, **extra})


def event(kind: str, **fields: Any) -> dict[str, Any]:
    return rec("event_msg", {"type": kind, **fields})


def parse(*records: dict[str, Any]) -> Any:
    return CodexParser().parse(jsonl(*records), path=PATH)


def test_fixture_records_land_as_their_event_types() -> None:
    parsed = CodexParser().parse(fixture_lines("codex/session.jsonl"), path="codex/session.jsonl")
    assert parsed.errors == []
    assert parsed.harness == "codex"
    assert parsed.session_key == "019c5f6a-49bd-7920-ac67-1dd8e33b0e95"
    assert (parsed.cwd, parsed.model, parsed.title) == ("/repo", "gpt-5.3-codex", None)
    keys = [event.key for event in parsed.events]
    assert summary(parsed) == [
        ("assistant_response", "msg:msg_1", "I will inspect the project."),
        ("tool_call", "call:call_read", 'Read(path="Cargo.toml")'),
        ("tool_response", "out:call_read", "workspace = true"),
        ("tool_call", "call:call_patch", "apply_patch\n*** Begin Patch\n*** End Patch\n"),
        ("tool_response", "out:call_patch", '{"ok":true}'),
        ("tool_call", keys[5], 'web_search(type="search", query="moraine ingest")'),
        ("reasoning", "rs:rs_1", "Need to preserve token accounting and tool rows."),
        (
            "runtime",
            keys[7],
            "token_count input_tokens=65323 cached_input_tokens=58624 output_tokens=445",
        ),
        (
            "compaction",
            keys[8],
            'user: Please summarize this session.\nCompacted reasoning survives.\nList(path="src")'
            "\nnormalize.rs",
        ),
    ]
    assert all(k.startswith("h:") and k.endswith(":0") for k in (keys[5], keys[7], keys[8]))
    assert [e.line for e in parsed.events] == [3, 4, 5, 6, 7, 8, 9, 10, 11]
    read_call, read_output = parsed.events[1], parsed.events[2]
    assert (read_call.tool_name, read_call.call_id, read_call.payload) == (
        "Read",
        "call_read",
        {"arguments": {"path": "Cargo.toml"}, "item_type": "function_call"},
    )
    assert (read_call.file_paths, read_call.mutation, read_call.cwd) == (
        ["Cargo.toml"],
        False,
        "/repo",
    )
    assert (read_output.tool_name, read_output.call_id) == ("Read", "call_read")
    assert parsed.events[3].mutation is True
    assert [e.model for e in parsed.events] == ["gpt-5.3-codex"] * 2 + [None] + [
        "gpt-5.3-codex"
    ] + [None] + ["gpt-5.3-codex"] * 2 + [None, None]
    assert parsed.events[0].timestamp == datetime(2026, 2, 15, 3, 50, 43, tzinfo=UTC)
    assert not any(e.starts_turn or e.terminal for e in parsed.events)


def test_injected_context_is_system_and_the_prompt_is_user_input() -> None:
    parsed = parse(
        rec("session_meta", {"id": "s1", "cwd": "/w"}),
        msg("developer", "<permissions instructions>sandboxed</permissions instructions>"),
        msg("user", "# AGENTS.md instructions for /w\n\n<INSTRUCTIONS>be brief</INSTRUCTIONS>"),
        msg("user", "<environment_context>\n  <cwd>/w</cwd>\n</environment_context>"),
        msg("user", "<recommended_plugins>\nA list\n</recommended_plugins>", "<skill>x</skill>"),
        msg("user", "<user_shell_command>ls</user_shell_command>"),
        msg("user", "<turn_aborted>The user interrupted</turn_aborted>"),
        msg("user", "<image name=[Image #1]>", "</image>", "Fix the <b>bug</b>"),
    )
    assert [(e.type, e.text) for e in parsed.events] == [
        (EventType.SYSTEM, "<permissions instructions>sandboxed</permissions instructions>"),
        (
            EventType.SYSTEM,
            "# AGENTS.md instructions for /w\n\n<INSTRUCTIONS>be brief</INSTRUCTIONS>",
        ),
        (EventType.SYSTEM, "<environment_context>\n  <cwd>/w</cwd>\n</environment_context>"),
        (
            EventType.SYSTEM,
            "<recommended_plugins>\nA list\n</recommended_plugins>\n<skill>x</skill>",
        ),
        (EventType.SYSTEM, "<user_shell_command>ls</user_shell_command>"),
        (EventType.SYSTEM, "<turn_aborted>The user interrupted</turn_aborted>"),
        (EventType.USER_INPUT, "<image name=[Image #1]>\n</image>\nFix the <b>bug</b>"),
    ]
    # The setup before the first prompt belongs to its turn.
    assert [e.starts_turn for e in parsed.events] == [True] + [False] * 6


def test_mixed_injected_and_typed_text_keeps_only_the_typed_text() -> None:
    parsed = parse(msg("user", "<environment_context>x</environment_context>", "Do it"))
    (only,) = parsed.events
    assert (only.type, only.text, only.payload) == (
        EventType.USER_INPUT,
        "Do it",
        {"role": "user", "injected_parts": 1},
    )


def test_event_msg_twins_fold_into_one_event_in_either_order() -> None:
    parsed = parse(
        msg("user", "Run the tests"),
        event("user_message", message="Run the tests", images=[]),
        event("agent_message", message="All green."),
        msg("assistant", "All green."),
        event("agent_reasoning", text="**Checking**"),
        rec(
            "response_item",
            {
                "type": "reasoning",
                "summary": [{"type": "summary_text", "text": "**Checking**"}],
                "encrypted_content": "gAAA",
            },
        ),
        rec(
            "response_item",
            {"type": "reasoning", "summary": [{"type": "summary_text", "text": "**Next**"}]},
        ),
        event("agent_reasoning", text="**Next**"),
    )
    assert [(e.type, e.text, e.line) for e in parsed.events] == [
        (EventType.USER_INPUT, "Run the tests", 1),
        (EventType.ASSISTANT_RESPONSE, "All green.", 3),
        (EventType.REASONING, "**Checking**", 5),
        (EventType.REASONING, "**Next**", 7),
    ]
    assert parsed.events[1].payload == {"role": "assistant", "event_msg": "agent_message"}


def test_identical_prompts_stay_distinct_and_pair_one_to_one() -> None:
    records = [
        msg("user", "continue"),
        event("user_message", message="continue"),
        event("task_complete"),
        msg("user", "continue"),
        event("user_message", message="continue"),
        event("user_message", message="continue"),
    ]
    parsed = parse(*records)
    prompts = [e for e in parsed.events if e.type is EventType.USER_INPUT]
    assert [e.line for e in prompts] == [1, 4, 6]
    assert len({e.key for e in prompts}) == 3
    again = parse(*records)
    assert [e.key for e in again.events] == [e.key for e in parsed.events]


def test_identical_records_on_different_lines_stay_two_events() -> None:
    same = rec("response_item", {"type": "function_call", "name": "shell", "arguments": "{}"})
    parsed = parse(same, same)
    assert [e.type for e in parsed.events] == [EventType.TOOL_CALL, EventType.TOOL_CALL]
    first, second = (e.key for e in parsed.events)
    assert first != second
    assert (first.rsplit(":", 1)[1], second.rsplit(":", 1)[1]) == ("0", "1")


def test_repeated_call_ids_get_distinct_keys() -> None:
    call = rec(
        "response_item", {"type": "function_call", "call_id": "c1", "name": "x", "arguments": "{}"}
    )
    parsed = parse(call, call)
    assert [e.key for e in parsed.events] == ["call:c1", "call:c1#1"]


def test_task_complete_completes_the_turn_and_turn_aborted_does_not() -> None:
    parsed = parse(
        rec("session_meta", {"id": "s1", "cwd": "/w"}),
        event("task_started", turn_id="t1"),
        rec("turn_context", {"turn_id": "t1", "model": "gpt-5", "cwd": "/w"}),
        msg("user", "first"),
        msg("assistant", "done"),
        event("token_count", info=None),
        event("task_complete", turn_id="t1", last_agent_message="done"),
        event("task_started", turn_id="t2"),
        msg("user", "<environment_context>changed</environment_context>"),
        msg("user", "second"),
        rec(
            "response_item",
            {"type": "function_call", "call_id": "c", "name": "shell", "arguments": "{}"},
        ),
        event("turn_aborted", reason="interrupted"),
    )
    assert [
        (e.type.value, e.text, e.starts_turn, e.terminal, e.completes_turn) for e in parsed.events
    ] == [
        ("runtime", "task_started", True, False, False),
        ("user_input", "first", False, False, False),
        ("assistant_response", "done", False, False, False),
        ("runtime", "token_count", False, False, False),
        ("runtime", "task_complete", False, True, True),
        ("runtime", "task_started", True, False, False),
        ("system", "<environment_context>changed</environment_context>", False, False, False),
        ("user_input", "second", False, False, False),
        ("tool_call", "shell()", False, False, False),
        ("runtime", "turn_aborted reason=interrupted", False, True, False),
    ]
    assert parsed.events[4].payload == {
        "turn_id": "t1",
        "last_agent_message": "done",
        "event_msg": "task_complete",
    }
    assert [e.model for e in parsed.events][:3] == [None, None, "gpt-5"]


def test_tool_outputs_carry_exit_codes() -> None:
    def call(call_id: str) -> dict[str, Any]:
        args = '{"command": ["bash", "-lc", "make"]}'
        return rec(
            "response_item",
            {"type": "function_call", "call_id": call_id, "name": "shell", "arguments": args},
        )

    def output(call_id: str, value: Any) -> dict[str, Any]:
        return rec(
            "response_item", {"type": "function_call_output", "call_id": call_id, "output": value}
        )

    parsed = parse(
        call("a"),
        output("a", '{"output":"built\\n","metadata":{"exit_code":0,"duration_seconds":1.5}}'),
        call("b"),
        output("b", "Exit code: 2\nWall time: 0.4 seconds\nOutput:\nmake: *** error"),
        call("c"),
        output("c", "Chunk ID: 1\nWall time: 1s\nProcess exited with code 127\nOutput:\nnope"),
        call("d"),
        event("exec_command_end", call_id="d", exit_code=1, stdout="x", aggregated_output="x"),
        output("d", {"content": "failed", "success": False}),
        call("e"),
        output("e", "prints Exit code: 3 later"),
    )
    outputs = [e for e in parsed.events if e.type is EventType.TOOL_RESPONSE]
    assert [(e.text, e.payload, e.tool_name) for e in outputs] == [
        ("built\n", {"exit_code": 0}, "shell"),
        (
            "Exit code: 2\nWall time: 0.4 seconds\nOutput:\nmake: *** error",
            {"exit_code": 2},
            "shell",
        ),
        (
            "Chunk ID: 1\nWall time: 1s\nProcess exited with code 127\nOutput:\nnope",
            {"exit_code": 127},
            "shell",
        ),
        ("failed", {"success": False, "exit_code": 1}, "shell"),
        ("prints Exit code: 3 later", None, "shell"),
    ]
    runtime = next(e for e in parsed.events if e.type is EventType.RUNTIME)
    assert runtime.text == "exec_command_end exit_code=1"
    assert runtime.payload == {"call_id": "d", "exit_code": 1, "event_msg": "exec_command_end"}


def test_encrypted_reasoning_is_opaque() -> None:
    parsed = parse(
        rec("response_item", {"type": "reasoning", "summary": [], "encrypted_content": "gAAAA"}),
        rec(
            "response_item",
            {
                "type": "reasoning",
                "summary": [],
                "content": [{"type": "reasoning_text", "text": "raw"}],
            },
        ),
    )
    assert [(e.type, e.text, e.payload) for e in parsed.events] == [
        (EventType.REASONING, "[encrypted reasoning omitted]", {"encrypted": True}),
        (EventType.REASONING, "raw", None),
    ]


def test_own_tool_calls_and_their_outputs_are_flagged() -> None:
    parsed = parse(
        rec(
            "response_item",
            {
                "type": "function_call",
                "call_id": "s",
                "name": "mcp__mcpd__search_sessions",
                "arguments": '{"query": "flaky test"}',
            },
        ),
        rec("response_item", {"type": "function_call_output", "call_id": "s", "output": "hits"}),
        rec(
            "response_item",
            {
                "type": "function_call",
                "call_id": "o",
                "name": "open",
                "arguments": '{"id": "session:ses_x"}',
            },
        ),
    )
    call, output, opened = parsed.events
    assert call.payload == {
        "arguments": {"query": "flaky test"},
        "item_type": "function_call",
        "self_tool": True,
        "canonical_tool": "search_sessions",
    }
    assert output.payload == {"self_tool": True, "canonical_tool": "search_sessions"}
    assert opened.payload is not None
    assert opened.payload["canonical_tool"] == "open"


def test_local_shell_calls_use_their_working_directory() -> None:
    parsed = parse(
        rec("turn_context", {"cwd": "/w", "model": "m"}),
        rec(
            "response_item",
            {
                "type": "local_shell_call",
                "call_id": "l",
                "status": "completed",
                "action": {
                    "type": "exec",
                    "command": ["bash", "-lc", "touch new.txt"],
                    "working_directory": "/w/sub",
                },
            },
        ),
    )
    (call,) = parsed.events
    assert (call.tool_name, call.cwd, call.file_paths, call.mutation) == (
        "local_shell",
        "/w/sub",
        ["new.txt"],
        True,
    )


def test_a_bad_line_is_an_error_and_parsing_continues() -> None:
    lines = [*jsonl(msg("user", "one")), "{not json", "[]", *jsonl(msg("assistant", "two"))]
    parsed = CodexParser().parse(lines, path=PATH)
    assert parsed.errors == [
        ParseError(
            2, "invalid JSON: Expecting property name enclosed in double quotes at column 2"
        ),
        ParseError(3, "expected a JSON object, got an array"),
    ]
    assert [(e.type, e.line) for e in parsed.events] == [
        (EventType.USER_INPUT, 1),
        (EventType.ASSISTANT_RESPONSE, 4),
    ]


def test_unknown_records_are_unknown_events_and_the_key_falls_back_to_the_file_name() -> None:
    parsed = parse(rec("something_new", {"x": 1}), rec("response_item", {"type": "novel"}))
    assert [e.type for e in parsed.events] == [EventType.UNKNOWN, EventType.UNKNOWN]
    assert parsed.session_key == "019c5f6a-49bd-7920-ac67-1dd8e33b0e95"
    assert CodexParser().parse([], path="/x/odd-name.jsonl").session_key == "odd-name"
