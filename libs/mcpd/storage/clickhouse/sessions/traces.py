"""Trace sessions on ClickHouse: the session side of one trace-store write.

ClickHouse has no transactions, so `ClickHouseTraceTurns` writes after the write's spans and
trace rows, and before its ingest keys (`mcpd.storage.clickhouse.signals`): a failure before
the keys leaves the batch to be written again, and its sessions with it. What that allows and
what it does not:

* `savepoint` undoes nothing: a failure part-way through `apply` leaves some rows of the new
  version written. The trace states are written LAST, so the traces whose states did not move
  are recomputed from their spans (read back) at their next write, which mends their turns.
* `lock_sessions` is a no-op: writes are serialised within a process (the trace store's
  process-wide write lock, and the session store's lock around version allocation), not
  between processes. Two processes writing traces of one session at once may each write a
  session row and ordinals from what they read; the next write of the session puts them in
  step. An embedded ClickHouse (chdb) belongs to one process, so this only concerns several
  processes on one ClickHouse server.
* Every read is FINAL, exact right after a write.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

from mcpd.sessions.model import EventRecord, FileTouch
from mcpd.sessions.traces import SEQ_STRIDE, PlacedTurn, SessionChange, TraceTurn
from mcpd.signals.rows import SpanRow
from mcpd.storage.clickhouse.executor import ClickHouseExecutor
from mcpd.storage.clickhouse.sessions.reads import Reads
from mcpd.storage.clickhouse.sessions.tables import (
    EVENTS,
    SEARCH,
    SESSION_EXTRA,
    SESSIONS,
    TOUCHES,
    TURNS,
    VERSIONED,
    insert,
)
from mcpd.storage.clickhouse.sessions.writes import (
    TOUCH_TOMBSTONE,
    diff_rows,
    next_version,
    tombstone,
    versioned,
    with_search,
)
from mcpd.storage.clickhouse.signals import reads as signal_reads
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

TRACE_TURNS: dict[str, str] = {
    "project": "String",
    "trace_id": "String",
    "session_id": "String",
    "session_key": "String",
    "source": "String",
    "turn_id": "String",
    "start_ns": "Int64",
    "prompt": "Nullable(String)",
    "touches": "Int64",
    "facts": "String",
}
_IDS = "{ids:Array(String)}"


class ClickHouseTraceTurns:
    """The trace-session side of one write on ClickHouse (see the module docstring)."""

    def __init__(self, executor: ClickHouseExecutor, lock: threading.Lock) -> None:
        self._executor = executor
        self._reads = Reads(executor)
        self._lock = lock

    @contextmanager
    def savepoint(self) -> Iterator[None]:
        """No savepoints on ClickHouse (see the module docstring)."""
        yield

    def trace_turns(self, project: str, trace_ids: Sequence[str]) -> dict[str, TraceTurn]:
        """The stored states of these traces, by trace id."""
        rows = self._states(project, f"trace_id IN {_IDS}", list(trace_ids))
        return {row["trace_id"]: _state_of(row) for row in rows}

    def lock_sessions(self, project: str, session_keys: Sequence[str]) -> None:
        """Nothing: see the module docstring."""

    def sessions_by_key(self, project: str, session_keys: Sequence[str]) -> dict[str, str]:
        """The source of each session with trace states, by session key."""
        rows = self._states(project, f"session_key IN {_IDS}", list(session_keys))
        return {row["session_key"]: row["source"] for row in rows}

    def stored_sessions(self, project: str, session_ids: Sequence[str]) -> set[str]:
        """The ids among `session_ids` that have a session row."""
        found = self._executor.query(
            f"SELECT id FROM sessions FINAL WHERE project = {{project:String}} AND id IN {_IDS}",
            {"project": project, "ids": list(session_ids)},
        )
        return {str(row[0]) for row in found}

    def placed_turns(self, project: str, session_ids: Sequence[str]) -> dict[str, list[PlacedTurn]]:
        """The stored turns of these sessions that have trace states, in ordinal order."""
        ids = list(session_ids)
        states = {
            (row["session_id"], row["turn_id"]): row
            for row in self._states(project, f"session_id IN {_IDS}", ids)
        }
        turns = self._reads.select(
            "turns",
            TURNS,
            ["project = {project:String}", f"session_id IN {_IDS}"],
            {"project": project, "ids": ids},
            order="session_id, ordinal",
        )
        placed: dict[str, list[PlacedTurn]] = {}
        for row in turns:
            state = states.get((row["session_id"], row["id"]))
            if state is not None:
                placed.setdefault(row["session_id"], []).append(
                    PlacedTurn(
                        trace_id=state["trace_id"],
                        start=int(state["start_ns"]),
                        prompt=state["prompt"],
                        touches=int(state["touches"]),
                        turn=turn_of(row),
                    )
                )
        return placed

    def turn_events(self, project: str, turn_ids: Sequence[str]) -> list[EventRecord]:
        """The stored events of these turns."""
        rows = self._reads.select(
            "events",
            EVENTS,
            ["project = {project:String}", f"turn_id IN {_IDS}"],
            {"project": project, "ids": list(turn_ids)},
        )
        return [event_of(row) for row in rows]

    def touches_from(self, project: str, session_id: str, position: int) -> list[FileTouch]:
        """The session's touches at positions from `position` on, in order."""
        rows = self._reads.select(
            "file_touches",
            TOUCHES,
            [
                "project = {project:String}",
                "session_id = {session_id:String}",
                "position >= {position:Int64}",
            ],
            {"project": project, "session_id": session_id, "position": position},
            order="position",
        )
        return [touch_of(row) for row in rows]

    def trace_spans(self, project: str, trace_ids: Sequence[str]) -> list[SpanRow]:
        """Every stored span of these traces, with the session columns."""
        return signal_reads.trace_spans(self._executor, project, trace_ids)

    def session_traces(self, project: str, session_key: str) -> list[str]:
        """The traces with a span carrying this session id."""
        return signal_reads.session_traces(self._executor, project, session_key)

    def apply(self, project: str, changes: Sequence[SessionChange]) -> None:
        """Write the changes at one new read-model version of the project, each table's rows
        for all the changed sessions in one statement: the session rows' children first, the
        session rows next, the trace states last, then the project's version."""
        if not changes:
            return
        with self._lock:
            version = next_version(self._executor, project)
            totals = self._totals(project, [change.session_id for change in changes])
            self._turns(project, changes, version)
            self._events(project, changes, version, totals)
            self._sequence(project, changes, version)
            self._touches(project, changes, version)
            self._sessions(project, changes, version, totals)
            states = [_state_row(project, s) for change in changes for s in change.states]
            insert(
                self._executor,
                "trace_turns",
                {**TRACE_TURNS, **VERSIONED},
                versioned(states, version),
            )
            insert(
                self._executor,
                "session_versions",
                {"project": "String", "version": "UInt64"},
                [{"project": project, "version": version}],
            )

    def after_commit(self) -> None:
        """Nothing follows outside ClickHouse: the search tokens are written with the rows."""

    def _turns(self, project: str, changes: Sequence[SessionChange], version: int) -> None:
        """Each change's turns: a whole session's all, another's the turns it names."""
        whole = [c.session_id for c in changes if c.whole]
        named = [
            i for c in changes if not c.whole for i in (*{t.id for t in c.turns}, *c.removed_turns)
        ]
        existing = {
            **self._existing("turns", project, "session_id", whole),
            **self._existing("turns", project, "id", named),
        }
        rows = [turn_row(project, turn) for change in changes for turn in change.turns]
        stale, fresh = diff_rows(existing, rows)
        tombstone(self._executor, "turns", project, stale, version)
        insert(self._executor, "turns", {**TURNS, **VERSIONED}, versioned(fresh, version))

    def _events(
        self,
        project: str,
        changes: Sequence[SessionChange],
        version: int,
        totals: dict[str, tuple[int, int]],
    ) -> None:
        """Each change's events (a whole session's all, another's those of the turns it
        names), moving each session's search totals in `totals` by the difference."""
        whole = [c.session_id for c in changes if c.whole]
        turns = [t for c in changes if not c.whole for t in c.event_turns]
        extra = ", searchable, doc_length, session_id"
        existing = {
            **self._existing("events", project, "session_id", whole, extra),
            **self._existing("events", project, "turn_id", turns, extra),
        }
        rows = [
            trace_event_row(project, event, harness=c.session.harness, source=c.session.source)
            for c in changes
            if c.session is not None
            for event in c.events
        ]
        stale, fresh = diff_rows(existing, rows)
        searched = [with_search(row) for row in fresh]
        moved = dict(totals)
        # The old rows of vanished and changed events leave the search totals.
        for event_id in [*stale, *(row["id"] for row in fresh if row["id"] in existing)]:
            _, searchable, doc_length, session_id = existing[event_id]
            docs, length = moved.get(str(session_id), (0, 0))
            moved[str(session_id)] = (docs - int(bool(searchable)), length - int(str(doc_length)))
        for row in searched:
            docs, length = moved.get(row["session_id"], (0, 0))
            moved[row["session_id"]] = (docs + int(row["searchable"]), length + row["doc_length"])
        totals.update(moved)
        tombstone(self._executor, "events", project, stale, version)
        insert(
            self._executor,
            "events",
            {**EVENTS, **SEARCH, **VERSIONED},
            versioned(searched, version),
        )

    def _sequence(self, project: str, changes: Sequence[SessionChange], version: int) -> None:
        """Give the stored events of the changes' moved turns the seq of their new ordinal:
        inserted again with it, at this version (seq is left out of the row hash)."""
        bases = {
            turn.id: turn.ordinal * SEQ_STRIDE
            for change in changes
            for turn in change.turns
            if turn.id in change.moved_turns
        }
        if not bases:
            return
        columns = {**EVENTS, **SEARCH}
        rows = self._reads.select(
            "events",
            columns,
            ["project = {project:String}", f"turn_id IN {_IDS}"],
            {"project": project, "ids": sorted(bases)},
        )
        moved = [
            {**row, "seq": bases[row["turn_id"]] + row["ordinal"]}
            for row in rows
            if row["seq"] != bases[row["turn_id"]] + row["ordinal"]
        ]
        insert(self._executor, "events", {**columns, **VERSIONED}, versioned(moved, version))

    def _touches(self, project: str, changes: Sequence[SessionChange], version: int) -> None:
        """Replace each changed session's touches from its `touches_from` on (all of a whole
        session's): new positions inserted, those past the new end tombstoned."""
        starts = {
            c.session_id: 0 if c.whole else c.touches_from
            for c in changes
            if c.whole or c.touches_from is not None
        }
        if not starts:
            return
        stored = self._executor.query(
            "SELECT session_id, position FROM file_touches FINAL "
            f"WHERE project = {{project:String}} AND session_id IN {_IDS}",
            {"project": project, "ids": sorted(starts)},
        )
        rows: list[Row] = []
        ends: dict[str, int] = {}
        for change in changes:
            start = starts.get(change.session_id)
            if start is None:
                continue
            session = change.session
            touches = change.touches if session is not None else []
            names = {"harness": session.harness, "source": session.source} if session else {}
            rows += [
                touch_row(project, start + offset, touch, **names)
                for offset, touch in enumerate(touches)
            ]
            ends[change.session_id] = start + len(touches)
        gone = [
            {"project": project, "session_id": str(sid), "position": int(position)}
            for sid, position in stored
            if int(position) >= ends[str(sid)]
        ]
        insert(
            self._executor,
            "file_touches",
            TOUCH_TOMBSTONE,
            [{**g, "version": version, "is_deleted": 1} for g in gone],
        )
        insert(self._executor, "file_touches", {**TOUCHES, **VERSIONED}, versioned(rows, version))

    def _sessions(
        self,
        project: str,
        changes: Sequence[SessionChange],
        version: int,
        totals: Mapping[str, tuple[int, int]],
    ) -> None:
        """The changed sessions' rows, with their content hash and search totals; a session
        left without turns is deleted."""
        rows: list[Row] = []
        for change in changes:
            if change.session is None:
                self._executor.command(
                    "DELETE FROM sessions "
                    "WHERE project = {project:String} AND id = {session_id:String}",
                    {"project": project, "session_id": change.session_id},
                )
                continue
            row = session_row(project, change.session)
            docs, length = totals.get(change.session_id, (0, 0))
            extra = {"content_hash": digest(row), "search_docs": docs, "search_length": length}
            rows.append({**row, **extra, "version": version})
        insert(self._executor, "sessions", {**SESSIONS, **SESSION_EXTRA}, rows)

    def _existing(
        self, table: str, project: str, column: str, ids: Sequence[str], extra: str = ""
    ) -> dict[str, tuple[object, ...]]:
        """The stored (row_hash, ...extra) of the project's rows whose `column` is in `ids`."""
        if not ids:
            return {}
        rows = self._executor.query(
            f"SELECT id, row_hash{extra} FROM {table} FINAL "
            f"WHERE project = {{project:String}} AND {column} IN {_IDS}",
            {"project": project, "ids": list(ids)},
        )
        return {str(row[0]): tuple(row[1:]) for row in rows}

    def _totals(self, project: str, session_ids: Sequence[str]) -> dict[str, tuple[int, int]]:
        found = self._executor.query(
            "SELECT id, search_docs, search_length FROM sessions FINAL "
            f"WHERE project = {{project:String}} AND id IN {_IDS}",
            {"project": project, "ids": list(session_ids)},
        )
        return {str(row[0]): (int(row[1]), int(row[2])) for row in found}

    def _states(self, project: str, condition: str, ids: list[str]) -> list[dict[str, Any]]:
        if not ids:
            return []
        return self._reads.select(
            "trace_turns",
            TRACE_TURNS,
            ["project = {project:String}", condition],
            {"project": project, "ids": ids},
        )


def _state_of(row: Mapping[str, Any]) -> TraceTurn:
    return TraceTurn(
        trace_id=row["trace_id"],
        session_id=row["session_id"],
        session_key=row["session_key"],
        source=row["source"],
        turn_id=row["turn_id"],
        start=int(row["start_ns"]),
        prompt=row["prompt"],
        touches=int(row["touches"]),
        facts=json.loads(row["facts"]),
    )


def _state_row(project: str, state: TraceTurn) -> Row:
    facts = json.dumps(dict(state.facts), sort_keys=True, separators=(",", ":"))
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
            "facts": facts,
        }
    )
