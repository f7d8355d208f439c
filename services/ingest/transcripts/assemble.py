"""A parsed transcript into session, turn, event and file-touch rows (spec: Session > Turn >
Event, Completion Status, Opening A Session, list_sessions display_label, file_attention).

- Turns: a new turn begins at each event with `starts_turn` (a genuine prompt, or the setup
  the parser attached to it); events before the first one form turn 1 (no user input).
- Order: transcript line, then the parser's order within a line. Ordinals are one-based: a
  turn within its session, an event within its turn; `seq` runs across the session.
- Completion: a turn is completed when its last terminal event completes it.
- Times: an event without a timestamp takes the previous event's (the first known one at the
  start); a file without any uses `fallback_time` (else the epoch).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime

from mcpd.sessions.model import (
    AssembledSession,
    EventRecord,
    EventType,
    FileTouch,
    ParsedEvent,
    ParsedSession,
    SessionRecord,
    TurnRecord,
)
from services.ingest.transcripts.keys import event_id, session_id, turn_id
from services.ingest.transcripts.parsers._common import UniqueKeys
from services.ingest.transcripts.paths import WorktreeResolver
from services.ingest.transcripts.text import preview

__all__ = [
    "assemble",
    "display_label",
    "event_record",
    "format_time",
    "tool_call_models",
    "turn_record",
    "turn_touches",
]

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def assemble(
    parsed: ParsedSession,
    *,
    source: str,
    project: str,
    path: str,
    fallback_time: datetime | None = None,
) -> AssembledSession:
    """All rows one transcript contributes to the read model."""
    sid = session_id(source, parsed.session_key)
    parsed_events = sorted(parsed.events, key=lambda event: event.line)
    unique = UniqueKeys()
    keys = [unique.claim(event.key) for event in parsed_events]
    times = _times(parsed_events, fallback_time)
    call_models = tool_call_models(parsed_events)

    groups: list[list[int]] = []
    for index, event in enumerate(parsed_events):
        if event.starts_turn or not groups:
            groups.append([])
        groups[-1].append(index)

    turns: list[TurnRecord] = []
    events: list[EventRecord] = []
    touches: list[FileTouch] = []
    resolver = WorktreeResolver()
    for ordinal, group in enumerate(groups, start=1):
        tid = turn_id(sid, keys[group[0]])
        for position, index in enumerate(group, start=1):
            event = parsed_events[index]
            record = event_record(
                event,
                event_id(sid, keys[index]),
                session_id=sid,
                turn_id=tid,
                ordinal=position,
                seq=index + 1,
                timestamp=times[index],
                call_models=call_models,
            )
            events.append(record)
            touches.extend(turn_touches(event, record, parsed.cwd, resolver))
        turns.append(
            turn_record(tid, sid, ordinal, [parsed_events[i] for i in group], events[-len(group) :])
        )

    prompt = next((e.text for e in parsed_events if e.type is EventType.USER_INPUT), None)
    prompt_preview = preview(prompt) if prompt is not None else ""
    title = _clean(parsed.title) or prompt_preview or None
    started_at = min(times) if times else (fallback_time or _EPOCH)
    updated_at = max(times) if times else (fallback_time or _EPOCH)
    mode = parsed.mode or (
        "tool_calling" if any(e.type is EventType.TOOL_CALL for e in parsed_events) else "chat"
    )
    session = SessionRecord(
        id=sid,
        project=project,
        source=source,
        harness=parsed.harness,
        session_key=parsed.session_key,
        path=path,
        title=title,
        display_label=display_label(
            title=title,
            prompt_preview=prompt_preview,
            summary=parsed.summary,
            slug=parsed.slug,
            harness=parsed.harness,
            updated_at=_utc(updated_at),
            turn_count=len(turns),
        ),
        started_at=_utc(started_at),
        updated_at=_utc(updated_at),
        completed=turns[-1].completed if turns else False,
        turn_count=len(turns),
        event_count=len(events),
        mode=mode,
        slug=parsed.slug,
        summary=parsed.summary,
        cwd=parsed.cwd,
    )
    return AssembledSession(session=session, turns=turns, events=events, touches=touches)


def tool_call_models(events: Sequence[ParsedEvent]) -> dict[str | None, str | None]:
    """The model of each tool call, by call id (a tool response's originating model)."""
    return {e.call_id: e.model for e in events if e.type is EventType.TOOL_CALL}


def event_record(
    event: ParsedEvent,
    eid: str,
    *,
    session_id: str,
    turn_id: str,
    ordinal: int,
    seq: int,
    timestamp: datetime,
    call_models: Mapping[str | None, str | None],
) -> EventRecord:
    """The row of one parsed event, with its id and place."""
    originating = event.model
    if originating is None and event.type is EventType.TOOL_RESPONSE:
        originating = call_models.get(event.call_id)
    return EventRecord(
        id=eid,
        session_id=session_id,
        turn_id=turn_id,
        ordinal=ordinal,
        seq=seq,
        type=event.type,
        timestamp=timestamp,
        terminal=event.terminal,
        text=event.text,
        tool_name=event.tool_name,
        model=event.model,
        originating_model=originating,
        call_id=event.call_id,
        payload=event.payload,
        line=event.line,
    )


def turn_record(
    tid: str, sid: str, ordinal: int, parsed: Sequence[ParsedEvent], rows: Sequence[EventRecord]
) -> TurnRecord:
    """The row of one turn of `rows` (made from `parsed`, in order)."""
    last = next((i for i in reversed(range(len(rows))) if rows[i].terminal), None)
    terminal = rows[last] if last is not None else None
    completed = last is not None and parsed[last].completes_turn
    final = None
    if completed:
        final = next(
            (
                row
                for row in reversed(rows)
                if row.type is EventType.ASSISTANT_RESPONSE
                and not (row.payload or {}).get("sidechain")
            ),
            None,
        )
    user_input = next((row for row in rows if row.type is EventType.USER_INPUT), None)
    tools = [row.tool_name for row in rows if row.type is EventType.TOOL_CALL and row.tool_name]
    types = [row.type.value for row in rows if row.type is not EventType.UNKNOWN]
    return TurnRecord(
        id=tid,
        session_id=sid,
        ordinal=ordinal,
        started_at=min(row.timestamp for row in rows),
        updated_at=max(row.timestamp for row in rows),
        completed=completed,
        event_count=len(rows),
        terminal_event_id=terminal.id if terminal is not None else None,
        user_input_event_id=user_input.id if user_input is not None else None,
        final_response_event_id=final.id if final is not None else None,
        tools_called=tuple(dict.fromkeys(tools)),
        event_types=tuple(dict.fromkeys(types)),
    )


def turn_touches(
    event: ParsedEvent, record: EventRecord, session_cwd: str | None, resolver: WorktreeResolver
) -> list[FileTouch]:
    """The file touches of one event's row (a tool call naming files)."""
    if event.type is not EventType.TOOL_CALL:
        return []
    touches = []
    for raw in dict.fromkeys(event.file_paths):
        resolved = resolver.resolve(raw, event.cwd or session_cwd)
        touches.append(
            FileTouch(
                event_id=record.id,
                session_id=record.session_id,
                turn_id=record.turn_id,
                timestamp=record.timestamp,
                tool_name=event.tool_name or "",
                raw_path=raw,
                tail=resolved.tail,
                tail_is_absolute=resolved.tail_is_absolute,
                worktree_root=resolved.worktree_root,
                git_common_dir=resolved.git_common_dir,
                mutation=event.mutation,
            )
        )
    return touches


def _times(events: Sequence[ParsedEvent], fallback: datetime | None) -> list[datetime]:
    known = next((e.timestamp for e in events if e.timestamp is not None), None)
    previous = _utc(known or fallback or _EPOCH)
    times = []
    for event in events:
        if event.timestamp is not None:
            previous = _utc(event.timestamp)
        times.append(previous)
    return times


def _utc(moment: datetime) -> datetime:
    if moment.tzinfo is None:
        return moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC)


def _clean(value: str | None) -> str | None:
    return value.strip() if value and value.strip() else None


def format_time(moment: datetime) -> str:
    """RFC 3339 UTC with milliseconds (spec: Time Format), e.g. 2026-04-29T18:42:31.125Z."""
    utc = _utc(moment)
    return utc.strftime("%Y-%m-%dT%H:%M:%S.") + f"{utc.microsecond // 1000:03d}Z"


def display_label(
    *,
    title: str | None,
    prompt_preview: str | None,
    summary: str | None,
    slug: str | None,
    harness: str,
    updated_at: datetime,
    turn_count: int,
) -> str:
    """The list_sessions label: the title, else the first genuine prompt's preview, else the
    summary, else the slug (blank values skipped), else `<harness> session · <updated_at> ·
    N turns`."""
    for candidate in (title, prompt_preview, summary, slug):
        if candidate and candidate.strip():
            return candidate.strip()
    turns = "1 turn" if turn_count == 1 else f"{turn_count} turns"
    return f"{harness} session · {format_time(updated_at)} · {turns}"
