"""What is particular to the ClickHouse signal surface, on the real engine (chdb): one INSERT per
table with the ingest keys last, replacing tables instead of transactions, held spans removed by
lightweight DELETE, throttled facet writes, and migration 0003's guard. The behaviour every
backend shares is tests/libs/storage/test_signal_store.py."""

from __future__ import annotations

import dataclasses
import re
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from mcpd.signals.batch import HeldTrace, SignalBatch
from mcpd.storage.clickhouse import ChdbExecutor, ClickHouseError, ClickHouseTraceStore
from mcpd.storage.clickhouse.migrate import MIGRATIONS_DIR, migrate
from mcpd.storage.clickhouse.signals import columns
from mcpd.storage.clickhouse.signals.columns import ASPECT_NOTES, METRICS, Table
from mcpd.storage.clickhouse.signals.writes import FACET_REFRESH_NS
from mcpd.testing.templates import ClickHouseTemplate
from tests.libs.signals.samples import (
    MS,
    T0,
    aspect_note,
    feedback,
    log,
    metric,
    score,
    span,
)
from tests.libs.storage.helpers import RecordingExecutor

SECOND = 1_000_000_000
CORRELATION = {
    "environment": "production",
    "service_name": "checkout",
    "service_version": "1.4.2",
    "session_id": "sess-1",
    "thread_id": "thread-1",
    "user_id": "u-digest",
    "resource_id": "res-1",
    "run_id": "run-1",
    "request_id": "req-1",
    "experiment_id": "exp-1",
    "release": "2026.01",
}
COST = {
    "cost_currency": "EUR",
    "input_cost": 0.125,
    "output_cost": 0.5,
    "total_cost": 0.625,
    "cost_price_book": "book-7",
    "cost_is_estimated": False,
}


class Store:
    """A ClickHouse trace store on chdb over a migrated data directory, with the statements it
    issues recorded."""

    def __init__(self, path: Path) -> None:
        self.executor = RecordingExecutor(ChdbExecutor(path))
        self.store = ClickHouseTraceStore(self.executor)

    def write(self, *batches: SignalBatch) -> list[bool]:
        written: list[bool] = self.store.write_batches(list(batches))
        return written

    def count(self, sql: str) -> int:
        return int(self.executor.inner.query(sql)[0][0])

    def rows(self, table: Table) -> list[dict[str, Any]]:
        found = self.executor.inner.query(f"SELECT {table.select_list()} FROM {table.name} FINAL")
        return columns.as_rows(table, found)

    def statements_of(self, action: Any) -> list[str]:
        """The statements `action()` issues, whitespace collapsed."""
        start = len(self.executor.statements)
        action()
        return [" ".join(sql.split()) for sql in self.executor.statements[start:]]


@pytest.fixture
def ch(tmp_path: Path, clickhouse_template: ClickHouseTemplate) -> Iterator[Store]:
    opened = Store(clickhouse_template.copy(tmp_path / "clickhouse"))
    try:
        yield opened
    finally:
        opened.store.close()


def batch(
    *, key: str | None = None, project: str = "p", received_at: int = T0 + 50 * MS, **rows: Any
) -> SignalBatch:
    return SignalBatch(key_project=project, ingest_key=key, received_at=received_at, **rows)


def records(ch: Store, project: str = "p", trace_id: str = "t1") -> Any:
    return ch.store.trace_records(project, trace_id, logs=True, scores=True, feedback=True)


def inserted_tables(statements: list[str]) -> list[str]:
    return [m.group(1) for sql in statements if (m := re.match(r"INSERT INTO (\w+)", sql))]


# --- round trip --------------------------------------------------------------------------------


