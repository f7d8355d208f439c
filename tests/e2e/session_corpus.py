"""A session corpus for the MCP end-to-end tests: transcript fixtures of three harnesses plus
crafted transcripts, imported with `mcpd import` as a user runs it, and the ids the read model
gave every session, turn and event, read back from the stores."""

from __future__ import annotations

import json
import os
import subprocess
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from mcpd.sessions.model import EventType
from mcpd.sessions.store import SessionListQuery
from mcpd.storage import open_stores
from mcpd.testing.daemon import mcpd_executable
from tests.e2e.mcp_client import FIXTURES

PROJECT = "default"  # the local project: no keys, every request is its
# Words only the crafted transcripts contain, to find their sessions by search.
TRAVERSAL_WORD = "kestrel"
DUPLICATE_WORD = "plover"
CLAUDE_DUPLICATE_WORD = "avocet"
TRAVERSAL_SESSION = "0199c0de-0000-7000-8000-000000000001"
DUPLICATE_SESSION = "0199c0de-0000-7000-8000-000000000002"


@dataclass(frozen=True)
class Import:
    """One `mcpd import` run: a harness, transcripts, and a source name (None: the default)."""

    harness: str
    paths: tuple[Path, ...]
    source: str | None = None


def iso(at: datetime) -> str:
    return at.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def codex_line(at: datetime, kind: str, payload: dict[str, Any]) -> str:
    """One Codex rollout record."""
    return json.dumps({"timestamp": iso(at), "type": kind, "payload": payload})


def codex_turn(
    at: datetime,
    turn: str,
    prompt: str,
    calls: int,
    *,
    complete: bool,
    word: str = TRAVERSAL_WORD,
) -> list[str]:
    """A Codex turn: task_started, the prompt, reasoning, `calls` shell calls with their outputs
    (about `word`), an answer, and task_complete when `complete`; one second per record from
    `at`."""
    records: list[tuple[str, dict[str, Any]]] = [
        ("event_msg", {"type": "task_started", "turn_id": turn}),
        (
            "response_item",
            {
                "type": "message",
                "role": "user",
                "content": [{"type": "input_text", "text": prompt}],
            },
        ),
        (
            "response_item",
            {
                "type": "reasoning",
                "summary": [{"type": "summary_text", "text": f"Plan the {turn} steps."}],
            },
        ),
    ]
    for n in range(1, calls + 1):
        call_id = f"call_{turn}_{n}"
        command = json.dumps({"command": ["rg", "-n", f"{word}{n}"]})
        records += [
            (
                "response_item",
                {
                    "type": "function_call",
                    "call_id": call_id,
                    "name": "shell",
                    "arguments": command,
                },
            ),
            (
                "response_item",
                {
                    "type": "function_call_output",
                    "call_id": call_id,
                    "output": f"src/nest.py:{n}: {word} sighting {n} of {turn}",
                },
            ),
        ]
    answer = f"The {word} answer for {turn}."
    records.append(
        (
            "response_item",
            {
                "type": "message",
                "role": "assistant",
                "content": [{"type": "output_text", "text": answer}],
            },
        )
    )
    if complete:
        records.append(
            ("event_msg", {"type": "task_complete", "turn_id": turn, "last_agent_message": answer})
        )
    return [
        codex_line(at + timedelta(seconds=i), kind, payload)
        for i, (kind, payload) in enumerate(records)
    ]


def codex_meta(at: datetime, session: str) -> str:
    return codex_line(at, "session_meta", {"id": session, "cwd": "/work/nest"})


def traversal_rollout(directory: Path) -> Path:
    """Four turns of four to nine events each, the last one unfinished."""
    start = datetime(2026, 6, 1, 9, 0, tzinfo=UTC)
    lines = [codex_meta(start, TRAVERSAL_SESSION)]
    for t, calls in enumerate((1, 3, 0, 2), start=1):
        prompt = f"Turn {t}: where did the {TRAVERSAL_WORD} nest this time?"
        at = start + timedelta(minutes=t)
        lines += codex_turn(at, f"turn{t}", prompt, calls, complete=t < 4)
    path = directory / f"rollout-2026-06-01T09-00-00-{TRAVERSAL_SESSION}.jsonl"
    path.write_text("\n".join(lines) + "\n")
    return path


