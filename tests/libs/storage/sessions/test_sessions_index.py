"""The SQLite backend's tantivy index stays in step with the database and mends itself:
after a deleted index, a crash between the two commits, a re-created database, a format
change, or a writer lock held elsewhere; and the writer's holder follows what other processes
write."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import select
from sqlalchemy.engine import Engine

from mcpd.sessions.search.index import STATE_FILE, SearchIndex
from mcpd.sessions.store import SearchQuery, SearchResult
from mcpd.storage.sql.engine import Synchronous, create_sqlite_engine
from mcpd.storage.sql.schema.sessions import search_log
from mcpd.storage.sql.sessions import SqlSessionStore
from mcpd.storage.sql.sessions.tantivy_search import TantivySearch
from mcpd.testing.eventually import eventually
from mcpd.testing.templates import SqliteTemplates
from tests.libs.storage.sessions.builders import ASSISTANT, USER, assemble, event_id


@pytest.fixture
def engine(tmp_path: Path, sqlite_templates: SqliteTemplates) -> Iterator[Engine]:
    path = sqlite_templates.copy("trace", tmp_path / "trace.db")
    created = create_sqlite_engine(path, synchronous=Synchronous.NORMAL)
    yield created
    created.dispose()


@pytest.fixture
def index_dir(tmp_path: Path) -> Path:
    return tmp_path / "search" / "events"


def open_store(engine: Engine, index_dir: Path) -> SqlSessionStore:
    store = SqlSessionStore(engine, index_dir=index_dir)
    store.reconcile_search_index()
    return store


def results(store: SqlSessionStore, text: str, project: str = "p") -> list[tuple[str, float]]:
    found: SearchResult = store.search(
        SearchQuery(project=project, text=text, event_types=["user_input"], limit=50)
    )
    return [(hit.event.id, hit.score) for hit in found.hits]


def assert_found(store: SqlSessionStore, text: str, count: int) -> None:
    assert len(results(store, text)) == count


def fill(store: SqlSessionStore) -> None:
    for n in range(5):
        store.write_session(
            "p",
            assemble(
                f"s{n}",
                [[(USER, f"deploy failure number {n} " + "deploy " * n), (ASSISTANT, "ok")]],
            ),
        )
    store.write_session("q", assemble("s0", [[(USER, "deploy elsewhere")]], project="q"))


def test_a_deleted_index_is_rebuilt_from_sql(engine: Engine, index_dir: Path) -> None:
    store = open_store(engine, index_dir)
    fill(store)
    before = results(store, "deploy failure")
    assert len(before) == 5
    store.close()

    shutil.rmtree(index_dir)
    reopened = open_store(engine, index_dir)
    try:
        assert results(reopened, "deploy failure") == before
        assert [i for i, _ in results(reopened, "deploy", project="q")] == [event_id("s0", 1, 1)]
    finally:
        reopened.close()


def test_rebuild_gives_the_same_results(engine: Engine, index_dir: Path) -> None:
    store = open_store(engine, index_dir)
    try:
        fill(store)
        before = results(store, "deploy failure")
        # Five user events and five answers in p, one in q.
        assert store.rebuild_search_index() == 11
        assert results(store, "deploy failure") == before
    finally:
        store.close()


def test_a_crash_between_the_commits_is_caught_up(
    engine: Engine, index_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = open_store(engine, index_dir)
    store.write_session("p", assemble("s1", [[(USER, "stale words")]]))
    # The process dies after SQLite commits and before the index does.
    with monkeypatch.context() as patch:
        patch.setattr(TantivySearch, "after_commit", lambda self, written: None)
        store.write_session("p", assemble("s1", [[(USER, "fresh words")]]))
        store.write_session("p", assemble("s2", [[(USER, "fresh too")]]))
    assert results(store, "stale") != []  # the index lags
    store.close()

    reopened = open_store(engine, index_dir)
    try:
        assert results(reopened, "stale") == []
        assert sorted(i for i, _ in results(reopened, "fresh")) == [
            event_id("s1", 1, 1),
            event_id("s2", 1, 1),
        ]
    finally:
        reopened.close()


def test_a_lagging_index_catches_up_on_the_next_write(
    engine: Engine, index_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = open_store(engine, index_dir)
    try:
        with monkeypatch.context() as patch:
            patch.setattr(TantivySearch, "after_commit", lambda self, written: None)
            store.write_session("p", assemble("s1", [[(USER, "missed words")]]))
        store.write_session("p", assemble("s2", [[(USER, "later words")]]))
        assert sorted(i for i, _ in results(store, "words")) == [
            event_id("s1", 1, 1),
            event_id("s2", 1, 1),
        ]
    finally:
        store.close()


def test_an_index_of_another_database_is_replaced(
    engine: Engine, index_dir: Path, tmp_path: Path, sqlite_templates: SqliteTemplates
) -> None:
    store = open_store(engine, index_dir)
    store.write_session("p", assemble("old", [[(USER, "ancient history")]]))
    store.close()

    # The database is deleted and re-imported; its version happens to be the same (1).
    fresh = sqlite_templates.copy("trace", tmp_path / "fresh.db")
    fresh_engine = create_sqlite_engine(fresh, synchronous=Synchronous.NORMAL)
    try:
        store = open_store(fresh_engine, index_dir)
        store.write_session("p", assemble("new", [[(USER, "modern history")]]))
        store.close()
        reopened = open_store(fresh_engine, index_dir)
        assert [i for i, _ in results(reopened, "history")] == [event_id("new", 1, 1)]
        reopened.close()
    finally:
        fresh_engine.dispose()


def test_an_index_of_another_format_is_rebuilt(engine: Engine, index_dir: Path) -> None:
    store = open_store(engine, index_dir)
    store.write_session("p", assemble("s1", [[(USER, "format check")]]))
    store.close()
    state = json.loads((index_dir / STATE_FILE).read_text())
    (index_dir / STATE_FILE).write_text(json.dumps({**state, "format": "older"}))

    reopened = open_store(engine, index_dir)
    try:
        assert [i for i, _ in results(reopened, "format")] == [event_id("s1", 1, 1)]
    finally:
        reopened.close()


def test_a_held_writer_lock_leaves_the_index_to_its_holder(engine: Engine, index_dir: Path) -> None:
    writer = open_store(engine, index_dir)
    writer.write_session("p", assemble("s1", [[(USER, "first words")]]))  # takes the lock
    other = open_store(engine, index_dir)  # cannot reconcile: logged, not raised
    try:
        # The other store's write commits to SQLite; its index update is left to the holder.
        other.write_session("p", assemble("s2", [[(USER, "second words")]]))
        assert other.get_event("p", event_id("s2", 1, 1)) is not None
        # The holder catches up on its next write; the other sees its commit (the reader
        # reloads on commit, with a short delay).
        writer.write_session("p", assemble("s3", [[(USER, "third words")]]))
        assert len(results(writer, "words")) == 3
        eventually(lambda: assert_found(other, "words", 3), timeout=5)
    finally:
        other.close()
        writer.close()


def test_the_writer_holder_follows_writes_it_never_makes(engine: Engine, index_dir: Path) -> None:
    holder = open_store(engine, index_dir)
    holder.write_session("p", assemble("s1", [[(USER, "first words")]]))  # takes the writer
    others = [open_store(engine, index_dir) for _ in range(2)]
    try:
        # Every other process writes; the holder writes nothing more, and catches up.
        for number, other in enumerate(others, start=2):
            other.write_session("p", assemble(f"s{number}", [[(USER, "more words")]]))
        others[0].write_session("q", assemble("s9", [[(USER, "more words")]], project="q"))

        def caught_up() -> None:
            assert len(results(holder, "words")) == 3, "the holder did not catch up"
            assert results(holder, "words", "q"), "the holder did not catch project q up"

        eventually(caught_up, timeout=15)
        assert [i for i, _ in results(holder, "more", "q")] == [event_id("s9", 1, 1)]
    finally:
        for other in others:
            other.close()
        holder.close()


def test_the_holder_applies_other_writes_by_their_logged_difference(
    engine: Engine, index_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    holder = open_store(engine, index_dir)
    holder.write_session("p", assemble("s1", [[(USER, "old words")]]))  # takes the writer
    other = open_store(engine, index_dir)

    def whole_sessions(*_args: object) -> None:
        raise AssertionError("re-indexed session by session")

    try:
        # Re-indexing session by session would fail: the log must carry every difference.
        monkeypatch.setattr("mcpd.storage.sql.sessions.tantivy_search._docs", whole_sessions)
        other.write_session("p", assemble("s1", [[(USER, "new words")]]))
        other.write_session("p", assemble("s2", [[(USER, "more words")]]))

        def followed() -> None:
            found = sorted(i for i, _ in results(holder, "words"))
            assert found == [event_id("s1", 1, 1), event_id("s2", 1, 1)], found
            assert not results(holder, "old"), "the holder did not follow the log"

        eventually(followed, timeout=15)
        # The log is trimmed once the index has committed what it names.
        eventually(lambda: _no_log(engine), timeout=15)
    finally:
        other.close()
        holder.close()


def _no_log(engine: Engine) -> None:
    assert _logged_versions(engine) == [], "the log was not trimmed"


def _logged_versions(engine: Engine) -> list[int]:
    with engine.connect() as conn:
        return [int(v) for v in conn.execute(select(search_log.c.version)).scalars()]


def test_searching_never_takes_the_writer_lock(engine: Engine, index_dir: Path) -> None:
    store = open_store(engine, index_dir)
    store.write_session("p", assemble("s1", [[(USER, "lock free")]]))
    store.close()
    reader = open_store(engine, index_dir)
    try:
        assert results(reader, "lock") != []
        # Reconciling released the lock again, and searching did not take it.
        writer = SearchIndex(index_dir)
        writer.update(docs=[])
        writer.close()
    finally:
        reader.close()


def test_sqlite_needs_an_index_directory(engine: Engine) -> None:
    with pytest.raises(ValueError, match="index directory"):
        SqlSessionStore(engine)


def test_a_burst_of_writes_shares_a_commit(engine: Engine, index_dir: Path) -> None:
    store = open_store(engine, index_dir)
    reader = SqlSessionStore(engine, index_dir=index_dir)  # searches only: takes no lock
    try:
        store.write_session("p", assemble("s1", [[(USER, "burst words")]]))  # commits at once
        store.write_session("p", assemble("s2", [[(USER, "burst words")]]))  # shares the next
        # Another process sees the second write once the timer commits it.
        eventually(lambda: assert_found(reader, "burst", 2), timeout=5)
        # The writing process always finds what it wrote: a search commits what is pending.
        store.write_session("p", assemble("s3", [[(USER, "burst words")]]))
        assert len(results(store, "burst")) == 3
        # Closing commits too, and records how far the index got.
        store.write_session("p", assemble("s4", [[(USER, "burst words")]]))
    finally:
        store.close()
        reader.close()
    state = json.loads((index_dir / STATE_FILE).read_text())
    assert state["projects"]["p"]["version"] == store.snapshot("p") == 4