def test_every_kind_round_trips_with_every_field(ch: Store) -> None:
    root = span(
        "s1",
        **CORRELATION,
        **COST,
        external_parent_span_id="ext-9",
        name="agent turn",
        kind="agent_run",
        status="error",
        is_root=True,
        entity_kind="agent",
        entity_id="agent-1",
        entity_name="support",
        input={"messages": [{"role": "user", "content": "naïve \u2028 quote ' \\ tab\t"}]},
        output="done",
        attributes={"big": 2**63 - 1, "neg": -1.5e-300, "flags": [True, False, None]},
        metadata=[1, "two", {"three": 3}],
        input_tokens=1200,
        output_tokens=34,
        total_tokens=1234,
        usage_details={"input": {"cache_read": 200}, "output": {"reasoning": 5}},
        model_parameters={"temperature": 0.0},
        error={"message": "boom", "type": "ValueError"},
        links=[{"trace_id": "t0", "span_id": "s9", "attributes": {"k": "v"}}],
        tags=["vip", ""],
        model="gpt-4o",
        provider="openai",
        ingest_key="k-1",
    )
    event = span(
        "s2",
        parent_span_id="s1",
        is_event=True,
        start_time=T0 + 1,
        end_time=None,
        duration_ns=None,
        input=0,
        output=False,
    )
    line = log("l1", **CORRELATION, span_id="s1", level="error", fields={"a": [1]}, logger="app.db")
    point = metric(
        "m1",
        **CORRELATION,
        kind="histogram",
        value=-0.0,
        unit="ms",
        labels={"route": "/pay", "code": 200},
        buckets=[{"le": 10.5, "count": 3}],
        trace_id="t1",
        span_id="s1",
    )
    judged = score(
        "sc1",
        **CORRELATION,
        **COST,
        span_id="s1",
        scorer_version="3",
        source="experiment",
        value=0.75,
        min=0.0,
        max=1.0,
        label="good",
        reason="on topic",
        score_trace_id="t-judge",
        metadata={"judge": "small"},
    )
    opinion = feedback(
        "f1",
        **CORRELATION,
        span_id="s1",
        kind="correction",
        value={"text": "It ships Monday."},
        comment="wrong day",
        author_id="a1",
        author_kind="operator",
        metadata={"ui": "web"},
    )
    note = aspect_note("n1", **CORRELATION, model="small", definition_version=7)

    assert ch.write(
        batch(
            key="k-1",
            spans=[root, event],
            logs=[line],
            metrics=[point],
            scores=[judged],
            feedback=[opinion],
            aspect_notes=[note],
        )
    ) == [True]

    found = records(ch)
    assert found.spans == [root, event]
    assert (found.logs, found.scores, found.feedback) == ([line], [judged], [opinion])
    assert ch.rows(METRICS) == [point]
    assert ch.rows(ASPECT_NOTES) == [note]
    assert found.trace == {
        "project": "p",
        **CORRELATION,
        **COST,
        "trace_id": "t1",
        "root_span_id": "s1",
        "name": "agent turn",
        "kind": "agent_run",
        "status": "error",
        "start_time": T0,
        "end_time": T0 + 10 * MS,
        "duration_ns": 10 * MS,
        "span_count": 2,
        "error_count": 1,
        "model_count": 0,
        "tool_count": 0,
        "input_tokens": 1200,
        "output_tokens": 34,
        "total_tokens": 1234,
        "usage_details": {"input": {"cache_read": 200}, "output": {"reasoning": 5}},
        "tags": ["vip", ""],
        "score_summary": {"relevance": 0.75},
        "feedback_summary": {"correction": {"count": 1}},
        "is_complete": True,
        "received_at": T0 + 50 * MS,
    }
    # Stored as 0001 says: absent strings and JSON documents are '', absent numbers NULL,
    # times at full nanosecond precision.
    stored = ch.executor.inner.query(
        "SELECT entity_id, input, output, attributes, toUnixTimestamp64Nano(start_time), "
        "end_time, duration_ns, tags FROM spans FINAL WHERE span_id = 's2'"
    )
    assert stored == [("", "0", "false", "", T0 + 1, None, None, [])]


# --- one INSERT per table, keys last -----------------------------------------------------------


def test_a_call_inserts_each_table_once_and_the_keys_last(ch: Store) -> None:
    batches = [
        batch(key=f"k{n}", spans=[span(f"s{n}", trace_id=f"t{n}")], logs=[log(f"l{n}")])
        for n in range(3)
    ]
    batches.append(
        batch(
            key="k9",
            held_spans=[span("h", trace_id="held")],
            scores=[score("x", service_name="scorer")],
        )
    )

    statements = ch.statements_of(lambda: ch.write(*batches))

    assert statements[0].startswith("SELECT project, ingest_key FROM ingest_keys FINAL")
    assert inserted_tables(statements) == [
        "spans",
        "held_spans",
        "logs",
        "scores",
        "traces",
        "rollups",
        "score_rollups",
        "facet_values",
        "ingest_keys",
    ]
    # t0, t1 (the score's trace as well), t2; the held trace has no trace row yet.
    assert ch.count("SELECT count() FROM traces") == 3
    assert ch.count("SELECT count() FROM ingest_keys") == 4


