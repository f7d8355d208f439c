"""The statements the signal writes repeat on every call, built once per dialect.

Bulk upserts (`BulkUpsert`) are SQLAlchemy Core constructs compiled once per table and dialect,
then executed at the driver level with parameters built here, because profiling a batch of 512
spans showed SQLAlchemy's per-row, per-column parameter processing costing more than SQLite's
own work. What the type processors did is done here instead: JSON is serialised compactly, and
NUL characters, which PostgreSQL refuses in text and in JSONB and which would fail a whole group
commit, become U+FFFD on both backends alike.

* SQLite: `INSERT ... VALUES (?, ...) ON CONFLICT ...` as one executemany of tuples (the
  driver steps one prepared statement per row, in C).
* PostgreSQL: `INSERT ... SELECT ... FROM json_to_recordset(%s::JSON) AS v(<column> <type>,
  ...) ON CONFLICT ...`, the rows sent as one JSON array that the server unpacks into typed
  columns (nested documents straight into JSONB). Measured on 512 spans of ~1.5 KB: psycopg's
  executemany pipelines one statement per row and stalled on its 100 ms wait interval; a
  multi-row VALUES of 25,000 placeholders spent 200 ms in psycopg's query parsing (queries that
  long are not cached); one array per column spent most of its time in psycopg's Python array
  quoting. One JSON parameter costs one C-level `json` encode here and one short, cached,
  server-side prepared statement.

Rows sharing a statement must not share a key (PostgreSQL refuses to update one row twice in one
statement); callers deduplicate.
"""

from __future__ import annotations

import functools
import hashlib
import json
import json.encoder
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from operator import itemgetter
from typing import Any, assert_never

from sqlalchemy import BigInteger, Connection, Table, Text, bindparam, column, func, select
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.dialects.postgresql import psycopg
from sqlalchemy.engine import Dialect
from sqlalchemy.sql.dml import Insert

from mcpd.storage.sql.dialect import SqlDialect
from mcpd.storage.sql.schema.trace import facet_values, ingest_keys
from mcpd.storage.sql.types import JsonDocument

# Keys per IN list (well under SQLite's 32766 variables and PostgreSQL's 65535 parameters).
CHUNK = 500
# Rows per PostgreSQL recordset statement: bounds one statement's memory on either side.
_RECORDSET_ROWS = 5000


def dialect_insert(target: Table, dialect: SqlDialect) -> Any:
    """The dialect's own `insert`, which has `on_conflict_do_*` and `excluded`."""
    match dialect:
        case SqlDialect.SQLITE:
            return sqlite.insert(target)
        case SqlDialect.POSTGRES:
            return postgresql.insert(target)
        case _:
            assert_never(dialect)


def _on_conflict(statement: Any, target: Table) -> Insert:
    """The conflict clause of `target`'s upsert: a facet value's `last_seen` only moves forward
    (and the row is not rewritten when it would not move); any other row replaces the stored
    row with the same primary key."""
    keys = [key.name for key in target.primary_key.columns]
    if target is facet_values:
        result: Insert = statement.on_conflict_do_update(
            index_elements=keys,
            set_={"last_seen": statement.excluded.last_seen},
            where=statement.excluded.last_seen > facet_values.c.last_seen,
        )
        return result
    replaced = {c.name: statement.excluded[c.name] for c in target.columns if c.name not in keys}
    result = statement.on_conflict_do_update(index_elements=keys, set_=replaced)
    return result


@functools.cache
def upsert(target: Table, dialect: SqlDialect) -> Insert:
    """`INSERT ... ON CONFLICT (primary key) DO UPDATE` for one row of `target` (see
    `_on_conflict` for what an update changes)."""
    return _on_conflict(dialect_insert(target, dialect), target)


@functools.cache
def insert_new_keys(dialect: SqlDialect) -> Insert:
    """Record ingest keys, returning only those that were not stored yet."""
    statement = dialect_insert(ingest_keys, dialect).on_conflict_do_nothing()
    result: Insert = statement.returning(ingest_keys.c.project, ingest_keys.c.ingest_key)
    return result


# --- bulk upserts ----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class BulkUpsert:
    """A compiled upsert, the column order of its parameters, and how to build them."""

    dialect: SqlDialect
    sql: str
    columns: tuple[str, ...]
    json_positions: tuple[int, ...]
    text_positions: tuple[int, ...]
    # `itemgetter(*columns)`: one C call per row where a comprehension of `get`s costs fifty.
    pick: Callable[[Mapping[str, Any]], tuple[Any, ...]]

    def execute(self, conn: Connection, rows: Sequence[Mapping[str, Any]]) -> None:
        """Write `rows` (a missing key is NULL, an extra one is ignored)."""
        if not rows:
            return
        match self.dialect:
            case SqlDialect.SQLITE:
                conn.exec_driver_sql(self.sql, [self.params(row) for row in rows])
            case SqlDialect.POSTGRES:
                for start in range(0, len(rows), _RECORDSET_ROWS):
                    chunk = [
                        row if isinstance(row, dict) else dict(row)
                        for row in rows[start : start + _RECORDSET_ROWS]
                    ]
                    conn.exec_driver_sql(self.sql, (json_text(chunk),))
            case _:
                assert_never(self.dialect)

    def params(self, row: Mapping[str, Any]) -> tuple[Any, ...]:
        """The row's values in column order, JSON serialised and NUL replaced."""
        try:
            values = list(self.pick(row))
        except KeyError:  # a row that leaves optional columns out
            get = row.get
            values = [get(name) for name in self.columns]
        for position in self.json_positions:
            document = values[position]
            if document is not None:
                values[position] = json_text(document)
        for position in self.text_positions:
            text = values[position]
            if text is not None and "\x00" in text:
                values[position] = text.replace("\x00", "\ufffd")
        return tuple(values)


