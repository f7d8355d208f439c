"""`ClickHouseSessionStore`: the session read model in the ClickHouse trace database.

The tables come from the trace store's migration `0002_session_read_model`; migrate the trace
store first. Rows are versioned (ReplacingMergeTree, read with FINAL: see `reads`), writes
insert only what changed (`writes`), and search ranks with BM25 inside ClickHouse over a text
index (`search`). Differences from the SQL stores, all documented where they live: a write is
not one transaction (a failed write is completed by the next import, see `writes`), and writes
of one project are serialised within a process only.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence

from mcpd.sessions.model import AssembledSession, EventRecord, FileTouch, SessionRecord, TurnRecord
from mcpd.sessions.search.analysis import query_units
from mcpd.sessions.search.snippet import normalize_scores, snippet
from mcpd.sessions.store import SearchHit, SearchQuery, SearchResult, SessionListQuery, TouchQuery
from mcpd.storage.clickhouse.executor import ClickHouseExecutor
from mcpd.storage.clickhouse.sessions import search as ranking
from mcpd.storage.clickhouse.sessions.reads import Reads
from mcpd.storage.clickhouse.sessions.tables import (
    EVENTS,
    SEARCH,
    SESSION_EXTRA,
    SESSIONS,
    VERSIONED,
    insert,
)
from mcpd.storage.clickhouse.sessions.traces import ClickHouseTraceTurns
from mcpd.storage.clickhouse.sessions.writes import with_search, write_session
from mcpd.storage.sql.convert import nanos

Ends = tuple[str | None, str | None]


class ClickHouseSessionStore:
    """A SessionStore on the ClickHouse trace store's executor (which it does not close)."""

    def __init__(self, executor: ClickHouseExecutor) -> None:
        self._executor = executor
        self._reads = Reads(executor)
        self._write_lock = threading.Lock()

    @property
    def backend(self) -> str:
        """Always `clickhouse`."""
        return "clickhouse"

    @property
    def executor(self) -> ClickHouseExecutor:
        """The trace store's executor, which this store shares."""
        return self._executor

    def write_session(self, project: str, assembled: AssembledSession) -> None:
        """Replace one session, writing only what changed; an identical re-write is a no-op."""
        with self._write_lock:
            write_session(self._executor, project, assembled)

    def trace_turns(self, transaction: object) -> ClickHouseTraceTurns:
        """The trace-session side of one trace-store write (ClickHouse has no transaction:
        `transaction` is None)."""
        if transaction is not None:
            raise TypeError("a ClickHouse trace-store write has no transaction to pass")
        return ClickHouseTraceTurns(self._executor, self._write_lock)

    def nudge_search_index(self) -> None:
        """Nothing to catch up: the tokens are written with their rows."""

    def reconcile_search_index(self) -> int:
        """Nothing to catch up: the tokens are written with their rows. Returns 0."""
        return 0

    def rebuild_search_index(self) -> int:
        """Re-analyze every live event (after an analyzer change) and recount the sessions'
        search totals, each row at its own version; return how many events are searchable.
        Reads the whole read model into memory: a maintenance operation."""
        totals: dict[tuple[str, str], list[int]] = {}
        with self._write_lock:
            rows = self._reads.select("events", {**EVENTS, "version": "UInt64"}, ["1"], {})
            fresh = [{**with_search(row), "is_deleted": 0} for row in rows]
            insert(self._executor, "events", {**EVENTS, **SEARCH, **VERSIONED}, fresh)
            for row in fresh:
                total = totals.setdefault((row["project"], row["session_id"]), [0, 0])
                total[0] += int(row["searchable"])
                total[1] += int(row["doc_length"])
            columns = {**SESSIONS, **SESSION_EXTRA}
            sessions = self._reads.select("sessions", columns, ["1"], {})
            for session in sessions:
                docs, length = totals.get((session["project"], session["id"]), [0, 0])
                session.update(search_docs=docs, search_length=length)
            insert(self._executor, "sessions", columns, sessions)
        return sum(1 for row in fresh if row["searchable"])

    def close(self) -> None:
        """Nothing to release: the executor belongs to the trace store."""

    def snapshot(self, project: str) -> int:
        """The project's read-model version (0 before its first write)."""
        return self._reads.snapshot(project)

    def session_version(self, project: str, session_id: str) -> int | None:
        """The project version at which the session was last written, or None."""
        return self._reads.session_version(project, session_id)

    def get_session(self, project: str, session_id: str) -> SessionRecord | None:
        """One session, or None."""
        return self._reads.get_session(project, session_id)

    def get_turn(self, project: str, turn_id: str) -> TurnRecord | None:
        """One turn, or None."""
        return self._reads.get_turn(project, turn_id)

    def get_event(self, project: str, event_id: str) -> EventRecord | None:
        """One event with its full text and payload, or None."""
        return self._reads.get_event(project, event_id)

    def sessions_by_id(self, project: str, session_ids: Sequence[str]) -> dict[str, SessionRecord]:
        """The project's sessions among `session_ids`, by id (unknown ids are absent)."""
        return self._reads.sessions_by_id(project, session_ids)

    def turns_by_id(self, project: str, turn_ids: Sequence[str]) -> dict[str, TurnRecord]:
        """The project's turns among `turn_ids`, by id (unknown ids are absent)."""
        return self._reads.turns_by_id(project, turn_ids)

    def list_turns(
        self, project: str, session_id: str, *, after_ordinal: int, limit: int
    ) -> list[TurnRecord]:
        """The session's turns with ordinal > after_ordinal, ascending, at most `limit`."""
        return self._reads.list_turns(project, session_id, after_ordinal, limit)

    def list_events(
        self, project: str, turn_id: str, *, after_ordinal: int, limit: int
    ) -> list[EventRecord]:
        """The turn's events with ordinal > after_ordinal, ascending, at most `limit`."""
        return self._reads.list_events(project, turn_id, after_ordinal, limit)

    def neighbour_turns(self, project: str, turn: TurnRecord) -> Ends:
        """The turns before and after `turn` in its session."""
        scope = ("session_id", turn.session_id)
        return self._reads.neighbours("turns", scope, ("ordinal", turn.ordinal), turn.id, project)

    def neighbour_events(self, project: str, event: EventRecord) -> Ends:
        """The events before and after `event` in session order (seq)."""
        scope = ("session_id", event.session_id)
        return self._reads.neighbours("events", scope, ("seq", event.seq), event.id, project)

    def neighbour_sessions(self, project: str, session: SessionRecord) -> Ends:
        """The sessions before and after `session` by (started_at, id) in its source."""
        key = ("started_at", nanos(session.started_at))
        return self._reads.neighbours(
            "sessions", ("source", session.source), key, session.id, project
        )

    def edge_turns(self, project: str, session_id: str) -> Ends:
        """The first and last turn ids of a session."""
        return self._reads.edges("turns", "session_id", session_id, project)

    def edge_events(self, project: str, turn_id: str) -> Ends:
        """The first and last event ids of a turn."""
        return self._reads.edges("events", "turn_id", turn_id, project)

    def list_sessions(self, query: SessionListQuery) -> list[SessionRecord]:
        """Sessions overlapping the range, by (updated_at, id) in the asked direction."""
        return self._reads.list_sessions(query)

    def touches(self, query: TouchQuery) -> tuple[list[FileTouch], bool]:
        """Touches of the file, newest first, and whether more than `limit` matched."""
        return self._reads.touches(query)

    def session_of_key(self, project: str, source: str, session_key: str) -> SessionRecord | None:
        """The session a transcript's own id maps to, if imported."""
        return self._reads.session_of_key(project, source, session_key)

    def search(self, query: SearchQuery) -> SearchResult:
        """BM25 inside ClickHouse; scores normalized within the response, snippets added."""
        units = query_units(query.text)
        ranked = ranking.rank(self._executor, units, query)
        if not ranked.hits:
            return SearchResult(hits=[], truncated=False)
        loaded = self._reads.events_by_id(query.project, [event_id for event_id, _ in ranked.hits])
        kept = [
            (loaded[event_id], score)
            for event_id, score in ranked.hits
            if event_id in loaded and not (loaded[event_id].payload or {}).get("self_tool")
        ]
        scores = normalize_scores([score for _, score in kept])
        hits = []
        for (event, _), score in zip(kept, scores, strict=True):
            text, truncated = snippet(event.text, units, ranked.weights)
            hits.append(SearchHit(event, score, text, truncated))
        return SearchResult(hits=hits, truncated=ranked.truncated)
