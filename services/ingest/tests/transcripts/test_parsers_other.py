"""Parsers of qwen-code, cursor, kimi-cli, pi-coding-agent and prime-agent transcripts."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mcpd.sessions.model import EventType, ParsedEvent, ParsedSession, ParseError
from services.ingest.transcripts.assemble import assemble
from services.ingest.transcripts.parsers._common import Parser
from services.ingest.transcripts.parsers.cursor import CursorParser
from services.ingest.transcripts.parsers.kimi_cli import KimiCliParser
from services.ingest.transcripts.parsers.pi import PiParser
from services.ingest.transcripts.parsers.prime_agent import PrimeAgentParser
from services.ingest.transcripts.parsers.qwen_code import QwenCodeParser
from services.ingest.transcripts.registry import parser_for

FIXTURES = Path(__file__).resolve().parents[4] / "tests" / "fixtures" / "transcripts"
U, A, R = EventType.USER_INPUT, EventType.ASSISTANT_RESPONSE, EventType.REASONING
CALL, RESP, COMP = EventType.TOOL_CALL, EventType.TOOL_RESPONSE, EventType.COMPACTION
SYS, RUN, UNK = EventType.SYSTEM, EventType.RUNTIME, EventType.UNKNOWN

# fixture -> (parser, file, session key, [(type, text or tool name)], turn starts, terminals
# as {index: completes}, a line to garble)
CASES: dict[
    str, tuple[Parser, str, str, list[tuple[EventType, str]], list[int], dict[int, bool], int]
] = {
    "qwen-code": (
        QwenCodeParser(),
        "session.jsonl",
        "qwen-session-001",
        [
            (U, "Explain the fixture behavior.\nKeep the answer concise."),
            (R, "I should inspect the indexed sessions."),
            (A, "I will search first."),
            (CALL, "mcp__moraine__search_sessions"),
            (A, "The search request is ready."),
            (RESP, "mcp__moraine__search_sessions"),
            (A, "I will demonstrate a failed tool."),
            (CALL, "shell"),
            (RESP, "shell"),
            (CALL, "shell"),
            (RESP, "shell"),
            (COMP, "chat compressed: 12000 -> 2500 tokens (token_limit)"),
            (SYS, "Background agent completed."),
            (SYS, "Scheduled maintenance prompt."),
            (U, "Use the focused result instead."),
            (A, "This answer belongs to the abandoned branch."),
            (SYS, "rewind: 4 records rewound"),
            (U, "Replacement branch prompt."),
            (A, "Replacement branch answer."),
            (UNK, "future_record"),
            (RUN, "ui_telemetry: render"),
            (RUN, "file_history_snapshot: src/example.rs"),
            (U, "[image/png]"),
            (U, "Malformed timestamps route to ingest errors."),
        ],
        [0, 16, 23],
        {15: True, 18: True},
        4,
    ),
    "cursor": (
        CursorParser(),
        "11111111-2222-4333-8444-555555555555.jsonl",
        "11111111-2222-4333-8444-555555555555",
        [
            (U, "local fixture cursor user prompt cursor_fixture_keyword"),
            (A, "I will inspect the target file."),
            (CALL, "Read"),
            (RESP, "Read"),
            (R, "The file contains a small main function."),
            (A, "local fixture cursor assistant reply cursor_fixture_keyword cursor_fixture_trace"),
        ],
        [0],
        {5: True},
        3,
    ),
    "kimi-cli": (
        KimiCliParser(),
        "wire.jsonl",
        "kimi-cli",  # the session directory's name
        [
            (U, "Please inspect the sample project."),
            (RUN, "step 1"),
            (R, "Need to inspect files first."),
            (A, "I will read the manifest."),
            (CALL, "ReadFile"),
            (RESP, "ReadFile"),
            (
                RUN,
                "status: context 100 tokens; usage input_other=10, output=5, "
                "input_cache_read=2, input_cache_creation=1",
            ),
            (RUN, "subagent sub_xyz: ContentPart"),
        ],
        [0],
        {},
        4,
    ),
    "pi": (
        PiParser(),
        "session.jsonl",
        "11111111-2222-4333-8444-555555555555",
        [
            (SYS, "model: openrouter/Arcee AI/Trinity Large Thinking"),
            (SYS, "thinking level: high"),
            (U, "Please inspect the manifest and summarize the package."),
            (R, "I should read the manifest before answering."),
            (A, "I will inspect Cargo.toml first."),
            (CALL, "read"),
            (RESP, "read"),
            (CALL, "bash"),
            (RESP, "bash"),
            (COMP, "Earlier manifest inspection was summarized."),
            (COMP, "A side branch checked package metadata."),
            (RUN, 'demo-state: {"status": "ok"}'),
            (SYS, "Injected package context."),
            (SYS, "label 'manifest-checkpoint' on pi-user-1"),
        ],
        [0],  # the model and thinking-level setup opens the first turn
        {},
        6,
    ),
    "prime-agent": (
        PrimeAgentParser(),
        "session.jsonl",
        "12345678-1234-4234-8234-123456789abc",
        [
            (SYS, "model: openai-codex/gpt-5.6-sol"),
            (SYS, "thinking level: high"),
            (SYS, "service tier: default"),
            (U, "Inspect the manifest."),
            (U, "[image image/png]"),
            (R, "I should inspect it first."),
            (A, "I will read Cargo.toml."),
            (CALL, "read"),
            (RESP, "read"),
            (SYS, "Visible agent handoff"),
            (SYS, "Default-visible custom note"),
            (UNK, "hidden custom_message internal_note"),
            (UNK, "custom thread_goal_state"),
            (UNK, "custom message internal"),
            (UNK, "futureBlock block"),
            (RUN, "agent status: working"),
            (RUN, "subagent usage attributed: 180 tokens"),
            (RUN, "session state: active"),
            (RUN, "git: feat/demo @ fedcba987654"),
            (COMP, "Manifest inspected."),
            (UNK, "future_prime_record"),
        ],
        [0],
        {14: True},  # stopReason "stop" on the last assistant message
        9,
    ),
}


def _lines(name: str) -> list[str]:
    path = FIXTURES / name / CASES[name][1]
    return path.read_text(encoding="utf-8").splitlines(keepends=True)


def parse_fixture(name: str, lines: list[str] | None = None) -> ParsedSession:
    """The fixture `name` (or `lines` in its place) read by its parser."""
    parser, file = CASES[name][0], CASES[name][1]
    return parser.parse(_lines(name) if lines is None else lines, path=f"/x/{name}/{file}")


def _salient(event: ParsedEvent) -> str:
    return event.tool_name or "" if event.type in (CALL, RESP) else event.text


def _view(events: list[ParsedEvent]) -> list[tuple[str, EventType, str]]:
    return [(e.key, e.type, e.text) for e in events]


@pytest.mark.parametrize("name", sorted(CASES))
def test_fixture_parses_to_the_expected_events(name: str) -> None:
    parser, _, key, expected, starts, terminals, _ = CASES[name]
    session = parse_fixture(name)
    assert session.errors == []
    assert session.harness == parser.harness
    assert session.session_key == key
    assert [(e.type, _salient(e)) for e in session.events] == expected
    assert [i for i, e in enumerate(session.events) if e.starts_turn] == starts
    assert {i: e.completes_turn for i, e in enumerate(session.events) if e.terminal} == terminals
    assert all(not e.completes_turn for e in session.events if not e.terminal)
    assert len({e.key for e in session.events}) == len(session.events)


@pytest.mark.parametrize("name", sorted(CASES))
def test_a_garbled_line_is_one_error_and_the_rest_is_intact(name: str) -> None:
    garbled = CASES[name][6]
    lines = _lines(name)
    lines[garbled - 1] = lines[garbled - 1][:25] + "\n"
    session = parse_fixture(name, lines)
    assert [e.line for e in session.errors] == [garbled]
    assert isinstance(session.errors[0], ParseError)
    before = [e for e in parse_fixture(name).events if e.line != garbled]
    assert _view(session.events) == _view(before)
    assert [e.line for e in session.events] == [e.line for e in before]


@pytest.mark.parametrize("name", sorted(CASES))
def test_reparsing_gives_identical_keys(name: str) -> None:
    first, second = parse_fixture(name), parse_fixture(name)
    assert [e.key for e in first.events] == [e.key for e in second.events]
    assert first.session_key == second.session_key


@pytest.mark.parametrize("name", sorted(CASES))
def test_two_identical_records_stay_two_events(name: str) -> None:
    lines = _lines(name)
    index = next(i for i, e in enumerate(parse_fixture(name).events) if e.type is A)
    line = parse_fixture(name).events[index].line
    doubled = [*lines[:line], lines[line - 1], *lines[line:]]
    session = parse_fixture(name, doubled)
    assert session.errors == []
    first = [e for e in session.events if e.line == line]
    second = [e for e in session.events if e.line == line + 1]
    assert [(e.type, e.text) for e in first] == [(e.type, e.text) for e in second]
    assert len({e.key for e in session.events}) == len(session.events)
    assert [e.key for e in first] == [e.key for e in parse_fixture(name).events if e.line == line]


@pytest.mark.parametrize(
    ("name", "turns", "completed"),
    [
        ("qwen-code", 3, False),
        ("cursor", 1, True),
        ("kimi-cli", 1, False),
        ("pi", 1, False),
        ("prime-agent", 1, True),
    ],
)
def test_assembled_turns(name: str, turns: int, completed: bool) -> None:
    assembled = assemble(parse_fixture(name), source=name, project="p", path="/x")
    assert assembled.session.turn_count == turns
    assert assembled.session.completed is completed


def by_line(session: ParsedSession, line: int) -> list[ParsedEvent]:
    """The events one line of a transcript gave."""
    return [e for e in session.events if e.line == line]


ODD_RECORDS = [
    {"type": 5, "message": "text", "role": ["user"]},
    {"type": "message", "message": {"role": "assistant", "content": 7}},
    {"type": "user", "message": {"parts": [None, 3, {"text": None}]}, "timestamp": "soon"},
    {"message": {"type": "ToolCall", "payload": {"function": "x", "id": 4}}},
    {"role": "assistant", "message": {"content": [{"type": "tool_use", "input": "raw"}, 1]}},
    {"type": "system", "subtype": "chat_compression", "systemPayload": {"info": 1}},
    {},
]


@pytest.mark.parametrize("name", sorted(CASES))
def test_odd_record_shapes_never_raise(name: str) -> None:
    lines = [json.dumps(record) + "\n" for record in ODD_RECORDS]
    session = parse_fixture(name, lines)
    assert session.errors == []
    assert session.session_key
    assert len({e.key for e in session.events}) == len(session.events)
    assert parser_for(CASES[name][0].harness).harness == CASES[name][0].harness