def _compact_chunks() -> Callable[[Any, int], Sequence[str]]:
    """What `json.JSONEncoder(separators=(",", ":"), ensure_ascii=False).encode` joins, from a C
    encoder built once: `encode` builds a new one (and a dict to detect cycles) on every call,
    which cost a third of the time spent encoding a span's documents. The text is the same;
    the documents come from decoded JSON and protobuf, so they have no cycles to detect (a
    cycle would raise RecursionError rather than ValueError)."""
    reference = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False)
    make = getattr(json.encoder, "c_make_encoder", None)
    if make is None:  # pragma: no cover - CPython has its C accelerator
        return lambda document, _level: (reference.encode(document),)
    chunks: Callable[[Any, int], Sequence[str]] = make(
        None,  # markers: no cycle detection (check_circular=False)
        reference.default,
        json.encoder.encode_basestring,
        None,  # indent
        reference.key_separator,
        reference.item_separator,
        reference.sort_keys,
        reference.skipkeys,
        reference.allow_nan,
    )
    return chunks


_encode_chunks = _compact_chunks()


def json_text(document: Any) -> str:
    """A JSON document as stored: compact, and without NUL (U+FFFD instead) even inside."""
    text = "".join(_encode_chunks(document, 0))
    if "\\u0000" in text:  # a NUL somewhere, or text that merely looks like one
        text = "".join(_encode_chunks(_scrub(document), 0))
    return text


def _scrub(value: Any) -> Any:
    if isinstance(value, str):
        return value.replace("\x00", "\ufffd")
    if isinstance(value, Mapping):
        return {_scrub(key): _scrub(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_scrub(item) for item in value]
    return value


def _positional(dialect: SqlDialect) -> Dialect:
    match dialect:
        case SqlDialect.SQLITE:
            return sqlite.dialect()
        case SqlDialect.POSTGRES:
            # `%s` placeholders, so parameters go to psycopg as a tuple.
            return psycopg.dialect(paramstyle="format")  # type: ignore[no-untyped-call]
        case _:
            assert_never(dialect)


def _statement(target: Table, dialect: SqlDialect) -> Insert:
    match dialect:
        case SqlDialect.SQLITE:
            return upsert(target, dialect)
        case SqlDialect.POSTGRES:
            names = [c.name for c in target.columns]
            records = (
                func.json_to_recordset(bindparam("rows", type_=postgresql.JSON))
                .table_valued(*[column(c.name, c.type) for c in target.columns])
                .render_derived(name="v", with_types=True)
            )
            rows = select(*[records.c[name] for name in names])
            return _on_conflict(postgresql.insert(target).from_select(names, rows), target)
        case _:
            assert_never(dialect)


@functools.cache
def bulk_upsert(target: Table, dialect: SqlDialect) -> BulkUpsert:
    """The upsert of `target` (see `_on_conflict`), compiled for bulk writes."""
    compiled = _statement(target, dialect).compile(dialect=_positional(dialect))
    names = [c.name for c in target.columns]
    columns = tuple(compiled.positiontup or ())
    if dialect is SqlDialect.SQLITE and sorted(columns) != sorted(names):
        raise ValueError(f"the statement does not bind exactly the columns of {target.name}")
    kinds = {c.name: c.type for c in target.columns}
    columns = columns if dialect is SqlDialect.SQLITE else tuple(names)
    return BulkUpsert(
        dialect=dialect,
        sql=compiled.string,
        columns=columns,
        json_positions=tuple(
            i for i, name in enumerate(columns) if isinstance(kinds[name], JsonDocument)
        ),
        text_positions=tuple(i for i, name in enumerate(columns) if isinstance(kinds[name], Text)),
        pick=itemgetter(*columns),
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
    digest = hashlib.blake2b(
        f"{project}\x00{trace_id}".encode(), digest_size=8, person=b"mcpd-trace"
    ).digest()
    return int.from_bytes(digest, "big", signed=True)


def lock_traces(conn: Connection, dialect: SqlDialect, traces: Sequence[tuple[str, str]]) -> None:
    """Serialise this transaction with every other writer of `traces` until it ends.

    PostgreSQL: one advisory lock per trace, taken in ascending key order (the same order in
    every writer, so two writers of overlapping traces cannot deadlock); `unnest` scans the
    sorted array in order and the locks are taken as the rows are produced. SQLite needs
    nothing: BEGIN IMMEDIATE already made this the only writer.
    """
    match dialect:
        case SqlDialect.SQLITE:
            return
        case SqlDialect.POSTGRES:
            keys = sorted({trace_lock_key(project, trace_id) for project, trace_id in traces})
            if keys:
                conn.execute(_TAKE_LOCKS, {"keys": keys})
        case _:
            assert_never(dialect)
