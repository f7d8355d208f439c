"""Hot statements run on the driver's cursor: SQLAlchemy builds and compiles them, the DBAPI
executes them.

A statement through `Connection.execute` pays SQLAlchemy's execution machinery every time (the
cache key, the parameters' construction, an execution context, a result with its key map),
which costs several times what SQLite takes to run a short statement, and inside a write
transaction that holds the database's only write lock. A `DriverStatement` compiles its Core
statement once per dialect (and per set of columns it writes), keeps the compiled SQL, the order
of its parameters and the type processors of its binds and result columns (the dialect's own,
so values are stored and read exactly as through SQLAlchemy), and executes on the DBAPI
connection of the caller's `Connection`, inside the caller's transaction (begun first, as
SQLAlchemy begins one, when the connection has none yet).

A DBAPI error is raised as SQLAlchemy raises it (`sqlalchemy.exc.DBAPIError.instance`), and a
connection the database dropped is invalidated as SQLAlchemy would, so callers and the pool
cannot tell the two paths apart. Statements run here emit no SQLAlchemy events.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import closing, contextmanager
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Connection, exc
from sqlalchemy.engine import Dialect
from sqlalchemy.sql import ClauseElement, ColumnElement
from sqlalchemy.sql.compiler import SQLCompiler

__all__ = ["DriverStatement"]

_Processor = Callable[[Any], Any]
_Row = dict[str, Any]


@dataclass(slots=True)
class _Compiled:
    """A statement compiled for one dialect and one set of parameter names."""

    sql: str
    # The bind names in the order of the SQL's placeholders, for a positional paramstyle.
    positions: tuple[str, ...] | None
    # Every bind's value when the caller gives none (the literals a statement was built with).
    defaults: Mapping[str, Any]
    binds: Mapping[str, _Processor]
    keys: tuple[str, ...]
    columns: tuple[ColumnElement[Any], ...]
    dialect: Dialect
    # The result columns' processors, by index: the dialect chooses them by the type codes the
    # driver describes, known once the statement has run.
    results: tuple[tuple[int, _Processor], ...] | None = None

    def parameters(self, given: Mapping[str, Any]) -> Sequence[Any] | Mapping[str, Any]:
        values = {**self.defaults, **given}
        for name, process in self.binds.items():
            values[name] = process(values[name])
        if self.positions is None:
            return values
        return tuple(values[name] for name in self.positions)

    def rows(
        self, description: Sequence[Sequence[Any]], fetched: Iterable[Sequence[Any]]
    ) -> list[_Row]:
        if self.results is None:
            self.results = _result_processors(self.columns, description, self.dialect)
        rows = []
        for fetched_row in fetched:
            row = dict(zip(self.keys, fetched_row, strict=True))
            for index, process in self.results:
                key = self.keys[index]
                row[key] = process(row[key])
            rows.append(row)
        return rows


class DriverStatement:
    """A Core statement executed on the DBAPI cursor (see the module docstring). Parameters
    are named as in `Connection.execute`: the statement's bind names, and for an INSERT or
    UPDATE the columns it writes."""

    def __init__(self, statement: ClauseElement) -> None:
        self._statement = statement
        self._compiled: dict[tuple[str, tuple[str, ...]], _Compiled] = {}

    def rows(self, conn: Connection, params: Mapping[str, Any]) -> list[_Row]:
        """Execute once; the rows it answers, as dicts keyed by column."""
        compiled = self._compile(conn.dialect, params)
        with _cursor(conn, compiled.sql) as cursor:
            cursor.execute(compiled.sql, compiled.parameters(params))
            if not compiled.keys:
                return []
            return compiled.rows(cursor.description, cursor.fetchall())

    def first(self, conn: Connection, params: Mapping[str, Any]) -> _Row | None:
        """Execute once; its first row, or None."""
        found = self.rows(conn, params)
        return found[0] if found else None

    def execute(self, conn: Connection, params: Mapping[str, Any]) -> None:
        """Execute once, for its effect."""
        self.rows(conn, params)

    def executemany(self, conn: Connection, rows: Sequence[Mapping[str, Any]]) -> None:
        """Execute once per parameter set (every set naming the same parameters), for the
        effect."""
        if not rows:
            return
        if len(rows) == 1:  # psycopg runs an executemany in a pipeline, costly for one row
            self.execute(conn, rows[0])
            return
        compiled = self._compile(conn.dialect, rows[0])
        with _cursor(conn, compiled.sql) as cursor:
            cursor.executemany(compiled.sql, [compiled.parameters(row) for row in rows])

    def _compile(self, dialect: Dialect, params: Mapping[str, Any]) -> _Compiled:
        names = tuple(params)
        cached = self._compiled.get((dialect.name, names))
        if cached is None:
            cached = _compile(self._statement, dialect, names)
            self._compiled[(dialect.name, names)] = cached
        return cached


@contextmanager
def _cursor(conn: Connection, sql: str) -> Iterator[Any]:
    """A DBAPI cursor of `conn`'s transaction, closed after the block; a DBAPI error the block
    raises comes out as SQLAlchemy's, with a dropped connection invalidated."""
    if not conn.in_transaction():
        # As SQLAlchemy begins one before its first statement: the store's own BEGIN (a
        # reader's snapshot on SQLite) is emitted, and the transaction ends with the block.
        conn.begin()
    driver = conn.connection.driver_connection
    assert driver is not None, "the connection is closed"
    dialect = conn.dialect
    with closing(driver.cursor()) as cursor:
        try:
            yield cursor
        except dialect.loaded_dbapi.Error as error:
            dropped = dialect.is_disconnect(error, conn.connection.dbapi_connection, cursor)
            if dropped:
                conn.invalidate(error)
            raise exc.DBAPIError.instance(
                sql,
                None,
                error,
                dialect.loaded_dbapi.Error,
                hide_parameters=True,
                connection_invalidated=dropped,
                dialect=dialect,
            ) from error


def _compile(statement: ClauseElement, dialect: Dialect, names: tuple[str, ...]) -> _Compiled:
    compiled = statement.compile(dialect=dialect, column_keys=list(names))
    assert isinstance(compiled, SQLCompiler)
    if "__[POSTCOMPILE" in compiled.string or compiled.escaped_bind_names:
        raise ValueError("a driver statement takes no expanding or escaped parameters")
    binds = {}
    for name, bind in compiled.binds.items():
        process = bind.type.dialect_impl(dialect).bind_processor(dialect)
        if process is not None:
            binds[name] = process
    columns: tuple[ColumnElement[Any], ...] = tuple(getattr(statement, "exported_columns", ()))
    return _Compiled(
        sql=compiled.string,
        positions=tuple(compiled.positiontup) if compiled.positiontup is not None else None,
        defaults=compiled.params,
        binds=binds,
        keys=tuple(str(column.key) for column in columns),
        columns=columns,
        dialect=dialect,
    )


def _result_processors(
    columns: Sequence[ColumnElement[Any]], description: Sequence[Sequence[Any]], dialect: Dialect
) -> tuple[tuple[int, _Processor], ...]:
    found = []
    for index, (column, described) in enumerate(zip(columns, description, strict=True)):
        process = column.type.dialect_impl(dialect).result_processor(dialect, described[1])
        if process is not None:
            found.append((index, process))
    return tuple(found)
