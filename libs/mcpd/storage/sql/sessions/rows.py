"""Session read-model records to SQL rows and back, row digests, and what search indexes."""

from __future__ import annotations

import hashlib
import json
import posixpath
from collections.abc import Iterable, Mapping
from typing import Any

from mcpd.sessions.model import (
    AssembledSession,
    EventRecord,
    EventType,
    FileTouch,
    SessionRecord,
    TurnRecord,
)
from mcpd.storage.sql.convert import datetime_of, nanos
from mcpd.storage.stored_json import scrub_nul

Row = dict[str, Any]
# A row as read back (a dict, or SQLAlchemy's RowMapping).
RowLike = Mapping[Any, Any]


def digest(value: Any) -> str:
    """A short, stable digest of a JSON-able value."""
    return _hash(_encode(value))


def with_hash(row: Row) -> Row:
    """`row`, cleaned (see `clean`), with its `row_hash`: the digest of everything else."""
    cleaned = {
        name: scrub_nul(value) if isinstance(value, str) else value for name, value in row.items()
    }
    encoded = _encode(cleaned)
    if "\\u0000" in encoded:  # a NUL inside a JSON document (or a harmless look-alike)
        cleaned = clean(cleaned)
        encoded = _encode(cleaned)
    cleaned["row_hash"] = _hash(encoded)
    return cleaned


def clean(row: Row) -> Row:
    """`row` with each NUL character, in text or inside a JSON document, replaced by U+FFFD:
    PostgreSQL refuses NUL in both, and both backends store the same thing."""
    return {name: scrub_nul(value) for name, value in row.items()}


