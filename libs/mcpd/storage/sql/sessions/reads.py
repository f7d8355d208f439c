"""The read queries of the session store, each served by one index led by `project`."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from sqlalchemy import (
    ColumnElement,
    Connection,
    Select,
    Table,
    bindparam,
    func,
    or_,
    select,
    tuple_,
)

from mcpd.sessions.model import EventRecord, FileTouch, SessionRecord, TurnRecord
from mcpd.sessions.store import SessionListQuery, TouchQuery
from mcpd.storage.sql.convert import nanos
from mcpd.storage.sql.schema.sessions import (
    events,
    file_touches,
    session_versions,
    sessions,
    turns,
)
from mcpd.storage.sql.sessions.rows import (
    RowLike,
    basename,
    event_of,
    session_of,
    touch_of,
    turn_of,
)
from mcpd.storage.sql.sessions.writes import chunks

Ends = tuple[str | None, str | None]
R = TypeVar("R")


def snapshot(conn: Connection, project: str) -> int:
    """The project's read-model version (0 before its first write)."""
    version = conn.execute(
        select(session_versions.c.version).where(session_versions.c.project == project)
    ).scalar_one_or_none()
    return int(version or 0)


def session_version(conn: Connection, project: str, session_id: str) -> int | None:
    """The project version at which the session was last written, or None."""
    version = conn.execute(
        select(sessions.c.version).where(sessions.c.project == project, sessions.c.id == session_id)
    ).scalar_one_or_none()
    return None if version is None else int(version)


def get_session(conn: Connection, project: str, session_id: str) -> SessionRecord | None:
    """One session, or None."""
    row = _by_id(conn, sessions, project, session_id)
    return session_of(row) if row is not None else None


def get_turn(conn: Connection, project: str, turn_id: str) -> TurnRecord | None:
    """One turn, or None."""
    row = _by_id(conn, turns, project, turn_id)
    return turn_of(row) if row is not None else None


def get_event(conn: Connection, project: str, event_id: str) -> EventRecord | None:
    """One event, or None."""
    row = _by_id(conn, events, project, event_id)
    return event_of(row) if row is not None else None


def events_by_id(conn: Connection, project: str, ids: Sequence[str]) -> dict[str, EventRecord]:
    """The events with these ids that exist, by id."""
    return _records_by_id(conn, events, project, ids, event_of)


def turns_by_id(conn: Connection, project: str, ids: Sequence[str]) -> dict[str, TurnRecord]:
    """The turns with these ids that exist, by id."""
    return _records_by_id(conn, turns, project, ids, turn_of)


def sessions_by_id(conn: Connection, project: str, ids: Sequence[str]) -> dict[str, SessionRecord]:
    """The sessions with these ids that exist, by id."""
    return _records_by_id(conn, sessions, project, ids, session_of)


def list_turns(
    conn: Connection, project: str, session_id: str, after_ordinal: int, limit: int
) -> list[TurnRecord]:
    """The session's turns after `after_ordinal`, ascending."""
    rows = conn.execute(
        select(turns)
        .where(turns.c.project == project, turns.c.session_id == session_id)
        .where(turns.c.ordinal > after_ordinal)
        .order_by(turns.c.ordinal, turns.c.id)
        .limit(limit)
    )
    return [turn_of(row._mapping) for row in rows]


def list_events(
    conn: Connection, project: str, turn_id: str, after_ordinal: int, limit: int
) -> list[EventRecord]:
    """The turn's events after `after_ordinal`, ascending."""
    rows = conn.execute(
        select(events)
        .where(events.c.project == project, events.c.turn_id == turn_id)
        .where(events.c.ordinal > after_ordinal)
        .order_by(events.c.ordinal, events.c.id)
        .limit(limit)
    )
    return [event_of(row._mapping) for row in rows]


def neighbour_turns(conn: Connection, project: str, turn: TurnRecord) -> Ends:
    """The turns just before and after `turn` in its session, by ordinal."""
    where = [turns.c.project == project, turns.c.session_id == turn.session_id]
    key = tuple_(turns.c.ordinal, turns.c.id)
    anchor = tuple_(turn.ordinal, turn.id)
    order = (turns.c.ordinal, turns.c.id)
    return (
        _first_id(conn, turns, [*where, key < anchor], order, descending=True),
        _first_id(conn, turns, [*where, key > anchor], order, descending=False),
    )


def neighbour_events(conn: Connection, project: str, event: EventRecord) -> Ends:
    """The events just before and after `event` in session order (seq, then id)."""
    where = [events.c.project == project, events.c.session_id == event.session_id]
    key = tuple_(events.c.seq, events.c.id)
    anchor = tuple_(event.seq, event.id)
    order = (events.c.seq, events.c.id)
    return (
        _first_id(conn, events, [*where, key < anchor], order, descending=True),
        _first_id(conn, events, [*where, key > anchor], order, descending=False),
    )


def neighbour_sessions(conn: Connection, project: str, session: SessionRecord) -> Ends:
    """The sessions just before and after `session` by (started_at, id) in its source."""
    where = [sessions.c.project == project, sessions.c.source == session.source]
    key = tuple_(sessions.c.started_at, sessions.c.id)
    anchor = tuple_(nanos(session.started_at), session.id)
    order = (sessions.c.started_at, sessions.c.id)
    return (
        _first_id(conn, sessions, [*where, key < anchor], order, descending=True),
        _first_id(conn, sessions, [*where, key > anchor], order, descending=False),
    )


