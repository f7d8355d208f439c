"""ClickHouse's versioned SQL migrations, on the real engine (chdb)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from mcpd.runtime.errors import FailedPrecondition
from mcpd.storage.clickhouse.executor import ChdbExecutor
from mcpd.storage.clickhouse.migrate import (
    READ_APPLIED,
    load_migrations,
    migrate,
    split_statements,
)
from tests.libs.storage.helpers import DDL, RecordingExecutor


@pytest.fixture
def executor(tmp_path: Path) -> Iterator[RecordingExecutor]:
    recording = RecordingExecutor(ChdbExecutor(tmp_path / "ch"))
    try:
        yield recording
    finally:
        recording.close()


@pytest.fixture
def migrations(tmp_path: Path) -> Path:
    directory = tmp_path / "migrations"
    directory.mkdir()
    (directory / "0001_first.sql").write_text(
        "-- a comment; with a semicolon\n"
        "CREATE TABLE IF NOT EXISTS a\n(\n    x UInt8\n)\nENGINE = MergeTree\nORDER BY x;\n"
    )
    (directory / "README.md").write_text("not a migration")
    return directory


def tables(executor: RecordingExecutor) -> set[str]:
    rows = executor.inner.query("SELECT name FROM system.tables WHERE database = currentDatabase()")
    return {row[0] for row in rows}


def test_applies_in_order_once(executor: RecordingExecutor, migrations: Path) -> None:
    assert migrate(executor, migrations) == ["0001_first"]
    assert tables(executor) == {"a", "schema_migrations"}

    (migrations / "0002_second.sql").write_text(
        "CREATE TABLE IF NOT EXISTS b (y UInt8) ENGINE = MergeTree ORDER BY y;\n"
    )
    assert migrate(executor, migrations) == ["0002_second"]
    assert tables(executor) == {"a", "b", "schema_migrations"}


def test_nothing_to_apply_is_one_read_and_no_ddl(
    executor: RecordingExecutor, migrations: Path
) -> None:
    migrate(executor, migrations)
    executor.statements.clear()

    assert migrate(executor, migrations) == []

    assert executor.statements == [READ_APPLIED]
    assert not any(DDL.match(statement) for statement in executor.statements)


def test_edited_migration_is_refused(executor: RecordingExecutor, migrations: Path) -> None:
    migrate(executor, migrations)
    path = migrations / "0001_first.sql"
    path.write_text(path.read_text() + "\n")

    with pytest.raises(FailedPrecondition) as raised:
        migrate(executor, migrations)
    assert raised.value.reason == "SCHEMA_DRIFT"


def test_unknown_applied_migration_is_refused(
    executor: RecordingExecutor, migrations: Path
) -> None:
    migrate(executor, migrations)
    executor.command(
        "INSERT INTO schema_migrations VALUES ({v:String}, 'x', now64(9))", {"v": "9999_future"}
    )

    with pytest.raises(FailedPrecondition) as raised:
        migrate(executor, migrations)
    assert raised.value.reason == "SCHEMA_TOO_NEW"


def test_shipped_migrations_are_safe_to_repeat(executor: RecordingExecutor) -> None:
    # ClickHouse has no transactional DDL: a migration interrupted after some statements ran
    # is completed by running it again, which must not fail. 0003 replaces tables that were
    # still empty (CREATE OR REPLACE), behind a THROWIF guard that refuses when one holds rows;
    # 0007 and 0008 fill the rollups from stored rows, each INSERT only while its rows are
    # missing.
    assert migrate(executor) == [m.version for m in load_migrations()]
    for migration in load_migrations():
        for statement in migration.statements:
            if statement.upper().startswith("INSERT INTO ROLLUPS"):
                assert "(SELECT count() FROM rollups WHERE" in statement
                continue
            if statement.upper().startswith("INSERT INTO SCORE_ROLLUPS"):
                assert "(SELECT count() FROM score_rollups" in statement
                continue
            assert statement.upper().startswith(
                (
                    "CREATE TABLE IF NOT EXISTS",
                    "ALTER TABLE",
                    "CREATE OR REPLACE TABLE",
                    "SELECT THROWIF(",
                )
            )
    executor.command("TRUNCATE TABLE schema_migrations")

    assert migrate(executor) == [m.version for m in load_migrations()]


def test_split_statements() -> None:
    sql = "-- header\nSELECT 1;\n\nSELECT\n  ';' AS s;\n-- trailing comment\n"
    assert split_statements(sql) == ["SELECT 1", "SELECT\n  ';' AS s"]
    with pytest.raises(ValueError, match="semicolon"):
        split_statements("SELECT 1;\nSELECT 2\n")
