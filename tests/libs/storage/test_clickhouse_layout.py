"""The ClickHouse layout of migration 0004, on the real engine (chdb): `traces` ordered by
(project, start_time, trace_id) with tombstones where a trace's start moved, its skip indexes,
the migration of 0003 data, and the text search over stored JSON. What every backend shares is
the behaviour suite (tests/libs/storage/test_query_store*.py)."""

from __future__ import annotations

import re
import shutil
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from mcpd.signals.batch import SignalBatch
from mcpd.signals.projection import project_trace
from mcpd.signals.queries import SpanQuery, TraceQuery, Window
from mcpd.signals.rows import SpanRow, TraceRow
from mcpd.storage.clickhouse import ChdbExecutor, ClickHouseTraceStore
from mcpd.storage.clickhouse.migrate import MIGRATIONS_DIR, load_migrations, migrate
from mcpd.storage.clickhouse.signals import columns
from mcpd.storage.clickhouse.signals.columns import SPANS, TRACE_ROW, TRACES, Table
from mcpd.testing.templates import ClickHouseTemplate
from tests.libs.signals.samples import MS, T0, span
from tests.libs.storage.test_migrations import CLICKHOUSE_REVISIONS

SECOND = 1_000_000_000
# 2026-02-01T00:00:00Z: T0 (2026-01-01) and this are in two monthly partitions.
FEBRUARY = T0 - 123 + 31 * 86_400 * SECOND


class Capturing:
    """A ClickHouseExecutor that keeps the last query and its parameters, to EXPLAIN it."""

    def __init__(self, inner: ChdbExecutor) -> None:
        self.inner = inner
        self.last: tuple[str, Mapping[str, object] | None] = ("", None)

    def command(self, sql: str, params: Mapping[str, object] | None = None) -> None:
        self.inner.command(sql, params)

    def query(self, sql: str, params: Mapping[str, object] | None = None) -> list[tuple[Any, ...]]:
        self.last = (sql, params)
        return self.inner.query(sql, params)

    def insert(self, table: str, names: Any, data: str | bytes, fmt: str) -> None:
        self.inner.insert(table, names, data, fmt)

    def close(self) -> None:
        self.inner.close()


class Store:
    """A ClickHouse trace store on chdb over a migrated data directory."""

    def __init__(self, path: Path) -> None:
        self.executor = Capturing(ChdbExecutor(path))
        self.store = ClickHouseTraceStore(self.executor)

    def write(self, *spans: SpanRow, received_at: int = T0 + SECOND) -> None:
        batch = SignalBatch(key_project="p", ingest_key=None, received_at=received_at)
        batch.spans.extend(spans)
        self.store.write_batches([batch])

    def listed(self, **fields: Any) -> list[tuple[str, int]]:
        page = self.store.list_traces("p", TraceQuery(**fields))
        return [(row["trace_id"], row["start_time"]) for row in page.rows]

    def value(self, sql: str) -> Any:
        return self.executor.inner.query(sql)[0][0]

    def trace(self, trace_id: str = "t1") -> TraceRow:
        found = self.store.trace_records("p", trace_id, logs=False, scores=False, feedback=False)
        assert found is not None
        return found.trace


@pytest.fixture
def ch(tmp_path: Path, clickhouse_template: ClickHouseTemplate) -> Iterator[Store]:
    opened = Store(clickhouse_template.copy(tmp_path / "clickhouse"))
    try:
        yield opened
    finally:
        opened.store.close()


# --- the table ---------------------------------------------------------------------------------