def duplicate_rollout(directory: Path) -> Path:
    """A Codex rollout where two records are repeated, byte for byte, on the next line: the
    prompt (no id of its own: keyed by content) and a tool output (keyed by its call id)."""
    at = datetime(2026, 6, 2, 9, 0, tzinfo=UTC)
    prompt = codex_line(
        at,
        "response_item",
        {
            "type": "message",
            "role": "user",
            "content": [{"type": "input_text", "text": f"Say {DUPLICATE_WORD} twice."}],
        },
    )
    call = {"type": "function_call", "call_id": "call_dup", "name": "shell", "arguments": "{}"}
    output = codex_line(
        at,
        "response_item",
        {"type": "function_call_output", "call_id": "call_dup", "output": DUPLICATE_WORD},
    )
    lines = [
        codex_meta(at, DUPLICATE_SESSION),
        prompt,
        prompt,
        codex_line(at, "response_item", call),
        output,
        output,
    ]
    path = directory / f"rollout-2026-06-02T09-00-00-{DUPLICATE_SESSION}.jsonl"
    path.write_text("\n".join(lines) + "\n")
    return path


def duplicate_claude(directory: Path) -> Path:
    """A Claude Code transcript whose user record (with its own uuid) is written twice."""
    user = {
        "type": "user",
        "sessionId": "0199c0de-0000-7000-8000-000000000003",
        "cwd": "/work/nest",
        "uuid": "user-dup",
        "timestamp": "2026-06-03T09:00:00.000Z",
        "message": {"role": "user", "content": f"Call the {CLAUDE_DUPLICATE_WORD}."},
    }
    path = directory / "claude-duplicate.jsonl"
    path.write_text(json.dumps(user) + "\n" + json.dumps(user) + "\n")
    return path


def corpus_imports(crafted: Path) -> list[Import]:
    """The imports of the corpus; `crafted` receives the crafted transcripts.

    The Codex fixture is imported as source `laptop`: it started before every other Codex
    session, and the query-service case tables expect their first `codex` session to have no
    predecessor."""
    crafted.mkdir(parents=True, exist_ok=True)
    return [
        Import("codex", (FIXTURES / "codex",), source="laptop"),
        Import("codex", (traversal_rollout(crafted), duplicate_rollout(crafted))),
        Import("claude-code", (FIXTURES / "claude-code", duplicate_claude(crafted))),
        Import("qwen-code", (FIXTURES / "qwen-code",)),
    ]


def mcpd_env(data_dir: Path) -> dict[str, str]:
    """This environment without MCPD_* settings, on `data_dir`."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("MCPD_", "OTEL_"))}
    return {**clean, "MCPD_DATA_DIR": str(data_dir)}


def run_import(data_dir: Path, spec: Import) -> None:
    """`mcpd import` of one spec into `data_dir`; it must read every line."""
    args = [str(mcpd_executable()), "import", spec.harness, *map(str, spec.paths)]
    if spec.source is not None:
        args += ["--source", spec.source]
    done = subprocess.run(
        args, env=mcpd_env(data_dir), capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, (args, done.stdout, done.stderr)
    assert " 0 errors " in done.stdout, (args, done.stdout)


def import_all(data_dir: Path, imports: list[Import]) -> None:
    for spec in imports:
        run_import(data_dir, spec)


@dataclass(frozen=True)
class StoredEvent:
    id: str
    type: EventType
    text: str


@dataclass(frozen=True)
class StoredTurn:
    id: str
    events: tuple[StoredEvent, ...]


@dataclass(frozen=True)
class StoredSession:
    id: str
    harness: str
    source: str
    turns: tuple[StoredTurn, ...]

    @property
    def event_ids(self) -> list[str]:
        """Every event id, in session order."""
        return [event.id for turn in self.turns for event in turn.events]


EVERYTHING = (datetime(1970, 1, 1, tzinfo=UTC), datetime(2100, 1, 1, tzinfo=UTC))


def read_sessions(data_dir: Path) -> dict[str, StoredSession]:
    """Every session of the local project with its turns and events in order, by id, read
    from the stores directly (no daemon may run on `data_dir`)."""
    with open_stores("sqlite", data_dir=data_dir, postgres_url=None, clickhouse_url=None) as stores:
        store = stores.sessions
        found = store.list_sessions(
            SessionListQuery(project=PROJECT, start=EVERYTHING[0], end=EVERYTHING[1], limit=10_000)
        )
        sessions: dict[str, StoredSession] = {}
        for record in found:
            turns = []
            for turn in store.list_turns(PROJECT, record.id, after_ordinal=0, limit=10_000):
                events = store.list_events(PROJECT, turn.id, after_ordinal=0, limit=10_000)
                assert [e.ordinal for e in events] == list(range(1, len(events) + 1))
                stored = tuple(StoredEvent(e.id, e.type, e.text) for e in events)
                turns.append(StoredTurn(turn.id, stored))
            sessions[record.id] = StoredSession(
                record.id, record.harness, record.source, tuple(turns)
            )
    return sessions
