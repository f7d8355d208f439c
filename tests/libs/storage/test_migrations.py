"""Migrations on every backend: what they create, that a second run does nothing, and that
the migrated schema is exactly the MetaData the code declares."""

from __future__ import annotations

import subprocess
import sys
import threading
from pathlib import Path

import pytest
from alembic import command
from alembic.script import ScriptDirectory
from sqlalchemy import inspect, text

from mcpd.runtime.errors import FailedPrecondition
from mcpd.storage.clickhouse.migrate import READ_APPLIED
from mcpd.storage.sql.control_store import SqlControlStore
from mcpd.storage.sql.migrate import CONNECTION_ATTR, alembic_config, head_revision, schema_diff
from mcpd.storage.sql.schema import METADATA, StoreName
from mcpd.storage.sql.stores import SqlRunStore, SqlTraceStore
from tests.libs.storage.helpers import DDL, WRITE, OpenedStore, open_store, sql_engine

TRACE_TABLES = {
    "spans",
    "traces",
    "logs",
    "metrics",
    "scores",
    "feedback",
    "aspect_notes",
    "theme_snapshots",
    "themes",
    "theme_members",
    "theme_endings",
    "facet_values",
}
# The session read model: the same tables on every backend, and PostgreSQL's search vectors.
CLICKHOUSE_SESSION_TABLES = {
    "sessions",
    "turns",
    "events",
    "file_touches",
    "session_versions",
    "trace_turns",
}
SESSION_TABLES = {
    "sessions",
    "turns",
    "events",
    "file_touches",
    "event_search",
    "session_versions",
    "trace_turns",
    "search_log",
}
# What ingest writes beside the signals on SQL (idempotency keys, tail sampling's holding table).
SQL_SIGNAL_TABLES = {"ingest_keys", "held_spans"}
# SQLite's arrival sequence (delta polling); the table exists on PostgreSQL too, unused.
EVALUATION_TABLES = {"datasets", "dataset_items", "experiments", "experiment_items"}
SQL_TRACE_TABLES = (
    TRACE_TABLES
    | SESSION_TABLES
    | SQL_SIGNAL_TABLES
    | EVALUATION_TABLES
    | {"arrival_clock", "rollups", "score_rollups"}
)
# SQLite's FTS5 search tables and their shadow tables: created by the migration, not declared in
# the MetaData (which the comparison below therefore leaves out).
SQLITE_SEARCH_TABLES = {
    f"{table}_fts{suffix}"
    for table in ("spans", "logs")
    for suffix in ("", "_data", "_idx", "_content", "_config")
}
RUN_TABLES = {
    "definitions",
    "runs",
    "step_attempts",
    "leases",
    "span_outbox",
    "run_events",
    "timers",
    "waits",
    "parked_events",
    "idempotency_keys",
}
CONTROL_TABLES = {
    "projects",
    "accounts",
    "api_keys",
    "account_sessions",
    "audit_log",
    "price_book",
    "watch_states",
    "aspects",
}
CLICKHOUSE_REVISIONS = [
    "0001_initial",
    "0002_session_read_model",
    "0003_ingest_keys_held_spans",
    "0004_query_layout",
    "0005_trace_turns",
    "0006_datasets",
    "0007_rollups",
    "0008_score_rollups",
    "0009_themes",
]
EXPECTED_TABLES = {"trace": SQL_TRACE_TABLES, "run": RUN_TABLES, "control": CONTROL_TABLES}
# Every store's revisions, oldest first: what a fresh database has applied after `migrate`.
REVISIONS = {
    "trace": [
        "0001_initial",
        "0002_session_read_model",
        "0003_ingest_keys_held_spans",
        "0004_query_read_paths",
        "0005_span_head_json",
        "0006_trace_sessions",
        "0007_datasets",
        "0008_rollups",
        "0009_score_rollups",
        "0010_themes",
    ],
    "run": [
        "0001_initial",
        "0002_definition_digest",
        "0003_leases",
        "0004_span_outbox",
        "0005_run_endings",
    ],
    "control": [
        "0001_initial",
        "0002_key_owner_audit_order",
        "0003_audit_source_count",
        "0004_watch_states",
        "0005_aspects",
    ],
}


