"""Engine configuration: SQLite pragmas and locking, foreign keys on both SQL backends."""

from __future__ import annotations

import fcntl
import os
import sqlite3
import threading
from pathlib import Path

import pytest
from sqlalchemy import delete, func, insert, select, text
from sqlalchemy.exc import DBAPIError, IntegrityError

from mcpd.storage.sql.engine import (
    BUSY_TIMEOUT_MS,
    Synchronous,
    create_postgres_engine,
    create_sqlite_engine,
    read_connection,
)
from mcpd.storage.sql.engine import postgres_url as parse_postgres_url
from mcpd.storage.sql.schema import run
from mcpd.storage.sql.stores import SqlRunStore
from tests.libs.storage.helpers import record_statements, sql_engine


@pytest.mark.parametrize(("synchronous", "pragma_value"), [("NORMAL", 1), ("FULL", 2)])
def test_sqlite_pragmas(tmp_path: Path, synchronous: str, pragma_value: int) -> None:
    engine = create_sqlite_engine(tmp_path / "x.db", synchronous=Synchronous(synchronous))
    try:
        with read_connection(engine) as conn:
            assert conn.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
            assert conn.exec_driver_sql("PRAGMA synchronous").scalar() == pragma_value
            assert conn.exec_driver_sql("PRAGMA foreign_keys").scalar() == 1
            assert conn.exec_driver_sql("PRAGMA busy_timeout").scalar() == BUSY_TIMEOUT_MS
    finally:
        engine.dispose()


def test_sqlite_page_cache_is_sqlites_default_unless_chosen(tmp_path: Path) -> None:
    default = create_sqlite_engine(tmp_path / "x.db", synchronous=Synchronous.NORMAL)
    chosen = create_sqlite_engine(tmp_path / "x.db", synchronous=Synchronous.NORMAL, cache_mib=8)
    try:
        with read_connection(default) as conn:
            assert conn.exec_driver_sql("PRAGMA cache_size").scalar() == -2000
        with read_connection(chosen) as conn:
            assert conn.exec_driver_sql("PRAGMA cache_size").scalar() == -8 * 1024
    finally:
        default.dispose()
        chosen.dispose()


def test_sqlite_write_transaction_takes_the_write_lock_at_begin(tmp_path: Path) -> None:
    path = tmp_path / "x.db"
    engine = create_sqlite_engine(path, synchronous=Synchronous.NORMAL)
    statements = record_statements(engine)
    other = sqlite3.connect(path, timeout=0, isolation_level=None)
    try:
        with engine.begin() as conn:
            conn.execute(select(1))  # only a read so far, yet the write lock is held
            with pytest.raises(sqlite3.OperationalError, match="locked"):
                other.execute("BEGIN IMMEDIATE")
            # WAL: readers are not blocked by the writer.
            assert other.execute("SELECT 1").fetchone() == (1,)
        assert statements[0] == "BEGIN IMMEDIATE"
    finally:
        other.close()
        engine.dispose()


def test_sqlite_read_connection_takes_no_write_lock(tmp_path: Path) -> None:
    path = tmp_path / "x.db"
    engine = create_sqlite_engine(path, synchronous=Synchronous.NORMAL)
    statements = record_statements(engine)
    other = sqlite3.connect(path, timeout=0, isolation_level=None)
    try:
        with read_connection(engine) as conn:
            conn.execute(select(1))
            other.execute("BEGIN IMMEDIATE")  # a writer elsewhere is not blocked
            other.execute("ROLLBACK")
        assert statements[0] == "BEGIN"
    finally:
        other.close()
        engine.dispose()


def _writer_turn_is_free(path: Path) -> bool:
    """Whether no connection holds the file's writers' queue (probed without waiting)."""
    fd = os.open(f"{path}-writer", os.O_RDWR | os.O_CREAT)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    finally:
        os.close(fd)  # closing drops a lock this probe took
    return True


def test_sqlite_writers_queue_in_the_kernel_and_leave_after_commit(tmp_path: Path) -> None:
    path = tmp_path / "x.db"
    first = create_sqlite_engine(path, synchronous=Synchronous.NORMAL)
    second = create_sqlite_engine(path, synchronous=Synchronous.NORMAL)
    with first.begin() as conn:
        conn.exec_driver_sql("CREATE TABLE t (n INTEGER)")
    assert _writer_turn_is_free(path)
    began = threading.Event()

    def write_second() -> None:
        with second.begin() as conn:
            began.set()
            conn.exec_driver_sql("INSERT INTO t VALUES (2)")

    try:
        with first.connect() as conn:
            with conn.begin():
                conn.exec_driver_sql("INSERT INTO t VALUES (1)")
                assert not _writer_turn_is_free(path)
                waiting = threading.Thread(target=write_second)
                waiting.start()
                # Queued behind the first writer, not begun.
                assert not began.wait(0.2)
                with read_connection(second) as reader:  # readers do not queue
                    assert reader.exec_driver_sql("SELECT count(*) FROM t").scalar() == 0
            # Committed, its connection still open: the next writer is in.
            waiting.join(timeout=5)
            assert began.is_set()
            assert not waiting.is_alive()
        with read_connection(first) as reader:
            assert reader.exec_driver_sql("SELECT n FROM t ORDER BY n").scalars().all() == [1, 2]
        assert _writer_turn_is_free(path)
    finally:
        first.dispose()
        second.dispose()


