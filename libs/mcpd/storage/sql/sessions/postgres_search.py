"""Search on PostgreSQL: a `'simple'` tsvector per searchable event, GIN, `ts_rank_cd`.

The text is tokenized and folded in Python by the same analyzer as the tantivy index
(`mcpd.sessions.search.analysis`), and the tokens, space-separated, go to
`to_tsvector('simple', ...)`: PostgreSQL only splits on the spaces and lowercases, so case,
diacritics and CJK behave exactly as on SQLite. The query is built from analyzed units, each
lexeme quoted (user text is never parsed as tsquery syntax): `'a' | 'b' | ('東' <-> '京')`.
The vector is maintained by the writer in the read model's own transaction, so it is never
out of step and there is nothing to reconcile.

Limits: a tsvector holds at most 1 MB, so only the first `MAX_SEARCH_CHARS` characters of an
event's folded tokens are indexed; and `ts_rank_cd` scores every match (no top-k pruning).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from sqlalchemy import ColumnElement, Connection, bindparam, delete, func, insert, literal_column
from sqlalchemy import select as sql_select
from sqlalchemy.engine import Engine

from mcpd.sessions.search.analysis import Unit, tokens
from mcpd.sessions.store import SearchQuery
from mcpd.storage.sql.schema.sessions import event_search, events
from mcpd.storage.sql.sessions.backend import Ranked
from mcpd.storage.sql.sessions.rows import Row, RowLike, is_searchable, search_text
from mcpd.storage.sql.sessions.writes import CHUNK, Written, delete_ids

MAX_SEARCH_CHARS = 300_000
_SIMPLE: ColumnElement[Any] = literal_column("'simple'::regconfig")
_INSERT = insert(event_search).values(
    search_vector=func.to_tsvector(_SIMPLE, bindparam("search_text"))
)
_COPIED = ("project", "session_id", "turn_id", "type", "harness", "source", "timestamp_ns")


def folded_tokens(text: str) -> str:
    """The folded tokens of `text`, space-separated, cut to MAX_SEARCH_CHARS at a token end."""
    joined = " ".join(tokens(text))
    if len(joined) <= MAX_SEARCH_CHARS:
        return joined
    return joined[: joined.rfind(" ", 0, MAX_SEARCH_CHARS + 1)]


def tsquery(units: Sequence[Unit]) -> str:
    """A tsquery OR-ing the units; a multi-token unit (a CJK run) is a phrase."""
    parts = []
    for unit in units:
        lexemes = ["'" + token.replace("\\", "\\\\").replace("'", "''") + "'" for token in unit]
        parts.append(lexemes[0] if len(lexemes) == 1 else "(" + " <-> ".join(lexemes) + ")")
    return " | ".join(parts)


def search_rows(rows: Iterable[RowLike]) -> list[Row]:
    """The event_search parameters of the searchable event rows among `rows`."""
    return [
        {
            "event_id": row["id"],
            "search_text": folded_tokens(search_text(row)),
            **{name: row[name] for name in _COPIED},
        }
        for row in rows
        if is_searchable(row)
    ]


class PostgresSearch:
    """The PostgreSQL search backend."""

    def __init__(self, engine: Engine) -> None:
        self._engine = engine

    def in_transaction(self, conn: Connection, written: Written) -> None:
        """Replace the search rows of the events the write removed or changed."""
        delete_ids(
            conn, event_search, event_search.c.event_id, written.project, written.stale_event_ids
        )
        _insert(conn, search_rows(written.fresh_events))

    def after_commit(self, written: Written) -> None:
        """Nothing: the vectors were written in the transaction."""

    def rank(self, units: Sequence[Unit], query: SearchQuery) -> Ranked:
        """Rank with ts_rank_cd over the GIN-matched rows."""
        if not units or not query.event_types:
            return Ranked([], False, None)
        c = event_search.c
        matched = func.to_tsquery(_SIMPLE, tsquery(units))
        score = func.ts_rank_cd(c.search_vector, matched).label("score")
        where: list[ColumnElement[bool]] = [
            c.project == query.project,
            c.type.in_(list(query.event_types)),
            c.search_vector.op("@@")(matched),
        ]
        exact = (
            (c.session_id, query.session_id),
            (c.turn_id, query.turn_id),
            (c.harness, query.harness),
            (c.source, query.source),
        )
        where.extend(column == value for column, value in exact if value is not None)
        statement = (
            sql_select(c.event_id, score)
            .where(*where)
            .order_by(score.desc(), c.timestamp_ns.desc(), c.event_id)
            .limit(query.limit + 1)
        )
        with self._engine.connect() as conn:
            found = [(str(row[0]), float(row[1])) for row in conn.execute(statement)]
        return Ranked(found[: query.limit], len(found) > query.limit, None)

    def reconcile(self) -> int:
        """Nothing to catch up: the vectors live in the read model's transactions."""
        return 0

    def nudge(self) -> None:
        """Nothing to catch up."""

    def rebuild(self) -> int:
        """Recompute every search row from the events (after an analyzer change)."""
        columns: list[Any] = [events.c.id, events.c.text, events.c.tool_name, events.c.payload]
        columns += [events.c[name] for name in _COPIED]
        count = 0
        with self._engine.begin() as conn:
            conn.execute(delete(event_search))
            # yield_per on the statement: on the connection it would stream every statement
            # after it too, and psycopg cannot executemany on a server-side cursor.
            statement = sql_select(*columns).execution_options(yield_per=CHUNK)
            result = conn.execute(statement)
            for partition in result.mappings().partitions():
                batch = search_rows(partition)
                _insert(conn, batch)
                count += len(batch)
        return count

    def close(self) -> None:
        """Nothing held."""


def _insert(conn: Connection, rows: list[Row]) -> None:
    for start in range(0, len(rows), CHUNK):
        conn.execute(_INSERT, rows[start : start + CHUNK])