def _encode(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def _hash(encoded: str) -> str:
    return hashlib.blake2b(encoded.encode("utf-8"), digest_size=16).hexdigest()


def session_row(project: str, session: SessionRecord) -> Row:
    """The sessions row, without `content_hash` and `version` (the writer sets them)."""
    return clean(
        {
            "project": project,
            "id": session.id,
            "source": session.source,
            "harness": session.harness,
            "session_key": session.session_key,
            "path": session.path,
            "title": session.title,
            "display_label": session.display_label,
            "started_at": nanos(session.started_at),
            "updated_at": nanos(session.updated_at),
            "completed": session.completed,
            "turn_count": session.turn_count,
            "event_count": session.event_count,
            "mode": session.mode,
            "slug": session.slug,
            "summary": session.summary,
            "cwd": session.cwd,
        }
    )


def turn_row(project: str, turn: TurnRecord) -> Row:
    """A turns row with its row hash."""
    return with_hash(
        {
            "project": project,
            "id": turn.id,
            "session_id": turn.session_id,
            "ordinal": turn.ordinal,
            "started_at": nanos(turn.started_at),
            "updated_at": nanos(turn.updated_at),
            "completed": turn.completed,
            "event_count": turn.event_count,
            "terminal_event_id": turn.terminal_event_id,
            "user_input_event_id": turn.user_input_event_id,
            "final_response_event_id": turn.final_response_event_id,
            "tools_called": list(turn.tools_called),
            "event_types": list(turn.event_types),
        }
    )


def event_row(project: str, event: EventRecord, *, harness: str, source: str) -> Row:
    """An events row with its row hash (harness and source included: they are filtered on)."""
    return with_hash(_event_fields(project, event, harness, source, event.seq))


def trace_event_row(project: str, event: EventRecord, *, harness: str, source: str) -> Row:
    """An events row of a session built from traces. Its row hash leaves `seq` out: a trace
    turn's events take their seq from the turn's ordinal, which moves when a trace sorts before
    the turn; the writer then sets the seq of the turn's stored rows in place
    (`mcpd.sessions.traces.SessionChange`), and an unchanged row must still hash the same. The
    text is digested apart from the other columns' JSON, so it is hashed but never escaped:
    these rows are built inside the trace store's write transaction."""
    row = _event_fields(project, event, harness, source, event.seq)
    for name in _TEXT_COLUMNS:
        value = row[name]
        if value and "\x00" in value:
            row[name] = value.replace("\x00", "\ufffd")
    if row["payload"] is not None:
        row["payload"] = scrub_nul(row["payload"])
    head = _encode([row[name] for name in _TRACE_EVENT_HASHED])
    digest = hashlib.blake2b(head.encode("utf-8"), digest_size=16, person=b"mcpd-trace-evt")
    digest.update(row["text"].encode("utf-8", "surrogatepass"))
    row["row_hash"] = digest.hexdigest()
    return row


# What a trace event's row hash covers beside its text: every column but `seq` and the hash.
_TRACE_EVENT_HASHED = (
    "project",
    "id",
    "session_id",
    "turn_id",
    "ordinal",
    "type",
    "timestamp_ns",
    "terminal",
    "tool_name",
    "model",
    "originating_model",
    "call_id",
    "payload",
    "line",
    "harness",
    "source",
)
# The columns of an events row that hold text.
_TEXT_COLUMNS = (
    "project",
    "id",
    "session_id",
    "turn_id",
    "text",
    "tool_name",
    "model",
    "originating_model",
    "call_id",
    "harness",
    "source",
)


def _event_fields(project: str, event: EventRecord, harness: str, source: str, seq: int) -> Row:
    return {
        "project": project,
        "id": event.id,
        "session_id": event.session_id,
        "turn_id": event.turn_id,
        "ordinal": event.ordinal,
        "seq": seq,
        "type": str(event.type),
        "timestamp_ns": nanos(event.timestamp),
        "terminal": event.terminal,
        "text": event.text,
        "tool_name": event.tool_name,
        "model": event.model,
        "originating_model": event.originating_model,
        "call_id": event.call_id,
        "payload": event.payload,
        "line": event.line,
        "harness": harness,
        "source": source,
    }


def touch_row(project: str, position: int, touch: FileTouch, *, harness: str, source: str) -> Row:
    """A file_touches row; `position` is the touch's index in the assembled session."""
    return clean(
        {
            "project": project,
            "session_id": touch.session_id,
            "position": position,
            "event_id": touch.event_id,
            "turn_id": touch.turn_id,
            "timestamp_ns": nanos(touch.timestamp) if touch.timestamp is not None else None,
            "tool_name": touch.tool_name,
            "raw_path": touch.raw_path,
            "tail": touch.tail,
            "basename": basename(touch.tail),
            "tail_is_absolute": touch.tail_is_absolute,
            "worktree_root": touch.worktree_root,
            "git_common_dir": touch.git_common_dir,
            "mutation": touch.mutation,
            "phase": touch.phase,
            "harness": harness,
            "source": source,
        }
    )


def basename(tail: str) -> str:
    """The last component of a tail (what a tail or path-suffix lookup is indexed by)."""
    return posixpath.basename(tail.rstrip("/"))


def content_hash(
    session: Row, turns: Iterable[Row], events: Iterable[Row], touches: Iterable[Row]
) -> str:
    """The digest of a whole assembled session: equal digests mean an identical re-write."""
    return digest(
        {
            "session": session,
            "turns": [row["row_hash"] for row in turns],
            "events": [row["row_hash"] for row in events],
            "touches": digest(list(touches)),
        }
    )


def rows_of(
    project: str, assembled: AssembledSession
) -> tuple[Row, list[Row], list[Row], list[Row]]:
    """The session, turn, event and touch rows of one assembled session."""
    session = assembled.session
    where = {"harness": session.harness, "source": session.source}
    return (
        session_row(project, session),
        [turn_row(project, turn) for turn in assembled.turns],
        [event_row(project, event, **where) for event in assembled.events],
        [touch_row(project, i, touch, **where) for i, touch in enumerate(assembled.touches)],
    )


def is_searchable(row: RowLike) -> bool:
    """Whether an event is indexed: not `unknown` (never searchable), not one of the MCP
    server's own calls (`payload.self_tool`), and with something to find."""
    payload = row["payload"]
    if isinstance(payload, Mapping) and payload.get("self_tool"):
        return False
    return row["type"] != EventType.UNKNOWN.value and bool(row["text"] or row["tool_name"])


def search_text(row: RowLike) -> str:
    """What is searched for an event: its text, and its tool name."""
    text: str = row["text"]
    return f"{text}\n{row['tool_name']}" if row["tool_name"] else text


def session_of(row: RowLike) -> SessionRecord:
    """The SessionRecord of a sessions row."""
    return SessionRecord(
        id=row["id"],
        project=row["project"],
        source=row["source"],
        harness=row["harness"],
        session_key=row["session_key"],
        path=row["path"],
        title=row["title"],
        display_label=row["display_label"],
        started_at=datetime_of(row["started_at"]),
        updated_at=datetime_of(row["updated_at"]),
        completed=row["completed"],
        turn_count=row["turn_count"],
        event_count=row["event_count"],
        mode=row["mode"],
        slug=row["slug"],
        summary=row["summary"],
        cwd=row["cwd"],
    )


def turn_of(row: RowLike) -> TurnRecord:
    """The TurnRecord of a turns row."""
    return TurnRecord(
        id=row["id"],
        session_id=row["session_id"],
        ordinal=row["ordinal"],
        started_at=datetime_of(row["started_at"]),
        updated_at=datetime_of(row["updated_at"]),
        completed=row["completed"],
        event_count=row["event_count"],
        terminal_event_id=row["terminal_event_id"],
        user_input_event_id=row["user_input_event_id"],
        final_response_event_id=row["final_response_event_id"],
        tools_called=tuple(row["tools_called"]),
        event_types=tuple(row["event_types"]),
    )


def event_of(row: RowLike) -> EventRecord:
    """The EventRecord of an events row."""
    return EventRecord(
        id=row["id"],
        session_id=row["session_id"],
        turn_id=row["turn_id"],
        ordinal=row["ordinal"],
        seq=row["seq"],
        type=EventType(row["type"]),
        timestamp=datetime_of(row["timestamp_ns"]),
        terminal=row["terminal"],
        text=row["text"],
        tool_name=row["tool_name"],
        model=row["model"],
        originating_model=row["originating_model"],
        call_id=row["call_id"],
        payload=row["payload"],
        line=row["line"],
    )


def touch_of(row: RowLike) -> FileTouch:
    """The FileTouch of a file_touches row."""
    stamp = row["timestamp_ns"]
    return FileTouch(
        event_id=row["event_id"],
        session_id=row["session_id"],
        turn_id=row["turn_id"],
        timestamp=datetime_of(stamp) if stamp is not None else None,
        tool_name=row["tool_name"],
        raw_path=row["raw_path"],
        tail=row["tail"],
        tail_is_absolute=row["tail_is_absolute"],
        worktree_root=row["worktree_root"],
        git_common_dir=row["git_common_dir"],
        mutation=row["mutation"],
        phase=row["phase"],
    )