def test_sqlite_a_rolled_back_writer_leaves_the_queue(tmp_path: Path) -> None:
    path = tmp_path / "x.db"
    engine = create_sqlite_engine(path, synchronous=Synchronous.NORMAL)
    try:
        held: list[bool] = []

        def fail_inside_a_write() -> None:
            with engine.begin() as conn:
                conn.execute(select(1))
                held.append(not _writer_turn_is_free(path))
                raise ZeroDivisionError

        with pytest.raises(ZeroDivisionError):
            fail_inside_a_write()
        assert held == [True]
        assert _writer_turn_is_free(path)
        with read_connection(engine) as conn:
            conn.execute(select(1))
            assert _writer_turn_is_free(path)
    finally:
        engine.dispose()


def test_foreign_keys_are_enforced_and_cascade(run_store: SqlRunStore) -> None:
    engine = run_store.engine
    with engine.begin() as conn:
        conn.execute(
            insert(run.definitions).values(
                project="p",
                id="refund",
                version=1,
                kind="workflow",
                body={"steps": []},
                created_at=1,
            )
        )
        conn.execute(
            insert(run.runs).values(
                run_id="r1", project="p", definition_id="refund", definition_version=1,
                status="running", cursor_index=0, cursor_construct="task", trace_id="0" * 32,
                steps_used=0, cost_usd=0.0, root_run_id="r1", depth=0, next_event_seq=0,
                created_at=1, updated_at=1,
            )
        )  # fmt: skip
        conn.execute(
            insert(run.step_attempts).values(
                project="p", run_id="r1", step_key="a", attempt=1, kind="task",
                effect="at_least_once", status="pending", span_id="0" * 16, created_at=1,
            )
        )  # fmt: skip

    # An attempt for a run that does not exist is refused...
    with pytest.raises(IntegrityError), engine.begin() as conn:
        conn.execute(
            insert(run.step_attempts).values(
                project="p", run_id="missing", step_key="a", attempt=1, kind="task",
                effect="at_least_once", status="pending", span_id="0" * 16, created_at=1,
            )
        )  # fmt: skip

    # ...and deleting a run takes its journal with it.
    with engine.begin() as conn:
        conn.execute(delete(run.runs).where(run.runs.c.run_id == "r1"))
    with engine.connect() as conn:
        count = conn.execute(select(func.count()).select_from(run.step_attempts)).scalar()
    assert count == 0


def test_postgres_url_pins_psycopg_and_refuses_other_schemes() -> None:
    assert parse_postgres_url("postgresql://u:p@h:5432/db").drivername == "postgresql+psycopg"
    assert parse_postgres_url("postgres://h/db").drivername == "postgresql+psycopg"
    with pytest.raises(ValueError, match="not a PostgreSQL URL"):
        parse_postgres_url("mysql://h/db")
    with pytest.raises(ValueError, match="no host"):
        parse_postgres_url("postgresql:///db")


def test_postgres_read_connection_sees_committed_rows(postgres_url: str) -> None:
    engine = create_postgres_engine(postgres_url)
    try:
        with engine.begin() as conn:
            conn.execute(text("CREATE TABLE t (x int)"))
            conn.execute(text("INSERT INTO t VALUES (1)"))
        with read_connection(engine) as conn:
            assert conn.execute(text("SELECT x FROM t")).scalar() == 1
    finally:
        engine.dispose()


def test_errors_do_not_carry_statement_parameters(
    backend: str, backend_url: str | None, tmp_path: Path
) -> None:
    # A digest, hash or prompt bound into a failing statement must not reach a log line
    # through the error's text.
    engine = sql_engine("control", backend, tmp_path, backend_url)
    try:
        with pytest.raises(DBAPIError) as raised, engine.connect() as conn:
            conn.execute(
                text("SELECT 1 FROM no_such_table WHERE x = :secret"), {"secret": "s3cr3t"}
            )
        assert "s3cr3t" not in str(raised.value)
        assert "hide_parameters" in str(raised.value)
    finally:
        engine.dispose()
