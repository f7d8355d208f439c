"""Assembling a parsed transcript into session, turn, event and touch rows."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from mcpd.sessions.model import EventType, ParsedEvent, ParsedSession
from services.ingest.tests.transcripts.transcript_lines import fixture_lines, jsonl
from services.ingest.transcripts.assemble import assemble, display_label, format_time
from services.ingest.transcripts.keys import event_id, session_id, turn_id
from services.ingest.transcripts.parsers.claude_code import ClaudeCodeParser
from services.ingest.transcripts.parsers.codex import CodexParser

T0 = datetime(2026, 3, 1, 10, 0, tzinfo=UTC)


def ev(
    key: str, kind: EventType, line: int, second: int | None = None, **fields: Any
) -> ParsedEvent:
    moment = None if second is None else T0 + timedelta(seconds=second)
    return ParsedEvent(
        key=key, line=line, type=kind, text=fields.pop("text", key), timestamp=moment, **fields
    )


def session(*events: ParsedEvent, **fields: Any) -> ParsedSession:
    return ParsedSession(harness="codex", session_key="k1", events=list(events), **fields)


def build(parsed: ParsedSession, **kwargs: Any) -> Any:
    return assemble(parsed, source="codex", project="p", path="/t/k1.jsonl", **kwargs)


def test_turns_ordinals_ids_and_completion() -> None:
    parsed = session(
        ev("pre", EventType.ASSISTANT_RESPONSE, 1, 0),
        ev("p1", EventType.USER_INPUT, 2, 1, starts_turn=True, text="First prompt\nmore"),
        ev("c1", EventType.TOOL_CALL, 3, 2, tool_name="shell", call_id="c1", model="gpt-5"),
        ev("r1", EventType.TOOL_RESPONSE, 4, 3, tool_name="shell", call_id="c1"),
        ev("c2", EventType.TOOL_CALL, 4, 3, tool_name="apply_patch", model="gpt-5"),
        ev("c3", EventType.TOOL_CALL, 5, 4, tool_name="shell", model="gpt-5"),
        ev("x", EventType.UNKNOWN, 6, 5),
        ev("a1", EventType.ASSISTANT_RESPONSE, 7, 6, model="gpt-5"),
        ev("done", EventType.RUNTIME, 8, 7, terminal=True, completes_turn=True),
        ev("p2", EventType.USER_INPUT, 9, 8, starts_turn=True),
        ev("a2", EventType.ASSISTANT_RESPONSE, 10, 9),
        ev("stop", EventType.RUNTIME, 11, 10, terminal=True),
        ev("setup", EventType.RUNTIME, 12, 11, starts_turn=True),
        ev("p3", EventType.USER_INPUT, 13, 12),
        ev("a3", EventType.ASSISTANT_RESPONSE, 14, 13),
    )
    out = build(parsed)
    sid = session_id("codex", "k1")
    assert out.session.id == sid
    assert [t.ordinal for t in out.turns] == [1, 2, 3, 4]
    assert [t.id for t in out.turns] == [turn_id(sid, k) for k in ("pre", "p1", "p2", "setup")]
    assert [e.id for e in out.events] == [event_id(sid, e.key) for e in parsed.events]
    assert [e.seq for e in out.events] == list(range(1, 16))
    assert [(e.ordinal, e.turn_id) for e in out.events][:3] == [
        (1, out.turns[0].id),
        (1, out.turns[1].id),
        (2, out.turns[1].id),
    ]
    ids = {e.key: event_id(sid, e.key) for e in parsed.events}
    first, second, third, fourth = out.turns
    assert (first.user_input_event_id, first.completed, first.terminal_event_id) == (
        None,
        False,
        None,
    )
    assert (second.completed, second.terminal_event_id, second.final_response_event_id) == (
        True,
        ids["done"],
        ids["a1"],
    )
    assert second.user_input_event_id == ids["p1"]
    assert second.tools_called == ("shell", "apply_patch")
    assert second.event_types == (
        "user_input",
        "tool_call",
        "tool_response",
        "assistant_response",
        "runtime",
    )
    assert (second.event_count, second.started_at, second.updated_at) == (
        8,
        T0 + timedelta(seconds=1),
        T0 + timedelta(seconds=7),
    )
    assert (third.completed, third.terminal_event_id, third.final_response_event_id) == (
        False,
        ids["stop"],
        None,
    )
    assert (fourth.user_input_event_id, fourth.completed) == (ids["p3"], False)
    assert out.session.completed is False
    assert (out.session.turn_count, out.session.event_count, out.session.mode) == (
        4,
        15,
        "tool_calling",
    )
    assert out.session.title == "First prompt"
    response = out.events[3]
    assert (response.model, response.originating_model, response.tool_name) == (
        None,
        "gpt-5",
        "shell",
    )


def test_the_last_terminal_event_decides_and_session_completion_follows_the_last_turn() -> None:
    parsed = session(
        ev("p", EventType.USER_INPUT, 1, 0, starts_turn=True),
        ev("cut", EventType.RUNTIME, 2, 1, terminal=True),
        ev("a", EventType.ASSISTANT_RESPONSE, 3, 2, terminal=True, completes_turn=True),
    )
    out = build(parsed)
    (turn,) = out.turns
    assert (turn.completed, turn.terminal_event_id) == (True, out.events[2].id)
    assert out.session.completed is True
    assert [e.terminal for e in out.events] == [False, True, True]


def test_order_follows_lines_and_keeps_the_parsers_order_within_a_line() -> None:
    parsed = session(
        ev("b", EventType.ASSISTANT_RESPONSE, 2, 5),
        ev("a0", EventType.REASONING, 1, 4),
        ev("a1", EventType.TOOL_CALL, 1, 4, tool_name="t"),
    )
    out = build(parsed)
    assert [(e.seq, e.line, e.text) for e in out.events] == [
        (1, 1, "a0"),
        (2, 1, "a1"),
        (3, 2, "b"),
    ]


def test_missing_timestamps_inherit_and_fall_back() -> None:
    parsed = session(
        ev("a", EventType.SYSTEM, 1),
        ev("b", EventType.USER_INPUT, 2, 30, starts_turn=True),
        ev("c", EventType.ASSISTANT_RESPONSE, 3),
        ev("d", EventType.ASSISTANT_RESPONSE, 4, 10),
    )
    out = build(parsed)
    assert [e.timestamp for e in out.events] == [
        T0 + timedelta(seconds=s) for s in (30, 30, 30, 10)
    ]
    assert (out.session.started_at, out.session.updated_at) == (
        T0 + timedelta(seconds=10),
        T0 + timedelta(seconds=30),
    )
    mtime = datetime(2025, 1, 2, tzinfo=UTC)
    undated = build(session(ev("a", EventType.SYSTEM, 1)), fallback_time=mtime)
    assert (undated.events[0].timestamp, undated.session.started_at) == (mtime, mtime)
    epoch = build(session(ev("a", EventType.SYSTEM, 1)))
    assert epoch.session.updated_at == datetime(1970, 1, 1, tzinfo=UTC)
    empty = build(session(), fallback_time=mtime)
    assert (empty.session.turn_count, empty.session.completed, empty.turns) == (0, False, [])
    assert empty.session.display_label == "codex session · 2025-01-02T00:00:00.000Z · 0 turns"


def test_repeated_keys_still_get_distinct_ids() -> None:
    parsed = session(
        ev("same", EventType.ASSISTANT_RESPONSE, 1, 0),
        ev("same", EventType.ASSISTANT_RESPONSE, 2, 1),
    )
    out = build(parsed)
    sid = out.session.id
    assert [e.id for e in out.events] == [event_id(sid, "same"), event_id(sid, "same#1")]


def test_display_label_ladder() -> None:
    when = datetime(2026, 4, 30, 13, 10, 5, 123456, tzinfo=UTC)

    def label(**fields: Any) -> str:
        base: dict[str, Any] = dict(title=None, prompt_preview=None, summary=None, slug=None)
        base.update(fields)
        return display_label(harness="claude-code", updated_at=when, turn_count=1, **base)

    assert label(title="Title", prompt_preview="Prompt", summary="S", slug="s") == "Title"
    assert label(title="  ", prompt_preview="Prompt", summary="S") == "Prompt"
    assert label(summary="Summary", slug="slug") == "Summary"
    assert label(summary="\t", slug="slug-name") == "slug-name"
    assert label() == "claude-code session · 2026-04-30T13:10:05.123Z · 1 turn"
    assert format_time(datetime(2026, 1, 1, 1, tzinfo=UTC)) == "2026-01-01T01:00:00.000Z"


def test_title_and_label_come_from_the_first_prompt_when_there_is_no_title() -> None:
    long_line = "é" * 130
    parsed = session(
        ev("s", EventType.SYSTEM, 1, 0, text="setup"),
        ev(
            "p",
            EventType.USER_INPUT,
            2,
            1,
            starts_turn=True,
            text=f"\n  {long_line}  \nsecond line",
        ),
        summary="a summary",
        slug="a-slug",
    )
    out = build(parsed)
    assert out.session.title == "é" * 120 + "…"
    assert out.session.display_label == "é" * 120 + "…"
    assert (out.session.mode, out.session.summary, out.session.slug) == (
        "chat",
        "a summary",
        "a-slug",
    )
    titled = build(session(*parsed.events, title="  Named  ", mode="web_search"))
    assert (titled.session.title, titled.session.display_label, titled.session.mode) == (
        "Named",
        "Named",
        "web_search",
    )
    no_prompt = build(session(ev("a", EventType.ASSISTANT_RESPONSE, 1, 0), summary="Sum"))
    assert (no_prompt.session.title, no_prompt.session.display_label) == (None, "Sum")


def test_file_touches_resolve_against_the_event_cwd(tmp_path: Path) -> None:
    root = tmp_path / "w"
    (root / ".git").mkdir(parents=True)
    parsed = session(
        ev("p", EventType.USER_INPUT, 1, 0, starts_turn=True),
        ev(
            "e",
            EventType.TOOL_CALL,
            2,
            1,
            tool_name="Edit",
            file_paths=["src/a.py", "src/a.py"],
            mutation=True,
        ),
        ev(
            "r",
            EventType.TOOL_CALL,
            3,
            2,
            tool_name="Read",
            file_paths=["b.py"],
            cwd=str(root / "pkg"),
        ),
        ev("t", EventType.TOOL_RESPONSE, 4, 3, file_paths=["ignored.py"]),
        cwd=str(root),
    )
    out = build(parsed)
    common = str((root / ".git").resolve())
    assert [
        (
            t.event_id,
            t.turn_id,
            t.tool_name,
            t.raw_path,
            t.tail,
            t.worktree_root,
            t.git_common_dir,
            t.mutation,
            t.phase,
        )
        for t in out.touches
    ] == [
        (
            out.events[1].id,
            out.turns[0].id,
            "Edit",
            "src/a.py",
            "src/a.py",
            str(root),
            common,
            True,
            "request",
        ),
        (
            out.events[2].id,
            out.turns[0].id,
            "Read",
            "b.py",
            "pkg/b.py",
            str(root),
            common,
            False,
            "request",
        ),
    ]
    assert out.touches[0].timestamp == T0 + timedelta(seconds=1)
    assert out.touches[0].tail_is_absolute is False


def test_reimporting_the_same_file_gives_identical_rows() -> None:
    for parser, name in (
        (CodexParser(), "codex/session.jsonl"),
        (ClaudeCodeParser(), "claude-code/session.jsonl"),
        (ClaudeCodeParser(), "claude-cowork/aaaaaaaa-1111-4333-8444-555555555555.jsonl"),
    ):
        lines = fixture_lines(name)
        first = assemble(parser.parse(lines, path=name), source="s", project="p", path=name)
        again = assemble(parser.parse(list(lines), path=name), source="s", project="p", path=name)
        assert first == again
        # Appending lines keeps every existing id.
        grown = assemble(
            parser.parse(lines + lines[-1:], path=name), source="s", project="p", path=name
        )
        assert [e.id for e in grown.events[: len(first.events)]] == [e.id for e in first.events]
        assert len({e.id for e in grown.events}) == len(grown.events)


def test_codex_turn_completion_end_to_end() -> None:
    def rec(kind: str, payload: dict[str, Any], second: int) -> dict[str, Any]:
        return {"timestamp": f"2026-03-01T10:00:{second:02d}Z", "type": kind, "payload": payload}

    def user(text: str, second: int) -> dict[str, Any]:
        return rec(
            "response_item",
            {"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]},
            second,
        )

    lines = jsonl(
        rec("session_meta", {"id": "s", "cwd": "/w"}, 0),
        rec("event_msg", {"type": "task_started"}, 1),
        user("<environment_context>x</environment_context>", 1),
        user("Fix the flaky test", 2),
        rec("event_msg", {"type": "user_message", "message": "Fix the flaky test"}, 2),
        rec(
            "response_item",
            {
                "type": "message",
                "role": "assistant",
                "content": [{"type": "output_text", "text": "Fixed."}],
            },
            3,
        ),
        rec("event_msg", {"type": "task_complete"}, 4),
        rec("event_msg", {"type": "task_started"}, 5),
        user("Now the docs", 6),
        rec("event_msg", {"type": "turn_aborted", "reason": "interrupted"}, 7),
    )
    out = assemble(
        CodexParser().parse(lines, path="r.jsonl"), source="codex", project="p", path="r.jsonl"
    )
    assert [(t.ordinal, t.completed, t.event_count, t.event_types) for t in out.turns] == [
        (1, True, 5, ("runtime", "system", "user_input", "assistant_response")),
        (2, False, 3, ("runtime", "user_input")),
    ]
    first, second = out.turns
    assert first.final_response_event_id == out.events[3].id
    assert first.terminal_event_id == out.events[4].id
    assert first.user_input_event_id == out.events[2].id
    assert (second.terminal_event_id, second.final_response_event_id) == (out.events[7].id, None)
    assert (out.session.title, out.session.display_label, out.session.completed) == (
        "Fix the flaky test",
        "Fix the flaky test",
        False,
    )
    assert out.session.started_at == datetime(2026, 3, 1, 10, 0, 1, tzinfo=UTC)


def test_claude_turn_completion_end_to_end() -> None:
    def record(kind: str, uuid: str, second: int, **fields: Any) -> dict[str, Any]:
        stamp = f"2026-03-01T10:00:{second:02d}Z"
        return {"type": kind, "uuid": uuid, "sessionId": "s", "timestamp": stamp, **fields}

    def said(uuid: str, second: int, *blocks: dict[str, Any], stop: str | None = None) -> Any:
        message = {"role": "assistant", "model": "claude-x", "content": list(blocks)}
        return record("assistant", uuid, second, message={**message, "stop_reason": stop})

    def asked(uuid: str, second: int, content: Any) -> dict[str, Any]:
        return record("user", uuid, second, message={"role": "user", "content": content})

    lines = jsonl(
        asked("u1", 1, "Explain"),
        said("a1", 2, {"type": "text", "text": "Because."}, stop="end_turn"),
        asked("u2", 3, "Run it"),
        said("a2", 4, {"type": "tool_use", "id": "t", "name": "Bash", "input": {"command": "x"}}),
        asked("u3", 5, "Stop, do y instead"),
        said("a3", 6, {"type": "text", "text": "Doing y."}),
        asked("i1", 7, [{"type": "text", "text": "[Request interrupted by user]"}]),
    )
    parsed = ClaudeCodeParser().parse(lines, path="s.jsonl")
    out = assemble(parsed, source="claude", project="p", path="s.jsonl")
    assert [(t.ordinal, t.completed, t.event_count) for t in out.turns] == [
        (1, True, 2),
        (2, False, 2),
        (3, False, 3),
    ]
    first, pending, interrupted = out.turns
    assert (first.terminal_event_id, first.final_response_event_id) == (out.events[1].id,) * 2
    assert (pending.terminal_event_id, pending.tools_called) == (None, ("Bash",))
    assert interrupted.terminal_event_id == out.events[6].id
    assert interrupted.final_response_event_id is None
    assert out.session.completed is False
    assert out.session.title == "Explain"
    assert out.events[3].originating_model == "claude-x"


def test_touches_from_edits_patches_and_shell_commands(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)

    def call(call_id: str, name: str, arguments: str, kind: str = "function_call") -> Any:
        field = "input" if kind == "custom_tool_call" else "arguments"
        payload = {"type": kind, "call_id": call_id, "name": name, field: arguments}
        return {"timestamp": "2026-03-01T10:00:00Z", "type": "response_item", "payload": payload}

    patch = "*** Begin Patch\n*** Update File: src/app.py\n@@\n-a\n+b\n*** End Patch\n"
    lines = jsonl(
        {"type": "turn_context", "payload": {"cwd": str(repo), "model": "m"}},
        call("p", "apply_patch", patch, kind="custom_tool_call"),
        call(
            "s",
            "shell",
            '{"command": ["bash", "-lc", "cat ../README.md"], "workdir": "' + str(repo) + '/docs"}',
        ),
        call("q", "mcp__mcpd__file_attention", '{"path": "src/app.py"}'),
    )
    out = assemble(
        CodexParser().parse(lines, path="r.jsonl"), source="codex", project="p", path="r.jsonl"
    )
    assert [
        (t.tool_name, t.raw_path, t.tail, t.worktree_root, t.mutation) for t in out.touches
    ] == [
        ("apply_patch", "src/app.py", "src/app.py", str(repo), True),
        ("shell", "../README.md", "README.md", str(repo), False),
    ]