def test_trace_store_migrate_creates_every_table(trace_store: OpenedStore) -> None:
    clickhouse = trace_store.backend == "clickhouse"
    tables = (
        TRACE_TABLES
        | CLICKHOUSE_SESSION_TABLES
        | SQL_SIGNAL_TABLES
        | EVALUATION_TABLES
        | {"rollups", "score_rollups"}
        if clickhouse
        else SQL_TRACE_TABLES
    )
    assert trace_store.table_names() & tables == set()

    applied = trace_store.store.migrate()

    assert applied == (CLICKHOUSE_REVISIONS if clickhouse else REVISIONS["trace"])
    version_table = "schema_migrations" if clickhouse else StoreName.TRACE.version_table
    assert trace_store.table_names() == tables | {version_table} | _search_tables(
        trace_store.backend
    )


def test_trace_store_second_migrate_issues_no_ddl(trace_store: OpenedStore) -> None:
    trace_store.store.migrate()
    trace_store.statements.clear()

    assert trace_store.store.migrate() == []

    if trace_store.backend == "clickhouse":
        # Exactly one statement: the read of schema_migrations.
        assert trace_store.statements == [READ_APPLIED]
    else:
        _assert_only_reads(trace_store.statements, StoreName.TRACE)


@pytest.mark.parametrize("kind", ["run", "control"])
def test_run_and_control_migrate_once(
    backend: str, backend_url: str | None, kind: str, tmp_path: Path
) -> None:
    opened = open_store(kind, backend, tmp_path, backend_url)
    try:
        assert opened.store.migrate() == REVISIONS[kind]
        store = StoreName(kind)
        assert opened.table_names() == EXPECTED_TABLES[kind] | {store.version_table}

        opened.statements.clear()
        assert opened.store.migrate() == []
        _assert_only_reads(opened.statements, store)
    finally:
        opened.store.close()


def test_three_stores_share_one_database(
    backend: str, backend_url: str | None, tmp_path: Path
) -> None:
    # Distinct version tables let the three stores live in one PostgreSQL database (or, here
    # on SQLite too, one file) without reading each other's revisions.
    engine = sql_engine("shared", backend, tmp_path, backend_url)
    try:
        classes = {"trace": SqlTraceStore, "run": SqlRunStore, "control": SqlControlStore}
        for kind, store_class in classes.items():
            assert store_class(engine).migrate() == REVISIONS[kind]
        for store_class in (SqlTraceStore, SqlRunStore, SqlControlStore):
            assert store_class(engine).migrate() == []
        names = set(inspect(engine).get_table_names())
        assert names == SQL_TRACE_TABLES | RUN_TABLES | CONTROL_TABLES | _search_tables(backend) | {
            store.version_table for store in StoreName
        }
        with engine.connect() as conn:
            for store in StoreName:
                assert schema_diff(conn, store) == []
    finally:
        engine.dispose()


def test_control_store_upgrades_from_0001(
    backend: str, backend_url: str | None, tmp_path: Path
) -> None:
    # A database migrated by the first release: 0002 swaps the audit index and adds the key
    # owner index, 0003 adds the audit log's source, count and reason, keeping the rows (each
    # a single event), and the result is exactly the declared MetaData.
    opened = open_store("control", backend, tmp_path, backend_url)
    try:
        assert opened.engine is not None
        config = alembic_config(StoreName.CONTROL)
        with opened.engine.begin() as conn:
            config.attributes[CONNECTION_ATTR] = conn
            command.upgrade(config, "0001_initial")
            conn.execute(
                text(
                    "INSERT INTO audit_log (audit_id, timestamp, principal, subject, action,"
                    " project, result) VALUES ('a1', 1, 'anonymous', '', 'get_trace', 'p',"
                    " 'allowed')"
                )
            )
        upgrades = REVISIONS["control"][1:]
        assert opened.store.pending_migrations() == upgrades

        assert opened.store.migrate() == upgrades

        with opened.engine.connect() as conn:
            assert schema_diff(conn, StoreName.CONTROL) == []
            assert conn.execute(text("SELECT audit_id FROM audit_log")).scalars().all() == ["a1"]
        (old,) = opened.store.list_audit("p", cursor=None, limit=10).events
        assert old.count == 1
        assert not old.HasField("source")
        assert not old.HasField("reason")
    finally:
        opened.store.close()


