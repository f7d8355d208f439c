"""Trace sessions on SQLite and PostgreSQL: the session side of one trace-store write.

`SqlTraceTurns` works on the trace store's own transaction (`mcpd.sessions.traces`): what it
writes commits, or rolls back, with the spans. Reads go through the indexes led by `project`
(trace states by trace, by session key and by session id; turns and events by id and turn;
touches by position; spans by trace and by session id).

Locks (PostgreSQL): the trace store's writer already holds the lock of each trace it writes;
`lock_sessions` adds a transaction-scoped advisory lock per session, taken after those in key
order, so two writers of traces of one session take turns: the second reads the first's
states once it has committed, and neither loses the other's turns. `apply` then bumps the
project's read-model version, whose row lock serialises the project's read-model writers until
commit, as a transcript import's does. SQLite's BEGIN IMMEDIATE already made this the only
writer.

`apply` writes each change's rows with one version for the whole write: the session row, the
turns and events that differ (by row hash), the touches from the first position that moved,
and the trace states. The search side writes its part in the same transaction (PostgreSQL) or
after the commit (`after_commit`: the tantivy index).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from sqlalchemy import Connection, delete, select

from mcpd.sessions.model import EventRecord, FileTouch
from mcpd.sessions.traces import PlacedTurn, SessionChange, TraceTurn
from mcpd.signals.rows import SESSION_SPAN_COLUMNS, SpanRow
from mcpd.storage.sql.dialect import SqlDialect
from mcpd.storage.sql.schema.sessions import (
    events,
    file_touches,
    sessions,
    trace_turns,
    turns,
)
from mcpd.storage.sql.schema.trace import spans
from mcpd.storage.sql.sessions.rows import (
    Row,
    clean,
    digest,
    event_of,
    event_row,
    session_row,
    touch_of,
    touch_row,
    turn_of,
    turn_row,
)
from mcpd.storage.sql.sessions.writes import (
    SearchSide,
    Written,
    bump_version,
    chunks,
    delete_ids,
    insert_rows,
    replace_among,
)
from mcpd.storage.sql.signals.statements import lock_key, take_locks

_LOCK_KIND = b"mcpd-session"


class SqlTraceTurns:
    """The trace-session side of one write, on the write's connection (see the module
    docstring). `after_commit` takes a search backend's `after_commit`."""

    def __init__(
        self,
        conn: Connection,
        dialect: SqlDialect,
        search: SearchSide,
        after: Callable[[Written], None],
    ) -> None:
        self._conn = conn
        self._dialect = dialect
        self._search = search
        self._after = after
        self._written: list[Written] = []

    @contextmanager
    def savepoint(self) -> Iterator[None]:
        """A SAVEPOINT: what runs inside is undone alone when it raises."""
        try:
            with self._conn.begin_nested():
                yield
        except BaseException:
            self._written.clear()
            raise

    def trace_turns(self, project: str, trace_ids: Sequence[str]) -> dict[str, TraceTurn]:
        """The stored states of these traces, by trace id."""
        found: dict[str, TraceTurn] = {}
        c = trace_turns.c
        for chunk in chunks(list(trace_ids)):
            result = self._conn.execute(
                select(trace_turns).where(c.project == project, c.trace_id.in_(chunk))
            )
            for row in result.mappings():
                found[row["trace_id"]] = _state_of(row)
        return found

    def lock_sessions(self, project: str, session_keys: Sequence[str]) -> None:
        """One advisory lock per session (PostgreSQL), in key order."""
        keys = [lock_key(_LOCK_KIND, project, key) for key in session_keys]
        take_locks(self._conn, self._dialect, keys)

    def sessions_by_key(self, project: str, session_keys: Sequence[str]) -> dict[str, str]:
        """The source of each session with trace states, by session key."""
        c = trace_turns.c
        found: dict[str, str] = {}
        for chunk in chunks(list(session_keys)):
            statement = (
                select(c.session_key, c.source)
                .where(c.project == project, c.session_key.in_(chunk))
                .distinct()
            )
            found.update((str(k), str(v)) for k, v in self._conn.execute(statement))
        return found

    def stored_sessions(self, project: str, session_ids: Sequence[str]) -> set[str]:
        """The ids among `session_ids` that have a session row."""
        found: set[str] = set()
        for chunk in chunks(list(session_ids)):
            statement = select(sessions.c.id).where(
                sessions.c.project == project, sessions.c.id.in_(chunk)
            )
            found.update(self._conn.execute(statement).scalars())
        return found

    def placed_turns(self, project: str, session_ids: Sequence[str]) -> dict[str, list[PlacedTurn]]:
        """The stored turns of these sessions that have trace states, in ordinal order."""
        t = trace_turns.c
        placed: dict[str, list[PlacedTurn]] = {}
        for chunk in chunks(list(session_ids)):
            statement = (
                select(turns, t.trace_id, t.start_ns, t.prompt, t.touches)
                .join(
                    trace_turns,
                    (t.project == turns.c.project)
                    & (t.turn_id == turns.c.id)
                    & (t.session_id == turns.c.session_id),
                )
                .where(t.project == project, t.session_id.in_(chunk))
                .order_by(turns.c.session_id, turns.c.ordinal)
            )
            for row in self._conn.execute(statement).mappings():
                placed.setdefault(row["session_id"], []).append(
                    PlacedTurn(
                        trace_id=row["trace_id"],
                        start=int(row["start_ns"]),
                        prompt=row["prompt"],
                        touches=int(row["touches"]),
                        turn=turn_of(row),
                    )
                )
        return placed

    def turn_events(self, project: str, turn_ids: Sequence[str]) -> list[EventRecord]:
        """The stored events of these turns."""
        found: list[EventRecord] = []
        for chunk in chunks(list(turn_ids)):
            statement = select(events).where(
                events.c.project == project, events.c.turn_id.in_(chunk)
            )
            found.extend(event_of(row) for row in self._conn.execute(statement).mappings())
        return found

    def touches_from(self, project: str, session_id: str, position: int) -> list[FileTouch]:
        """The session's touches at positions from `position` on, in order."""
        c = file_touches.c
        statement = (
            select(file_touches)
            .where(c.project == project, c.session_id == session_id, c.position >= position)
            .order_by(c.position)
        )
        return [touch_of(row) for row in self._conn.execute(statement).mappings()]

    def trace_spans(self, project: str, trace_ids: Sequence[str]) -> list[SpanRow]:
        """Every stored span of these traces, with the session columns."""
        columns = [spans.c[name] for name in SESSION_SPAN_COLUMNS]
        found: list[SpanRow] = []
        for chunk in chunks(list(trace_ids)):
            statement = select(*columns).where(
                spans.c.project == project, spans.c.trace_id.in_(chunk)
            )
            result = self._conn.execute(statement)
            found.extend(dict(row) for row in result.mappings())  # type: ignore[misc]
        return found

    def session_traces(self, project: str, session_key: str) -> list[str]:
        """The traces with a span carrying this session id (the spans' session index)."""
        statement = (
            select(spans.c.trace_id)
            .where(spans.c.project == project, spans.c.session_id == session_key)
            .distinct()
        )
        return sorted(self._conn.execute(statement).scalars())

    def apply(self, project: str, changes: Sequence[SessionChange]) -> None:
        """Write the changes under one new read-model version of the project."""
        if not changes:
            return
        version, generation = bump_version(self._conn, self._dialect, project)
        stale: list[str] = []
        fresh: list[Row] = []
        for change in changes:
            gone, added = self._apply(project, change, version)
            stale.extend(gone)
            fresh.extend(added)
        written = Written(project, generation, version, stale, fresh)
        self._search.in_transaction(self._conn, written)
        self._written.append(written)

    def after_commit(self) -> None:
        """The search index follows what `apply` wrote (the write has committed)."""
        for written in self._written:
            self._after(written)
        self._written.clear()

    def _apply(
        self, project: str, change: SessionChange, version: int
    ) -> tuple[list[str], list[Row]]:
        conn, sid = self._conn, change.session_id
        session = change.session
        delete_ids(conn, sessions, sessions.c.id, project, [sid])
        if session is not None:
            row = session_row(project, session)
            insert_rows(conn, sessions, [{**row, "content_hash": digest(row), "version": version}])
        where = {"harness": session.harness, "source": session.source} if session else None
        if change.whole:
            turn_scope, event_scope = (turns.c.session_id, [sid]), (events.c.session_id, [sid])
        else:
            turn_scope = (turns.c.id, [*{t.id for t in change.turns}, *change.removed_turns])
            event_scope = (events.c.turn_id, change.event_turns)
        replace_among(
            conn, turns, project, *turn_scope, [turn_row(project, t) for t in change.turns]
        )
        event_rows = [event_row(project, e, **where) for e in change.events] if where else []
        gone, added = replace_among(conn, events, project, *event_scope, event_rows)
        self._touches(project, change, where)
        states = [_state_row(project, state) for state in change.states]
        delete_ids(
            conn, trace_turns, trace_turns.c.trace_id, project, [s.trace_id for s in change.states]
        )
        insert_rows(conn, trace_turns, states)
        return gone, added

    def _touches(self, project: str, change: SessionChange, where: dict[str, str] | None) -> None:
        c = file_touches.c
        start = 0 if change.whole else change.touches_from
        if start is None:
            return
        self._conn.execute(
            delete(file_touches).where(
                c.project == project, c.session_id == change.session_id, c.position >= start
            )
        )
        if where is not None:
            rows = [
                touch_row(project, start + offset, touch, **where)
                for offset, touch in enumerate(change.touches)
            ]
            insert_rows(self._conn, file_touches, rows)


def _state_of(row: Any) -> TraceTurn:
    return TraceTurn(
        trace_id=row["trace_id"],
        session_id=row["session_id"],
        session_key=row["session_key"],
        source=row["source"],
        turn_id=row["turn_id"],
        start=int(row["start_ns"]),
        prompt=row["prompt"],
        touches=int(row["touches"]),
        facts=row["facts"],
    )


def _state_row(project: str, state: TraceTurn) -> Row:
    return clean(
        {
            "project": project,
            "trace_id": state.trace_id,
            "session_id": state.session_id,
            "session_key": state.session_key,
            "source": state.source,
            "turn_id": state.turn_id,
            "start_ns": state.start,
            "prompt": state.prompt,
            "touches": state.touches,
            "facts": dict(state.facts),
        }
    )
