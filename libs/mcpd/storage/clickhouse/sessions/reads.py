"""The read queries of the ClickHouse session store.

Every read is `FINAL`: ReplacingMergeTree keeps old row versions and tombstones until a merge,
and FINAL resolves them at read time (the newest version of each key, tombstoned keys dropped),
so reads are exact right after a write. Keys lead with `project`; lookups by session or turn are
pruned by bloom-filter skip indexes.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

from mcpd.sessions.model import EventRecord, FileTouch, SessionRecord, TurnRecord
from mcpd.sessions.store import SessionListQuery, TouchQuery
from mcpd.storage.clickhouse.executor import ClickHouseExecutor
from mcpd.storage.clickhouse.sessions.tables import (
    EVENTS,
    SESSIONS,
    TOUCHES,
    TURNS,
    as_dicts,
    select_list,
)
from mcpd.storage.sql.convert import nanos
from mcpd.storage.sql.sessions.rows import basename, event_of, session_of, touch_of, turn_of
from mcpd.storage.sql.sessions.writes import chunks

Ends = tuple[str | None, str | None]
Params = dict[str, object]
R = TypeVar("R")


class Reads:
    """The read queries, on one executor."""

    def __init__(self, executor: ClickHouseExecutor) -> None:
        self._executor = executor

    def select(
        self,
        table: str,
        columns: Mapping[str, str],
        where: Sequence[str],
        params: Params,
        *,
        order: str = "",
        limit: int | None = None,
    ) -> list[dict[str, Any]]:
        """Rows of `table` FINAL matching every condition in `where`."""
        sql = f"SELECT {select_list(columns)} FROM {table} FINAL WHERE {' AND '.join(where)}"
        if order:
            sql += f" ORDER BY {order}"
        if limit is not None:
            sql += f" LIMIT {int(limit)}"
        return as_dicts(columns, self._executor.query(sql, params))

    def snapshot(self, project: str) -> int:
        rows = self._executor.query(
            "SELECT max(version) FROM session_versions WHERE project = {project:String}",
            {"project": project},
        )
        return int(rows[0][0] or 0) if rows else 0

    def session_version(self, project: str, session_id: str) -> int | None:
        rows = self._executor.query(
            "SELECT version FROM sessions FINAL WHERE project = {p:String} AND id = {id:String}",
            {"p": project, "id": session_id},
        )
        return int(rows[0][0]) if rows else None

    def get_session(self, project: str, session_id: str) -> SessionRecord | None:
        rows = self._by_id("sessions", SESSIONS, project, session_id)
        return session_of(rows[0]) if rows else None

    def get_turn(self, project: str, turn_id: str) -> TurnRecord | None:
        rows = self._by_id("turns", TURNS, project, turn_id)
        return turn_of(rows[0]) if rows else None

    def get_event(self, project: str, event_id: str) -> EventRecord | None:
        rows = self._by_id("events", EVENTS, project, event_id)
        return event_of(rows[0]) if rows else None

    def events_by_id(self, project: str, ids: Sequence[str]) -> dict[str, EventRecord]:
        return self._records_by_id("events", EVENTS, project, ids, event_of)

    def turns_by_id(self, project: str, ids: Sequence[str]) -> dict[str, TurnRecord]:
        return self._records_by_id("turns", TURNS, project, ids, turn_of)

    def sessions_by_id(self, project: str, ids: Sequence[str]) -> dict[str, SessionRecord]:
        return self._records_by_id("sessions", SESSIONS, project, ids, session_of)

    def list_turns(
        self, project: str, session_id: str, after_ordinal: int, limit: int
    ) -> list[TurnRecord]:
        rows = self.select(
            "turns",
            TURNS,
            ["project = {p:String}", "session_id = {s:String}", "ordinal > {after:Int64}"],
            {"p": project, "s": session_id, "after": after_ordinal},
            order="ordinal, id",
            limit=limit,
        )
        return [turn_of(row) for row in rows]

    def list_events(
        self, project: str, turn_id: str, after_ordinal: int, limit: int
    ) -> list[EventRecord]:
        rows = self.select(
            "events",
            EVENTS,
            ["project = {p:String}", "turn_id = {t:String}", "ordinal > {after:Int64}"],
            {"p": project, "t": turn_id, "after": after_ordinal},
            order="ordinal, id",
            limit=limit,
        )
        return [event_of(row) for row in rows]

    def neighbours(
        self, table: str, scope: tuple[str, str], key: tuple[str, int], row_id: str, project: str
    ) -> Ends:
        """The ids just before and after (key, id) among the rows whose `scope` column matches."""
        column, value = scope
        name, anchor = key
        params: Params = {"p": project, "v": value, "k": anchor, "id": row_id}
        where = ["project = {p:String}", f"{column} = {{v:String}}"]
        before = [*where, f"({name}, id) < ({{k:Int64}}, {{id:String}})"]
        after = [*where, f"({name}, id) > ({{k:Int64}}, {{id:String}})"]
        return (
            self._first_id(table, before, params, f"{name} DESC, id DESC"),
            self._first_id(table, after, params, f"{name}, id"),
        )

    def edges(self, table: str, column: str, value: str, project: str) -> Ends:
        """The first and last ids by (ordinal, id) among the rows whose `column` is `value`."""
        where = ["project = {p:String}", f"{column} = {{v:String}}"]
        params: Params = {"p": project, "v": value}
        return (
            self._first_id(table, where, params, "ordinal, id"),
            self._first_id(table, where, params, "ordinal DESC, id DESC"),
        )

    def list_sessions(self, query: SessionListQuery) -> list[SessionRecord]:
        where = ["project = {p:String}", "updated_at >= {start:Int64}", "started_at < {end:Int64}"]
        params: Params = {"p": query.project, "start": nanos(query.start), "end": nanos(query.end)}
        for column in ("mode", "harness", "source"):
            value = getattr(query, column)
            if value is not None:
                where.append(f"{column} = {{{column}:String}}")
                params[column] = value
        if query.after is not None:
            compare = "<" if query.descending else ">"
            where.append(f"(updated_at, id) {compare} ({{at:Int64}}, {{after:String}})")
            params.update(at=nanos(query.after[0]), after=query.after[1])
        direction = " DESC" if query.descending else ""
        order = f"updated_at{direction}, id{direction}"
        rows = self.select("sessions", SESSIONS, where, params, order=order, limit=query.limit)
        return [session_of(row) for row in rows]

    def touches(self, query: TouchQuery) -> tuple[list[FileTouch], bool]:
        where = [
            "project = {p:String}",
            "basename = {base:String}",
            "(tail = {tail:String} OR endsWith(tail, {suffix:String}))",
        ]
        params: Params = {
            "p": query.project,
            "base": basename(query.tail),
            "tail": query.tail,
            "suffix": "/" + query.tail,
        }
        if query.start is not None:
            where.append("timestamp_ns >= {start:Int64}")
            params["start"] = nanos(query.start)
        if query.end is not None:
            where.append("timestamp_ns < {end:Int64}")
            params["end"] = nanos(query.end)
        if query.tool is not None:
            where.append("lowerUTF8(tool_name) = {tool:String}")
            params["tool"] = query.tool.lower()
        for column in ("harness", "source", "git_common_dir"):
            value = getattr(query, column)
            if value is not None:
                where.append(f"{column} = {{{column}:String}}")
                params[column] = value
        if query.mutations_only:
            where.append("mutation")
        order = "timestamp_ns DESC NULLS LAST, session_id, position"
        rows = self.select(
            "file_touches", TOUCHES, where, params, order=order, limit=query.limit + 1
        )
        found = [touch_of(row) for row in rows]
        return found[: query.limit], len(found) > query.limit

    def session_of_key(self, project: str, source: str, key: str) -> SessionRecord | None:
        rows = self.select(
            "sessions",
            SESSIONS,
            ["project = {p:String}", "source = {source:String}", "session_key = {key:String}"],
            {"p": project, "source": source, "key": key},
            order="id",
            limit=1,
        )
        return session_of(rows[0]) if rows else None

    def _records_by_id(
        self,
        table: str,
        columns: Mapping[str, str],
        project: str,
        ids: Sequence[str],
        record_of: Callable[[dict[str, Any]], R],
    ) -> dict[str, R]:
        found: dict[str, R] = {}
        for chunk in chunks(ids):
            rows = self.select(
                table,
                columns,
                ["project = {p:String}", "id IN {ids:Array(String)}"],
                {"p": project, "ids": list(chunk)},
            )
            found.update((row["id"], record_of(row)) for row in rows)
        return found

    def _by_id(
        self, table: str, columns: Mapping[str, str], project: str, row_id: str
    ) -> list[dict[str, Any]]:
        where = ["project = {p:String}", "id = {id:String}"]
        return self.select(table, columns, where, {"p": project, "id": row_id}, limit=1)

    def _first_id(self, table: str, where: Sequence[str], params: Params, order: str) -> str | None:
        sql = f"SELECT id FROM {table} FINAL WHERE {' AND '.join(where)} ORDER BY {order} LIMIT 1"
        rows = self._executor.query(sql, params)
        return str(rows[0][0]) if rows else None
