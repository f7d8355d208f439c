"""An in-memory SessionStore: an edge fake for the tools' unit tests.

It implements the SessionStore contract literally (project scoping, keyset pages, ranking
order, snapshot bumps) so the tool tests exercise the same behaviour a real backend owes, plus
hooks to inject failures and read-model churn.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Sequence
from dataclasses import replace
from datetime import UTC, datetime

from mcpd.sessions.model import AssembledSession, EventRecord, FileTouch, SessionRecord, TurnRecord
from mcpd.sessions.store import (
    SearchHit,
    SearchQuery,
    SearchResult,
    SessionListQuery,
    TouchQuery,
)

_WORD = re.compile(r"\w+")
SNIPPET_CHARS = 80
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


class MemorySessionStore:
    """SessionStore over dicts, one namespace per project."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._data: dict[str, dict[str, AssembledSession]] = {}
        self._snapshots: dict[str, int] = {}
        self._versions: dict[tuple[str, str], int] = {}
        # Test hooks: an exception every call raises; a callback run after each search.
        self.fail_with: Exception | None = None
        self.after_search: Callable[[], None] | None = None
        self.search_limits: list[int] = []

    # -- writes -------------------------------------------------------------------------------

    def write_session(self, project: str, assembled: AssembledSession) -> None:
        """Insert or replace a session; identical data leaves the snapshot alone."""
        with self._lock:
            sessions = self._data.setdefault(project, {})
            if sessions.get(assembled.session.id) == assembled:
                return
            sessions[assembled.session.id] = assembled
            self._snapshots[project] = self._snapshots.get(project, 0) + 1
            self._versions[project, assembled.session.id] = self._snapshots[project]

    def delete_session(self, project: str, session_id: str) -> None:
        """Remove a session (test helper: simulates a re-index dropping rows)."""
        with self._lock:
            self._data.get(project, {}).pop(session_id, None)
            self._snapshots[project] = self._snapshots.get(project, 0) + 1

    def snapshot(self, project: str) -> int:
        self._check()
        return self._snapshots.get(project, 0)

    def session_version(self, project: str, session_id: str) -> int | None:
        self._check()
        if session_id not in self._sessions(project):
            return None
        return self._versions.get((project, session_id), 0)

    # -- point reads --------------------------------------------------------------------------

    def get_session(self, project: str, session_id: str) -> SessionRecord | None:
        self._check()
        found = self._sessions(project).get(session_id)
        return None if found is None else found.session

    def get_turn(self, project: str, turn_id: str) -> TurnRecord | None:
        self._check()
        return next((t for t in self._turns(project) if t.id == turn_id), None)

    def get_event(self, project: str, event_id: str) -> EventRecord | None:
        self._check()
        return next((e for e in self._events(project) if e.id == event_id), None)

    def sessions_by_id(self, project: str, session_ids: Sequence[str]) -> dict[str, SessionRecord]:
        self._check()
        sessions = self._sessions(project)
        return {i: sessions[i].session for i in session_ids if i in sessions}

    def turns_by_id(self, project: str, turn_ids: Sequence[str]) -> dict[str, TurnRecord]:
        self._check()
        wanted = set(turn_ids)
        return {t.id: t for t in self._turns(project) if t.id in wanted}

    # -- pages and neighbours -----------------------------------------------------------------

    def list_turns(
        self, project: str, session_id: str, *, after_ordinal: int, limit: int
    ) -> list[TurnRecord]:
        self._check()
        turns = [t for t in self._turns(project) if t.session_id == session_id]
        turns = sorted((t for t in turns if t.ordinal > after_ordinal), key=lambda t: t.ordinal)
        return turns[:limit]

    def list_events(
        self, project: str, turn_id: str, *, after_ordinal: int, limit: int
    ) -> list[EventRecord]:
        self._check()
        events = [e for e in self._events(project) if e.turn_id == turn_id]
        events = sorted((e for e in events if e.ordinal > after_ordinal), key=lambda e: e.ordinal)
        return events[:limit]

    def neighbour_turns(self, project: str, turn: TurnRecord) -> tuple[str | None, str | None]:
        self._check()
        turns = sorted(
            (t for t in self._turns(project) if t.session_id == turn.session_id),
            key=lambda t: t.ordinal,
        )
        return _around([t.id for t in turns], turn.id)

    def neighbour_events(self, project: str, event: EventRecord) -> tuple[str | None, str | None]:
        self._check()
        events = sorted(
            (e for e in self._events(project) if e.session_id == event.session_id),
            key=lambda e: e.seq,
        )
        return _around([e.id for e in events], event.id)

    def neighbour_sessions(
        self, project: str, session: SessionRecord
    ) -> tuple[str | None, str | None]:
        self._check()
        same = sorted(
            (s.session for s in self._sessions(project).values()),
            key=lambda s: (s.started_at, s.id),
        )
        return _around([s.id for s in same if s.source == session.source], session.id)

    def edge_turns(self, project: str, session_id: str) -> tuple[str | None, str | None]:
        turns = self.list_turns(project, session_id, after_ordinal=0, limit=10**9)
        return (turns[0].id, turns[-1].id) if turns else (None, None)

    def edge_events(self, project: str, turn_id: str) -> tuple[str | None, str | None]:
        events = self.list_events(project, turn_id, after_ordinal=0, limit=10**9)
        return (events[0].id, events[-1].id) if events else (None, None)

    # -- queries ------------------------------------------------------------------------------

    def search(self, query: SearchQuery) -> SearchResult:
        """Fraction of distinct query words present, as the score; contract order."""
        self._check()
        self.search_limits.append(query.limit)
        words = set(_WORD.findall(query.text.lower()))
        hits: list[SearchHit] = []
        for assembled in self._sessions(query.project).values():
            session = assembled.session
            if query.session_id is not None and session.id != query.session_id:
                continue
            if query.harness is not None and session.harness != query.harness:
                continue
            if query.source is not None and session.source != query.source:
                continue
            for event in assembled.events:
                if event.type.value not in query.event_types:
                    continue
                if query.turn_id is not None and event.turn_id != query.turn_id:
                    continue
                present = words & set(_WORD.findall(event.text.lower()))
                if words and present:
                    hits.append(_hit(event, len(present) / len(words)))
        hits.sort(key=lambda h: (-h.score, -h.event.timestamp.timestamp(), h.event.id))
        result = SearchResult(hits[: query.limit], len(hits) > query.limit)
        if self.after_search is not None:
            self.after_search()
        return result

    def list_sessions(self, query: SessionListQuery) -> list[SessionRecord]:
        self._check()
        rows = [
            a.session
            for a in self._sessions(query.project).values()
            if a.session.updated_at >= query.start
            and a.session.started_at < query.end
            and (query.mode is None or a.session.mode == query.mode)
            and (query.harness is None or a.session.harness == query.harness)
            and (query.source is None or a.session.source == query.source)
        ]
        rows.sort(key=lambda s: (s.updated_at, s.id), reverse=query.descending)
        if query.after is not None:
            after = query.after
            if query.descending:
                rows = [s for s in rows if (s.updated_at, s.id) < after]
            else:
                rows = [s for s in rows if (s.updated_at, s.id) > after]
        return rows[: query.limit]

    def touches(self, query: TouchQuery) -> tuple[list[FileTouch], bool]:
        self._check()
        found: list[FileTouch] = []
        for assembled in self._sessions(query.project).values():
            session = assembled.session
            if query.harness is not None and session.harness != query.harness:
                continue
            if query.source is not None and session.source != query.source:
                continue
            for touch in assembled.touches:
                if not _tail_matches(touch, query.tail):
                    continue
                if query.tool is not None and touch.tool_name != query.tool:
                    continue
                if query.mutations_only and not touch.mutation:
                    continue
                if query.git_common_dir is not None and touch.git_common_dir != (
                    query.git_common_dir
                ):
                    continue
                if query.start is not None or query.end is not None:
                    if touch.timestamp is None:
                        continue
                    if query.start is not None and touch.timestamp < query.start:
                        continue
                    if query.end is not None and touch.timestamp >= query.end:
                        continue
                found.append(touch)
        found.sort(
            key=lambda t: (t.timestamp is None, -(t.timestamp or _EPOCH).timestamp(), t.event_id)
        )
        return found[: query.limit], len(found) > query.limit

    def session_of_key(self, project: str, source: str, session_key: str) -> SessionRecord | None:
        self._check()
        for assembled in self._sessions(project).values():
            s = assembled.session
            if s.source == source and s.session_key == session_key:
                return s
        return None

    # -- internals ----------------------------------------------------------------------------

    def _check(self) -> None:
        if self.fail_with is not None:
            raise self.fail_with

    def _sessions(self, project: str) -> dict[str, AssembledSession]:
        with self._lock:
            return dict(self._data.get(project, {}))

    def _turns(self, project: str) -> list[TurnRecord]:
        return [t for a in self._sessions(project).values() for t in a.turns]

    def _events(self, project: str) -> list[EventRecord]:
        return [e for a in self._sessions(project).values() for e in a.events]


def _around(ids: list[str], target: str) -> tuple[str | None, str | None]:
    if target not in ids:
        return None, None
    index = ids.index(target)
    previous = ids[index - 1] if index > 0 else None
    following = ids[index + 1] if index + 1 < len(ids) else None
    return previous, following


def _hit(event: EventRecord, score: float) -> SearchHit:
    text = " ".join(event.text.split())
    truncated = len(text) > SNIPPET_CHARS
    return SearchHit(replace(event), score, text[:SNIPPET_CHARS], truncated)


def _tail_matches(touch: FileTouch, tail: str) -> bool:
    if touch.tail == tail:
        return True
    # An absolute tail (root unknown) still matches by path suffix.
    return touch.tail_is_absolute and touch.tail.endswith("/" + tail)
