"""The SQL dialects mcpd speaks, as a closed enum, and the helpers that differ between them.

Every helper here returns a SQLAlchemy Core construct and branches with `match` +
`assert_never`, so adding a dialect is a type error everywhere it must be handled. ClickHouse is
not a member: it has its own store class (`mcpd.storage.clickhouse`), not a third branch here.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from typing import Any, assert_never, cast

from sqlalchemy import Table
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import Dialect, Engine
from sqlalchemy.sql.dml import Insert


class SqlDialect(enum.StrEnum):
    """A SQL backend; the value is the `backend` string StoreCapabilities reports."""

    SQLITE = "sqlite"
    POSTGRES = "postgres"

    @classmethod
    def of(cls, bind: Engine | Dialect) -> SqlDialect:
        """The dialect an engine (or a SQLAlchemy dialect) speaks."""
        name = bind.dialect.name if isinstance(bind, Engine) else bind.name
        if name == "sqlite":
            return cls.SQLITE
        if name == "postgresql":
            return cls.POSTGRES
        raise ValueError(f"unsupported SQL dialect {name!r}")

    def sqlalchemy_dialect(self) -> Dialect:
        """A SQLAlchemy dialect object, for compiling statements without a connection."""
        match self:
            case SqlDialect.SQLITE:
                return sqlite.dialect()
            case SqlDialect.POSTGRES:
                return postgresql.dialect()  # type: ignore[no-untyped-call]
            case _:
                assert_never(self)


def insert_ignore(table: Table, dialect: SqlDialect) -> Insert:
    """`INSERT ... ON CONFLICT DO NOTHING` on `table`'s primary key.

    Both backends spell it the same way in SQL, but SQLAlchemy exposes it through each
    dialect's own `insert`, so the choice is made here once.
    """
    match dialect:
        case SqlDialect.SQLITE:
            return sqlite.insert(table).on_conflict_do_nothing()
        case SqlDialect.POSTGRES:
            return postgresql.insert(table).on_conflict_do_nothing()
        case _:
            assert_never(dialect)


def upsert(table: Table, dialect: SqlDialect, columns: Sequence[str]) -> Insert:
    """`INSERT ... ON CONFLICT (primary key) DO UPDATE` setting `columns` from the row offered:
    what a write of a row that replaces any stored under its key needs, in one statement."""
    match dialect:
        case SqlDialect.SQLITE:
            made: Any = sqlite.insert(table)
        case SqlDialect.POSTGRES:
            made = postgresql.insert(table)
        case _:
            assert_never(dialect)
    keys = [column.name for column in table.primary_key.columns]
    return cast(
        Insert,
        made.on_conflict_do_update(
            index_elements=keys, set_={name: made.excluded[name] for name in columns}
        ),
    )
