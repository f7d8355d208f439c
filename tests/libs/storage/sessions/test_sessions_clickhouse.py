"""What is particular to the ClickHouse session store: versioned rows read with FINAL,
tombstones for vanished rows, writes without a transaction, and the text index."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from mcpd.sessions.store import SearchQuery
from mcpd.storage.clickhouse import ChdbExecutor, ClickHouseTraceStore
from mcpd.storage.clickhouse.sessions import ClickHouseSessionStore
from mcpd.storage.clickhouse.sessions import writes as clickhouse_writes
from mcpd.storage.clickhouse.sessions.tables import insert as real_insert
from mcpd.testing.templates import ClickHouseTemplate
from tests.libs.storage.sessions.builders import (
    ASSISTANT,
    USER,
    assemble,
    event_id,
    session_id,
    turn_id,
)


@pytest.fixture
def ch_store(
    tmp_path: Path, clickhouse_template: ClickHouseTemplate
) -> Iterator[ClickHouseSessionStore]:
    trace = ClickHouseTraceStore(ChdbExecutor(clickhouse_template.copy(tmp_path / "clickhouse")))
    try:
        yield ClickHouseSessionStore(trace.executor)
    finally:
        trace.close()


def _count(store: ClickHouseSessionStore, sql: str) -> int:
    return int(store.executor.query(sql)[0][0])


def test_a_rewrite_inserts_only_what_changed(ch_store: ClickHouseSessionStore) -> None:
    ch_store.write_session("p", assemble("s1", [[(USER, "hello"), (ASSISTANT, "hi")]]))
    longer = [[(USER, "hello"), (ASSISTANT, "hi"), (ASSISTANT, "more")]]
    ch_store.write_session("p", assemble("s1", longer))
    # Event 1 is untouched; event 2 changed (no longer terminal) and event 3 is new.
    assert _count(ch_store, "SELECT count() FROM events") == 4
    assert _count(ch_store, "SELECT count() FROM events FINAL") == 3


def test_vanished_rows_get_tombstones_and_reads_stay_exact(
    ch_store: ClickHouseSessionStore,
) -> None:
    ch_store.write_session("p", assemble("s1", [[(USER, "alpha one")], [(USER, "alpha two")]]))
    ch_store.write_session("p", assemble("s1", [[(USER, "alpha one")]]))

    assert _count(ch_store, "SELECT countIf(is_deleted = 1) FROM events") == 1
    assert ch_store.get_turn("p", turn_id("s1", 2)) is None
    assert ch_store.edge_turns("p", session_id("s1")) == (turn_id("s1", 1), turn_id("s1", 1))
    found = ch_store.search(
        SearchQuery(project="p", text="alpha", event_types=["user_input"], limit=5)
    )
    assert [hit.event.id for hit in found.hits] == [event_id("s1", 1, 1)]
    # A merge drops the replaced row but keeps the (small) tombstone, so a late insert of an
    # older version could never resurrect the event; the reads do not change.
    ch_store.executor.command("OPTIMIZE TABLE events FINAL")
    ch_store.executor.command("OPTIMIZE TABLE turns FINAL")
    assert _count(ch_store, "SELECT count() FROM events") == 2
    assert ch_store.get_turn("p", turn_id("s1", 2)) is None
    assert ch_store.get_event("p", event_id("s1", 2, 1)) is None
    # An id that comes back is live again.
    ch_store.write_session("p", assemble("s1", [[(USER, "alpha one")], [(USER, "alpha two")]]))
    assert ch_store.get_event("p", event_id("s1", 2, 1)) is not None


def test_a_failed_write_is_completed_by_the_next_import(
    ch_store: ClickHouseSessionStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    ch_store.write_session("p", assemble("s1", [[(USER, "hello")]]))
    changed = assemble("s1", [[(USER, "changed"), (ASSISTANT, "new")]])

    def fail_on_sessions(executor: object, table: str, *args: object) -> None:
        if table == "sessions":
            raise RuntimeError("connection lost")
        real_insert(executor, table, *args)  # type: ignore[arg-type]

    monkeypatch.setattr(clickhouse_writes, "insert", fail_on_sessions)
    with pytest.raises(RuntimeError, match="connection lost"):
        ch_store.write_session("p", changed)
    # No transaction: the session row (and the snapshot) are as they were...
    assert ch_store.snapshot("p") == 1
    monkeypatch.undo()

    # ...so its content hash differs and the re-import writes the session whole.
    ch_store.write_session("p", changed)
    assert ch_store.snapshot("p") == 2
    assert ch_store.get_session("p", session_id("s1")) == changed.session
    assert ch_store.list_events("p", turn_id("s1", 1), after_ordinal=0, limit=9) == changed.events


def test_search_columns_hold_the_analyzed_tokens(ch_store: ClickHouseSessionStore) -> None:
    self_tool = {"payload": {"self_tool": True}}
    ch_store.write_session(
        "p", assemble("s1", [[(USER, "Café Crème"), (ASSISTANT, "search x", self_tool)]])
    )
    rows = ch_store.executor.query(
        "SELECT id, searchable, tokens, doc_length FROM events FINAL ORDER BY id"
    )
    assert rows == [
        (event_id("s1", 1, 1), True, ["cafe", "creme"], 2),
        (event_id("s1", 1, 2), False, [], 0),
    ]
    totals = ch_store.executor.query("SELECT search_docs, search_length FROM sessions FINAL")
    assert totals == [(1, 2)]


def test_the_text_index_prunes_granules(ch_store: ClickHouseSessionStore) -> None:
    ch_store.write_session("p", assemble("s1", [[(USER, "needle in a haystack")]]))
    plan = ch_store.executor.query(
        "EXPLAIN indexes = 1 SELECT id FROM events FINAL "
        "WHERE project = 'p' AND hasAny(tokens, ['needle'])"
    )
    text = "\n".join(str(row[0]) for row in plan)
    assert "Name: idx_tokens" in text
    assert "Description: text" in text
