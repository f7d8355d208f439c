"""The statements the signal writes repeat on every call, built once per dialect.

Bulk upserts (`BulkUpsert`) are SQLAlchemy Core constructs compiled once per table and dialect,
then executed at the driver level with parameters built here, because SQLAlchemy's per-row,
per-column parameter processing cost more than SQLite's own work on a batch of spans. What the
type processors did is done here instead: JSON is serialised as every store keeps it
(`mcpd.storage.stored_json`), and NUL characters, which PostgreSQL refuses in text and in JSONB
and which would fail a whole group commit, become U+FFFD on both backends alike.

* SQLite: `INSERT ... VALUES (?, ...) ON CONFLICT ...` as one executemany of tuples (the
  driver steps one prepared statement per row, in C).
* PostgreSQL: `INSERT ... SELECT ... FROM json_to_recordset(%s::JSON) AS v(<column> <type>,
  ...) ON CONFLICT ...`, the rows sent as one JSON array that the server unpacks into typed
  columns (nested documents straight into JSONB). The alternatives lose time in the driver:
  psycopg's executemany pipelines one statement per row and stalls on its wait interval; a
  multi-row VALUES of tens of thousands of placeholders spends its time in psycopg's query
  parsing (queries that long are not cached); one array per column spends it in psycopg's
  Python array quoting. One JSON parameter costs one C-level `json` encode here and one short,
  cached, server-side prepared statement.

Rows sharing a statement must not share a key (PostgreSQL refuses to update one row twice in one
statement); callers deduplicate.

Two things ride along with the upserts of spans, traces and logs:

* **Arrival stamps.** The rows of one write transaction share one `arrival_seq`
  (`next_arrival`), bound once to the statement rather than copied into every row.
* **The search index** of spans and logs, over `mcpd.signals.search`'s text (at most
  `MAX_SEARCH_CHARS` of it). Its words are runs of letters and digits (`search_words`): `_` and
  punctuation separate, so `a@b.com` is `a`, `b` and `com`, as FTS5's unicode61 splits it.

  PostgreSQL: the upsert sets `search_vector` to the words of the text case folded here with
  `str.casefold()` (`folded_words`), cast to `tsvector`. Those are the lexemes
  `to_tsvector('simple', ...)` would make of them, without its parser (whose email, URL and
  path tokens would not be words, and which was the largest single cost of a span's write) and
  without positions (a match needs every word, anywhere); the database's locale plays no part.
  Words are letters and digits only, so each is a valid lexeme as it stands.

  SQLite: an FTS5 table per searched table (`fts_table`), whose rowid is the row's rowid and
  which stores the text itself (SQLite 3.40 has no contentless delete). One statement before
  the upsert drops the entries of the rows about to be replaced; one executemany after it
  inserts the new entries, each under the rowid its primary key finds. (An UPDATE trigger
  could drop stale entries, but merely having one slows every inserted span: every execution
  of the upsert then opens the FTS table.) A deleted row's entry goes with it by the
  DELETE trigger the migration creates, so erasure and retention need nothing more.
"""

from __future__ import annotations

import functools
import hashlib
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from operator import itemgetter
from typing import Any, assert_never
from typing import cast as type_cast

from sqlalchemy import (
    BigInteger,
    ColumnElement,
    Connection,
    LargeBinary,
    Table,
    Text,
    bindparam,
    cast,
    column,
    func,
    literal_column,
    select,
    update,
)
from sqlalchemy import text as sql_text
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.dialects.postgresql import TSVECTOR, psycopg
from sqlalchemy.engine import Dialect
from sqlalchemy.sql.dml import Insert

from mcpd.signals.documents import span_head
from mcpd.signals.rows import SpanRow
from mcpd.signals.search import log_search_text, span_search_text
from mcpd.storage.sql.dialect import SqlDialect
from mcpd.storage.sql.schema.trace import (
    ARRIVAL_SEQ,
    HEAD_JSON,
    SEARCH_VECTOR,
    arrival_clock,
    facet_values,
    ingest_keys,
    metadata,
    row_columns,
)
from mcpd.storage.sql.types import JsonDocument
from mcpd.storage.stored_json import json_text

