"""Writing one assembled session: a single transaction that touches only what changed.

The project's version row is bumped first (`INSERT ... ON CONFLICT DO UPDATE ... RETURNING`),
which on PostgreSQL also locks it until commit, so writers of a project are serialised (SQLite
serialises every writer with BEGIN IMMEDIATE). Then, when the session's content hash equals the
stored one, the transaction is rolled back: an identical re-write changes nothing, not even the
version. Otherwise the session row is replaced, turns and events are diffed by row hash (rows
that vanished or changed are deleted, new and changed ones inserted, the rest left alone), and
the file touches are replaced. The search side (`SearchSide.in_transaction`) writes its part in
the same transaction; what the tantivy index needs afterwards is returned as a `Written`.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from sqlalchemy import Connection, Table, delete, insert, select
from sqlalchemy.dialects import postgresql, sqlite

from mcpd.sessions.model import AssembledSession
from mcpd.storage.sql.dialect import SqlDialect
from mcpd.storage.sql.schema.sessions import (
    events,
    file_touches,
    session_versions,
    sessions,
    turns,
)
from mcpd.storage.sql.sessions.rows import Row, content_hash, rows_of

# Rows per IN list or multi-row INSERT.
CHUNK = 500

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Written:
    """What one committed write changed, for the search side (one read-model version of a
    project: one session, or the trace sessions of one trace-store write)."""

    project: str
    generation: str
    version: int
    # Events that vanished or changed (their old documents go), and event rows that are new or
    # changed (their documents come).
    stale_event_ids: list[str]
    fresh_events: list[Row]

    @property
    def previous_version(self) -> int:
        """The project's version just before this write."""
        return self.version - 1


class SearchSide(Protocol):
    """The part of a search backend that writes inside the read model's transaction."""

    def in_transaction(self, conn: Connection, written: Written) -> None:
        """Bring the backend's SQL-side state in step with `written` (or do nothing)."""
        ...


class Unchanged(Exception):  # noqa: N818 - a signal, not an error
    """Raised inside the transaction to roll it back: the session is stored as it is."""


def write_session(
    conn: Connection,
    dialect: SqlDialect,
    project: str,
    assembled: AssembledSession,
    search: SearchSide,
) -> Written:
    """Replace one session's rows; raise Unchanged (rolling back) when nothing differs."""
    if assembled.session.project != project:
        raise ValueError("the assembled session belongs to another project")
    session, turn_rows, event_rows, touch_rows = rows_of(project, assembled)
    for kind, rows in (("turn", turn_rows), ("event", event_rows)):
        if len({row["id"] for row in rows}) != len(rows):
            raise ValueError(f"the assembled session repeats a {kind} id")
    digest = content_hash(session, turn_rows, event_rows, touch_rows)
    version, generation = bump_version(conn, dialect, project)
    session_id = assembled.session.id
    stored = conn.execute(
        select(sessions.c.content_hash).where(
            sessions.c.project == project, sessions.c.id == session_id
        )
    ).scalar_one_or_none()
    if stored == digest:
        raise Unchanged
    conn.execute(delete(sessions).where(sessions.c.project == project, sessions.c.id == session_id))
    conn.execute(insert(sessions), [{**session, "content_hash": digest, "version": version}])
    replace_keyed(conn, turns, project, session_id, turn_rows)
    stale, fresh = replace_keyed(conn, events, project, session_id, event_rows)
    conn.execute(
        delete(file_touches).where(
            file_touches.c.project == project, file_touches.c.session_id == session_id
        )
    )
    insert_rows(conn, file_touches, touch_rows)
    written = Written(project, generation, version, stale, fresh)
    search.in_transaction(conn, written)
    return written


def bump_version(conn: Connection, dialect: SqlDialect, project: str) -> tuple[int, str]:
    """Increment the project's read-model version (creating it at 1); return it and the
    project's generation."""
    values = {"project": project, "version": 1, "generation": uuid.uuid4().hex}
    match dialect:
        case SqlDialect.SQLITE:
            statement: Any = sqlite.insert(session_versions).values(values)
        case SqlDialect.POSTGRES:
            statement = postgresql.insert(session_versions).values(values)
    statement = statement.on_conflict_do_update(
        index_elements=[session_versions.c.project],
        set_={"version": session_versions.c.version + 1},
    ).returning(session_versions.c.version, session_versions.c.generation)
    version, generation = conn.execute(statement).one()
    return int(version), str(generation)


def replace_keyed(
    conn: Connection, table: Table, project: str, session_id: str, rows: Sequence[Row]
) -> tuple[list[str], list[Row]]:
    """Make the session's rows in `table` (keyed by `id`, with `row_hash`) equal `rows`,
    writing only the difference; return the ids deleted and the rows inserted."""
    return replace_among(conn, table, project, table.c.session_id, [session_id], rows)


def replace_among(
    conn: Connection,
    table: Table,
    project: str,
    column: Any,
    values: Sequence[str],
    rows: Sequence[Row],
) -> tuple[list[str], list[Row]]:
    """Make the project's rows in `table` (keyed by `id`, with `row_hash`) whose `column` is
    one of `values` equal `rows`, writing only the difference; return the ids deleted and the
    rows inserted."""
    existing: dict[str, str] = {}
    for chunk in chunks(values):
        statement = select(table.c.id, table.c.row_hash).where(
            table.c.project == project, column.in_(chunk)
        )
        existing.update((str(i), str(h)) for i, h in conn.execute(statement))
    wanted = {row["id"]: row for row in rows}
    stale = [
        row_id
        for row_id, row_hash in existing.items()
        if row_id not in wanted or wanted[row_id]["row_hash"] != row_hash
    ]
    fresh = [row for row_id, row in wanted.items() if existing.get(row_id) != row["row_hash"]]
    delete_ids(conn, table, table.c.id, project, stale)
    insert_rows(conn, table, fresh)
    return stale, fresh


def delete_ids(
    conn: Connection, table: Table, column: Any, project: str, ids: Sequence[str]
) -> None:
    """Delete the project's rows whose `column` is one of `ids`."""
    for chunk in chunks(ids):
        conn.execute(delete(table).where(table.c.project == project, column.in_(chunk)))


def insert_rows(conn: Connection, table: Table, rows: Sequence[Row]) -> None:
    """Insert `rows` (all with the same keys), a chunk per statement."""
    for chunk in chunks(rows):
        conn.execute(insert(table), list(chunk))


def chunks(items: Sequence[T]) -> Iterator[Sequence[T]]:
    """`items` in slices of at most CHUNK."""
    for start in range(0, len(items), CHUNK):
        yield items[start : start + CHUNK]
