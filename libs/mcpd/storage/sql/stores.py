"""The SQLite/PostgreSQL implementations of the three stores."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from google.protobuf import json_format, struct_pb2, timestamp_pb2
from sqlalchemy import select
from sqlalchemy.engine import Engine

from mcpd.model.v1 import account_pb2, query_pb2
from mcpd.runtime.clock import Clock, SystemClock
from mcpd.storage import capabilities
from mcpd.storage.sql import migrate as sql_migrate
from mcpd.storage.sql.dialect import SqlDialect, insert_ignore
from mcpd.storage.sql.engine import read_connection
from mcpd.storage.sql.schema import StoreName, control

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


class _SqlStore:
    """What the three SQL stores share: an engine, its dialect, migrations and closing."""

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


class SqlTraceStore(_SqlStore):
    """The trace store on SQLite or PostgreSQL."""

    _store = StoreName.TRACE

    def capabilities(self) -> query_pb2.StoreCapabilities:
        """This backend's row of `mcpd.storage.capabilities`."""
        return capabilities.BY_BACKEND[self.backend].to_proto()


class SqlRunStore(_SqlStore):
    """The run store on SQLite or PostgreSQL."""

    _store = StoreName.RUN


class SqlControlStore(_SqlStore):
    """The control store on SQLite or PostgreSQL."""

    _store = StoreName.CONTROL

    def __init__(self, engine: Engine, *, clock: Clock | None = None) -> None:
        super().__init__(engine)
        self._clock = clock or SystemClock()

    def ensure_project(self, project_id: str, name: str) -> None:
        """Create the project unless it exists; an existing one keeps its name and settings."""
        statement = insert_ignore(control.projects, self._dialect).values(
            project_id=project_id, name=name, created_at=_nanos(self._clock.now())
        )
        with self._engine.begin() as conn:
            conn.execute(statement)

    def get_project(self, project_id: str) -> account_pb2.Project | None:
        """The project with this id, or None."""
        projects = control.projects
        with read_connection(self._engine) as conn:
            row = (
                conn.execute(select(projects).where(projects.c.project_id == project_id))
                .mappings()
                .first()
            )
        if row is None:
            return None
        project = account_pb2.Project(
            project_id=row["project_id"],
            name=row["name"],
            created_at=_timestamp(row["created_at"]),
            retention_days=row["retention_days"],
        )
        for field in ("sampling", "redaction", "budget", "metadata"):
            if row[field] is not None:
                getattr(project, field).CopyFrom(_value(row[field]))
        return project


def _nanos(moment: datetime) -> int:
    # Integer arithmetic: a float timestamp would round away the microseconds.
    return (moment - _EPOCH) // timedelta(microseconds=1) * 1000


def _timestamp(nanos: int) -> timestamp_pb2.Timestamp:
    seconds, remainder = divmod(nanos, 1_000_000_000)
    return timestamp_pb2.Timestamp(seconds=seconds, nanos=remainder)


def _value(document: Any) -> struct_pb2.Value:
    value = struct_pb2.Value()
    json_format.ParseDict(document, value)
    return value
