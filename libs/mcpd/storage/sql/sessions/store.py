"""`SqlSessionStore`: the session read model on SQLite (with tantivy) or PostgreSQL.

The tables live in the trace store's database (`mcpd.storage.sql.schema.sessions`, created by
the trace migrations); this store only reads and writes them, so migrate the trace store first.
Search ranks with tantivy beside SQLite (`TantivySearch`, under `index_dir`) and with full-text
search inside PostgreSQL (`PostgresSearch`); either way the hits are then loaded from SQL,
scored relative to the best hit, and given a snippet around their best match.

`snapshot` is the project's version: it moves with every write that changes something and
stays put for an identical re-write (which is a no-op), so cursors outlive re-imports.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from sqlalchemy import Connection
from sqlalchemy.engine import Engine

from mcpd.sessions.model import AssembledSession, EventRecord, FileTouch, SessionRecord, TurnRecord
from mcpd.sessions.search.analysis import query_units
from mcpd.sessions.search.snippet import normalize_scores, snippet
from mcpd.sessions.store import (
    SearchHit,
    SearchQuery,
    SearchResult,
    SessionListQuery,
    TouchQuery,
)
from mcpd.storage.sql.dialect import SqlDialect
from mcpd.storage.sql.engine import read_connection
from mcpd.storage.sql.sessions import reads
from mcpd.storage.sql.sessions.backend import SearchBackend
from mcpd.storage.sql.sessions.postgres_search import PostgresSearch
from mcpd.storage.sql.sessions.tantivy_search import TantivySearch
from mcpd.storage.sql.sessions.traces import SqlTraceTurns
from mcpd.storage.sql.sessions.writes import Unchanged, write_session

Ends = tuple[str | None, str | None]


class SqlSessionStore:
    """A SessionStore on the trace store's engine. On SQLite, `index_dir` is required: the
    directory of the tantivy index (created if missing)."""

    def __init__(self, engine: Engine, *, index_dir: Path | None = None) -> None:
        self._engine = engine
        self._dialect = SqlDialect.of(engine)
        self._search: SearchBackend
        if self._dialect is SqlDialect.SQLITE:
            if index_dir is None:
                raise ValueError("a session store on SQLite needs an index directory")
            self._search = TantivySearch(engine, index_dir)
        else:
            self._search = PostgresSearch(engine)

    @property
    def backend(self) -> str:
        """`sqlite` or `postgres`."""
        return self._dialect.value

    @property
    def engine(self) -> Engine:
        """The trace store's engine, which this store shares."""
        return self._engine

    # Writes and index maintenance

    def write_session(self, project: str, assembled: AssembledSession) -> None:
        """Replace one session atomically; the search index follows the commit."""
        try:
            with self._engine.begin() as conn:
                written = write_session(conn, self._dialect, project, assembled, self._search)
        except Unchanged:
            return
        self._search.after_commit(written)

    def trace_turns(self, transaction: object) -> SqlTraceTurns:
        """The trace-session side of one trace-store write, on its connection (the trace store
        shares this store's engine, so both write in one transaction)."""
        if not isinstance(transaction, Connection):
            raise TypeError("a SQL trace-store write passes its Connection")
        return SqlTraceTurns(transaction, self._dialect, self._search, self._search.after_commit)

    def nudge_search_index(self) -> None:
        """Another process wrote the read model: the search index catches up soon."""
        self._search.nudge()

    def reconcile_search_index(self) -> int:
        """Bring the search index in step with the read model (run on open); return how many
        sessions were re-indexed. A no-op on PostgreSQL."""
        return self._search.reconcile()

    def rebuild_search_index(self) -> int:
        """Rebuild the search index from the read model; return how many events it holds."""
        return self._search.rebuild()

    def close(self) -> None:
        """Release the search index's writer. The engine belongs to the trace store."""
        self._search.close()

    # Reads

    def snapshot(self, project: str) -> int:
        """The project's read-model version (0 before its first write)."""
        with read_connection(self._engine) as conn:
            return reads.snapshot(conn, project)

    def session_version(self, project: str, session_id: str) -> int | None:
        """The project version at which the session was last written, or None."""
        with read_connection(self._engine) as conn:
            return reads.session_version(conn, project, session_id)

    def get_session(self, project: str, session_id: str) -> SessionRecord | None:
        """One session, or None."""
        with read_connection(self._engine) as conn:
            return reads.get_session(conn, project, session_id)

    def get_turn(self, project: str, turn_id: str) -> TurnRecord | None:
        """One turn, or None."""
        with read_connection(self._engine) as conn:
            return reads.get_turn(conn, project, turn_id)

    def get_event(self, project: str, event_id: str) -> EventRecord | None:
        """One event with its full text and payload, or None."""
        with read_connection(self._engine) as conn:
            return reads.get_event(conn, project, event_id)

    def sessions_by_id(self, project: str, session_ids: Sequence[str]) -> dict[str, SessionRecord]:
        """The project's sessions among `session_ids`, by id (unknown ids are absent)."""
        with read_connection(self._engine) as conn:
            return reads.sessions_by_id(conn, project, session_ids)

    def turns_by_id(self, project: str, turn_ids: Sequence[str]) -> dict[str, TurnRecord]:
        """The project's turns among `turn_ids`, by id (unknown ids are absent)."""
        with read_connection(self._engine) as conn:
            return reads.turns_by_id(conn, project, turn_ids)

    def list_turns(
        self, project: str, session_id: str, *, after_ordinal: int, limit: int
    ) -> list[TurnRecord]:
        """The session's turns with ordinal > after_ordinal, ascending, at most `limit`."""
        with read_connection(self._engine) as conn:
            return reads.list_turns(conn, project, session_id, after_ordinal, limit)

    def list_events(
        self, project: str, turn_id: str, *, after_ordinal: int, limit: int
    ) -> list[EventRecord]:
        """The turn's events with ordinal > after_ordinal, ascending, at most `limit`."""
        with read_connection(self._engine) as conn:
            return reads.list_events(conn, project, turn_id, after_ordinal, limit)

    def neighbour_turns(self, project: str, turn: TurnRecord) -> Ends:
        """The turns before and after `turn` in its session."""
        with read_connection(self._engine) as conn:
            return reads.neighbour_turns(conn, project, turn)

    def neighbour_events(self, project: str, event: EventRecord) -> Ends:
        """The events before and after `event` in session order (seq)."""
        with read_connection(self._engine) as conn:
            return reads.neighbour_events(conn, project, event)

    def neighbour_sessions(self, project: str, session: SessionRecord) -> Ends:
        """The sessions before and after `session` by (started_at, id) in its source."""
        with read_connection(self._engine) as conn:
            return reads.neighbour_sessions(conn, project, session)

    def edge_turns(self, project: str, session_id: str) -> Ends:
        """The first and last turn ids of a session."""
        with read_connection(self._engine) as conn:
            return reads.edge_turns(conn, project, session_id)

    def edge_events(self, project: str, turn_id: str) -> Ends:
        """The first and last event ids of a turn."""
        with read_connection(self._engine) as conn:
            return reads.edge_events(conn, project, turn_id)

    def list_sessions(self, query: SessionListQuery) -> list[SessionRecord]:
        """Sessions overlapping the range, by (updated_at, id) in the asked direction."""
        with read_connection(self._engine) as conn:
            return reads.list_sessions(conn, query)

    def touches(self, query: TouchQuery) -> tuple[list[FileTouch], bool]:
        """Touches of the file, newest first, and whether more than `limit` matched."""
        with read_connection(self._engine) as conn:
            return reads.touches(conn, query)

    def session_of_key(self, project: str, source: str, session_key: str) -> SessionRecord | None:
        """The session a transcript's own id maps to, if imported."""
        with read_connection(self._engine) as conn:
            return reads.session_of_key(conn, project, source, session_key)

    # Search

    def search(self, query: SearchQuery) -> SearchResult:
        """Ranked full-text search over event text; scores normalized within the response."""
        units = query_units(query.text)
        ranked = self._search.rank(units, query)
        if not ranked.hits:
            return SearchResult(hits=[], truncated=False)
        with read_connection(self._engine) as conn:
            loaded = reads.events_by_id(
                conn, query.project, [event_id for event_id, _ in ranked.hits]
            )
        # An event missing from SQL was replaced since the index ranked it.
        kept = [
            (loaded.pop(event_id), score)
            for event_id, score in ranked.hits
            if event_id in loaded and not _is_self_tool(loaded[event_id])
        ]
        scores = normalize_scores([score for _, score in kept])
        hits = []
        for (event, _), score in zip(kept, scores, strict=True):
            text, truncated = snippet(event.text, units, ranked.weights)
            hits.append(SearchHit(event, score, text, truncated))
        return SearchResult(hits=hits, truncated=ranked.truncated)


def _is_self_tool(event: EventRecord) -> bool:
    # Never indexed; checked again in case an index predates the flag.
    return bool(event.payload and event.payload.get("self_tool"))