# Keys per IN list (well under SQLite's 32766 variables and PostgreSQL's 65535 parameters).
CHUNK = 500
# Rows per PostgreSQL recordset statement: bounds one statement's memory on either side.
_RECORDSET_ROWS = 5000
# The indexed prefix of a row's search text. A tsvector holds at most 1 MB, and the words of
# this many characters (at most 4 bytes each, plus 4 per distinct word) stay well under it.
MAX_SEARCH_CHARS = 100_000
_WORD = re.compile(r"[^\W_]+")
# PostgreSQL refuses a longer lexeme in a tsvector's text.
_MAX_LEXEME_BYTES = 2047
_LONG_ASCII_WORD = re.compile(f"[a-z0-9]{{{_MAX_LEXEME_BYTES + 1},}}")
# Every byte but an ASCII letter or digit becomes a space.
_ASCII_SEPARATORS = bytes(
    byte if byte < 128 and chr(byte).isalnum() else ord(" ") for byte in range(256)
)
# The search text of each searched table's rows.
SEARCH_TEXT: Mapping[str, Callable[[Any], str]] = {
    "spans": span_search_text,
    "logs": log_search_text,
}


def dialect_insert(target: Table, dialect: SqlDialect) -> Any:
    """The dialect's own `insert`, which has `on_conflict_do_*` and `excluded`."""
    match dialect:
        case SqlDialect.SQLITE:
            return sqlite.insert(target)
        case SqlDialect.POSTGRES:
            return postgresql.insert(target)
        case _:
            assert_never(dialect)


def _on_conflict(statement: Any, target: Table, names: Iterable[str]) -> Insert:
    """The conflict clause of `target`'s upsert of the columns `names`: a facet value's
    `last_seen` only moves forward (and the row is not rewritten when it would not move); any
    other row replaces the stored row with the same primary key."""
    keys = [key.name for key in target.primary_key.columns]
    if target is facet_values:
        result: Insert = statement.on_conflict_do_update(
            index_elements=keys,
            set_={"last_seen": statement.excluded.last_seen},
            where=statement.excluded.last_seen > facet_values.c.last_seen,
        )
        return result
    replaced = {name: statement.excluded[name] for name in names if name not in keys}
    result = statement.on_conflict_do_update(index_elements=keys, set_=replaced)
    return result


@functools.cache
def insert_new_keys(dialect: SqlDialect) -> Insert:
    """Record ingest keys, returning only those that were not stored yet."""
    statement = dialect_insert(ingest_keys, dialect).on_conflict_do_nothing()
    result: Insert = statement.returning(ingest_keys.c.project, ingest_keys.c.ingest_key)
    return result


# --- arrival stamps and the search index -----------------------------------------------------

_BUMP_CLOCK = (
    update(arrival_clock)
    .where(arrival_clock.c.id == 1)
    .values(seq=arrival_clock.c.seq + 1)
    .returning(arrival_clock.c.seq)
)
_TRANSACTION_ID = select(func.pg_current_xact_id().cast(Text).cast(BigInteger))


def next_arrival(conn: Connection, dialect: SqlDialect) -> int:
    """The arrival sequence of this write transaction; call it once per transaction.

    SQLite: the clock's next value (writers are serialised, so sequences commit in order).
    PostgreSQL: the transaction's id, which the delta poll bounds by the oldest one running.
    """
    match dialect:
        case SqlDialect.SQLITE:
            seq: int = conn.execute(_BUMP_CLOCK).scalar_one()
        case SqlDialect.POSTGRES:
            seq = conn.execute(_TRANSACTION_ID).scalar_one()
        case _:
            assert_never(dialect)
    return seq


def search_words(text: str) -> list[str]:
    """The words of `text`: runs of letters and digits, in order."""
    return _WORD.findall(text)


