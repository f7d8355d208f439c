"""file_attention's summary, root buckets, event rows and session rollups."""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from dataclasses import dataclass
from typing import Any

from mcpd.sessions.model import FileTouch, SessionRecord
from mcpd.sessions.store import SessionStore
from services.query.sessions.envelope import as_utc, optional_timestamp, timestamp
from services.query.sessions.errors import read_model_refresh
from services.query.sessions.paths import ResolvedPath
from services.query.sessions.shapes import tool_arguments, unique

PREVIEW_CHARS = 160


def newest_first(touch: FileTouch) -> tuple[bool, float, str]:
    """Sort key: newest first, unknown times last, then event id for a stable order."""
    if touch.timestamp is None:
        return (True, 0.0, touch.event_id)
    return (False, -as_utc(touch.timestamp).timestamp(), touch.event_id)


def summarize(
    touches: list[FileTouch], scan_capped: bool
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The summary block and the root buckets (known roots by touches, then the unknown root:
    it is listed because it can make a single known root ambiguous)."""
    per_root: Counter[str | None] = Counter(t.worktree_root for t in touches)
    sessions_per_root: dict[str | None, set[str]] = defaultdict(set)
    for touch in touches:
        sessions_per_root[touch.worktree_root].add(touch.session_id)
    known = sorted((r for r in per_root if r is not None), key=lambda r: (-per_root[r], r))
    order: list[str | None] = [*known, *([None] if None in per_root else [])]
    roots = [
        {"root": r, "touch_count": per_root[r], "session_count": len(sessions_per_root[r])}
        for r in order
    ]
    times = [as_utc(t.timestamp) for t in touches if t.timestamp is not None]
    summary = {
        "total_touches": len(touches),
        "distinct_sessions": len({t.session_id for t in touches}),
        "distinct_roots": len(roots),
        "distinct_known_roots": len(known),
        "unknown_root_touches": per_root.get(None, 0),
        "first_touch": timestamp(min(times)) if times else None,
        "last_touch": timestamp(max(times)) if times else None,
        "ambiguous": len(roots) > 1,
        "scan_truncated": scan_capped,
    }
    return summary, roots


def warnings(summary: dict[str, Any], resolved: ResolvedPath) -> list[dict[str, Any]]:
    """Warnings that make ambiguity and partial answers visible to generic clients."""
    found: list[dict[str, Any]] = []
    unknown = summary["unknown_root_touches"]
    if unknown:
        found.append(
            {
                "code": "unknown_worktree_root",
                "message": f"{unknown} touch(es) have no known worktree root; the same tail "
                "there may be a different file",
                "touches": unknown,
            }
        )
    if summary["distinct_known_roots"] > 1:
        found.append(
            {
                "code": "ambiguous_tail",
                "message": f"the tail was touched under {summary['distinct_known_roots']} "
                "known roots; check roots before assuming one file",
            }
        )
    if resolved.tail_is_absolute:
        found.append(
            {
                "code": "unresolved_root",
                "message": "the path could not be reduced to a project-relative tail; "
                "only touches of this absolute path match",
            }
        )
    if summary["scan_truncated"]:
        found.append(
            {
                "code": "scan_truncated",
                "message": "the touch scan hit its cap; counts cover the newest touches only",
            }
        )
    return found


def by_session(touches: list[FileTouch]) -> list[list[FileTouch]]:
    """Touches grouped per session (each newest first), sessions by latest touch."""
    groups: dict[str, list[FileTouch]] = {}
    for touch in touches:  # already newest first, so group order is latest-touch order
        groups.setdefault(touch.session_id, []).append(touch)
    return list(groups.values())


@dataclass
class Rows:
    """Builds displayed rows, loading each session, turn and event once."""

    store: SessionStore
    project: str
    path: str
    resolved: ResolvedPath

    def __post_init__(self) -> None:
        self._sessions: dict[str, SessionRecord] = {}
        self._turn_ordinals: dict[str, int | None] = {}

    def event_row(self, rank: int, touch: FileTouch) -> dict[str, Any]:
        """One flat timeline row."""
        session = self._session(touch.session_id)
        return {
            "rank": rank,
            "id": touch.event_id,
            "event": {
                "id": touch.event_id,
                "session_id": touch.session_id,
                "harness": session.harness,
                "source": session.source,
                "timestamp": optional_timestamp(touch.timestamp),
                "tool_name": touch.tool_name,
                "phase": touch.phase,
                "turn": self._turn_ordinal(touch.turn_id),
                "match_kind": self._match_kind(touch),
                "worktree_root": touch.worktree_root,
                "action_preview": self._preview(touch),
            },
            "open": _open(touch),
        }

    def session_row(self, rank: int, touches: list[FileTouch]) -> dict[str, Any]:
        """One session rollup; its `open` points at the session's latest touch."""
        latest = touches[0]
        session = self._session(latest.session_id)
        times = [as_utc(t.timestamp) for t in touches if t.timestamp is not None]
        return {
            "rank": rank,
            "id": session.id,
            "session": {
                "id": session.id,
                "title": session.title,
                "harness": session.harness,
                "source": session.source,
                "started_at": timestamp(session.started_at),
                "updated_at": timestamp(session.updated_at),
            },
            "touch_count": len(touches),
            "mutation_count": sum(1 for t in touches if t.mutation),
            "first_touch": timestamp(min(times)) if times else None,
            "last_touch": timestamp(max(times)) if times else None,
            "tools": unique([t.tool_name for t in reversed(touches)]),
            "roots": unique([t.worktree_root for t in reversed(touches) if t.worktree_root]),
            "unknown_root_touches": sum(1 for t in touches if t.worktree_root is None),
            "open": _open(latest),
        }

    def _session(self, session_id: str) -> SessionRecord:
        if session_id not in self._sessions:
            session = self.store.get_session(self.project, session_id)
            if session is None:
                raise read_model_refresh()
            self._sessions[session_id] = session
        return self._sessions[session_id]

    def _turn_ordinal(self, turn_id: str | None) -> int | None:
        if turn_id is None:
            return None
        if turn_id not in self._turn_ordinals:
            turn = self.store.get_turn(self.project, turn_id)
            self._turn_ordinals[turn_id] = None if turn is None else turn.ordinal
        return self._turn_ordinals[turn_id]

    def _match_kind(self, touch: FileTouch) -> str:
        if touch.raw_path == self.path:
            return "exact"
        if not touch.tail_is_absolute and touch.tail == self.resolved.tail:
            return "tail"
        return "path_suffix"

    def _preview(self, touch: FileTouch) -> str | None:
        event = self.store.get_event(self.project, touch.event_id)
        if event is None:
            return None
        arguments = tool_arguments(event)
        text = event.text if arguments is None else json.dumps(arguments, separators=(",", ":"))
        text = " ".join(text.split())
        return text if len(text) <= PREVIEW_CHARS else text[: PREVIEW_CHARS - 3] + "..."


def _open(touch: FileTouch) -> dict[str, str]:
    # turn_id only when the touch joins the conversation trace (spec: "present turn_id").
    handles = {"event_id": touch.event_id, "session_id": touch.session_id}
    if touch.turn_id is not None:
        handles["turn_id"] = touch.turn_id
    return handles
