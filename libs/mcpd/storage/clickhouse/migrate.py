"""Versioned SQL migrations for the ClickHouse trace store.

Migrations are files in `migrations/` named `NNNN_description.sql`, applied in name order and
recorded, with a SHA-256 of their text, in the `schema_migrations` table. Within a file a
statement ends with a semicolon at the end of a line, and full-line `--` comments are dropped.

A start with nothing to apply issues exactly one statement, the read of `schema_migrations`, and
no DDL: the table is created only when that read reports it missing (a fresh database). This is
what lets the backend declare `idempotent_schema_init`.

ClickHouse has no transactional DDL, so a migration interrupted half-way is completed by running
it again: every statement in a migration file must be safe to repeat (`CREATE TABLE IF NOT
EXISTS`, `ADD COLUMN IF NOT EXISTS`, ...). The same property makes two daemons that migrate at
once harmless.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from pathlib import Path

from mcpd.runtime.errors import FailedPrecondition
from mcpd.storage.clickhouse.executor import UNKNOWN_TABLE, ClickHouseError, ClickHouseExecutor

MIGRATIONS_DIR = Path(__file__).parent / "migrations"
_FILE_NAME = re.compile(r"^(\d{4}_[a-z0-9_]+)\.sql$")

CREATE_SCHEMA_MIGRATIONS = """
CREATE TABLE IF NOT EXISTS schema_migrations
(
    version String,
    checksum String,
    applied_at DateTime64(9, 'UTC')
)
ENGINE = MergeTree
ORDER BY version
"""
READ_APPLIED = "SELECT version, checksum FROM schema_migrations"
RECORD_APPLIED = (
    "INSERT INTO schema_migrations (version, checksum, applied_at) "
    "VALUES ({version:String}, {checksum:String}, now64(9))"
)


@dataclass(frozen=True)
class Migration:
    """One migration file: its version (the file name without `.sql`) and its statements."""

    version: str
    checksum: str
    statements: tuple[str, ...]


def split_statements(sql: str) -> list[str]:
    """Split a migration file into statements (see the module docstring for the rule)."""
    statements: list[str] = []
    current: list[str] = []
    for line in sql.splitlines():
        if line.strip().startswith("--"):
            continue
        current.append(line)
        if line.rstrip().endswith(";"):
            statement = "\n".join(current).strip().removesuffix(";").strip()
            if statement:
                statements.append(statement)
            current = []
    if "\n".join(current).strip():
        raise ValueError("the last statement does not end with a semicolon")
    return statements


def load_migrations(directory: Path = MIGRATIONS_DIR) -> list[Migration]:
    """Every migration file in `directory`, in the order they apply."""
    migrations = []
    for path in sorted(directory.iterdir()):
        match = _FILE_NAME.match(path.name)
        if match is None:
            continue
        text = path.read_text(encoding="utf-8")
        migrations.append(
            Migration(
                version=match.group(1),
                checksum=hashlib.sha256(text.encode()).hexdigest(),
                statements=tuple(split_statements(text)),
            )
        )
    return migrations


def applied_migrations(executor: ClickHouseExecutor) -> dict[str, str] | None:
    """Applied versions and their checksums, or None when `schema_migrations` does not exist."""
    try:
        rows = executor.query(READ_APPLIED)
    except ClickHouseError as error:
        if error.clickhouse_code == UNKNOWN_TABLE:
            return None
        raise
    return {str(version): str(checksum) for version, checksum in rows}


def migrate(executor: ClickHouseExecutor, directory: Path = MIGRATIONS_DIR) -> list[str]:
    """Apply pending migrations in order; return the versions applied."""
    migrations = load_migrations(directory)
    applied = applied_migrations(executor)
    if applied is None:
        executor.command(CREATE_SCHEMA_MIGRATIONS)
        applied = {}
    _check_history(migrations, applied)

    done: list[str] = []
    for migration in migrations:
        if migration.version in applied:
            continue
        for statement in migration.statements:
            executor.command(statement)
        executor.command(
            RECORD_APPLIED, {"version": migration.version, "checksum": migration.checksum}
        )
        done.append(migration.version)
    return done


def pending(executor: ClickHouseExecutor, directory: Path = MIGRATIONS_DIR) -> list[str]:
    """Versions not yet applied, in order; nothing is changed."""
    migrations = load_migrations(directory)
    applied = applied_migrations(executor) or {}
    _check_history(migrations, applied)
    return [m.version for m in migrations if m.version not in applied]


def _check_history(migrations: list[Migration], applied: dict[str, str]) -> None:
    known = {migration.version: migration.checksum for migration in migrations}
    for version, checksum in sorted(applied.items()):
        if version not in known:
            raise FailedPrecondition(
                f"the ClickHouse schema has migration {version!r}, which this version of mcpd "
                "does not know; run a newer mcpd",
                reason="SCHEMA_TOO_NEW",
            )
        if known[version] != checksum:
            raise FailedPrecondition(
                f"ClickHouse migration {version!r} was edited after it was applied; "
                "add a new migration instead of changing an applied one",
                reason="SCHEMA_DRIFT",
            )
