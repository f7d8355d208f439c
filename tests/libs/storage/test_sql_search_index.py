"""What the SQL trace store's writes maintain for the query service's reads, on SQLite and
PostgreSQL: the search index (SQLite FTS5 tables, PostgreSQL search vectors) kept in step with
upserts, releases, deletes and the 0004 migration, and the arrival sequence every write
transaction stamps. The list semantics themselves are the cross-backend suite's
(test_query_store*.py)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from alembic import command
from sqlalchemy import text

from mcpd.signals.batch import SignalBatch
from mcpd.signals.queries import LogQuery, SpanQuery, TraceQuery
from mcpd.storage.sql.migrate import CONNECTION_ATTR, alembic_config
from mcpd.storage.sql.schema import StoreName
from mcpd.storage.sql.signals import lists
from mcpd.storage.sql.signals.statements import folded_words, search_words
from tests.libs.signals.samples import MS, T0, log, score, span
from tests.libs.storage.helpers import Migrated, OpenedStore, open_store
from tests.libs.storage.test_migrations import REVISIONS


@pytest.fixture
def opened(backend: str, migrated: Migrated) -> Iterator[OpenedStore]:
    """A migrated trace store on each SQL backend."""
    store = migrated.open("trace", backend)
    try:
        yield store
    finally:
        store.store.close()


def write(opened: OpenedStore, **rows: Any) -> None:
    batch = SignalBatch(key_project="p", ingest_key=None, received_at=T0 + 50 * MS, **rows)
    assert opened.store.write_batches([batch]) == [True]


def span_ids(opened: OpenedStore, q: str) -> list[str]:
    page = opened.store.list_spans("p", SpanQuery(q=q))
    return sorted(row["span_id"] for row in page.rows)


def trace_ids(opened: OpenedStore, q: str) -> list[str]:
    page = opened.store.list_traces("p", TraceQuery(q=q))
    return sorted(row["trace_id"] for row in page.rows)


def log_ids(opened: OpenedStore, q: str) -> list[str]:
    page = opened.store.list_logs("p", LogQuery(q=q))
    return sorted(row["log_id"] for row in page.rows)


def scalar(opened: OpenedStore, sql: str) -> Any:
    assert opened.engine is not None
    with opened.engine.connect() as conn:
        return conn.execute(text(sql)).scalar_one()


def fts_rows(opened: OpenedStore, table: str) -> int:
    """SQLite: the entries of a table's FTS index (one per row, none stale)."""
    return int(scalar(opened, f"SELECT count(*) FROM {table}_fts"))


def arrivals(opened: OpenedStore, table: str, key: str) -> dict[str, int]:
    assert opened.engine is not None
    with opened.engine.connect() as conn:
        rows = conn.execute(text(f"SELECT {key}, arrival_seq FROM {table} WHERE project = 'p'"))
        return {str(row[0]): int(row[1]) for row in rows}


# --- the search index ---------------------------------------------------------------------------


def test_a_resent_span_is_found_by_its_new_text_only(opened: OpenedStore) -> None:
    write(opened, spans=[span("s1", name="alpha call", input={"q": "ancient words"})])
    write(opened, spans=[span("s2", name="other")])
    assert span_ids(opened, "ancient") == ["s1"]

    write(opened, spans=[span("s1", name="omega call", output=["fresh words"])])

    assert span_ids(opened, "fresh") == ["s1"]
    assert span_ids(opened, "omega") == ["s1"]
    assert span_ids(opened, "ancient") == []
    assert span_ids(opened, "alpha") == []
    assert span_ids(opened, "words call") == ["s1"]
    assert trace_ids(opened, "ancient") == []
    assert trace_ids(opened, "fresh") == ["t1"]
    if opened.backend == "sqlite":
        assert fts_rows(opened, "spans") == 2