def indexed_text(table: str, row: Mapping[str, Any]) -> str:
    """The part of a row's search text the index holds."""
    try:
        return SEARCH_TEXT[table](row)[:MAX_SEARCH_CHARS]
    except TypeError:
        # A row without its name or message, which the database's NOT NULL refuses: the
        # write must fail with that refusal, as it does for every other broken row.
        return ""


def folded_words(text: str) -> str:
    """What PostgreSQL's tsvector is made of: the words of the case-folded text, separated by
    spaces, without those too long to be a lexeme.

    ASCII text (most of it) takes a byte translation, the same words as `search_words` at a
    tenth of the regex's cost."""
    folded = text.casefold()
    if folded.isascii():
        words = folded.encode("ascii").translate(_ASCII_SEPARATORS).decode("ascii")
        return words if len(words) <= _MAX_LEXEME_BYTES else _LONG_ASCII_WORD.sub("", words)
    return " ".join(
        word for word in search_words(folded) if len(word.encode()) <= _MAX_LEXEME_BYTES
    )


def fts_table(table: str) -> str:
    """SQLite's FTS5 table of a searched table."""
    return f"{table}_fts"


def rebuild_search_index(conn: Connection, dialect: SqlDialect, table: str) -> int:
    """Index every stored row of a searched table anew (once when the index is added; again
    whenever what is indexed changes); returns how many rows were indexed."""
    target = metadata.tables[table]
    columns = row_columns(target)
    keys = list(target.primary_key.columns)
    match dialect:
        case SqlDialect.SQLITE:
            conn.exec_driver_sql(f"DELETE FROM {fts_table(table)}")
            read = select(literal_column("rowid").label("_rowid"), *columns)
            write: Any = sql_text(
                f"INSERT INTO {fts_table(table)} (rowid, search_text) VALUES (:_rowid, :text)"
            )

            def params(row: Mapping[Any, Any]) -> dict[str, Any]:
                return {"_rowid": row["_rowid"], "text": indexed_text(table, row)}

        case SqlDialect.POSTGRES:
            read = select(*columns)
            write = (
                update(target)
                .where(*[key == bindparam(f"_{key.name}") for key in keys])
                .values({SEARCH_VECTOR: cast(bindparam("_words"), TSVECTOR)})
            )

            def params(row: Mapping[Any, Any]) -> dict[str, Any]:
                words = folded_words(indexed_text(table, row))
                return {"_words": words, **{f"_{key.name}": row[key.name] for key in keys}}

        case _:
            assert_never(dialect)
    count = 0
    # yield_per on the statement: on the connection it would stream the writes too, and
    # psycopg cannot executemany on a server-side cursor.
    result = conn.execute(read.execution_options(yield_per=CHUNK))
    for partition in result.mappings().partitions():
        conn.execute(write, [params(row) for row in partition])
        count += len(partition)
    return count


# --- bulk upserts ----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Bound:
    """One row with what its upsert binds, built before the write's transaction (`bind`), so
    the transaction holds the database only for the database's own work."""

    row: Mapping[str, Any]
    # SQLite: the row's values in column order (the arrival sequence is added when written);
    # PostgreSQL: the row's JSON object in the recordset.
    values: Any
    # SQLite, a searched table: the text its FTS entry indexes.
    search: str | None = None