def test_a_malformed_row_writes_nothing(ch: Store) -> None:
    good = batch(key="k-good", spans=[span("s1")], logs=[log("l1")])
    bad = batch(key="k-bad", logs=[log("l2", timestamp=None)])

    start = len(ch.executor.statements)
    with pytest.raises(ValueError, match=r"logs\.timestamp is required"):
        ch.write(good, bad)

    # The key check ran; nothing was inserted.
    assert inserted_tables(ch.executor.statements[start:]) == []
    assert records(ch) is None
    assert ch.write(good) == [True]


# --- ingest keys, retries and replacing tables -------------------------------------------------


def test_a_replayed_key_is_refused_and_writes_nothing(ch: Store) -> None:
    first = batch(key="k1", spans=[span("s1")], logs=[log("l1")], scores=[score("sc1")])
    assert ch.write(first) == [True]

    replay = batch(key="k1", spans=[span("s2")], logs=[log("l2")], received_at=T0 + SECOND)
    statements = ch.statements_of(lambda: ch.write(replay))

    assert ch.store.write_batches([replay]) == [False]
    assert len(statements) == 1
    assert statements[0].startswith("SELECT")
    assert (ch.count("SELECT count() FROM spans"), ch.count("SELECT count() FROM logs")) == (1, 1)
    assert ch.count("SELECT count() FROM ingest_keys") == 1
    assert ch.rows(columns.INGEST_KEYS) == [
        {"project": "p", "ingest_key": "k1", "received_at": T0 + 50 * MS, "record_count": 3}
    ]


def test_a_key_twice_in_one_call_is_written_once(ch: Store) -> None:
    written = ch.write(
        batch(key="k1", spans=[span("s1")]),
        batch(key="k1", spans=[span("s2")], logs=[log("l2")]),
        batch(key="k1", project="q", spans=[span("s1", project="q")]),
    )

    assert written == [True, False, True]
    assert [s["span_id"] for s in records(ch).spans] == ["s1"]
    assert records(ch).logs == []
    assert ch.count("SELECT count() FROM ingest_keys") == 2
    assert records(ch, "q").trace["span_count"] == 1


def test_a_call_that_fails_part_way_is_completed_by_the_retry(ch: Store) -> None:
    sent = batch(
        key="k1",
        spans=[span("s1", is_root=True)],
        logs=[log("l1")],
        metrics=[metric("m1")],
        scores=[score("sc1", value=0.25)],
        feedback=[feedback("f1")],
        aspect_notes=[aspect_note("n1")],
    )
    inner = ch.executor.inner

    class LosesTheConnection:
        """Passes statements on until the trace rows' INSERT, which it fails."""

        def command(self, sql: str, params: Any = None) -> None:
            if sql.startswith("INSERT INTO traces"):
                raise ClickHouseError("connection lost", code=None)
            inner.command(sql, params)

        def query(self, sql: str, params: Any = None) -> list[tuple[Any, ...]]:
            return inner.query(sql, params)

        def insert(self, table: str, columns: Any, data: Any, fmt: str) -> None:
            if table == "traces":
                raise ClickHouseError("connection lost", code=None)
            inner.insert(table, columns, data, fmt)

    ch.executor.inner = LosesTheConnection()  # type: ignore[assignment]
    with pytest.raises(ClickHouseError):
        ch.write(sent)
    ch.executor.inner = inner

    # No rollback: the signal rows are in, the trace row and the key are not...
    assert ch.count("SELECT count() FROM logs") == 1
    assert records(ch) is None
    assert ch.count("SELECT count() FROM ingest_keys") == 0
    # ...so the client's retry (same key, a new arrival time) is not a replay, and writes it all
    # again: the second copies replace the first.
    assert ch.write(dataclasses.replace(sent, received_at=T0 + SECOND)) == [True]
    found = records(ch)
    assert (len(found.spans), len(found.logs), len(found.scores), len(found.feedback)) == (
        1,
        1,
        1,
        1,
    )
    assert found.trace["score_summary"] == {"relevance": 0.25}
    for table in ("spans", "logs", "metrics", "scores", "feedback", "aspect_notes"):
        assert ch.count(f"SELECT count() FROM {table}") == 2
        assert ch.count(f"SELECT count() FROM {table} FINAL") == 1
        ch.executor.inner.command(f"OPTIMIZE TABLE {table} FINAL")
        assert ch.count(f"SELECT count() FROM {table}") == 1
    assert ch.write(sent) == [False]


