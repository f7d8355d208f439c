"""What the SQL stores share: an engine, its dialect, migrations and closing."""

from __future__ import annotations

from sqlalchemy.engine import Engine

from mcpd.storage.sql import migrate as sql_migrate
from mcpd.storage.sql.dialect import SqlDialect
from mcpd.storage.sql.schema import StoreName


class SqlStore:
    """The lifecycle every SQL store has; subclasses name their `StoreName`."""

    _store: StoreName

    def __init__(self, engine: Engine) -> None:
        self._engine = engine
        self._dialect = SqlDialect.of(engine)
        self._closed = False

    @property
    def backend(self) -> str:
        """`sqlite` or `postgres`."""
        return self._dialect.value

    @property
    def engine(self) -> Engine:
        """The engine, for the feature code built on this store."""
        return self._engine

    def migrate(self) -> list[str]:
        """Apply pending Alembic migrations; return the revisions applied."""
        return sql_migrate.migrate(self._engine, self._store)

    def pending_migrations(self) -> list[str]:
        """Alembic revisions not yet applied; nothing is changed."""
        return sql_migrate.pending(self._engine, self._store)

    def close(self) -> None:
        """Dispose of the connection pool. Idempotent."""
        if not self._closed:
            self._closed = True
            self._engine.dispose()