@dataclass(frozen=True, slots=True)
class BulkUpsert:
    """A compiled upsert, the column order of its parameters, and how to build them."""

    dialect: SqlDialect
    table: str
    sql: str
    # The row's columns, in the order the statement binds them.
    columns: tuple[str, ...]
    json_positions: tuple[int, ...]
    text_positions: tuple[int, ...]
    # PostgreSQL: the binary columns, spelled in the JSON document as bytea's hex input.
    binary_columns: tuple[str, ...]
    # The columns read from the row: `columns` but a span's `head_json`, which is rendered from
    # the row as it is written, at `head_position`.
    picked: tuple[str, ...]
    head_position: int | None
    # `itemgetter(*picked)`: one C call per row where a comprehension of `get`s costs fifty.
    pick: Callable[[Mapping[str, Any]], tuple[Any, ...]]
    # Whether the table has `arrival_seq` (bound once per statement, after the row's columns).
    stamped: bool
    # Whether the table is searched (`SEARCH_TEXT`), and SQLite's statements on its FTS table.
    searched: bool
    unindex_sql: str
    index_sql: str
    # SQLite: where the primary key is among `columns`.
    key_positions: tuple[int, ...]
    # PostgreSQL: the names of the statement's parameters, in order ("rows", "arrival").
    param_names: tuple[str, ...]

    def execute(
        self, conn: Connection, rows: Sequence[Mapping[str, Any]], *, arrival: int | None = None
    ) -> None:
        """Write `rows` (a missing key is NULL, an extra one is ignored), stamped with `arrival`
        (required for a table with an arrival sequence), and index their search text."""
        self.write(conn, [self.bind(row) for row in rows], arrival=arrival)

    def bind(self, row: Mapping[str, Any]) -> Bound:
        """What writing `row` binds; needs no connection."""
        match self.dialect:
            case SqlDialect.SQLITE:
                search = indexed_text(self.table, row) if self.searched else None
                return Bound(row, self.params(row), search)
            case SqlDialect.POSTGRES:
                return Bound(row, json_text(self._document(row)))
            case _:
                assert_never(self.dialect)

    def write(
        self, conn: Connection, bound: Sequence[Bound], *, arrival: int | None = None
    ) -> None:
        """Write rows `bind` prepared, as `execute` documents."""
        if not bound:
            return
        if self.stamped and arrival is None:
            raise ValueError(f"rows of {self.table} need an arrival sequence")
        match self.dialect:
            case SqlDialect.SQLITE:
                if self.stamped:
                    stamp = (arrival,)
                    params = [item.values + stamp for item in bound]
                else:
                    params = [item.values for item in bound]
                if self.searched:
                    self._unindex_fts(conn, params)
                conn.exec_driver_sql(self.sql, params)
                if self.searched:
                    self._index_fts(conn, bound, params)
            case SqlDialect.POSTGRES:
                for start in range(0, len(bound), _RECORDSET_ROWS):
                    chunk = bound[start : start + _RECORDSET_ROWS]
                    values = {
                        "rows": "[" + ",".join([item.values for item in chunk]) + "]",
                        "arrival": arrival,
                    }
                    conn.exec_driver_sql(self.sql, tuple(values[n] for n in self.param_names))
            case _:
                assert_never(self.dialect)

    def params(self, row: Mapping[str, Any]) -> tuple[Any, ...]:
        """The row's values in column order, JSON serialised and NUL replaced."""
        try:
            values = list(self.pick(row))
        except KeyError:  # a row that leaves optional columns out
            get = row.get
            values = [get(name) for name in self.picked]
        if self.head_position is not None:
            values.insert(self.head_position, head_json_text(row))
        for position in self.json_positions:
            document = values[position]
            if document is not None:
                values[position] = json_text(document)
        for position in self.text_positions:
            text = values[position]
            if text is not None and "\x00" in text:
                values[position] = text.replace("\x00", "\ufffd")
        return tuple(values)

    def _unindex_fts(self, conn: Connection, params: Sequence[tuple[Any, ...]]) -> None:
        # The primary keys as stored (NUL replaced), in one JSON array.
        key = itemgetter(*self.key_positions)
        conn.exec_driver_sql(self.unindex_sql, (json_text([key(values) for values in params]),))

    def _index_fts(
        self, conn: Connection, bound: Sequence[Bound], params: Sequence[tuple[Any, ...]]
    ) -> None:
        key = itemgetter(*self.key_positions)
        conn.exec_driver_sql(
            self.index_sql,
            [(item.search, *key(values)) for item, values in zip(bound, params, strict=True)],
        )

    def _document(self, row: Mapping[str, Any]) -> dict[str, Any]:
        """The row with what the store derives from it: a span's head, the search vector."""
        derived: dict[str, Any] = {}
        if self.head_position is not None:
            derived[HEAD_JSON] = head_json_text(row)
        if self.searched:
            derived[SEARCH_VECTOR] = folded_words(indexed_text(self.table, row))
        for name in self.binary_columns:
            value = row.get(name)
            if value is not None:
                derived[name] = "\\x" + value.hex()
        if derived:
            return {**row, **derived}
        return row if isinstance(row, dict) else dict(row)


