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

`apply` writes every change of the write with one version and one statement per table: the
session rows, the turns and events that differ (by row hash; a trace event's leaves seq out),
the seq of a moved turn's stored events in place, the touches from the first position that
moved, and the trace states. The search side writes its part in the same transaction
(PostgreSQL's vectors, SQLite's change log) and the tantivy index follows after the commit
(`after_commit`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from sqlalchemy import (
    BigInteger,
    BindParameter,
    Connection,
    Table,
    bindparam,
    delete,
    select,
    update,
)

from mcpd.sessions.model import EventRecord, FileTouch, TurnRecord
from mcpd.sessions.traces import SEQ_STRIDE, PlacedTurn, SessionChange, TraceTurn
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
    session_row,
    touch_of,
    touch_row,
    trace_event_row,
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
        """Write the changes under one new read-model version of the project, each table's
        rows for all the changed sessions at once."""
        if not changes:
            return
        conn = self._conn
        version, generation = bump_version(conn, self._dialect, project)
        delete_ids(conn, sessions, sessions.c.id, project, [c.session_id for c in changes])
        insert_rows(
            conn, sessions, [_session_row(project, c, version) for c in changes if c.session]
        )
        whole = [c for c in changes if c.whole]
        parts = [c for c in changes if not c.whole]
        self._replace(turns, project, whole, turns.c.session_id, [c.session_id for c in whole])
        self._replace(turns, project, parts, turns.c.id, [i for c in parts for i in _turn_ids(c)])
        stale, fresh = self._replace(
            events, project, whole, events.c.session_id, [c.session_id for c in whole]
        )
        gone, added = self._replace(
            events, project, parts, events.c.turn_id, [t for c in parts for t in c.event_turns]
        )
        self._sequence(project, [t for c in changes for t in c.turns if t.id in c.moved_turns])
        for change in changes:
            self._touches(project, change)
        states = [state for change in changes for state in change.states]
        delete_ids(conn, trace_turns, trace_turns.c.trace_id, project, [s.trace_id for s in states])
        insert_rows(conn, trace_turns, [_state_row(project, state) for state in states])
        written = Written(project, generation, version, [*stale, *gone], [*fresh, *added])
        self._search.in_transaction(conn, written)
        self._written.append(written)

    def after_commit(self) -> None:
        """The search index follows what `apply` wrote (the write has committed)."""
        for written in self._written:
            self._after(written)
        self._written.clear()

    def _replace(
        self,
        table: Table,
        project: str,
        changes: Sequence[SessionChange],
        column: Any,
        scope: Sequence[str],
    ) -> tuple[list[str], list[Row]]:
        """Make the rows of `table` (turns or events) within `scope` those of `changes`."""
        rows: list[Row]
        if table is turns:
            rows = [turn_row(project, turn) for change in changes for turn in change.turns]
        else:
            rows = [
                trace_event_row(project, event, **_filtered(change))
                for change in changes
                if change.session is not None
                for event in change.events
            ]
        if not scope and not rows:
            return [], []
        return replace_among(self._conn, table, project, column, scope, rows)

    def _sequence(self, project: str, listed: Sequence[TurnRecord]) -> None:
        """Give the stored events of these moved turns the seq of their new ordinal, in place
        (rows written just now have it already; seq is left out of the row hash, and out of
        what search indexes)."""
        if not listed:
            return
        c = events.c
        base: BindParameter[int] = bindparam("base", type_=BigInteger)
        statement = (
            update(events)
            .where(c.project == project, c.turn_id == bindparam("turn"), c.seq != base + c.ordinal)
            .values(seq=base + c.ordinal)
        )
        self._conn.execute(
            statement, [{"turn": turn.id, "base": turn.ordinal * SEQ_STRIDE} for turn in listed]
        )

    def _touches(self, project: str, change: SessionChange) -> None:
        """Replace the session's touches from `touches_from` on (all of a whole session's)."""
        c = file_touches.c
        start = 0 if change.whole else change.touches_from
        if start is None:
            return
        self._conn.execute(
            delete(file_touches).where(
                c.project == project, c.session_id == change.session_id, c.position >= start
            )
        )
        if change.session is not None:
            rows = [
                touch_row(project, start + offset, touch, **_filtered(change))
                for offset, touch in enumerate(change.touches)
            ]
            insert_rows(self._conn, file_touches, rows)


def _filtered(change: SessionChange) -> dict[str, str]:
    """The session values its events and touches repeat (they are filtered on)."""
    assert change.session is not None
    return {"harness": change.session.harness, "source": change.session.source}


def _turn_ids(change: SessionChange) -> list[str]:
    return [*{turn.id for turn in change.turns}, *change.removed_turns]


def _session_row(project: str, change: SessionChange, version: int) -> Row:
    assert change.session is not None
    row = session_row(project, change.session)
    return {**row, "content_hash": digest(row), "version": version}


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