def test_traces_are_ordered_for_the_list_with_skip_indexes(ch: Store) -> None:
    engine, sorting_key, partition_key = ch.executor.inner.query(
        "SELECT engine_full, sorting_key, partition_key FROM system.tables "
        "WHERE database = currentDatabase() AND name = 'traces'"
    )[0]
    assert str(engine).startswith("ReplacingMergeTree(version) PARTITION BY")
    assert (sorting_key, partition_key) == ("project, start_time, trace_id", "toYYYYMM(start_time)")
    indexes = ch.executor.inner.query(
        "SELECT name, type_full FROM system.data_skipping_indices "
        "WHERE database = currentDatabase() AND table = 'traces' ORDER BY name"
    )
    assert indexes == [
        ("idx_cost", "minmax"),
        ("idx_duration", "minmax"),
        ("idx_session_id", "bloom_filter(0.01)"),
        ("idx_status", "set(8)"),
        ("idx_trace_id", "bloom_filter(0.001)"),
        ("idx_user_id", "bloom_filter(0.01)"),
    ]
    assert ch.store.list_traces("p", TraceQuery()).rows == []


def test_a_window_and_a_cursor_bound_the_primary_key(ch: Store) -> None:
    ch.write(span("j", trace_id="t-jan"), span("f", trace_id="t-feb", start_time=FEBRUARY))

    assert ch.listed(window=Window(start=FEBRUARY, end=FEBRUARY + SECOND)) == [("t-feb", FEBRUARY)]
    windowed = _explained(ch)
    assert ch.listed(after=(FEBRUARY, "t-feb")) == [("t-jan", T0)]
    paged = _explained(ch)

    # The window is a range of the primary key (project, start_time) in one month of two; the
    # cursor a range of (project, start_time, trace_id), which leaves the February row out.
    key = r"PrimaryKey\W+Keys:\W+project\W+start_time\W+"
    assert re.search(key + r"Condition: [^\n]*\n\W+Parts: 1/1", windowed)
    assert re.search(r"Min-Max\W+Keys:\W+start_time\W+Condition: [^\n]*\n\W+Parts: 1/2", windowed)
    assert re.search(key + r"trace_id\W+Condition: [^\n]*\n\W+Parts: 1/2", paged)


def _explained(ch: Store) -> str:
    """The plan, with its indexes, of the last query the store ran."""
    sql, params = ch.executor.last
    found = ch.executor.inner.query(f"EXPLAIN indexes = 1 {sql}", params)
    return "\n".join(str(line) for (line,) in found)


# --- tombstones --------------------------------------------------------------------------------


def test_a_trace_whose_start_moved_is_listed_once(ch: Store) -> None:
    ch.write(span("child", parent_span_id="root", start_time=T0 + 5 * SECOND, end_time=None))
    assert ch.listed() == [("t1", T0 + 5 * SECOND)]

    # The root ends last, and is sent last: the trace now starts earlier.
    ch.write(
        span("root", is_root=True, end_time=T0 + 9 * SECOND, duration_ns=9 * SECOND),
        received_at=T0 + 10 * SECOND,
    )

    assert ch.listed() == [("t1", T0)]
    assert ch.listed(window=Window(start=T0 + SECOND)) == []
    # The first row, the tombstone at its key, and the new row; FINAL reads the tombstone and
    # the new row, and the tombstone is dropped.
    assert ch.value("SELECT count() FROM traces") == 3
    assert ch.value("SELECT count() FROM traces FINAL WHERE is_deleted = 1") == 1
    assert ch.value("SELECT count() FROM traces FINAL WHERE is_deleted = 0") == 1
    assert (ch.trace()["start_time"], ch.trace()["span_count"]) == (T0, 2)

    ch.executor.inner.command("OPTIMIZE TABLE traces FINAL")
    assert ch.listed() == [("t1", T0)]


def test_a_start_moved_into_the_month_before_leaves_its_tombstone_behind(ch: Store) -> None:
    ch.write(span("late", start_time=FEBRUARY + SECOND))
    ch.write(span("early", is_root=True, start_time=FEBRUARY - SECOND))

    assert ch.listed() == [("t1", FEBRUARY - SECOND)]
    assert ch.listed(window=Window(start=FEBRUARY)) == []
    parts = ch.executor.inner.query(
        "SELECT _partition_id, is_deleted FROM traces ORDER BY _partition_id, is_deleted"
    )
    assert parts == [("202601", 0), ("202602", 0), ("202602", 1)]


