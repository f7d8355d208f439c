"""The real SessionStore for the tool tests: `SqlSessionStore` on a migrated SQLite trace
database with its tantivy index, both under the test's tmp dir."""

from __future__ import annotations

from pathlib import Path

from sqlalchemy.engine import Engine

from mcpd.storage.sql.engine import Synchronous, create_sqlite_engine
from mcpd.storage.sql.sessions import SqlSessionStore
from mcpd.testing.templates import SqliteTemplates


class OwnedSqlSessionStore(SqlSessionStore):
    """A SqlSessionStore that also disposes of the engine it was opened on."""

    def __init__(self, engine: Engine, *, index_dir: Path) -> None:
        super().__init__(engine, index_dir=index_dir)
        self._owned = engine

    def close(self) -> None:
        """Close the index, then the engine."""
        super().close()
        self._owned.dispose()


def open_sqlite(tmp_path: Path, templates: SqliteTemplates) -> OwnedSqlSessionStore:
    """A SQLite session store on a copy of the migrated template."""
    target = templates.copy("trace", tmp_path / "trace.db")
    engine = create_sqlite_engine(target, synchronous=Synchronous.NORMAL)
    return OwnedSqlSessionStore(engine, index_dir=tmp_path / "search" / "events")
