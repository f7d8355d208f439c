"""The session store of a trace backend that has none yet (ClickHouse, for now).

`open_stores` hands this out so `Stores.sessions` always satisfies `SessionStore`: every method
raises Unimplemented with a message naming the backend, which the gRPC layer reports as
UNIMPLEMENTED. Session search on ClickHouse (a text index with BM25, tested on chdb) comes later.
"""

from __future__ import annotations

from typing import NoReturn

from mcpd.runtime.errors import Unimplemented
from mcpd.sessions.model import AssembledSession, EventRecord, SessionRecord, TurnRecord
from mcpd.sessions.store import SearchQuery, SessionListQuery, TouchQuery

Ends = tuple[str | None, str | None]


class UnsupportedSessionStore:
    """A SessionStore whose every method raises Unimplemented."""

    def __init__(self, backend: str) -> None:
        self._backend = backend

    @property
    def backend(self) -> str:
        """The trace backend that has no session store."""
        return self._backend

    def _refuse(self) -> NoReturn:
        raise Unimplemented(
            f"agent sessions are not available on the {self._backend} storage backend yet; "
            "use sqlite or postgres"
        )

    def write_session(self, project: str, assembled: AssembledSession) -> None:
        self._refuse()

    def snapshot(self, project: str) -> int:
        self._refuse()

    def session_version(self, project: str, session_id: str) -> int | None:
        self._refuse()

    def get_session(self, project: str, session_id: str) -> SessionRecord | None:
        self._refuse()

    def get_turn(self, project: str, turn_id: str) -> TurnRecord | None:
        self._refuse()

    def get_event(self, project: str, event_id: str) -> EventRecord | None:
        self._refuse()

    def list_turns(
        self, project: str, session_id: str, *, after_ordinal: int, limit: int
    ) -> list[TurnRecord]:
        self._refuse()

    def list_events(
        self, project: str, turn_id: str, *, after_ordinal: int, limit: int
    ) -> list[EventRecord]:
        self._refuse()

    def neighbour_turns(self, project: str, turn: TurnRecord) -> Ends:
        self._refuse()

    def neighbour_events(self, project: str, event: EventRecord) -> Ends:
        self._refuse()

    def neighbour_sessions(self, project: str, session: SessionRecord) -> Ends:
        self._refuse()

    def edge_turns(self, project: str, session_id: str) -> Ends:
        self._refuse()

    def edge_events(self, project: str, turn_id: str) -> Ends:
        self._refuse()

    def search(self, query: SearchQuery) -> NoReturn:
        self._refuse()

    def list_sessions(self, query: SessionListQuery) -> NoReturn:
        self._refuse()

    def touches(self, query: TouchQuery) -> NoReturn:
        self._refuse()

    def session_of_key(self, project: str, source: str, session_key: str) -> SessionRecord | None:
        self._refuse()

    def close(self) -> None:
        """Nothing to release."""