def test_every_stale_row_of_a_trace_is_tombstoned(ch: Store) -> None:
    ch.write(span("a", start_time=T0 + 2 * SECOND))
    # A second live row at another start: what two replicas re-projecting one trace at the same
    # instant, or a call that failed between its trace row and its tombstone, leave behind.
    stored = ch.trace()
    stray = {
        **stored,
        "start_time": T0 + SECOND,
        "version": 1,
        "models": None,
        "providers": None,
        "is_deleted": 0,
    }
    data = columns.column_data(TRACES, [stray])
    ch.executor.insert("traces", TRACES.names, data, "JSONCompactColumns")
    assert [trace_id for trace_id, _ in ch.listed()] == ["t1", "t1"]
    # trace_records reads the newest of the two.
    assert ch.trace()["start_time"] == T0 + 2 * SECOND

    ch.write(span("root", is_root=True))

    assert ch.listed() == [("t1", T0)]
    assert ch.value("SELECT count() FROM traces WHERE is_deleted = 1") == 2


def test_models_and_providers_of_the_spans_are_kept_on_the_trace_row(ch: Store) -> None:
    ch.write(
        span("root", is_root=True),
        span("gen", kind="model_generation", model="gpt-4o", provider="openai"),
        span("gen2", kind="model_generation", model="claude", provider="anthropic"),
    )
    ch.write(span("gen3", kind="model_generation", model="gpt-4o", provider="azure"))

    assert ch.executor.inner.query("SELECT models, providers FROM traces FINAL") == [
        (["claude", "gpt-4o"], ["anthropic", "azure", "openai"])
    ]
    assert ch.listed(model="claude") == ch.listed(provider="azure") == [("t1", T0)]
    assert ch.listed(model="gpt") == []
    # They are the store's own: a listed row is a TraceRow, as trace_records returns it.
    (row,) = ch.store.list_traces("p", TraceQuery()).rows
    assert tuple(row) == TRACE_ROW
    assert row == ch.trace()


# --- migration 0004 ----------------------------------------------------------------------------

# The traces table as migrations 0001 to 0003 left it.
TRACES_0003 = Table(
    "traces",
    tuple(
        (name, kind)
        for name, kind in TRACES.columns
        if name not in ("models", "providers", "is_deleted")
    ),
)


def projected(trace_id: str, spans: list[SpanRow]) -> dict[str, Any]:
    """The trace row 0003 stored for these spans (at version 7)."""
    row = project_trace("p", trace_id, spans, [], [])
    assert row is not None
    return {**row, "version": 7}


