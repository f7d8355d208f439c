"""Rows of another tenant in every table, so isolation tests have something to leak."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import sqlalchemy as sa

from mcpd.storage.sql.engine import Synchronous, create_sqlite_engine
from mcpd.storage.sql.schema import METADATA, StoreName

FILES = {StoreName.TRACE: "trace.db", StoreName.RUN: "run.db", StoreName.CONTROL: "control.db"}
PROJECT_COLUMNS = {"project", "project_id"}
# Columns whose readers decode a spec enum: they need a valid value, not the marker. Extend this
# as read paths land on more tables.
ENUM_VALUES = {
    ("audit_log", "result"): "refused",
    ("events", "type"): "user_input",
    ("turns", "event_types"): ["user_input"],
    ("turns", "tools_called"): [],
}


def _value(table: str, column: sa.Column[Any], project: str, marker: str) -> object:
    if column.name in PROJECT_COLUMNS:
        return project
    if (table, column.name) in ENUM_VALUES:
        return ENUM_VALUES[table, column.name]
    python_type: type[Any] = column.type.python_type if _has_python_type(column) else str
    if python_type is bool:
        return False
    if python_type is int:
        return 1
    if python_type is float:
        return 1.0
    if python_type in (dict, list):
        return {"marker": marker}
    if python_type is bytes:
        return marker.encode()
    # Every text column holds the marker, so foreign keys between seeded rows line up.
    return marker


def _has_python_type(column: sa.Column[Any]) -> bool:
    try:
        column.type.python_type  # noqa: B018 (the property raises for types without one)
    except NotImplementedError:
        return False
    return True


# Tables of the store's own bookkeeping, holding no one's data (and one row from migration on).
STORE_BOOKKEEPING = frozenset({"arrival_clock"})


def seed_every_table(data_dir: Path, *, project: str, marker: str) -> int:
    """Insert one row carrying `marker` into every table of the migrated SQLite stores."""
    seeded = 0
    for store, file_name in FILES.items():
        engine = create_sqlite_engine(data_dir / file_name, synchronous=Synchronous.FULL)
        try:
            with engine.begin() as connection:
                for table in METADATA[store].sorted_tables:
                    if table.name in STORE_BOOKKEEPING:
                        continue
                    row = {c.name: _value(table.name, c, project, marker) for c in table.columns}
                    connection.execute(table.insert().values(**row))
                    seeded += 1
        finally:
            engine.dispose()
    return seeded


def add_run(data_dir: Path, *, project: str, run_id: str, user_id: str, status: str) -> None:
    """One run of a one-step workflow started with correlation `user_id`, in the run store of the
    migrated SQLite data directory (what the orchestrator's erasure matches on)."""
    engine = create_sqlite_engine(data_dir / FILES[StoreName.RUN], synchronous=Synchronous.FULL)
    runs = METADATA[StoreName.RUN].tables
    try:
        with engine.begin() as connection:
            definition = {"project": project, "id": "flow", "version": 1}
            exists = sa.select(runs["definitions"].c.id).filter_by(**definition)
            if connection.execute(exists).first() is None:
                connection.execute(
                    runs["definitions"]
                    .insert()
                    .values(**definition, kind="workflow", body={}, created_at=1)
                )
            connection.execute(
                runs["runs"]
                .insert()
                .values(
                    run_id=run_id,
                    project=project,
                    definition_id="flow",
                    definition_version=1,
                    status=status,
                    cursor_index=0,
                    cursor_construct="step",
                    input={"prompt": f"input of {run_id}"},
                    user_id=user_id,
                    trace_id="0" * 32,
                    steps_used=0,
                    cost_usd=0.0,
                    idempotency_key=f"start-{run_id}",
                    root_run_id=run_id,
                    depth=0,
                    next_event_seq=1,
                    created_at=1,
                    updated_at=1,
                )
            )
    finally:
        engine.dispose()


def run_ids(data_dir: Path, project: str) -> set[str]:
    """The run ids of `project` in the run store of the SQLite data directory."""
    engine = create_sqlite_engine(data_dir / FILES[StoreName.RUN], synchronous=Synchronous.FULL)
    runs = METADATA[StoreName.RUN].tables["runs"]
    try:
        with engine.connect() as connection:
            found = connection.execute(sa.select(runs.c.run_id).where(runs.c.project == project))
            return set(found.scalars())
    finally:
        engine.dispose()