def edge_turns(conn: Connection, project: str, session_id: str) -> Ends:
    """The first and last turns of a session."""
    where = [turns.c.project == project, turns.c.session_id == session_id]
    order = (turns.c.ordinal, turns.c.id)
    return (
        _first_id(conn, turns, where, order, descending=False),
        _first_id(conn, turns, where, order, descending=True),
    )


def edge_events(conn: Connection, project: str, turn_id: str) -> Ends:
    """The first and last events of a turn."""
    where = [events.c.project == project, events.c.turn_id == turn_id]
    order = (events.c.ordinal, events.c.id)
    return (
        _first_id(conn, events, where, order, descending=False),
        _first_id(conn, events, where, order, descending=True),
    )


def list_sessions(conn: Connection, query: SessionListQuery) -> list[SessionRecord]:
    """Sessions with updated_at >= start and started_at < end, by (updated_at, id)."""
    c = sessions.c
    where: list[ColumnElement[bool]] = [
        c.project == query.project,
        c.updated_at >= nanos(query.start),
        c.started_at < nanos(query.end),
    ]
    for column, value in (
        (c.mode, query.mode),
        (c.harness, query.harness),
        (c.source, query.source),
    ):
        if value is not None:
            where.append(column == value)
    if query.after is not None:
        key = tuple_(c.updated_at, c.id)
        anchor = tuple_(nanos(query.after[0]), query.after[1])
        where.append(key < anchor if query.descending else key > anchor)
    order = [c.updated_at, c.id]
    statement = select(sessions).where(*where).limit(query.limit)
    statement = statement.order_by(*(col.desc() if query.descending else col for col in order))
    return [session_of(row._mapping) for row in conn.execute(statement)]


def touches(conn: Connection, query: TouchQuery) -> tuple[list[FileTouch], bool]:
    """Touches whose tail is `query.tail` or ends with `/` + it, newest first (unknown times
    last), and whether more than `limit` matched."""
    c = file_touches.c
    where: list[ColumnElement[bool]] = [
        c.project == query.project,
        c.basename == basename(query.tail),
        or_(c.tail == query.tail, c.tail.endswith("/" + query.tail, autoescape=True)),
    ]
    if query.start is not None:
        where.append(c.timestamp_ns >= nanos(query.start))
    if query.end is not None:
        where.append(c.timestamp_ns < nanos(query.end))
    if query.tool is not None:
        where.append(func.lower(c.tool_name) == query.tool.lower())
    exact = (
        (c.harness, query.harness),
        (c.source, query.source),
        (c.git_common_dir, query.git_common_dir),
    )
    where.extend(column == value for column, value in exact if value is not None)
    if query.mutations_only:
        where.append(c.mutation.is_(True))
    statement = (
        select(file_touches)
        .where(*where)
        .order_by(c.timestamp_ns.desc().nulls_last(), c.session_id, c.position)
        .limit(query.limit + 1)
    )
    found = [touch_of(row._mapping) for row in conn.execute(statement)]
    return found[: query.limit], len(found) > query.limit


def session_of_key(
    conn: Connection, project: str, source: str, session_key: str
) -> SessionRecord | None:
    """The session a transcript's own id maps to (the first by id, should there be two)."""
    row = conn.execute(
        select(sessions)
        .where(sessions.c.project == project, sessions.c.source == source)
        .where(sessions.c.session_key == session_key)
        .order_by(sessions.c.id)
        .limit(1)
    ).first()
    return session_of(row._mapping) if row is not None else None


def _records_by_id(
    conn: Connection,
    table: Table,
    project: str,
    ids: Sequence[str],
    record_of: Callable[[RowLike], R],
) -> dict[str, R]:
    """One query per CHUNK ids (an IN list of bound parameters has a ceiling on every backend)."""
    found: dict[str, R] = {}
    statement = _BY_IDS[table.name]
    for chunk in chunks(ids):
        rows = conn.execute(statement, {"project": project, "ids": chunk})
        found.update((row.id, record_of(row._mapping)) for row in rows)
    return found


def _by_id(conn: Connection, table: Table, project: str, row_id: str) -> Any:
    row = conn.execute(_BY_ID[table.name], {"project": project, "id": row_id}).first()
    return row._mapping if row is not None else None


# The point reads of the tools' hot paths, built once: building a statement costs SQLAlchemy
# more than the database takes to answer it.
def _by_ids_statement(table: Table) -> Select[Any]:
    return select(table).where(
        table.c.project == bindparam("project"), table.c.id.in_(bindparam("ids", expanding=True))
    )


def _by_id_statement(table: Table) -> Select[Any]:
    return select(table).where(
        table.c.project == bindparam("project"), table.c.id == bindparam("id")
    )


_BY_IDS = {table.name: _by_ids_statement(table) for table in (events, turns, sessions)}
_BY_ID = {table.name: _by_id_statement(table) for table in (events, turns, sessions)}


def _first_id(
    conn: Connection,
    table: Table,
    where: Sequence[ColumnElement[bool]],
    order: Sequence[Any],
    *,
    descending: bool,
) -> str | None:
    ordering = [column.desc() if descending else column for column in order]
    found = conn.execute(select(table.c.id).where(*where).order_by(*ordering).limit(1))
    value = found.scalar_one_or_none()
    return str(value) if value is not None else None