def test_0004_keeps_every_trace_of_a_0003_table_readable(tmp_path: Path) -> None:
    upto_0003 = tmp_path / "upto_0003"
    upto_0003.mkdir()
    for path in sorted(MIGRATIONS_DIR.glob("000[123]_*.sql")):
        shutil.copy(path, upto_0003 / path.name)
    spans = {
        "t1": [
            span("r", trace_id="t1", is_root=True, name="first"),
            span("g", trace_id="t1", kind="model_generation", model="gpt-4o", provider="openai"),
        ],
        "t2": [span("x", trace_id="t2", start_time=T0 + SECOND, status="error")],
        "t3": [span("y", trace_id="t3", start_time=FEBRUARY, tags=["vip"])],
    }
    expected = {trace_id: projected(trace_id, rows) for trace_id, rows in spans.items()}
    # 0003 kept every version of a trace under one key: t1 also has an older version that
    # started later (before its root arrived).
    older = {**expected["t1"], "start_time": T0 + MS, "version": 6}
    executor = ChdbExecutor(tmp_path / "clickhouse")
    try:
        assert migrate(executor, upto_0003)[-1] == "0003_ingest_keys_held_spans"
        all_spans = [row for rows in spans.values() for row in rows]
        executor.insert(
            "spans", SPANS.names, columns.column_data(SPANS, all_spans), "JSONCompactColumns"
        )
        old_rows = columns.column_data(TRACES_0003, [older, *expected.values()])
        executor.insert("traces", TRACES_0003.names, old_rows, "JSONCompactColumns")

        assert migrate(executor) == CLICKHOUSE_REVISIONS[3:]

        store = ClickHouseTraceStore(executor)
        for trace_id, rows in spans.items():
            found = store.trace_records("p", trace_id, logs=False, scores=False, feedback=False)
            assert found is not None
            assert found.trace == {name: expected[trace_id][name] for name in TRACE_ROW}
            assert len(found.spans) == len(rows)
        listed = [row["trace_id"] for row in store.list_traces("p", TraceQuery()).rows]
        assert listed == ["t3", "t2", "t1"]
        assert [
            row["trace_id"] for row in store.list_traces("p", TraceQuery(model="gpt-4o")).rows
        ] == ["t1"]
        assert executor.query("SELECT count() FROM traces") == [(3,)]

        # Run again (an interrupted migration is completed so): the same rows, rebuilt, and
        # the tombstone of t2's start, which moved since, left out.
        moved = span("w", trace_id="t2", start_time=T0 - SECOND)
        store.write_batches([SignalBatch("p", None, T0 + SECOND, spans=[moved])])
        assert executor.query("SELECT count() FROM traces WHERE is_deleted = 1") == [(1,)]
        listed = [row["trace_id"] for row in store.list_traces("p", TraceQuery()).rows]
        (statement,) = next(
            m for m in load_migrations() if m.version == "0004_query_layout"
        ).statements
        executor.command(statement)
        assert [row["trace_id"] for row in store.list_traces("p", TraceQuery()).rows] == listed
        assert executor.query("SELECT count(), sum(is_deleted) FROM traces") == [(3, 0)]
    finally:
        executor.close()


# --- text search on stored JSON ------------------------------------------------------------------


# q -> the spans it finds. One store for all of them: chdb is slow to open.
SEARCHES: list[tuple[str, list[str]]] = [
    ('say "hi"', ["s-quote"]),  # stored with its quotes escaped
    ("back\\slash", ["s-backslash"]),  # and its backslash
    ("line one\nline two", ["s-newline"]),  # and its newline
    ("\\new", ["s-backslash"]),  # a backslash, then "new"
    ("\new", []),  # a newline, then "ew": escaped, as in c:\\new
    ("tab\there", ["s-tab"]),
    ("text", []),  # a key
    ('":"', []),  # JSON punctuation
    ("ünïcode", ["s-unicode"]),
    ("ÜNÏCODE", ["s-unicode"]),
    ("42", []),  # numbers are not text
    ("name s-", ["s-backslash", "s-newline", "s-quote", "s-tab", "s-unicode"]),
]


def test_text_search_matches_unescaped_string_values_only(ch: Store) -> None:
    texts = {
        "s-quote": 'they say "hi"',
        "s-backslash": "a back\\slash in c:\\new",
        "s-newline": "line one\nline two",
        "s-tab": "a tab\there",
        "s-unicode": "plain ünïcode",
    }
    ch.write(
        *(
            span(
                span_id,
                name=f"name {span_id}",
                start_time=T0 + index,
                input={"text": text, "count": 42},
                output=[text] if span_id == "s-quote" else None,
            )
            for index, (span_id, text) in enumerate(sorted(texts.items()))
        )
    )

    for q, found in SEARCHES:
        page = ch.store.list_spans("p", SpanQuery(q=q))
        assert sorted(row["span_id"] for row in page.rows) == found, q
        assert ch.listed(q=q) == ([("t1", T0)] if found else []), q