def test_a_resent_span_replaces_the_span_and_reprojects_the_trace(ch: Store) -> None:
    started = span("s1", is_root=True, status="unset", end_time=None, duration_ns=None)
    child = span("s2", parent_span_id="s1", start_time=T0 + MS, end_time=T0 + 2 * MS)
    ch.write(batch(spans=[started, child]))
    assert (records(ch).trace["is_complete"], records(ch).trace["end_time"]) == (False, None)

    ended = span(
        "s1",
        is_root=True,
        status="ok",
        end_time=T0 + 30 * MS,
        duration_ns=30 * MS,
        received_at=T0 + SECOND,
        output={"answer": 42},
    )
    ch.write(batch(spans=[ended], received_at=T0 + SECOND))

    found = records(ch)
    assert found.spans == [ended, child]
    assert {key: found.trace[key] for key in ("status", "end_time", "duration_ns")} == {
        "status": "ok",
        "end_time": T0 + 30 * MS,
        "duration_ns": 30 * MS,
    }
    assert (found.trace["is_complete"], found.trace["span_count"]) == (True, 2)
    # Two versions of the span and of the trace row are stored until a merge; FINAL reads one.
    assert ch.count("SELECT count() FROM spans") == 3
    assert ch.count("SELECT count() FROM traces") == 2
    versions = ch.executor.inner.query("SELECT version FROM traces ORDER BY version")
    assert versions[0][0] < versions[1][0]


def test_a_trace_in_three_calls_reads_as_if_written_at_once(ch: Store) -> None:
    spans = [
        span("root", is_root=True, kind="agent_run", name="agent", tags=["a"]),
        span("gen", parent_span_id="root", kind="model_generation", start_time=T0 + 1),
        span(
            "inf",
            parent_span_id="gen",
            kind="model_inference",
            start_time=T0 + 2,
            input_tokens=10,
            output_tokens=4,
            total_tokens=14,
            **COST,
        ),
        span(
            "tool", parent_span_id="root", kind="mcp_tool_call", status="error", start_time=T0 + 3
        ),
        span("late", parent_span_id="root", start_time=T0 + 5, end_time=T0 + 99 * MS),
    ]
    ch.write(batch(spans=spans[3:], received_at=T0 + 1 * SECOND))
    ch.write(batch(spans=spans[:1], scores=[score("sc", value=0.5)], received_at=T0 + 2 * SECOND))
    ch.write(batch(spans=spans[1:3], feedback=[feedback("f", value="down")]))
    ch.write(batch(project="q", spans=[{**s, "project": "q"} for s in spans]))

    in_parts, at_once = records(ch).trace, records(ch, "q").trace
    assert {**in_parts, "project": "q", "score_summary": None, "feedback_summary": None} == {
        **at_once,
        "received_at": in_parts["received_at"],
    }
    assert {
        key: in_parts[key]
        for key in (
            "root_span_id",
            "name",
            "status",
            "span_count",
            "error_count",
            "model_count",
            "tool_count",
            "end_time",
            "duration_ns",
            "is_complete",
            "total_tokens",
            "total_cost",
            "cost_currency",
            "tags",
            "score_summary",
            "feedback_summary",
        )
    } == {
        "root_span_id": "root",
        "name": "agent",
        "status": "error",
        "span_count": 5,
        "error_count": 1,
        "model_count": 1,
        "tool_count": 1,
        "end_time": T0 + 99 * MS,
        "duration_ns": 99 * MS,
        "is_complete": True,
        "total_tokens": 14,
        "total_cost": 0.625,
        "cost_currency": "EUR",
        "tags": ["a"],
        "score_summary": {"relevance": 0.5},
        "feedback_summary": {"thumbs": {"down": 1}},
    }


# --- held spans --------------------------------------------------------------------------------


