"""Store templates: each copy is a fully migrated store of its own, and what a test writes to
its copy reaches neither the template nor another test's copy."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import sqlalchemy as sa

from mcpd.storage.clickhouse import ChdbExecutor, ClickHouseTraceStore
from mcpd.storage.factory import CONTROL_DB, RUN_DB, TRACE_DB
from mcpd.storage.sql.engine import Synchronous, create_postgres_engine, create_sqlite_engine
from mcpd.testing.pytest_plugin import POSTGRES_ENV
from mcpd.testing.templates import (
    SQL_STORES,
    ClickHouseTemplate,
    PostgresTemplates,
    SqliteTemplates,
    SqlKind,
)

KINDS: list[SqlKind] = ["trace", "run", "control"]
MARKER = "CREATE TABLE copy_marker (id INTEGER)"
# One row of a table of each store, as the VALUES of an INSERT.
ROWS: dict[SqlKind, str] = {
    "trace": "logs (project, log_id, timestamp, level, message, received_at)"
    " VALUES ('p', 'l1', 1, 'info', 'x', 1)",
    "run": "definitions (project, id, version, kind, body, created_at)"
    " VALUES ('p', 'd', 1, 'flow', '{}', 1)",
    "control": "projects (project_id, name, created_at) VALUES ('p', 'P', 1)",
}


def _tables(engine: sa.Engine) -> set[str]:
    return set(sa.inspect(engine).get_table_names())


@pytest.mark.parametrize("kind", KINDS)
def test_a_sqlite_copy_is_migrated_and_its_own(
    kind: SqlKind, sqlite_templates: SqliteTemplates, tmp_path: Path
) -> None:
    first = create_sqlite_engine(
        sqlite_templates.copy(kind, tmp_path / "a.db"), synchronous=Synchronous.FULL
    )
    second = create_sqlite_engine(
        sqlite_templates.copy(kind, tmp_path / "b.db"), synchronous=Synchronous.FULL
    )
    try:
        assert SQL_STORES[kind](first).pending_migrations() == []
        with first.begin() as conn:
            conn.execute(sa.text(MARKER))
        assert "copy_marker" in _tables(first)
        assert "copy_marker" not in _tables(second)
    finally:
        first.dispose()
        second.dispose()
    # A copy made after another copy was written to is still the empty template.
    third = create_sqlite_engine(
        sqlite_templates.copy(kind, tmp_path / "c.db"), synchronous=Synchronous.FULL
    )
    try:
        assert "copy_marker" not in _tables(third)
    finally:
        third.dispose()


def test_a_data_dir_holds_the_three_migrated_stores_under_their_names(
    sqlite_templates: SqliteTemplates, tmp_path: Path
) -> None:
    data_dir = sqlite_templates.data_dir(tmp_path / "data")
    for kind, name in zip(KINDS, (TRACE_DB, RUN_DB, CONTROL_DB), strict=True):
        engine = create_sqlite_engine(data_dir / name, synchronous=Synchronous.FULL)
        try:
            assert SQL_STORES[kind](engine).pending_migrations() == []
        finally:
            engine.dispose()


@pytest.mark.postgres
@pytest.mark.parametrize("kind", KINDS)
def test_a_postgres_copy_is_migrated_and_its_own(
    kind: SqlKind, postgres_templates: PostgresTemplates
) -> None:
    with postgres_templates.database(kind) as first_url, postgres_templates.database(kind) as other:
        assert first_url != other
        first, second = create_postgres_engine(first_url), create_postgres_engine(other)
        try:
            assert SQL_STORES[kind](first).pending_migrations() == []
            with first.begin() as conn:
                conn.execute(sa.text(f"INSERT INTO {ROWS[kind]}"))
            assert _count(first, kind) == 1
            assert _count(second, kind) == 0
        finally:
            first.dispose()
            second.dispose()


@pytest.mark.postgres
def test_a_postgres_copy_is_emptied_for_the_next_test_or_dropped_if_its_schema_changed(
    postgres_templates: PostgresTemplates,
) -> None:
    with postgres_templates.database("control") as used:
        engine = create_postgres_engine(used)
        with engine.begin() as conn:
            conn.execute(sa.text(f"INSERT INTO {ROWS['control']}"))
            # A row that refers to the project: emptying must delete it first.
            conn.execute(
                sa.text(
                    "INSERT INTO accounts (email, project, password_hash, created_at)"
                    " VALUES ('a@example.com', 'p', 'h', 1)"
                )
            )
        engine.dispose()
    with postgres_templates.database("control") as reused:
        assert reused == used
        engine = create_postgres_engine(reused)
        try:
            assert _count(engine, "control") == 0
            with engine.begin() as conn:
                conn.execute(sa.text(MARKER))
        finally:
            engine.dispose()
    with postgres_templates.database("control") as next_one:
        assert next_one != used
        engine = create_postgres_engine(next_one)
        try:
            assert "copy_marker" not in _tables(engine)
        finally:
            engine.dispose()
    assert not _exists(used)
    with postgres_templates.database("control", fresh=True) as fresh:
        assert fresh != next_one


def _count(engine: sa.Engine, kind: SqlKind) -> int:
    table = ROWS[kind].split()[0]
    with engine.connect() as conn:
        return int(conn.execute(sa.text(f"SELECT count(*) FROM {table}")).scalar_one())


def _exists(url: str) -> bool:
    name = sa.make_url(url).database
    admin = create_postgres_engine(os.environ[POSTGRES_ENV])
    try:
        with admin.connect() as conn:
            query = sa.text("SELECT count(*) FROM pg_database WHERE datname = :name")
            return bool(conn.execute(query, {"name": name}).scalar_one())
    finally:
        admin.dispose()


def test_a_clickhouse_copy_is_migrated_and_its_own(
    clickhouse_template: ClickHouseTemplate, tmp_path: Path
) -> None:
    for name in ("first", "second"):
        store = ClickHouseTraceStore(ChdbExecutor(clickhouse_template.copy(tmp_path / name)))
        try:
            assert store.migrate() == []
            found = store.executor.query("SELECT count() FROM system.tables WHERE name = 'mark'")
            assert found == [(0,)], f"{name} holds what another copy wrote"
            store.executor.command("CREATE TABLE mark (id UInt8) ENGINE = MergeTree ORDER BY id")
        finally:
            store.close()
