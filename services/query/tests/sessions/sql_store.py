"""The real SessionStore for the tool tests: `SqlSessionStore` on a migrated SQLite trace
database with its tantivy index, both under the test's tmp dir."""

from __future__ import annotations

import shutil
from pathlib import Path

from sqlalchemy.engine import Engine

from mcpd.storage.sql.engine import Synchronous, create_sqlite_engine
from mcpd.storage.sql.sessions import SqlSessionStore
from mcpd.storage.sql.stores import SqlTraceStore


class OwnedSqlSessionStore(SqlSessionStore):
    """A SqlSessionStore that also disposes of the engine it was opened on."""

    def __init__(self, engine: Engine, *, index_dir: Path) -> None:
        super().__init__(engine, index_dir=index_dir)
        self._owned = engine

    def close(self) -> None:
        """Close the index, then the engine."""
        super().close()
        self._owned.dispose()


def migrated_database(directory: Path) -> Path:
    """A freshly migrated, empty trace database file (made once, copied per test, because
    running the migrations is most of a store's set-up time)."""
    path = directory / "trace.db"
    engine = create_sqlite_engine(path, synchronous=Synchronous.NORMAL)
    SqlTraceStore(engine).migrate()
    engine.dispose()  # the last connection checkpoints the WAL into the file
    return path


def open_sqlite(tmp_path: Path, template: Path) -> OwnedSqlSessionStore:
    """A SQLite session store on a copy of the migrated template."""
    target = tmp_path / "trace.db"
    for suffix in ("", "-wal", "-shm"):
        source = template.with_name(template.name + suffix)
        if source.exists():
            shutil.copyfile(source, target.with_name(target.name + suffix))
    engine = create_sqlite_engine(target, synchronous=Synchronous.NORMAL)
    return OwnedSqlSessionStore(engine, index_dir=tmp_path / "search" / "events")
