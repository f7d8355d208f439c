"""Records of the session read model (spec/mcp-search-interface.md: Session > Turn > Event).

Parsers produce `ParsedSession`s; `assemble` (in `mcpd.sessions.assemble`) turns one into the
rows below; a `SessionStore` keeps them and answers the MCP tools. IDs are opaque to callers,
stable across re-imports: derived from the harness's own ids, never from byte offsets.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any


class EventType(enum.StrEnum):
    """The normalized event vocabulary, in the spec's order (canonical requests use it)."""

    USER_INPUT = "user_input"
    ASSISTANT_RESPONSE = "assistant_response"
    REASONING = "reasoning"
    TOOL_CALL = "tool_call"
    TOOL_RESPONSE = "tool_response"
    COMPACTION = "compaction"
    SYSTEM = "system"
    RUNTIME = "runtime"
    UNKNOWN = "unknown"


EVENT_TYPE_ORDER: tuple[EventType, ...] = tuple(EventType)

# Normalized harness names (spec: search_sessions, harness filter).
HARNESSES = (
    "codex",
    "claude-code",
    "cursor",
    "hermes",
    "kiro-cli",
    "kimi-cli",
    "nac",
    "opencode",
    "pi-coding-agent",
    "prime-agent",
    "qwen-code",
    "mcpd",
)


TRACE_HARNESS = "mcpd"
"""The harness of the sessions built from ingested traces that carry a session id."""


@dataclass(frozen=True, slots=True)
class ParseError:
    """A line a parser could not read: recorded as an ingest error, never a stop."""

    line: int
    message: str


@dataclass(slots=True)
class ParsedEvent:
    """One event as a parser read it, before turns and ids are assigned.

    `key` is stable within the session: the harness's own record/call id (plus a block index
    where one record holds several events), else a content hash plus an occurrence counter.
    `text` is the full human-readable content (what `open` shows, what search indexes).
    """

    key: str
    line: int
    type: EventType
    text: str
    timestamp: datetime | None = None
    tool_name: str | None = None
    call_id: str | None = None
    model: str | None = None
    payload: dict[str, Any] | None = None
    # A genuine user prompt: starts a new turn.
    starts_turn: bool = False
    # Ends the turn (final response, interrupt, cancellation, crash, exit).
    terminal: bool = False
    # With terminal: whether the turn completed (a final answer) rather than being cut off.
    completes_turn: bool = False
    cwd: str | None = None
    # Paths named by a tool call's arguments (file_attention), and whether it mutates them.
    file_paths: list[str] = field(default_factory=list)
    mutation: bool = False


@dataclass(slots=True)
class ParsedSession:
    """One transcript file, parsed."""

    harness: str
    session_key: str
    events: list[ParsedEvent]
    errors: list[ParseError] = field(default_factory=list)
    title: str | None = None
    summary: str | None = None
    slug: str | None = None
    mode: str | None = None
    cwd: str | None = None
    model: str | None = None


@dataclass(frozen=True, slots=True)
class SessionRecord:
    """A session row. `id` is the MCP id (`session:...`)."""

    id: str
    project: str
    source: str
    harness: str
    session_key: str
    path: str
    title: str | None
    display_label: str
    started_at: datetime
    updated_at: datetime
    completed: bool
    turn_count: int
    event_count: int
    mode: str | None = None
    slug: str | None = None
    summary: str | None = None
    cwd: str | None = None


@dataclass(frozen=True, slots=True)
class TurnRecord:
    """A turn row: one user-driven interaction. `ordinal` is one-based within the session."""

    id: str
    session_id: str
    ordinal: int
    started_at: datetime
    updated_at: datetime
    completed: bool
    event_count: int
    terminal_event_id: str | None
    user_input_event_id: str | None
    final_response_event_id: str | None
    tools_called: tuple[str, ...]
    event_types: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class EventRecord:
    """An event row. `ordinal` is one-based within the turn; `seq` orders the whole session."""

    id: str
    session_id: str
    turn_id: str
    ordinal: int
    seq: int
    type: EventType
    timestamp: datetime
    terminal: bool
    text: str
    tool_name: str | None = None
    model: str | None = None
    originating_model: str | None = None
    call_id: str | None = None
    payload: dict[str, Any] | None = None
    line: int = 0


@dataclass(frozen=True, slots=True)
class FileTouch:
    """A tool call that named a file: the file_attention read model."""

    event_id: str
    session_id: str
    turn_id: str | None
    timestamp: datetime | None
    tool_name: str
    raw_path: str
    tail: str
    tail_is_absolute: bool
    worktree_root: str | None
    git_common_dir: str | None
    mutation: bool
    phase: str = "request"


@dataclass(frozen=True, slots=True)
class AssembledSession:
    """Everything one transcript contributes to the read model, written in one transaction."""

    session: SessionRecord
    turns: list[TurnRecord]
    events: list[EventRecord]
    touches: list[FileTouch]