def test_a_resent_log_is_found_by_its_new_message_only(opened: OpenedStore) -> None:
    write(opened, logs=[log("l1", message="disk almost full"), log("l2", message="ok")])
    write(opened, logs=[log("l1", message="disk replaced")])

    assert log_ids(opened, "replaced") == ["l1"]
    assert log_ids(opened, "full") == []
    assert log_ids(opened, "disk") == ["l1"]
    if opened.backend == "sqlite":
        assert fts_rows(opened, "logs") == 2


def test_released_spans_are_indexed_and_held_ones_are_not(opened: OpenedStore) -> None:
    held = span("h1", trace_id="t9", is_root=True, input={"text": "zebra crossing"})
    write(opened, held_spans=[held])
    assert span_ids(opened, "zebra") == []
    assert trace_ids(opened, "zebra") == []

    assert opened.store.release_held("p", ["t9"], []) == 1

    assert span_ids(opened, "zebra") == ["h1"]
    assert trace_ids(opened, "crossing") == ["t9"]


def test_words_are_runs_of_letters_and_digits_case_folded(opened: OpenedStore) -> None:
    write(
        opened,
        spans=[
            span("s1", input={"note": "Mail Bob@Example.COM about /usr/lib/x_y.py, v1.4.2"}),
            span("s2", output="Le CAFÉ est prêt"),
            span("s3", name="checkout failed"),
        ],
    )
    assert span_ids(opened, "example") == ["s1"]
    assert span_ids(opened, "bob@example.com") == ["s1"]
    assert span_ids(opened, "USR lib y py 4") == ["s1"]
    assert span_ids(opened, "café") == ["s2"]
    assert span_ids(opened, "heck") == []  # words, not substrings
    assert span_ids(opened, "checkout missing") == []  # every word
    assert span_ids(opened, "!!!") == []  # no word to find
    assert span_ids(opened, 'say "checkout" OR NOT') == []  # no FTS5 or tsquery syntax