def test_held_spans_are_kept_or_dropped(ch: Store) -> None:
    held = [
        span("r", trace_id="h1", is_root=True, end_time=None, received_at=T0 + 5),
        span("c", trace_id="h1", parent_span_id="r", status="error", received_at=T0 + 4),
        span("x", trace_id="h2", entity_name="dropped", received_at=T0 + 9),
    ]
    ch.write(batch(held_spans=held))
    # The root ends while held: the new copy replaces the held one.
    ended = {**held[0], "end_time": T0 + 20 * MS, "received_at": T0 + 6}
    ch.write(batch(held_spans=[ended]))

    assert ch.store.held_traces() == [
        HeldTrace("p", "h1", T0 + 4, 2, 1, T0, T0 + 20 * MS, 0),
        HeldTrace("p", "h2", T0 + 9, 1, 0, None, None, 0),
    ]
    assert (records(ch, trace_id="h1"), ch.count("SELECT count() FROM spans")) == (None, 0)

    statements = ch.statements_of(lambda: ch.store.release_held("p", keep=["h1"], drop=["h2"]))

    assert statements[-1].startswith("DELETE FROM held_spans WHERE project = {project:String}")
    assert ch.store.held_traces() == []
    assert ch.count("SELECT count() FROM held_spans") == 0
    found = records(ch, trace_id="h1")
    assert found.spans == [ended, held[1]]
    assert (found.trace["span_count"], found.trace["is_complete"]) == (2, True)
    assert records(ch, trace_id="h2") is None
    assert ch.store.facet_value_count("p", "entity_name", "") == 0
    assert ch.store.release_held("p", keep=["h1"], drop=[]) == 0
    with pytest.raises(ValueError, match="both kept and dropped"):
        ch.store.release_held("p", keep=["h1"], drop=["h1"])


def test_a_span_held_after_the_decision_was_read_stays_held(ch: Store) -> None:
    ch.write(batch(held_spans=[span("a", received_at=T0 + 1)]))
    # A copy that arrives later than what is moved (another replica held it meanwhile) is
    # not deleted with the moved rows: the next decision sees it.
    real_query = ch.executor.inner.query

    def query_then_hold(sql: str, params: Any = None) -> list[tuple[Any, ...]]:
        found = real_query(sql, params)
        if sql.startswith("SELECT row"):
            held = columns.column_data(
                columns.HELD_SPANS,
                [
                    {
                        "project": "p",
                        "trace_id": "t1",
                        "span_id": "b",
                        "received_at": T0 + 2,
                        "status": "ok",
                        "is_root": False,
                        "is_event": False,
                        "start_time": T0,
                        "end_time": None,
                        "row": columns.dump_json(span("b", received_at=T0 + 2)),
                    }
                ],
            )
            ch.executor.inner.insert(
                columns.HELD_SPANS.name, columns.HELD_SPANS.names, held, "JSONCompactColumns"
            )
        return found

    ch.executor.inner.query = query_then_hold  # type: ignore[method-assign]
    assert ch.store.release_held("p", keep=["t1"], drop=[]) == 1
    ch.executor.inner.query = real_query  # type: ignore[method-assign]

    assert [(h.trace_id, h.span_count) for h in ch.store.held_traces()] == [("t1", 1)]
    assert [s["span_id"] for s in records(ch).spans] == ["a"]


def test_nul_characters_in_held_spans_are_replaced_too(ch: Store) -> None:
    # As in every other column (see the shared suite): the held row's JSON holds no NUL either.
    ch.write(batch(held_spans=[span("a", name="n\x00", input={"k\x00": "\\u0000"})]))

    assert ch.store.release_held("p", keep=["t1"], drop=[]) == 1

    moved = records(ch).spans[0]
    assert (moved["name"], moved["input"]) == ("n\ufffd", {"k\ufffd": "\\u0000"})


# --- facets ------------------------------------------------------------------------------------


