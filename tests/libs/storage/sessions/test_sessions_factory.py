"""open_stores builds `Stores.sessions` on every trace backend."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from mcpd.sessions.store import SearchQuery
from mcpd.storage import open_stores
from mcpd.storage.factory import SESSION_INDEX_DIR, Stores
from mcpd.storage.sql.sessions import SqlSessionStore
from tests.libs.storage.sessions.builders import USER, assemble, event_id


def _hits(stores: Stores, text: str) -> list[str]:
    result = stores.sessions.search(
        SearchQuery(project="p", text=text, event_types=["user_input"], limit=5)
    )
    return [hit.event.id for hit in result.hits]


def test_sqlite_sessions_search_beside_the_trace_database(tmp_path: Path) -> None:
    with open_stores("sqlite", data_dir=tmp_path, postgres_url=None, clickhouse_url=None) as s:
        assert isinstance(s.sessions, SqlSessionStore)
        assert s.sessions.backend == "sqlite"
        s.sessions.write_session("p", assemble("s1", [[(USER, "factory wiring")]]))
        assert _hits(s, "wiring") == [event_id("s1", 1, 1)]
    assert (tmp_path / SESSION_INDEX_DIR).is_dir()

    # Opening reconciles: a deleted index comes back from the database.
    shutil.rmtree(tmp_path / "search")
    with open_stores("sqlite", data_dir=tmp_path, postgres_url=None, clickhouse_url=None) as s:
        assert _hits(s, "wiring") == [event_id("s1", 1, 1)]


def test_checking_migrations_creates_no_index(tmp_path: Path) -> None:
    with open_stores(
        "sqlite", data_dir=tmp_path, postgres_url=None, clickhouse_url=None, migrate=False
    ):
        pass
    assert not (tmp_path / "search").exists()


@pytest.mark.postgres
def test_postgres_sessions_keep_nothing_on_disk(tmp_path: Path, postgres_url: str) -> None:
    with open_stores(
        "postgres", data_dir=tmp_path, postgres_url=postgres_url, clickhouse_url=None
    ) as s:
        assert s.sessions.backend == "postgres"  # type: ignore[attr-defined]
        s.sessions.write_session("p", assemble("s1", [[(USER, "factory wiring")]]))
        assert _hits(s, "wiring") == [event_id("s1", 1, 1)]
    assert list(tmp_path.iterdir()) == []


def test_clickhouse_sessions_rank_inside_clickhouse(tmp_path: Path) -> None:
    with open_stores(
        "clickhouse",
        data_dir=tmp_path,
        postgres_url=None,
        clickhouse_url=f"chdb://{tmp_path}/clickhouse",
    ) as s:
        assert s.sessions.backend == "clickhouse"  # type: ignore[attr-defined]
        assert s.sessions.snapshot("p") == 0
        s.sessions.write_session("p", assemble("s1", [[(USER, "factory wiring")]]))
        assert _hits(s, "wiring") == [event_id("s1", 1, 1)]
    # Nothing beside the ClickHouse data: no tantivy index.
    assert not (tmp_path / "search").exists()