def head_json_text(row: Mapping[str, Any]) -> str:
    """A span's `head_json` as stored: `json_text` of its head."""
    return json_text(span_head(type_cast(SpanRow, row)))


def _positional(dialect: SqlDialect) -> Dialect:
    match dialect:
        case SqlDialect.SQLITE:
            return sqlite.dialect()
        case SqlDialect.POSTGRES:
            # `%s` placeholders, so parameters go to psycopg as a tuple.
            return psycopg.dialect(paramstyle="format")  # type: ignore[no-untyped-call]
        case _:
            assert_never(dialect)


def _written(target: Table, dialect: SqlDialect) -> list[str]:
    """The columns an upsert of `target` writes: the row's, a span's rendered head, the arrival
    sequence, and on PostgreSQL the search vector."""
    names = [c.name for c in row_columns(target)]
    if HEAD_JSON in target.c:
        names.append(HEAD_JSON)
    if ARRIVAL_SEQ in target.c:
        names.append(ARRIVAL_SEQ)
    if dialect is SqlDialect.POSTGRES and target.name in SEARCH_TEXT:
        names.append(SEARCH_VECTOR)
    return names


def _statement(target: Table, dialect: SqlDialect) -> Insert:
    names = _written(target, dialect)
    match dialect:
        case SqlDialect.SQLITE:
            return _on_conflict(sqlite.insert(target), target, names)
        case SqlDialect.POSTGRES:
            # The recordset carries the row's columns, and the search text as `search_vector`.
            carried = [
                column(name, Text if name == SEARCH_VECTOR else target.c[name].type)
                for name in names
                if name != ARRIVAL_SEQ
            ]
            records = (
                func.json_to_recordset(bindparam("rows", type_=postgresql.JSON))
                .table_valued(*carried)
                .render_derived(name="v", with_types=True)
            )

            def selected(name: str) -> ColumnElement[Any]:
                if name == ARRIVAL_SEQ:
                    return bindparam("arrival", type_=BigInteger)
                if name == SEARCH_VECTOR:
                    return cast(records.c[name], TSVECTOR)
                return records.c[name]

            rows = select(*[selected(name) for name in names])
            return _on_conflict(postgresql.insert(target).from_select(names, rows), target, names)
        case _:
            assert_never(dialect)


@functools.cache
def bulk_upsert(target: Table, dialect: SqlDialect) -> BulkUpsert:
    """The upsert of `target` (see `_on_conflict`), compiled for bulk writes."""
    names = _written(target, dialect)
    compiled = _statement(target, dialect).compile(dialect=_positional(dialect), column_keys=names)
    bound = tuple(compiled.positiontup or ())
    stamped = ARRIVAL_SEQ in names
    match dialect:
        case SqlDialect.SQLITE:
            if sorted(bound) != sorted(names) or (stamped and bound[-1] != ARRIVAL_SEQ):
                raise ValueError(
                    f"the statement does not bind the columns of {target.name} in order"
                )
            columns = bound[:-1] if stamped else bound
        case SqlDialect.POSTGRES:
            columns = tuple(name for name in names if name not in (ARRIVAL_SEQ, SEARCH_VECTOR))
        case _:
            assert_never(dialect)
    kinds = {c.name: c.type for c in target.columns}
    searched = target.name in SEARCH_TEXT
    picked = tuple(name for name in columns if name != HEAD_JSON)
    return BulkUpsert(
        dialect=dialect,
        table=target.name,
        sql=compiled.string,
        columns=columns,
        json_positions=tuple(
            i for i, name in enumerate(columns) if isinstance(kinds[name], JsonDocument)
        ),
        text_positions=tuple(i for i, name in enumerate(columns) if isinstance(kinds[name], Text)),
        binary_columns=tuple(name for name in columns if isinstance(kinds[name], LargeBinary)),
        picked=picked,
        head_position=columns.index(HEAD_JSON) if HEAD_JSON in columns else None,
        pick=itemgetter(*picked),
        stamped=stamped,
        searched=searched,
        unindex_sql=_fts_delete(target) if searched and dialect is SqlDialect.SQLITE else "",
        index_sql=_fts_insert(target) if searched and dialect is SqlDialect.SQLITE else "",
        key_positions=tuple(columns.index(key.name) for key in target.primary_key.columns),
        param_names=bound,
    )


