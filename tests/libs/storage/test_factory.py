"""open_stores: which backend each store lands on, migration on open, bad settings."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy import inspect

from mcpd.runtime.errors import InvalidArgument, Unavailable
from mcpd.storage import (
    ClickHouseTraceStore,
    ControlStore,
    RunStore,
    SqlControlStore,
    SqlRunStore,
    SqlTraceStore,
    TraceStore,
    open_stores,
)
from mcpd.storage.factory import TRACE_CACHE_MIB


def test_sqlite_puts_each_store_in_its_own_file(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"  # created on demand
    with open_stores("sqlite", data_dir=data_dir, postgres_url=None, clickhouse_url=None) as s:
        assert isinstance(s.trace, SqlTraceStore)
        assert isinstance(s.run, SqlRunStore)
        assert isinstance(s.control, SqlControlStore)
        assert isinstance(s.trace, TraceStore)
        assert isinstance(s.run, RunStore)
        assert isinstance(s.control, ControlStore)
        assert {s.trace.backend, s.run.backend, s.control.backend} == {"sqlite"}
        # Migrated on open.
        assert "spans" in inspect(s.trace.engine).get_table_names()
        assert "runs" in inspect(s.run.engine).get_table_names()
        s.control.ensure_project("default", "Default")
        # The trace store's connections get the larger page cache; the others SQLite's default.
        for store, kib in ((s.trace, -TRACE_CACHE_MIB * 1024), (s.run, -2000), (s.control, -2000)):
            with store.engine.connect() as conn:
                assert conn.exec_driver_sql("PRAGMA cache_size").scalar() == kib
    assert sorted(p.name for p in data_dir.glob("*.db")) == ["control.db", "run.db", "trace.db"]

    # Reopening finds everything migrated and the data in place.
    with open_stores("sqlite", data_dir=data_dir, postgres_url=None, clickhouse_url=None) as s:
        assert s.trace.migrate() == []
        project = s.control.get_project("default")
        assert project is not None
        assert project.name == "Default"


def test_clickhouse_trace_with_sqlite_run_and_control(tmp_path: Path) -> None:
    with open_stores(
        "clickhouse",
        data_dir=tmp_path,
        postgres_url=None,
        clickhouse_url=f"chdb://{tmp_path}/clickhouse",
    ) as s:
        assert isinstance(s.trace, ClickHouseTraceStore)
        assert s.trace.capabilities().backend == "clickhouse"
        assert s.trace.migrate() == []  # migrated on open
        assert (s.run.backend, s.control.backend) == ("sqlite", "sqlite")
    assert not (tmp_path / "trace.db").exists()


@pytest.mark.postgres
def test_postgres_holds_all_three(tmp_path: Path, postgres_url: str) -> None:
    with open_stores(
        "postgres", data_dir=tmp_path, postgres_url=postgres_url, clickhouse_url=None
    ) as s:
        assert {s.trace.backend, s.run.backend, s.control.backend} == {"postgres"}
        s.control.ensure_project("p", "P")
        project = s.control.get_project("p")
        assert project is not None
    assert list(tmp_path.iterdir()) == []  # nothing on local disk


@pytest.mark.postgres
def test_sqlite_trace_with_postgres_run_and_control(tmp_path: Path, postgres_url: str) -> None:
    with open_stores(
        "sqlite", data_dir=tmp_path, postgres_url=postgres_url, clickhouse_url=None
    ) as s:
        assert s.trace.backend == "sqlite"
        assert (s.run.backend, s.control.backend) == ("postgres", "postgres")
    assert [p.name for p in tmp_path.glob("*.db")] == ["trace.db"]


@pytest.mark.postgres
def test_clickhouse_trace_with_postgres_run_and_control(tmp_path: Path, postgres_url: str) -> None:
    with open_stores(
        "clickhouse",
        data_dir=tmp_path,
        postgres_url=postgres_url,
        clickhouse_url=f"chdb://{tmp_path}/clickhouse",
    ) as s:
        assert s.trace.backend == "clickhouse"
        assert (s.run.backend, s.control.backend) == ("postgres", "postgres")


@pytest.mark.parametrize(
    ("backend", "postgres_url", "clickhouse_url", "setting"),
    [
        ("mysql", None, None, "storage.backend"),
        ("", None, None, "storage.backend"),
        ("postgres", None, None, "storage.postgres_url"),
        ("sqlite", "mysql://h/db", None, "storage.postgres_url"),
        ("sqlite", "not a url", None, "storage.postgres_url"),
        ("clickhouse", None, None, "storage.clickhouse_url"),
        ("clickhouse", None, "tcp://h:9000/db", "storage.clickhouse_url"),
        ("clickhouse", None, "chdb://relative", "storage.clickhouse_url"),
    ],
)
def test_bad_settings_name_the_setting(
    tmp_path: Path,
    backend: str,
    postgres_url: str | None,
    clickhouse_url: str | None,
    setting: str,
) -> None:
    with pytest.raises(InvalidArgument) as raised:
        open_stores(
            backend, data_dir=tmp_path, postgres_url=postgres_url, clickhouse_url=clickhouse_url
        )
    assert raised.value.field == setting


def test_unreachable_postgres_is_unavailable(tmp_path: Path) -> None:
    with pytest.raises(Unavailable) as raised:
        open_stores(
            "sqlite",
            data_dir=tmp_path,
            postgres_url="postgresql://mcpd:hunter2@127.0.0.1:1/mcpd",
            clickhouse_url=None,
        )
    assert raised.value.field == "storage.postgres_url"
    assert "hunter2" not in raised.value.message
    # The SQLite trace store opened before the failure was closed again, and nothing leaked
    # open that would stop a second attempt.
    with open_stores("sqlite", data_dir=tmp_path, postgres_url=None, clickhouse_url=None):
        pass


def test_close_is_idempotent(tmp_path: Path) -> None:
    stores = open_stores("sqlite", data_dir=tmp_path, postgres_url=None, clickhouse_url=None)
    stores.close()
    stores.close()


def test_a_process_opens_only_the_stores_it_names(tmp_path: Path) -> None:
    with open_stores(
        "sqlite",
        data_dir=tmp_path,
        postgres_url=None,
        clickhouse_url=None,
        stores={"run", "control"},
    ) as s:
        assert s.names == {"run", "control"}
        assert s.run.migrate() == []
        assert set(s.pending_migrations()) == {"run", "control"}
        assert s.describe() == "sqlite (run, control)"
        for missing in ("trace", "sessions"):
            with pytest.raises(LookupError, match="did not open the trace store"):
                getattr(s, missing)
    # Neither the trace database nor the session search index was created.
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "control.db",
        "control.db-writer",  # the writers' queue (mcpd.storage.sql.engine)
        "run.db",
        "run.db-writer",
    ]

    with open_stores(
        "sqlite", data_dir=tmp_path, postgres_url=None, clickhouse_url=None, stores={"control"}
    ) as s:
        with pytest.raises(LookupError, match="did not open the run store"):
            _ = s.run
        assert s.describe() == "sqlite (control)"


@pytest.mark.postgres
def test_the_trace_store_alone_is_opened_on_its_own_backend(
    tmp_path: Path, postgres_url: str
) -> None:
    with open_stores(
        "clickhouse",
        data_dir=tmp_path,
        postgres_url=postgres_url,
        clickhouse_url=f"chdb://{tmp_path}/clickhouse",
        stores={"trace", "control"},
    ) as s:
        assert s.describe() == "clickhouse (trace), postgres (control)"
        with pytest.raises(LookupError):
            _ = s.run


def test_an_unknown_store_is_refused_before_anything_opens(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="unknown stores"):
        open_stores(
            "sqlite", data_dir=tmp_path, postgres_url=None, clickhouse_url=None, stores={"runs"}
        )
    assert list(tmp_path.iterdir()) == []
