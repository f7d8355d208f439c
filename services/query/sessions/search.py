"""search_sessions: ranked event hits as compact handles into the session graph."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from mcpd.sessions.model import EventType, SessionRecord, TurnRecord
from mcpd.sessions.store import SearchHit, SearchQuery, SessionStore
from services.query.sessions import common
from services.query.sessions.args import optional_integer, reject_unknown, required_text, value
from services.query.sessions.envelope import Outcome, as_utc, timestamp
from services.query.sessions.errors import NOT_FOUND, ToolError, invalid, read_model_refresh
from services.query.sessions.ids import Kind, id_kind, is_own_tool
from services.query.sessions.text import cap

TOOL = "search_sessions"
FIELDS = ("query", "within_id", "event_types", "harness", "source", "n_hits")
MAX_QUERY_CHARS = 4096
DEFAULT_HITS = 10
MAX_HITS = 50
# When this server's own tool calls are dropped from tool-event searches, the store is asked
# again for more, up to this many, so n_hits stays exact.
REFILL_CAP = 400
_TOOL_TYPES = frozenset({EventType.TOOL_CALL.value, EventType.TOOL_RESPONSE.value})


@dataclass(frozen=True, slots=True)
class SearchRequest:
    """A validated search_sessions request."""

    query: str
    within_id: str | None
    within_kind: Kind | None
    event_types: list[str]
    harness: str | None
    source: str | None
    n_hits: int

    def canonical(self) -> dict[str, Any]:
        """The canonical request, defaults applied (spec: Successful Response Shape)."""
        return {
            "query": self.query,
            "within_id": self.within_id,
            "event_types": self.event_types,
            "harness": self.harness,
            "source": self.source,
            "n_hits": self.n_hits,
        }


def parse(arguments: Mapping[str, Any]) -> SearchRequest:
    """Validate search_sessions arguments (spec: Accepted Inputs)."""
    reject_unknown(arguments, FIELDS)
    raw_query = required_text(arguments, "query")
    if len(raw_query) > MAX_QUERY_CHARS:
        raise invalid("query", f"query must be at most {MAX_QUERY_CHARS} characters")
    # Trimming is the one normalization the spec allows; the rest of the text is kept as sent.
    query = raw_query.strip()
    within_id, within_kind = _within(value(arguments, "within_id"))
    types = common.event_types(arguments)
    harness, source = common.harness_and_source(arguments)
    n_hits = optional_integer(
        arguments, "n_hits", default=DEFAULT_HITS, minimum=1, maximum=MAX_HITS
    )
    return SearchRequest(query, within_id, within_kind, types, harness, source, n_hits)


def _within(raw: object) -> tuple[str | None, Kind | None]:
    if raw is None:
        return None, None
    if not isinstance(raw, str) or not raw.strip():
        raise invalid("within_id", "within_id must be a non-empty string when present")
    kind = id_kind(raw, "within_id")
    if kind == "event":
        raise invalid("within_id", "within_id accepts session and turn IDs, not event IDs")
    return raw, kind


def execute(
    store: SessionStore, project: str, request: SearchRequest, config: common.ToolConfig
) -> Outcome:
    """Run the search and shape the hits (blocking: call from a worker thread)."""
    session_id = turn_id = None
    if request.within_kind == "session":
        session_id = request.within_id
        if session_id is None or store.get_session(project, session_id) is None:
            raise ToolError(NOT_FOUND, "session not found", field="within_id", id=session_id)
    elif request.within_kind == "turn":
        turn_id = request.within_id
        if turn_id is None or store.get_turn(project, turn_id) is None:
            raise ToolError(NOT_FOUND, "turn not found", field="within_id", id=turn_id)
    query = SearchQuery(
        project=project,
        text=request.query,
        event_types=tuple(request.event_types),
        limit=request.n_hits,
        session_id=session_id,
        turn_id=turn_id,
        harness=request.harness,
        source=request.source,
    )
    hits, truncated = _ranked(store, query, drop_own=bool(_TOOL_TYPES & set(query.event_types)))
    turns, sessions = _rows_of(store, project, hits)
    results: list[dict[str, Any]] = []
    for hit in hits:
        turn, session = turns[hit.event.turn_id], sessions[hit.event.session_id]
        if not _in_scope(hit, turn, session, query):
            # A store answering outside the asked scope must not leak it to the caller.
            continue
        results.append(_hit(len(results) + 1, hit, turn, session))
    data = {
        "result_count": len(results),
        "limit": request.n_hits,
        "truncated": truncated,
        "results": results,
    }
    warnings = common.filter_warnings(request.harness, request.source, config.sources)
    return Outcome(request.canonical(), data, warnings)


def _ranked(
    store: SessionStore, query: SearchQuery, *, drop_own: bool
) -> tuple[list[SearchHit], bool]:
    """The top `query.limit` hits in the contract's order, without this server's own calls."""
    wanted, limit = query.limit, query.limit
    while True:
        result = store.search(replace(query, limit=limit))
        kept = [h for h in result.hits if not (drop_own and _own(h))]
        if len(kept) >= wanted or not result.truncated or limit >= REFILL_CAP:
            break
        limit = min(REFILL_CAP, limit * 4)
    kept.sort(key=_rank_key)
    return kept[:wanted], result.truncated or len(kept) > wanted


def _own(hit: SearchHit) -> bool:
    return is_own_tool(hit.event.tool_name, hit.event.payload)


def _rank_key(hit: SearchHit) -> tuple[float, float, str]:
    # Score descending, then event time descending, then event id ascending (spec: Ranking).
    return (-_score(hit.score), -_epoch(hit.event.timestamp), hit.event.id)


def _score(score: float) -> float:
    # Scores are [0, 1] by contract; a NaN or a rounding overshoot must not break the schema.
    return 0.0 if math.isnan(score) else min(1.0, max(0.0, score))


def _epoch(moment: datetime) -> float:
    return as_utc(moment).timestamp()


def _rows_of(
    store: SessionStore, project: str, hits: list[SearchHit]
) -> tuple[dict[str, TurnRecord], dict[str, SessionRecord]]:
    """The hits' turns and sessions, by id, in one read each. A row that vanished between the
    search and this read means an ingest update is being published: the caller retries."""
    if not hits:
        return {}, {}
    turn_ids = list(dict.fromkeys(hit.event.turn_id for hit in hits))
    session_ids = list(dict.fromkeys(hit.event.session_id for hit in hits))
    turns = store.turns_by_id(project, turn_ids)
    sessions = store.sessions_by_id(project, session_ids)
    if any(i not in turns for i in turn_ids) or any(i not in sessions for i in session_ids):
        raise read_model_refresh()
    return turns, sessions


def _in_scope(hit: SearchHit, turn: TurnRecord, session: SessionRecord, q: SearchQuery) -> bool:
    event = hit.event
    return (
        event.type.value in q.event_types
        and (q.session_id is None or event.session_id == q.session_id)
        and (q.turn_id is None or event.turn_id == q.turn_id)
        and (q.harness is None or session.harness == q.harness)
        and (q.source is None or session.source == q.source)
        and turn.session_id == session.id == event.session_id
    )


def _hit(rank: int, hit: SearchHit, turn: TurnRecord, session: SessionRecord) -> dict[str, Any]:
    event = hit.event
    snippet, capped = cap(hit.snippet)
    return {
        "rank": rank,
        "score": _score(hit.score),
        "id": event.id,
        "event": {
            "id": event.id,
            "type": event.type.value,
            "timestamp": timestamp(event.timestamp),
            "ordinal": event.ordinal,
            "terminal": event.terminal,
        },
        "turn": {
            "id": turn.id,
            "ordinal": turn.ordinal,
            "completed": turn.completed,
            "event_count": turn.event_count,
        },
        "session": {
            "id": session.id,
            "title": session.title,
            "source": session.source,
            "harness": session.harness,
            "started_at": timestamp(session.started_at),
            "updated_at": timestamp(session.updated_at),
            "completed": session.completed,
        },
        "snippet": {"text": snippet, "truncated": hit.snippet_truncated or capped},
        "open": {"event_id": event.id, "turn_id": turn.id, "session_id": session.id},
    }
