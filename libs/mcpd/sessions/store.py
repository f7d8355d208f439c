"""The session read model's storage interface (one implementation per backend).

SYNCHRONOUS like every store: async callers run it in a worker thread. Every method is scoped to
one project; nothing crosses projects.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

from mcpd.sessions.model import AssembledSession, EventRecord, FileTouch, SessionRecord, TurnRecord


@dataclass(frozen=True, slots=True)
class SearchQuery:
    """What search_sessions asks of the store (already validated and canonical)."""

    project: str
    text: str
    event_types: Sequence[str]
    limit: int
    session_id: str | None = None
    turn_id: str | None = None
    harness: str | None = None
    source: str | None = None


@dataclass(frozen=True, slots=True)
class SearchHit:
    """One ranked event. `score` is normalized to [0, 1] within one response."""

    event: EventRecord
    score: float
    snippet: str
    snippet_truncated: bool


@dataclass(frozen=True, slots=True)
class SearchResult:
    """Hits in rank order (score desc, timestamp desc, event id asc); `truncated` when more
    matches may exist beyond the limit."""

    hits: list[SearchHit]
    truncated: bool


@dataclass(frozen=True, slots=True)
class SessionListQuery:
    """list_sessions: sessions with updated_at >= start and started_at < end."""

    project: str
    start: datetime
    end: datetime
    limit: int
    descending: bool = True
    mode: str | None = None
    harness: str | None = None
    source: str | None = None
    # Keyset anchor: the (updated_at, id) of the last session of the previous page.
    after: tuple[datetime, str] | None = None


@dataclass(frozen=True, slots=True)
class TouchQuery:
    """file_attention: touches whose repo-relative tail matches `tail`."""

    project: str
    tail: str
    limit: int
    start: datetime | None = None
    end: datetime | None = None
    tool: str | None = None
    harness: str | None = None
    source: str | None = None
    mutations_only: bool = False
    git_common_dir: str | None = None


class SessionStore(Protocol):
    """Sessions, turns, events and file touches, with ranked search over event text."""

    def write_session(self, project: str, assembled: AssembledSession) -> None:
        """Insert or replace one session with its turns, events and touches, atomically, and
        bring the search index in step. Re-writing identical data changes nothing."""
        ...

    def snapshot(self, project: str) -> int:
        """A number that changes whenever the project's read model changes."""
        ...

    def session_version(self, project: str, session_id: str) -> int | None:
        """A number that changes whenever this session's rows change (open cursors bind to it,
        so writes to other sessions never make a walk stale); None for an unknown session."""
        ...

    def get_session(self, project: str, session_id: str) -> SessionRecord | None:
        """One session, or None."""
        ...

    def get_turn(self, project: str, turn_id: str) -> TurnRecord | None:
        """One turn, or None."""
        ...

    def get_event(self, project: str, event_id: str) -> EventRecord | None:
        """One event with its full text and payload, or None."""
        ...

    def sessions_by_id(self, project: str, session_ids: Sequence[str]) -> dict[str, SessionRecord]:
        """The project's sessions among `session_ids`, by id, in one read; an id it does not
        hold is absent from the answer."""
        ...

    def turns_by_id(self, project: str, turn_ids: Sequence[str]) -> dict[str, TurnRecord]:
        """The project's turns among `turn_ids`, by id, in one read; an id it does not hold is
        absent from the answer."""
        ...

    def list_turns(
        self, project: str, session_id: str, *, after_ordinal: int, limit: int
    ) -> list[TurnRecord]:
        """The session's turns with ordinal > after_ordinal, ascending, at most `limit`."""
        ...

    def list_events(
        self, project: str, turn_id: str, *, after_ordinal: int, limit: int
    ) -> list[EventRecord]:
        """The turn's events with ordinal > after_ordinal, ascending, at most `limit`."""
        ...

    def neighbour_turns(self, project: str, turn: TurnRecord) -> tuple[str | None, str | None]:
        """The ids of the turns before and after `turn` in its session (None at the ends)."""
        ...

    def neighbour_events(self, project: str, event: EventRecord) -> tuple[str | None, str | None]:
        """The ids of the events before and after `event` in session order (by seq)."""
        ...

    def neighbour_sessions(
        self, project: str, session: SessionRecord
    ) -> tuple[str | None, str | None]:
        """The sessions before and after `session` by (started_at, id) in the same source."""
        ...

    def edge_turns(self, project: str, session_id: str) -> tuple[str | None, str | None]:
        """The first and last turn ids of a session."""
        ...

    def edge_events(self, project: str, turn_id: str) -> tuple[str | None, str | None]:
        """The first and last event ids of a turn."""
        ...

    def search(self, query: SearchQuery) -> SearchResult:
        """Ranked full-text search over event text (BM25 with top-k pruning)."""
        ...

    def list_sessions(self, query: SessionListQuery) -> list[SessionRecord]:
        """Sessions overlapping the range, ordered by (updated_at, id) in the asked direction."""
        ...

    def touches(self, query: TouchQuery) -> tuple[list[FileTouch], bool]:
        """Touches of the file, newest first, and whether the scan was capped."""
        ...

    def session_of_key(self, project: str, source: str, session_key: str) -> SessionRecord | None:
        """The session a transcript's own id maps to, if imported."""
        ...