@pytest.mark.parametrize("kind", ["trace", "run", "control"])
def test_migrated_schema_matches_metadata(
    backend: str, backend_url: str | None, kind: str, tmp_path: Path
) -> None:
    opened = open_store(kind, backend, tmp_path, backend_url)
    try:
        opened.store.migrate()
        assert opened.engine is not None
        with opened.engine.connect() as conn:
            assert schema_diff(conn, StoreName(kind)) == []
    finally:
        opened.store.close()


def test_schema_diff_sees_drift(backend: str, backend_url: str | None, tmp_path: Path) -> None:
    # The comparison above is only worth something if it can fail.
    opened = open_store("trace", backend, tmp_path, backend_url)
    try:
        opened.store.migrate()
        assert opened.engine is not None
        with opened.engine.begin() as conn:
            conn.execute(text("ALTER TABLE spans ADD COLUMN surprise TEXT"))
            conn.execute(text("DROP INDEX ix_logs_project_level_timestamp"))
        with opened.engine.connect() as conn:
            diff = schema_diff(conn, StoreName.TRACE)
        kinds = {entry[0] if isinstance(entry, tuple) else entry[0][0] for entry in diff}
        assert kinds == {"remove_column", "add_index"}
    finally:
        opened.store.close()


def test_every_metadata_table_is_created_by_its_migration() -> None:
    for store, tables in EXPECTED_TABLES.items():
        assert set(METADATA[StoreName(store)].tables) == tables


@pytest.mark.parametrize("store", list(StoreName))
def test_the_head_read_from_the_files_is_alembics(store: StoreName) -> None:
    script = ScriptDirectory.from_config(alembic_config(store))
    assert script.get_heads() == [head_revision(store)]


@pytest.mark.e2e  # a process of its own, with a clean module table
def test_opening_migrated_stores_imports_no_alembic(tmp_path: Path) -> None:
    # What a daemon's start costs when nothing is to migrate: no Alembic, Mako or Pygments.
    probe = (
        "import sys\n"
        "from pathlib import Path\n"
        "from mcpd.storage import open_stores\n"
        f"data = Path({str(tmp_path)!r})\n"
        "open_stores('sqlite', data_dir=data, postgres_url=None, clickhouse_url=None).close()\n"
        "before = 'alembic' in sys.modules\n"
        "for name in [n for n in sys.modules if n.split('.')[0] in ('alembic', 'mako')]:\n"
        "    del sys.modules[name]\n"
        "open_stores('sqlite', data_dir=data, postgres_url=None, clickhouse_url=None).close()\n"
        "print(before, 'alembic' in sys.modules)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, check=True
    )
    assert result.stdout.split() == ["True", "False"], result.stderr


def test_unknown_revision_is_refused(backend: str, backend_url: str | None, tmp_path: Path) -> None:
    opened = open_store("trace", backend, tmp_path, backend_url)
    try:
        opened.store.migrate()
        assert opened.engine is not None
        with opened.engine.begin() as conn:
            conn.execute(text("UPDATE alembic_version_trace SET version_num = '9999_future'"))
        with pytest.raises(FailedPrecondition) as raised:
            opened.store.migrate()
        assert raised.value.reason == "SCHEMA_TOO_NEW"
    finally:
        opened.store.close()


def test_concurrent_migrators_apply_once(
    backend: str, backend_url: str | None, tmp_path: Path
) -> None:
    # Two processes starting at once: the write lock (BEGIN IMMEDIATE, or the advisory lock on
    # PostgreSQL) lets one apply the migration; the other finds nothing left to do.
    stores = [open_store("run", backend, tmp_path, backend_url) for _ in range(2)]
    barrier = threading.Barrier(2)
    results: list[list[str]] = []
    errors: list[Exception] = []

    def run(opened: OpenedStore) -> None:
        barrier.wait()
        try:
            results.append(opened.store.migrate())
        except Exception as error:
            errors.append(error)

    threads = [threading.Thread(target=run, args=(opened,)) for opened in stores]
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=60)
        assert errors == []
        assert sorted(results) == [[], REVISIONS["run"]]
    finally:
        for opened in stores:
            opened.store.close()


def _search_tables(backend: str) -> set[str]:
    return SQLITE_SEARCH_TABLES if backend == "sqlite" else set()


def _assert_only_reads(statements: list[str], store: StoreName) -> None:
    assert statements, "the version table was not even read"
    assert [s for s in statements if DDL.match(s) or WRITE.match(s)] == []
    assert any(store.version_table in s for s in statements)
