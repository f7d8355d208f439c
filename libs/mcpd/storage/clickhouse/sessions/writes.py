"""Writing one assembled session to ClickHouse: only what changed, as new row versions.

ClickHouse has no transactions, so a write is a sequence of inserts ordered to be safe:

1. The stored session's content hash is read; when it equals the new one the write is a no-op
   (an identical re-write changes nothing, not even the version).
2. The project's next version is allocated (its highest version plus one).
3. Turns and events are diffed by row hash against the stored ones: new and changed rows are
   inserted at the new version, vanished ones get a tombstone (`is_deleted = 1`) at it; the
   touches are all re-inserted by position and the positions past the new end tombstoned.
4. The session row (with its new content hash and search totals) and then the project's
   version row are inserted last.

A write that fails part-way leaves the session row, and so its content hash, as it was: the next
import of the transcript sees a difference and writes it again, which completes it. Until then
reads may see some of the new child rows (there is no rollback). Version allocation is
serialised within a process (`ClickHouseSessionStore` holds a lock); two processes writing one
project at once could allocate the same version, so, as on SQLite, one process imports.
"""

from __future__ import annotations

from collections.abc import Sequence

from mcpd.sessions.model import AssembledSession
from mcpd.sessions.search.analysis import tokens
from mcpd.storage.clickhouse.executor import ClickHouseExecutor
from mcpd.storage.clickhouse.sessions.tables import (
    EVENTS,
    SEARCH,
    SESSION_EXTRA,
    SESSIONS,
    TOUCHES,
    TURNS,
    VERSIONED,
    insert,
)
from mcpd.storage.sql.sessions.rows import Row, content_hash, is_searchable, rows_of, search_text

_TOMBSTONE = {"project": "String", "id": "String", **VERSIONED}
TOUCH_TOMBSTONE = {"project": "String", "session_id": "String", "position": "Int64", **VERSIONED}


def write_session(executor: ClickHouseExecutor, project: str, assembled: AssembledSession) -> bool:
    """Replace one session's rows; return False (writing nothing) when nothing differs."""
    if assembled.session.project != project:
        raise ValueError("the assembled session belongs to another project")
    session, turn_rows, event_rows, touch_rows = rows_of(project, assembled)
    for kind, rows in (("turn", turn_rows), ("event", event_rows)):
        if len({row["id"] for row in rows}) != len(rows):
            raise ValueError(f"the assembled session repeats a {kind} id")
    digest = content_hash(session, turn_rows, event_rows, touch_rows)
    session_id = assembled.session.id
    stored = executor.query(
        "SELECT content_hash, search_docs, search_length FROM sessions FINAL "
        "WHERE project = {project:String} AND id = {id:String}",
        {"project": project, "id": session_id},
    )
    if stored and stored[0][0] == digest:
        return False
    docs, length = (int(stored[0][1]), int(stored[0][2])) if stored else (0, 0)
    version = next_version(executor, project)
    where: dict[str, object] = {"project": project, "session_id": session_id}

    replace_rows(executor, "turns", TURNS, where, turn_rows, version)
    docs, length = replace_events(executor, where, event_rows, version, (docs, length))
    _replace_touches(executor, where, touch_rows, version)

    totals = {"content_hash": digest, "search_docs": docs, "search_length": length}
    insert(
        executor,
        "sessions",
        {**SESSIONS, **SESSION_EXTRA},
        [{**session, **totals, "version": version}],
    )
    insert(
        executor,
        "session_versions",
        {"project": "String", "version": "UInt64"},
        [{"project": project, "version": version}],
    )
    return True