def _fts_delete(target: Table) -> str:
    """SQLite: drop the entries of the stored rows among a JSON array of primary keys."""
    keys = " AND ".join(
        f"t.{key.name} = json_extract(k.value, '$[{position}]')"
        for position, key in enumerate(target.primary_key.columns)
    )
    return (
        f"DELETE FROM {fts_table(target.name)} WHERE rowid IN "
        f"(SELECT t.rowid FROM json_each(?) AS k JOIN {target.name} AS t ON {keys})"
    )


def _fts_insert(target: Table) -> str:
    """SQLite: index one row's text under the rowid of the row with the given primary key."""
    keys = " AND ".join(f"{key.name} = ?" for key in target.primary_key.columns)
    # VALUES with a scalar subquery, not INSERT ... SELECT, which SQLite runs through a
    # coroutine into the virtual table for every row.
    return (
        f"INSERT INTO {fts_table(target.name)} (search_text, rowid) "
        f"VALUES (?, (SELECT rowid FROM {target.name} WHERE {keys}))"
    )


# --- trace locks -----------------------------------------------------------------------------

# Why advisory locks and not SELECT ... FOR UPDATE: the row a writer must serialise on is the
# trace's projection, and for a new trace that row does not exist yet, so there is nothing to
# lock; a transaction-scoped advisory lock per (project, trace_id) exists before the row does.
# Writers of different traces never wait for each other, and the locks go at commit.
_KEYS = (
    func.unnest(bindparam("keys", type_=postgresql.ARRAY(BigInteger)))
    .table_valued("k")
    .render_derived()
)
_TAKE_LOCKS = select(func.pg_advisory_xact_lock(_KEYS.c.k)).select_from(_KEYS)


def trace_lock_key(project: str, trace_id: str) -> int:
    """The advisory lock key of one trace: 64 bits of a digest, the same in every process."""
    return lock_key(b"mcpd-trace", project, trace_id)


def lock_key(kind: bytes, project: str, name: str) -> int:
    """The advisory lock key of one thing of `kind` (at most 16 bytes) in a project."""
    digest = hashlib.blake2b(f"{project}\x00{name}".encode(), digest_size=8, person=kind).digest()
    return int.from_bytes(digest, "big", signed=True)


def lock_traces(conn: Connection, dialect: SqlDialect, traces: Sequence[tuple[str, str]]) -> None:
    """Serialise this transaction with every other writer of `traces` until it ends.

    PostgreSQL: one advisory lock per trace, taken in ascending key order (the same order in
    every writer, so two writers of overlapping traces cannot deadlock); `unnest` scans the
    sorted array in order and the locks are taken as the rows are produced. SQLite needs
    nothing: BEGIN IMMEDIATE already made this the only writer.
    """
    take_locks(conn, dialect, [trace_lock_key(project, trace_id) for project, trace_id in traces])


def take_locks(conn: Connection, dialect: SqlDialect, keys: Iterable[int]) -> None:
    """Take these advisory locks until the transaction ends, in ascending order (PostgreSQL;
    nothing on SQLite, whose BEGIN IMMEDIATE made this the only writer)."""
    match dialect:
        case SqlDialect.SQLITE:
            return
        case SqlDialect.POSTGRES:
            ordered = sorted(set(keys))
            if ordered:
                conn.execute(_TAKE_LOCKS, {"keys": ordered})
        case _:
            assert_never(dialect)