def test_facet_values_are_written_again_only_when_stale(ch: Store) -> None:
    tagged = batch(spans=[span("a", tags=["x", "y"], entity_kind="tool")], received_at=T0)

    first = ch.statements_of(lambda: ch.write(tagged))
    again = ch.statements_of(
        lambda: ch.write(batch(spans=[span("b", tags=["x"])], received_at=T0 + SECOND))
    )
    later = T0 + FACET_REFRESH_NS + SECOND
    stale = ch.statements_of(
        lambda: ch.write(batch(spans=[span("c", tags=["x", "z"])], received_at=later))
    )

    assert "facet_values" in inserted_tables(first)
    assert "facet_values" not in inserted_tables(again)
    assert "facet_values" in inserted_tables(stale)
    seen = {
        row["value"]: row["last_seen"]
        for row in ch.rows(columns.FACET_VALUES)
        if row["facet"] == "tag"
    }
    assert seen == {"x": later, "y": T0, "z": later}
    assert (
        ch.store.facet_value_count("p", "tag", ""),
        ch.count("SELECT count() FROM facet_values"),
    ) == (
        3,
        5,
    )
    assert ch.store.facet_value_count("p", "entity_kind", "") == 1
    assert ch.store.facet_value_count("q", "tag", "") == 0


# --- tenancy -----------------------------------------------------------------------------------


def test_one_trace_id_in_two_projects_never_mixes(ch: Store) -> None:
    ch.write(
        batch(
            spans=[span("s1", is_root=True, name="mine"), span("s2", start_time=T0 + 1)],
            logs=[log("l1")],
            scores=[score("sc", value=1.0)],
            held_spans=[span("h", trace_id="t9")],
        ),
        batch(
            project="q",
            spans=[span("s1", project="q", is_root=True, name="theirs", status="error")],
            feedback=[feedback("f", project="q", value="down")],
            held_spans=[span("h", project="q", trace_id="t9")],
        ),
    )

    mine, theirs = records(ch, "p"), records(ch, "q")
    assert (mine.trace["name"], mine.trace["span_count"], mine.trace["status"]) == ("mine", 2, "ok")
    assert (theirs.trace["name"], theirs.trace["span_count"], theirs.trace["status"]) == (
        "theirs",
        1,
        "error",
    )
    assert (mine.trace["score_summary"], mine.trace["feedback_summary"]) == (
        {"relevance": 1.0},
        None,
    )
    assert (theirs.trace["score_summary"], theirs.trace["feedback_summary"]) == (
        None,
        {"thumbs": {"down": 1}},
    )
    assert ([row["log_id"] for row in mine.logs], theirs.logs) == (["l1"], [])
    assert {s["project"] for s in [*mine.spans, *theirs.spans]} == {"p", "q"}
    assert {s["project"] for s in mine.spans} == {"p"}

    assert ch.store.release_held("q", keep=["t9"], drop=[]) == 1
    assert [(h.project, h.trace_id) for h in ch.store.held_traces()] == [("p", "t9")]
    assert records(ch, "p", "t9") is None
    assert records(ch, "q", "t9").trace["span_count"] == 1


# --- migration 0003 ----------------------------------------------------------------------------


def test_0003_replaces_the_empty_signal_tables_and_refuses_full_ones(tmp_path: Path) -> None:
    upto_0002 = tmp_path / "upto_0002"
    upto_0002.mkdir()
    for path in sorted(MIGRATIONS_DIR.glob("000[12]_*.sql")):
        shutil.copy(path, upto_0002 / path.name)

    def engines(executor: ChdbExecutor) -> set[str]:
        found = executor.query(
            "SELECT DISTINCT engine FROM system.tables WHERE database = currentDatabase() "
            "AND name IN ('logs', 'metrics', 'scores', 'feedback', 'aspect_notes')"
        )
        return {str(engine) for (engine,) in found}

    executor = ChdbExecutor(tmp_path / "clickhouse")
    try:
        assert migrate(executor, upto_0002) == ["0001_initial", "0002_session_read_model"]
        assert engines(executor) == {"MergeTree"}
        executor.command(
            "INSERT INTO scores (project, score_id, scorer_id, source, value, timestamp, "
            "received_at) VALUES ('p', 's', 'x', 'live', 1, now64(9), now64(9))"
        )
        with pytest.raises(ClickHouseError) as refused:
            migrate(executor)
        assert "will not replace a table that holds rows" in refused.value.detail
    finally:
        # chdb hands the failed SELECT's partial output to the session's next query: reopen.
        executor.close()

    executor = ChdbExecutor(tmp_path / "clickhouse")
    try:
        assert engines(executor) == {"MergeTree"}
        assert executor.query("SELECT count() FROM scores") == [(1,)]
        executor.command("TRUNCATE TABLE scores")
        assert migrate(executor)[0] == "0003_ingest_keys_held_spans"
        assert engines(executor) == {"ReplacingMergeTree"}
    finally:
        executor.close()
