"""Assembled sessions for the session store tests, built from a compact description."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
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

T0 = datetime(2026, 4, 29, 18, 0, 0, 125_000, tzinfo=UTC)
USER = EventType.USER_INPUT
ASSISTANT = EventType.ASSISTANT_RESPONSE
TOOL_CALL = EventType.TOOL_CALL
TOOL_RESPONSE = EventType.TOOL_RESPONSE
REASONING = EventType.REASONING

# One event: its type and text, optionally with extra EventRecord fields.
EventSpec = tuple[EventType, str] | tuple[EventType, str, dict[str, Any]]


def session_id(key: str) -> str:
    return f"session:{key}"


def turn_id(key: str, ordinal: int) -> str:
    return f"turn:{key}:{ordinal}"


def event_id(key: str, turn: int, ordinal: int) -> str:
    return f"event:{key}:{turn}:{ordinal}"


def assemble(
    key: str,
    turns: Sequence[Sequence[EventSpec]],
    *,
    project: str = "p",
    source: str = "codex",
    harness: str = "codex",
    start: datetime = T0,
    step: timedelta = timedelta(seconds=1),
    title: str | None = None,
    mode: str | None = None,
    touches: Sequence[dict[str, Any]] = (),
) -> AssembledSession:
    """A session `key` whose turns hold the given events, one `step` apart from `start`."""
    sid = session_id(key)
    turn_records: list[TurnRecord] = []
    event_records: list[EventRecord] = []
    moment = start
    seq = 0
    for turn_ordinal, specs in enumerate(turns, start=1):
        tid = turn_id(key, turn_ordinal)
        first = moment
        ids: list[str] = []
        for ordinal, spec in enumerate(specs, start=1):
            kind, text = spec[0], spec[1]
            extra: dict[str, Any] = spec[2] if len(spec) == 3 else {}
            seq += 1
            eid = event_id(key, turn_ordinal, ordinal)
            ids.append(eid)
            fields: dict[str, Any] = {"timestamp": moment, **extra}
            event_records.append(
                EventRecord(
                    id=eid,
                    session_id=sid,
                    turn_id=tid,
                    ordinal=ordinal,
                    seq=seq,
                    type=kind,
                    terminal=ordinal == len(specs),
                    text=text,
                    **fields,
                )
            )
            moment += step
        turn_records.append(
            TurnRecord(
                id=tid,
                session_id=sid,
                ordinal=turn_ordinal,
                started_at=first,
                updated_at=moment - step,
                completed=True,
                event_count=len(specs),
                terminal_event_id=ids[-1] if ids else None,
                user_input_event_id=ids[0] if ids else None,
                final_response_event_id=ids[-1] if ids else None,
                tools_called=("Bash",),
                event_types=tuple(sorted({str(spec[0]) for spec in specs})),
            )
        )
    session = SessionRecord(
        id=sid,
        project=project,
        source=source,
        harness=harness,
        session_key=key,
        path=f"/transcripts/{key}.jsonl",
        title=title,
        display_label=title or key,
        started_at=start,
        updated_at=max(start, moment - step),
        completed=True,
        turn_count=len(turn_records),
        event_count=len(event_records),
        mode=mode,
        cwd="/src/repo",
    )
    touch_records = [
        FileTouch(
            event_id=spec.get("event_id", event_records[0].id),
            session_id=sid,
            turn_id=spec.get("turn_id", event_records[0].turn_id),
            timestamp=spec.get("timestamp", start),
            tool_name=spec.get("tool_name", "Edit"),
            raw_path=spec.get("raw_path", "/src/repo/" + spec["tail"]),
            tail=spec["tail"],
            tail_is_absolute=spec.get("tail_is_absolute", False),
            worktree_root=spec.get("worktree_root", "/src/repo"),
            git_common_dir=spec.get("git_common_dir", "/src/repo/.git"),
            mutation=spec.get("mutation", True),
        )
        for spec in touches
    ]
    return AssembledSession(session, turn_records, event_records, touch_records)


def with_session(assembled: AssembledSession, **changes: Any) -> AssembledSession:
    """`assembled` with its session record changed."""
    return replace(assembled, session=replace(assembled.session, **changes))
