"""list_sessions: sessions overlapping a datetime range, keyset-paginated by (updated_at, id)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from mcpd.sessions.model import SessionRecord
from mcpd.sessions.store import SessionListQuery, SessionStore
from services.query.sessions import common
from services.query.sessions.args import (
    optional_choice,
    optional_integer,
    reject_unknown,
    required_datetime,
    value,
)
from services.query.sessions.cursors import fingerprint
from services.query.sessions.envelope import Outcome, as_utc, request_timestamp
from services.query.sessions.errors import invalid
from services.query.sessions.shapes import session_listed

TOOL = "list_sessions"
FIELDS = (
    "start_datetime",
    "end_datetime",
    "limit",
    "cursor",
    "mode",
    "harness",
    "source",
    "sort",
)
MODES = ("web_search", "mcp_internal", "tool_calling", "chat")
SORTS = ("desc", "asc")
DEFAULT_LIMIT = 20
_CURSOR_KIND = "list_sessions"


@dataclass(frozen=True, slots=True)
class ListRequest:
    """A validated list_sessions request; `after`/`offset` come from a verified cursor."""

    start: datetime
    end: datetime
    limit: int
    cursor: str | None
    mode: str | None
    harness: str | None
    source: str | None
    sort: str
    after: tuple[datetime, str] | None
    offset: int

    def canonical(self) -> dict[str, Any]:
        """The canonical request, defaults applied."""
        return {
            "start_datetime": request_timestamp(self.start),
            "end_datetime": request_timestamp(self.end),
            "limit": self.limit,
            "cursor": self.cursor,
            "mode": self.mode,
            "harness": self.harness,
            "source": self.source,
            "sort": self.sort,
        }


def _binding(project: str, canonical: Mapping[str, Any]) -> str:
    # A cursor continues one project's listing under one filter and sort; the page size may
    # change between pages because the keyset anchor does not depend on it.
    keys = ("start_datetime", "end_datetime", "mode", "harness", "source", "sort")
    return fingerprint(project, [canonical[key] for key in keys])


def parse(arguments: Mapping[str, Any], project: str, config: common.ToolConfig) -> ListRequest:
    """Validate list_sessions arguments and any cursor against this filter and sort."""
    reject_unknown(arguments, FIELDS)
    start = required_datetime(arguments, "start_datetime")
    end = required_datetime(arguments, "end_datetime")
    if end <= start:
        raise invalid("end_datetime", "end_datetime must be after start_datetime")
    limit = optional_integer(
        arguments,
        "limit",
        default=min(DEFAULT_LIMIT, config.max_results),
        minimum=1,
        maximum=config.max_results,
    )
    mode = optional_choice(arguments, "mode", MODES, default=None)
    harness, source = common.harness_and_source(arguments)
    sort = optional_choice(arguments, "sort", SORTS, default="desc") or "desc"
    cursor = value(arguments, "cursor")
    if cursor is not None and (not isinstance(cursor, str) or not cursor.strip()):
        raise invalid("cursor", "cursor must be a non-empty string when present")
    request = ListRequest(start, end, limit, cursor, mode, harness, source, sort, None, 0)
    if cursor is None:
        return request
    body = config.cursors.decode(cursor)
    if body.get("k") != _CURSOR_KIND:
        raise invalid("cursor", "cursor does not belong to list_sessions", reason="wrong_kind")
    if body.get("f") != _binding(project, request.canonical()):
        raise invalid(
            "cursor",
            "cursor belongs to a different filter or sort; repeat the request without cursor",
            reason="cursor_mismatch",
        )
    try:
        anchor_time, anchor_id = body["a"]
        after = (datetime.fromisoformat(anchor_time), str(anchor_id))
        offset = int(body["o"])
    except (KeyError, TypeError, ValueError):
        raise invalid("cursor", "cursor is not a valid cursor") from None
    return ListRequest(start, end, limit, cursor, mode, harness, source, sort, after, offset)


def execute(
    store: SessionStore, project: str, request: ListRequest, config: common.ToolConfig
) -> Outcome:
    """One page of sessions (blocking: call from a worker thread)."""
    query = SessionListQuery(
        project=project,
        start=request.start,
        end=request.end,
        limit=request.limit + 1,  # one more than shown says whether another page exists
        descending=request.sort == "desc",
        mode=request.mode,
        harness=request.harness,
        source=request.source,
        after=request.after,
    )
    rows = [row for row in store.list_sessions(query) if _matches(row, request)]
    more = len(rows) > request.limit
    rows = rows[: request.limit]
    next_cursor = None
    if more:
        last = rows[-1]
        next_cursor = config.cursors.encode(
            {
                "k": _CURSOR_KIND,
                "f": _binding(project, request.canonical()),
                "a": [last.updated_at.isoformat(), last.id],
                # Ranks continue across pages: rank is the place in the whole ordering.
                "o": request.offset + len(rows),
            }
        )
    sessions = [
        {
            "rank": request.offset + index,
            "id": row.id,
            "session": session_listed(row),
            "open": {"session_id": row.id},
        }
        for index, row in enumerate(rows, start=1)
    ]
    data = {
        "result_count": len(sessions),
        "limit": request.limit,
        "truncated": more,
        "sessions": sessions,
        "next_cursor": next_cursor,
    }
    warnings = common.filter_warnings(request.harness, request.source, config.sources)
    return Outcome(request.canonical(), data, warnings)


def _matches(row: SessionRecord, request: ListRequest) -> bool:
    # The store filters; this re-check keeps a misbehaving backend from widening the answer.
    return (
        as_utc(row.updated_at) >= request.start
        and as_utc(row.started_at) < request.end
        and (request.mode is None or row.mode == request.mode)
        and (request.harness is None or row.harness == request.harness)
        and (request.source is None or row.source == request.source)
    )