@pytest.mark.parametrize("named", [True, False], ids=["named", "probed"])
def test_a_trace_filter_on_spans_names_few_traces_or_probes_each_trace(
    opened: OpenedStore, named: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A span-side filter names the traces it finds when they are few, and otherwise probes each
    # trace's spans (PostgreSQL: a subquery); every way answers the same page.
    if not named:
        monkeypatch.setattr(lists, "_FEW_SPANS", 0)
    write(
        opened,
        spans=[
            span(f"s{n}", trace_id=f"t{n}", model="m" if n % 2 else None, name=f"word{n % 3}")
            for n in range(6)
        ],
    )

    page = opened.store.list_traces("p", TraceQuery(model="m", q="word1"))

    assert [row["trace_id"] for row in page.rows] == ["t1"]
    assert trace_ids(opened, "word2") == ["t2", "t5"]


def test_a_key_with_a_nul_is_indexed_under_the_row_as_stored(opened: OpenedStore) -> None:
    # SQLite's FTS entry finds its row by primary key, which is stored with U+FFFD for NUL.
    # (PostgreSQL needs no lookup, and refuses a NUL in the key it reads the trace by.)
    if opened.backend != "sqlite":
        pytest.skip("the FTS entry's key lookup is SQLite's")
    write(opened, spans=[span("s\x00", trace_id="t\x00", name="needle")])

    assert span_ids(opened, "needle") == ["s\ufffd"]


def test_a_word_too_long_for_a_lexeme_leaves_the_rest_searchable(opened: OpenedStore) -> None:
    write(opened, spans=[span("s1", input="x" * 3000 + " needle " + "é" * 600)])

    assert span_ids(opened, "needle") == ["s1"]


def test_deleting_rows_deletes_their_index_entries(opened: OpenedStore) -> None:
    write(opened, spans=[span("s1", name="needle")], logs=[log("l1", message="needle")])
    write(opened, spans=[span("s2", trace_id="t2", name="needle")])

    assert opened.store.delete_trace("p", "t1") > 0

    assert span_ids(opened, "needle") == ["s2"]
    assert log_ids(opened, "needle") == []
    if opened.backend == "sqlite":
        assert (fts_rows(opened, "spans"), fts_rows(opened, "logs")) == (1, 0)


def test_words_match_the_postgres_translation() -> None:
    # The byte translation for ASCII text and the regex for the rest find the same words.
    for sample in ["Ünïcode ÉTÉ straße — x_y", "A@b.COM /usr/lib-x 1.4.2", "tab\tnew\nline"]:
        assert folded_words(sample).split() == search_words(sample.casefold())
        assert folded_words(sample + "é").split() == search_words((sample + "é").casefold())


def test_rows_stored_before_the_index_are_indexed_by_the_migration(
    backend: str, backend_url: str | None, tmp_path: Path
) -> None:
    opened = open_store("trace", backend, tmp_path, backend_url)
    try:
        assert opened.engine is not None
        config = alembic_config(StoreName.TRACE)
        with opened.engine.begin() as conn:
            config.attributes[CONNECTION_ATTR] = conn
            command.upgrade(config, "0003_ingest_keys_held_spans")
            conn.execute(
                text(
                    "INSERT INTO spans (project, trace_id, span_id, name, kind, status,"
                    " start_time, is_root, is_event, received_at, input) VALUES ('p', 't1',"
                    " 's1', 'old span', 'generic', 'ok', 1, true, false, 1, :input)"
                ),
                {"input": '{"text": "Archived Words"}'},
            )
            conn.execute(
                text(
                    "INSERT INTO logs (project, log_id, timestamp, level, message, received_at)"
                    " VALUES ('p', 'l1', 1, 'info', 'archived line', 1)"
                )
            )

        # Every revision from the one that adds the index.
        assert opened.store.migrate() == REVISIONS["trace"][3:]

        assert span_ids(opened, "archived words") == ["s1"]
        assert log_ids(opened, "archived") == ["l1"]
        assert arrivals(opened, "spans", "span_id") == {"s1": 0}
    finally:
        opened.store.close()


# --- arrival sequences --------------------------------------------------------------------------


def test_each_write_transaction_stamps_one_later_sequence(opened: OpenedStore) -> None:
    write(opened, spans=[span("s1", is_root=True), span("s2")], logs=[log("l1")])
    first = arrivals(opened, "spans", "span_id")
    assert first["s1"] == first["s2"] > 0
    assert arrivals(opened, "logs", "log_id") == {"l1": first["s1"]}
    assert arrivals(opened, "traces", "trace_id") == {"t1": first["s1"]}

    # A score re-projects the trace: the trace arrives again; its spans stay where they were.
    write(opened, scores=[score("c1", trace_id="t1")])
    second = arrivals(opened, "traces", "trace_id")["t1"]
    assert second > first["s1"]
    assert arrivals(opened, "spans", "span_id") == first

    write(opened, spans=[span("s2", start_time=T0 + MS)], logs=[log("l2")])
    third = arrivals(opened, "spans", "span_id")
    assert third["s1"] == first["s1"]
    assert third["s2"] > second
    assert arrivals(opened, "logs", "log_id") == {"l1": first["s1"], "l2": third["s2"]}


def test_a_release_stamps_the_spans_it_moves(opened: OpenedStore) -> None:
    write(opened, spans=[span("s1", trace_id="t1")])
    write(opened, held_spans=[span("h1", trace_id="t9", is_root=True)])
    before = arrivals(opened, "spans", "span_id")["s1"]

    opened.store.release_held("p", ["t9"], [])

    moved = arrivals(opened, "spans", "span_id")["h1"]
    assert moved > before
    assert arrivals(opened, "traces", "trace_id")["t9"] == moved


def test_a_replayed_batch_stamps_nothing(opened: OpenedStore) -> None:
    batch = SignalBatch(
        key_project="p", ingest_key="k1", received_at=T0, spans=[span("s1", name="first")]
    )
    assert opened.store.write_batches([batch]) == [True]
    stamped = arrivals(opened, "spans", "span_id")

    assert opened.store.write_batches([batch]) == [False]

    assert arrivals(opened, "spans", "span_id") == stamped