def replace_events(
    executor: ClickHouseExecutor,
    where: dict[str, object],
    rows: Sequence[Row],
    version: int,
    totals: tuple[int, int],
) -> tuple[int, int]:
    """Make the session's stored events equal `rows` at `version` (new and changed
    ones inserted, vanished ones tombstoned); return the session's search totals (searchable
    events, tokens) moved from `totals` by the difference."""
    docs, length = totals
    existing = _existing(executor, "events", where, ", searchable, doc_length")
    stale, fresh = diff_rows(existing, rows)
    # The old rows of vanished and changed events leave the search totals.
    for event_id in [*stale, *(row["id"] for row in fresh if row["id"] in existing)]:
        _, searchable, doc_length = existing[event_id]
        docs -= int(bool(searchable))
        length -= int(str(doc_length))
    fresh = [with_search(row) for row in fresh]
    for row in fresh:
        docs += int(row["searchable"])
        length += int(row["doc_length"])
    tombstone(executor, "events", str(where["project"]), stale, version)
    insert(executor, "events", {**EVENTS, **SEARCH, **VERSIONED}, versioned(fresh, version))
    return docs, length


def next_version(executor: ClickHouseExecutor, project: str) -> int:
    """The project's current version plus one (1 for a new project)."""
    rows = executor.query(
        "SELECT max(version) FROM session_versions WHERE project = {project:String}",
        {"project": project},
    )
    return int(rows[0][0] or 0) + 1


def with_search(row: Row) -> Row:
    """An event row with its search columns: searchable, the analyzed tokens and their count."""
    if not is_searchable(row):
        return {**row, "searchable": False, "tokens": [], "doc_length": 0}
    found = tokens(search_text(row))
    return {**row, "searchable": True, "tokens": found, "doc_length": len(found)}


def replace_rows(
    executor: ClickHouseExecutor,
    table: str,
    columns: dict[str, str],
    where: dict[str, object],
    rows: Sequence[Row],
    version: int,
) -> None:
    stale, fresh = diff_rows(_existing(executor, table, where), rows)
    tombstone(executor, table, str(where["project"]), stale, version)
    insert(executor, table, {**columns, **VERSIONED}, versioned(fresh, version))


def _existing(
    executor: ClickHouseExecutor,
    table: str,
    where: dict[str, object],
    extra: str = "",
) -> dict[str, tuple[object, ...]]:
    rows = executor.query(
        f"SELECT id, row_hash{extra} FROM {table} FINAL "
        "WHERE project = {project:String} AND session_id = {session_id:String}",
        where,
    )
    return {str(row[0]): tuple(row[1:]) for row in rows}


def diff_rows(
    existing: dict[str, tuple[object, ...]], rows: Sequence[Row]
) -> tuple[list[str], list[Row]]:
    wanted = {row["id"]: row for row in rows}
    # A changed row is replaced by its new version; only a vanished one gets a tombstone.
    vanished = [row_id for row_id in existing if row_id not in wanted]
    fresh = [
        row
        for row_id, row in wanted.items()
        if row_id not in existing or existing[row_id][0] != row["row_hash"]
    ]
    return vanished, fresh


def tombstone(
    executor: ClickHouseExecutor, table: str, project: str, ids: Sequence[str], version: int
) -> None:
    rows = [
        {"project": project, "id": row_id, "version": version, "is_deleted": 1} for row_id in ids
    ]
    insert(executor, table, _TOMBSTONE, rows)


def _replace_touches(
    executor: ClickHouseExecutor, where: dict[str, object], rows: Sequence[Row], version: int
) -> None:
    positions = executor.query(
        "SELECT position FROM file_touches FINAL "
        "WHERE project = {project:String} AND session_id = {session_id:String}",
        where,
    )
    gone = [
        {**where, "position": int(position), "version": version, "is_deleted": 1}
        for (position,) in positions
        if int(position) >= len(rows)
    ]
    insert(executor, "file_touches", TOUCH_TOMBSTONE, gone)
    insert(executor, "file_touches", {**TOUCHES, **VERSIONED}, versioned(rows, version))


def versioned(rows: Sequence[Row], version: int) -> list[Row]:
    return [{**row, "version": version, "is_deleted": 0} for row in rows]
