"""Builders of read-model sessions for the tool tests: records made directly, ids readable."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from typing import Any

from mcpd.sessions.model import (
    AssembledSession,
    EventRecord,
    EventType,
    FileTouch,
    SessionRecord,
    TurnRecord,
)

T0 = datetime(2026, 4, 29, 18, 41, 55, tzinfo=UTC)
PROJECT = "proj-a"
OTHER_PROJECT = "proj-b"


@dataclass(frozen=True)
class E:
    """One event to build: its type, text, and optional tool, terminal flag, model, payload
    and time (seconds after the session start; default one second after the previous)."""

    type: EventType
    text: str = ""
    tool: str | None = None
    terminal: bool = False
    model: str | None = None
    payload: dict[str, Any] | None = None
    at: float | None = None


def user(text: str, **kw: Any) -> E:
    """A user_input event."""
    return E(EventType.USER_INPUT, text, **kw)


def answer(text: str, *, final: bool = True, **kw: Any) -> E:
    """An assistant_response, terminal (the final answer) unless told otherwise."""
    return E(EventType.ASSISTANT_RESPONSE, text, terminal=final, **kw)


def call(tool: str, text: str, **kw: Any) -> E:
    """A tool_call."""
    return E(EventType.TOOL_CALL, text, tool=tool, **kw)


def output(tool: str, text: str, **kw: Any) -> E:
    """A tool_response."""
    return E(EventType.TOOL_RESPONSE, text, tool=tool, **kw)


def session_id(key: str) -> str:
    """The id `build` gives session `key`."""
    return f"session:ses_{key}"


def turn_id(key: str, turn: int) -> str:
    """The id of the turn with one-based ordinal `turn`."""
    return f"turn:turn_{key}_{turn}"


def event_id(key: str, turn: int, ordinal: int) -> str:
    """The id of event `ordinal` (one-based) of turn `turn`."""
    return f"event:evt_{key}_{turn}_{ordinal}"


def build(
    key: str,
    turns: Sequence[Sequence[E]],
    *,
    project: str = PROJECT,
    source: str = "codex",
    harness: str = "codex",
    title: str | None = None,
    start: datetime = T0,
    mode: str | None = None,
    slug: str | None = None,
    summary: str | None = None,
) -> AssembledSession:
    """A session with its turns and events, ordinals and summaries derived as ingest would."""
    sid = session_id(key)
    events: list[EventRecord] = []
    turn_rows: list[TurnRecord] = []
    clock = 0.0
    seq = 0
    for t_index, specs in enumerate(turns, start=1):
        tid = turn_id(key, t_index)
        mine: list[EventRecord] = []
        for e_index, spec in enumerate(specs, start=1):
            clock = spec.at if spec.at is not None else clock + 1
            seq += 1
            mine.append(
                EventRecord(
                    id=event_id(key, t_index, e_index),
                    session_id=sid,
                    turn_id=tid,
                    ordinal=e_index,
                    seq=seq,
                    type=spec.type,
                    timestamp=start + timedelta(seconds=clock),
                    terminal=spec.terminal,
                    text=spec.text,
                    tool_name=spec.tool,
                    model=spec.model,
                    originating_model=spec.model,
                    payload=spec.payload,
                )
            )
        events += mine
        turn_rows.append(_turn(tid, sid, t_index, mine))
    session = SessionRecord(
        id=sid,
        project=project,
        source=source,
        harness=harness,
        session_key=key,
        path=f"/transcripts/{key}.jsonl",
        title=title,
        display_label=title or (events[0].text.split("\n")[0][:120] if events else key),
        started_at=events[0].timestamp if events else start,
        updated_at=events[-1].timestamp if events else start,
        completed=bool(turn_rows) and turn_rows[-1].completed,
        turn_count=len(turn_rows),
        event_count=len(events),
        mode=mode,
        slug=slug,
        summary=summary,
    )
    return AssembledSession(session, turn_rows, events, [])


def _turn(tid: str, sid: str, ordinal: int, events: list[EventRecord]) -> TurnRecord:
    terminal = next((e for e in events if e.terminal), None)
    first_user = next((e for e in events if e.type is EventType.USER_INPUT), None)
    final = terminal if terminal and terminal.type is EventType.ASSISTANT_RESPONSE else None
    return TurnRecord(
        id=tid,
        session_id=sid,
        ordinal=ordinal,
        started_at=events[0].timestamp,
        updated_at=events[-1].timestamp,
        completed=terminal is not None,
        event_count=len(events),
        terminal_event_id=terminal.id if terminal else None,
        user_input_event_id=first_user.id if first_user else None,
        final_response_event_id=final.id if final else None,
        tools_called=tuple(dict.fromkeys(e.tool_name for e in events if e.tool_name)),
        event_types=tuple(dict.fromkeys(e.type.value for e in events)),
    )


def touch(
    assembled: AssembledSession,
    turn: int,
    ordinal: int,
    *,
    tail: str,
    root: str | None,
    common: str | None = None,
    raw: str | None = None,
    tool: str = "Edit",
    mutation: bool = True,
    joined: bool = True,
) -> FileTouch:
    """A touch by event (turn, ordinal) of the session; `joined=False` drops the trace join
    (no turn id, unknown time). A None root leaves the tail absolute (root unknown)."""
    event = next(
        e
        for e in assembled.events
        if e.id == event_id(assembled.session.session_key, turn, ordinal)
    )
    absolute = root is None
    return FileTouch(
        event_id=event.id,
        session_id=event.session_id,
        turn_id=event.turn_id if joined else None,
        timestamp=event.timestamp if joined else None,
        tool_name=tool,
        raw_path=raw or (f"{root}/{tail}" if root else tail),
        tail=(raw or tail) if absolute else tail,
        tail_is_absolute=absolute,
        worktree_root=root,
        git_common_dir=common,
        mutation=mutation,
    )


def with_touches(assembled: AssembledSession, touches: Sequence[FileTouch]) -> AssembledSession:
    """The session with these file touches."""
    return replace(assembled, touches=list(touches))
