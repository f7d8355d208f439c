"""open: a session, turn or event by id, or the next page of an expanded session or turn.

Pages are keyset-paginated by ordinal. A cursor binds the target, its kind, the page size, the
anchor (last ordinal shown), the project and the version of the walked session it was cut
from; when that version has moved the cursor is stale and the caller reopens the target, so a
page never mixes two versions of a session.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from mcpd.sessions.model import EventRecord, SessionRecord, TurnRecord
from mcpd.sessions.store import SessionStore
from services.query.sessions import common, shapes
from services.query.sessions.args import optional_integer, reject_unknown, value
from services.query.sessions.cursors import fingerprint
from services.query.sessions.envelope import Outcome
from services.query.sessions.errors import NOT_FOUND, ToolError, invalid, read_model_refresh
from services.query.sessions.ids import Kind, id_kind

TOOL = "open"
FIELDS = ("id", "limit", "cursor")
_CURSOR_KIND = "open"


@dataclass(frozen=True, slots=True)
class OpenRequest:
    """A validated open request: a target, and for pages its size, anchor and snapshot."""

    id: str
    kind: Kind
    limit: int | None
    cursor: str | None = None
    after: int = 0
    snapshot: int | None = None

    def canonical(self) -> dict[str, Any]:
        """The request as the caller gave it, validated (no defaults apply to open)."""
        if self.cursor is not None:
            return {"cursor": self.cursor}
        if self.limit is None:
            return {"id": self.id}
        return {"id": self.id, "limit": self.limit}


def parse(arguments: Mapping[str, Any], project: str, config: common.ToolConfig) -> OpenRequest:
    """Validate open arguments: an id (with an optional limit) or a cursor on its own."""
    reject_unknown(arguments, FIELDS)
    raw_id, limit, cursor = (value(arguments, name) for name in FIELDS)
    if cursor is not None:
        if raw_id is not None:
            raise invalid("cursor", "cursor must be provided by itself, without id")
        if limit is not None:
            raise invalid("limit", "limit cannot be combined with cursor; it carries its limit")
        return _from_cursor(cursor, project, config)
    if raw_id is None:
        if limit is not None:
            raise invalid("id", "limit requires a session or turn id")
        raise invalid("id", "id or cursor is required")
    if not isinstance(raw_id, str) or not raw_id.strip():
        raise invalid("id", "id must be a non-empty string")
    kind = id_kind(raw_id, "id")
    if limit is None:
        return OpenRequest(raw_id, kind, None)
    if kind == "event":
        raise invalid("limit", "limit applies to session and turn ids only; events have no pages")
    size = optional_integer(arguments, "limit", default=1, minimum=1, maximum=config.max_results)
    return OpenRequest(raw_id, kind, size)


def _from_cursor(cursor: object, project: str, config: common.ToolConfig) -> OpenRequest:
    if not isinstance(cursor, str) or not cursor.strip():
        raise invalid("cursor", "cursor must be a non-empty string")
    body = config.cursors.decode(cursor)
    if body.get("k") != _CURSOR_KIND:
        raise invalid(
            "cursor",
            "cursor was not issued by open; open a session or turn id with limit to page it",
            reason="wrong_kind",
        )
    target, kind = body.get("t"), body.get("tk")
    if not isinstance(target, str) or kind not in ("session", "turn"):
        raise invalid("cursor", "cursor is not a valid cursor")
    if body.get("p") != fingerprint(project):
        raise invalid(
            "cursor",
            f"cursor belongs to another project; reopen {target} with limit",
            reason="cursor_mismatch",
            reopen=target,
        )
    size, after, snapshot = (_whole(body.get(key)) for key in ("n", "a", "s"))
    if size is None or after is None or snapshot is None:
        raise invalid("cursor", "cursor is not a valid cursor")
    return OpenRequest(target, kind, size, cursor, after, snapshot)


def _whole(raw: object) -> int | None:
    return raw if isinstance(raw, int) and not isinstance(raw, bool) else None


def execute(
    store: SessionStore, project: str, request: OpenRequest, config: common.ToolConfig
) -> Outcome:
    """Open the target (blocking: call from a worker thread)."""
    # Read before the rows: a change during the reads then shows up as a stale next cursor.
    # Cursors bind to the version of the session being walked, not of the whole project, so
    # an agent writing its own transcript elsewhere never makes a walk of this one stale.
    snapshot = _session_version(store, project, request)
    if request.snapshot is not None and request.snapshot != snapshot:
        raise invalid(
            "cursor",
            f"cursor is stale: the read model changed since it was issued; reopen {request.id}"
            f" with limit {request.limit}",
            reason="stale_cursor",
            reopen=request.id,
            limit=request.limit,
        )
    pager = _Pager(store, project, request, config, snapshot)
    if request.kind == "session":
        data = pager.session()
    elif request.kind == "turn":
        data = pager.turn()
    else:
        data = pager.event()
    return Outcome(request.canonical(), data, [])


def _session_version(store: SessionStore, project: str, request: OpenRequest) -> int:
    """The version of the session holding the target; 0 when the target is unknown (the
    pager then answers not_found, or a cursor for it is stale)."""
    if request.kind == "session":
        session_id: str | None = request.id
    elif request.kind == "turn":
        turn = store.get_turn(project, request.id)
        session_id = turn.session_id if turn is not None else None
    else:
        return 0  # events are never paged
    version = store.session_version(project, session_id) if session_id is not None else None
    return version if version is not None else 0


def _not_found(kind: str, target: str) -> ToolError:
    return ToolError(NOT_FOUND, f"{kind} not found", field="id", id=target)


class _Pager:
    """The store reads of one open call."""

    def __init__(
        self,
        store: SessionStore,
        project: str,
        request: OpenRequest,
        config: common.ToolConfig,
        snapshot: int,
    ) -> None:
        self._store, self._project, self._request = store, project, request
        self._config, self._snapshot = config, snapshot

    def session(self) -> dict[str, Any]:
        store, project, target = self._store, self._project, self._request.id
        session = store.get_session(project, target)
        if session is None:
            raise _not_found("session", target)
        turns: list[dict[str, Any]] = []
        next_cursor = None
        if self._request.limit is not None:
            page = store.list_turns(
                project, target, after_ordinal=self._request.after, limit=self._request.limit + 1
            )
            next_cursor = self._next_cursor([turn.ordinal for turn in page])
            turns = [
                shapes.turn_summary(turn, *self._excerpts(turn))
                for turn in page[: self._request.limit]
            ]
        previous_session, next_session = store.neighbour_sessions(project, session)
        first_turn, last_turn = store.edge_turns(project, target)
        return {
            "kind": "session",
            "session": shapes.session_open(session),
            "turns": turns,
            "next_cursor": next_cursor,
            "traversal": {
                "previous_session_id": previous_session,
                "next_session_id": next_session,
                "first_turn_id": first_turn,
                "last_turn_id": last_turn,
            },
        }

    def turn(self) -> dict[str, Any]:
        store, project, target = self._store, self._project, self._request.id
        turn = store.get_turn(project, target)
        if turn is None:
            raise _not_found("turn", target)
        session = self._session_of(turn.session_id)
        events: list[dict[str, Any]] = []
        next_cursor = None
        if self._request.limit is not None:
            page = store.list_events(
                project, target, after_ordinal=self._request.after, limit=self._request.limit + 1
            )
            next_cursor = self._next_cursor([event.ordinal for event in page])
            events = [shapes.event_summary(event) for event in page[: self._request.limit]]
        previous_turn, next_turn = store.neighbour_turns(project, turn)
        first_event, last_event = store.edge_events(project, target)
        return {
            "kind": "turn",
            "turn": shapes.turn_block(turn),
            "session": shapes.session_brief(session),
            "summary": shapes.turn_digest(turn, *self._excerpts(turn)),
            "events": events,
            "next_cursor": next_cursor,
            "traversal": {
                "session_id": session.id,
                "previous_turn_id": previous_turn,
                "next_turn_id": next_turn,
                "first_event_id": first_event,
                "last_event_id": last_event,
            },
        }

    def event(self) -> dict[str, Any]:
        store, project, target = self._store, self._project, self._request.id
        event = store.get_event(project, target)
        if event is None:
            raise _not_found("event", target)
        turn = store.get_turn(project, event.turn_id)
        if turn is None:
            raise read_model_refresh()
        session = self._session_of(event.session_id)
        previous_event, next_event = self._adjacent_events(event)
        previous_turn, next_turn = store.neighbour_turns(project, turn)
        return {
            "kind": "event",
            "event": shapes.event_block(event),
            "content": shapes.event_content(event),
            "session": shapes.session_brief(session),
            "turn": {"id": turn.id, "ordinal": turn.ordinal, "completed": turn.completed},
            "traversal": {
                "session_id": session.id,
                "turn_id": turn.id,
                "previous_event_id": previous_event,
                "next_event_id": next_event,
                "previous_turn_id": previous_turn,
                "next_turn_id": next_turn,
            },
        }

    def _adjacent_events(self, event: EventRecord) -> tuple[str | None, str | None]:
        # Adjacent within the turn (the spec's examples end next_event_id at the turn's last
        # event and cross turns through next_turn_id); ordinals are one-based and dense.
        store, project = self._store, self._project
        following = store.list_events(project, event.turn_id, after_ordinal=event.ordinal, limit=1)
        previous: str | None = None
        if event.ordinal > 1:
            before = store.list_events(
                project, event.turn_id, after_ordinal=event.ordinal - 2, limit=1
            )
            if before and before[0].ordinal < event.ordinal:
                previous = before[0].id
        return previous, following[0].id if following else None

    def _session_of(self, session_id: str) -> SessionRecord:
        session = self._store.get_session(self._project, session_id)
        if session is None:
            # The child was read but its parent is gone: an update is being published.
            raise read_model_refresh()
        return session

    def _excerpts(self, turn: TurnRecord) -> tuple[EventRecord | None, EventRecord | None]:
        def load(event_id: str | None) -> EventRecord | None:
            return None if event_id is None else self._store.get_event(self._project, event_id)

        return load(turn.user_input_event_id), load(turn.final_response_event_id)

    def _next_cursor(self, ordinals: list[int]) -> str | None:
        # The page was read with one row more than its size: that row says another page exists.
        size = self._request.limit
        if size is None or len(ordinals) <= size:
            return None
        return self._config.cursors.encode(
            {
                "k": _CURSOR_KIND,
                "t": self._request.id,
                "tk": self._request.kind,
                "n": size,
                "a": ordinals[size - 1],
                "s": self._snapshot,
                "p": fingerprint(self._project),
            }
        )
