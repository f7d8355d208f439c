"""The trace store's signal surface on every backend: write_batches, held spans, trace_records,
facets. One behaviour suite; the backends must not be told apart by it."""

from __future__ import annotations

import math
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select
from sqlalchemy.exc import IntegrityError

from mcpd.signals.batch import HeldTrace, SignalBatch
from mcpd.signals.rows import SpanRow, TraceRow
from mcpd.storage.sql.schema import trace as schema
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
from tests.libs.storage.helpers import Migrated, open_store

# The lead adds "clickhouse" here when that backend implements the surface.
SIGNAL_BACKENDS: list[Any] = [
    "sqlite",
    pytest.param("postgres", marks=pytest.mark.postgres),
    "clickhouse",
]
# What a write that breaks a NOT NULL constraint raises, per backend family.
# A NOT NULL violation: the database's own on SQL; on ClickHouse, refused in Python before any
# insert (ClickHouse would store a default instead).
WRITE_ERRORS: tuple[type[Exception], ...] = (IntegrityError, ValueError)


@dataclass
class SignalStores:
    """A migrated trace store, and a way to open more stores on the same database."""

    backend: str
    store: Any
    opener: Callable[[], Any]
    opened: list[Any] = field(default_factory=list)

    def another(self) -> Any:
        """A second store (its own engine or executor) on the same database."""
        store = self.opener()
        self.opened.append(store)
        return store


@pytest.fixture(params=SIGNAL_BACKENDS)
def signal_store(
    request: pytest.FixtureRequest, migrated: Migrated, tmp_path: Path
) -> Iterator[SignalStores]:
    """A migrated trace store on each backend."""
    backend: str = request.param
    url = migrated.prepare("trace", backend)

    def opener() -> Any:
        return open_store("trace", backend, tmp_path, url).store

    stores = SignalStores(backend, opener(), opener)
    try:
        yield stores
    finally:
        for store in [stores.store, *stores.opened]:
            store.close()


def batch(
    *,
    key: str | None = None,
    project: str = "p",
    received_at: int = T0 + 50 * MS,
    **rows: Any,
) -> SignalBatch:
    return SignalBatch(key_project=project, ingest_key=key, received_at=received_at, **rows)


def records(store: Any, project: str = "p", trace_id: str = "t1") -> Any:
    return store.trace_records(project, trace_id, logs=True, scores=True, feedback=True)


def trace_row(store: Any, project: str = "p", trace_id: str = "t1") -> TraceRow:
    found = records(store, project, trace_id)
    assert found is not None, f"no trace {project}/{trace_id}"
    trace: TraceRow = found.trace
    return trace


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
    "cost_currency": "USD",
    "input_cost": 0.25,
    "output_cost": 0.5,
    "total_cost": 0.75,
    "cost_price_book": "book-1",
    "cost_is_estimated": True,
}


def full_span() -> SpanRow:
    return span(
        "s1",
        **CORRELATION,
        **COST,
        parent_span_id=None,
        external_parent_span_id="ext-1",
        name="agent turn",
        kind="agent_run",
        status="ok",
        is_root=True,
        entity_kind="agent",
        entity_id="agent-1",
        entity_name="support",
        input={"messages": [{"role": "user", "content": "Where is my order?"}], "n": 2},
        output="It ships tomorrow.",
        attributes={"http.status": 200, "ratio": 0.5, "flags": [True, False, None]},
        metadata=[1, "two"],
        input_tokens=120,
        output_tokens=30,
        total_tokens=150,
        usage_details={"input": {"cache_read": 20}, "output": {"reasoning": 5}},
        model_parameters={"temperature": 0.2, "stop_sequences": ["END"]},
        error={"message": "retried once", "retryable": True},
        links=[{"trace_id": "t0", "span_id": "s9"}],
        tags=["vip", "eu"],
        model="gpt-4o",
        provider="openai",
        ingest_key="k-full",
    )


# --- round trip --------------------------------------------------------------------------------


def test_every_field_of_every_kind_reads_back(signal_store: SignalStores) -> None:
    store = signal_store.store
    root = full_span()
    child = span("s2", parent_span_id="s1", start_time=T0 + MS, end_time=None, duration_ns=None)
    line = log(
        "l1",
        **CORRELATION,
        span_id="s1",
        level="warn",
        fields={"ms": 812, "slow": True},
        logger="app.db",
    )
    judged = score(
        "sc1",
        **CORRELATION,
        **COST,
        span_id="s1",
        scorer_version="3",
        source="offline",
        value=0.25,
        min=0.0,
        max=1.0,
        label="weak",
        reason="off topic",
        score_trace_id="t-judge",
        metadata={"judge": "small"},
    )
    opinion = feedback(
        "f1",
        **CORRELATION,
        span_id="s1",
        kind="rating",
        value={"value": 4, "scale": 5},
        comment="good",
        author_id="a1",
        author_kind="end_user",
        metadata={"ui": "web"},
    )

    written = store.write_batches(
        [batch(spans=[root, child], logs=[line], scores=[judged], feedback=[opinion])]
    )

    assert written == [True]
    found = records(store)
    assert found is not None
    assert found.spans == [root, child]
    assert found.logs == [line]
    assert found.scores == [judged]
    assert found.feedback == [opinion]
    assert found.trace == {
        "project": "p",
        **CORRELATION,
        **COST,
        "trace_id": "t1",
        "root_span_id": "s1",
        "name": "agent turn",
        "kind": "agent_run",
        "status": "ok",
        "start_time": T0,
        "end_time": None,
        "duration_ns": None,
        "span_count": 2,
        "error_count": 0,
        "model_count": 0,
        "tool_count": 0,
        "input_tokens": 120,
        "output_tokens": 30,
        "total_tokens": 150,
        "usage_details": {"input": {"cache_read": 20}, "output": {"reasoning": 5}},
        "tags": ["vip", "eu"],
        "score_summary": {"relevance": 0.25},
        "feedback_summary": {"rating": {"4": 1}},
        "is_complete": False,
        "received_at": T0 + 50 * MS,
    }


def test_only_what_is_asked_is_read(signal_store: SignalStores) -> None:
    store = signal_store.store
    store.write_batches([batch(spans=[span("s1")], logs=[log("l1")], scores=[score("sc1")])])

    found = store.trace_records("p", "t1", logs=False, scores=False, feedback=False)

    assert found is not None
    assert (len(found.spans), found.logs, found.scores, found.feedback) == (1, [], [], [])
    assert store.trace_records("p", "missing", logs=True, scores=True, feedback=True) is None


def test_read_order(signal_store: SignalStores) -> None:
    store = signal_store.store
    spans = [
        span("b", parent_span_id="a", start_time=T0),
        span("c", start_time=T0 + 1),
        span("a", is_root=True, start_time=T0),
        span("0", parent_span_id="b", start_time=T0),
    ]
    logs = [log("l2", timestamp=T0 + 2), log("l1", timestamp=T0 + 1), log("l0", timestamp=T0 + 2)]
    scores = [score("x", timestamp=T0 + 5), score("y", timestamp=T0 + 1)]
    opinions = [feedback("f2", timestamp=T0 + 3), feedback("f1", timestamp=T0 + 4)]

    store.write_batches([batch(spans=spans, logs=logs, scores=scores, feedback=opinions)])

    found = records(store)
    assert [s["span_id"] for s in found.spans] == ["a", "b", "0", "c"]
    assert [row["log_id"] for row in found.logs] == ["l1", "l0", "l2"]
    assert [row["score_id"] for row in found.scores] == ["y", "x"]
    assert [row["feedback_id"] for row in found.feedback] == ["f2", "f1"]


def test_metrics_and_notes_are_stored_whole(backend: str, migrated: Migrated) -> None:
    # Nothing on the TraceStore protocol reads these back yet, so this reads the SQL tables.
    opened = migrated.open("trace", backend)
    try:
        point = metric(
            "m1",
            **CORRELATION,
            kind="histogram",
            value=12.5,
            unit="ms",
            labels={"route": "/pay", "code": 200},
            buckets=[{"le": 10, "count": 3}],
            trace_id="t1",
            span_id="s1",
        )
        note = aspect_note("n1", **CORRELATION, model="small", definition_version=3)
        assert opened.store.write_batches([batch(metrics=[point], aspect_notes=[note])]) == [True]

        assert opened.engine is not None
        with opened.engine.connect() as conn:
            metrics = [dict(r._mapping) for r in conn.execute(select(schema.metrics))]
            notes = [dict(r._mapping) for r in conn.execute(select(schema.aspect_notes))]
        assert metrics == [point]
        assert notes == [note]
        assert opened.store.facet_value_count("p", "metric_label_value", "code") == 1
    finally:
        opened.store.close()


# --- ingest keys -------------------------------------------------------------------------------


def test_a_replayed_key_writes_nothing(signal_store: SignalStores) -> None:
    store = signal_store.store
    assert store.write_batches([batch(key="k1", spans=[span("s1")])]) == [True]

    replay = batch(key="k1", spans=[span("s2")], logs=[log("l9")])
    assert store.write_batches([replay]) == [False]

    found = records(store)
    assert [s["span_id"] for s in found.spans] == ["s1"]
    assert found.logs == []
    assert found.trace["span_count"] == 1
    # The key is scoped to the sending project: another project may use it.
    assert store.write_batches([batch(key="k1", project="q", spans=[span("s1", project="q")])]) == [
        True
    ]


def test_a_key_repeated_in_one_call_writes_once(signal_store: SignalStores) -> None:
    store = signal_store.store

    written = store.write_batches(
        [
            batch(key="k1", spans=[span("s1")]),
            batch(key=None, spans=[span("s2")]),
            batch(key="k1", spans=[span("s3")]),
            batch(key="k2", spans=[span("s4")]),
        ]
    )

    assert written == [True, True, False, True]
    assert [s["span_id"] for s in records(store).spans] == ["s1", "s2", "s4"]
    assert trace_row(store)["span_count"] == 3


def test_concurrent_writers_of_one_key(signal_store: SignalStores) -> None:
    first, second = signal_store.store, signal_store.another()
    barrier = threading.Barrier(2)
    results: dict[str, list[bool]] = {}
    errors: list[Exception] = []

    def write(name: str, store: Any) -> None:
        barrier.wait()
        try:
            results[name] = store.write_batches([batch(key="k1", spans=[span(name)])])
        except Exception as error:
            errors.append(error)

    threads = [
        threading.Thread(target=write, args=(name, store))
        for name, store in (("a", first), ("b", second))
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)

    assert errors == []
    assert sorted(results.values()) == [[False], [True]]
    winner = next(name for name, written in results.items() if written == [True])
    assert [s["span_id"] for s in records(first).spans] == [winner]


def test_concurrent_writers_of_one_trace_keep_every_span(signal_store: SignalStores) -> None:
    # Projection updates of one trace from two stores must not overwrite each other.
    stores = [signal_store.store, signal_store.another()]
    barrier = threading.Barrier(2)
    errors: list[Exception] = []

    def write(index: int) -> None:
        barrier.wait()
        try:
            for round_ in range(25):
                span_id = f"w{index}-{round_:02d}"
                stores[index].write_batches([batch(spans=[span(span_id, start_time=T0 + round_)])])
        except Exception as error:
            errors.append(error)

    threads = [threading.Thread(target=write, args=(index,)) for index in (0, 1)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)

    assert errors == []
    assert trace_row(stores[0])["span_count"] == 50


# --- projection --------------------------------------------------------------------------------


def test_a_resent_span_updates_the_span_and_the_trace(signal_store: SignalStores) -> None:
    store = signal_store.store
    started = span("s1", is_root=True, status="unset", end_time=None, duration_ns=None)
    store.write_batches([batch(spans=[started])])
    before = trace_row(store)
    assert (before["end_time"], before["duration_ns"], before["is_complete"]) == (None, None, False)
    assert before["status"] == "unset"

    ended = span("s1", is_root=True, status="ok", end_time=T0 + 30 * MS, duration_ns=30 * MS)
    store.write_batches([batch(spans=[ended], received_at=T0 + 90 * MS)])

    found = records(store)
    assert found.spans == [ended]
    assert (
        found.trace["end_time"],
        found.trace["duration_ns"],
        found.trace["is_complete"],
        found.trace["status"],
        found.trace["span_count"],
    ) == (T0 + 30 * MS, 30 * MS, True, "ok", 1)


def trace_spans() -> list[SpanRow]:
    return [
        span("root", is_root=True, kind="agent_run", name="agent", tags=["a"], start_time=T0),
        span("gen", parent_span_id="root", kind="model_generation", start_time=T0 + 1, **COST),
        span(
            "inf",
            parent_span_id="gen",
            kind="model_inference",
            start_time=T0 + 2,
            input_tokens=10,
            output_tokens=4,
            total_tokens=14,
            usage_details={"input": {"cache_read": 3}},
            **{**COST, "total_cost": 0.5},
        ),
        span("tool", parent_span_id="root", kind="tool_call", status="error", start_time=T0 + 3),
        span("ev", parent_span_id="tool", is_event=True, end_time=None, start_time=T0 + 4),
        span("late", parent_span_id="root", start_time=T0 + 5, end_time=T0 + 99 * MS),
    ]


def test_a_trace_arriving_in_three_calls_projects_as_if_at_once(
    signal_store: SignalStores,
) -> None:
    store = signal_store.store
    spans = trace_spans()
    for part in (spans[4:], spans[:2], spans[2:4]):
        store.write_batches([batch(spans=part)])
    store.write_batches([batch(project="q", spans=[{**s, "project": "q"} for s in spans])])

    in_parts = trace_row(store)
    at_once = trace_row(store, "q")
    assert {**in_parts, "project": "q"} == at_once
    assert (
        in_parts["span_count"],
        in_parts["error_count"],
        in_parts["model_count"],
        in_parts["tool_count"],
        in_parts["status"],
        in_parts["end_time"],
        in_parts["is_complete"],
        in_parts["input_tokens"],
        in_parts["total_cost"],
    ) == (6, 1, 1, 1, "error", T0 + 99 * MS, True, 10, 0.5)


def test_scores_and_feedback_update_the_trace(signal_store: SignalStores) -> None:
    store = signal_store.store
    # A score that arrives before any span is kept and counted once the spans come.
    store.write_batches([batch(scores=[score("early", value=1.0)])])
    assert records(store) is None

    store.write_batches([batch(spans=[span("s1", is_root=True)])])
    assert trace_row(store)["score_summary"] == {"relevance": 1.0}
    assert trace_row(store)["feedback_summary"] is None

    store.write_batches(
        [
            batch(
                scores=[score("late", value=0.0), score("tox", scorer_id="toxicity", value=0.25)],
                feedback=[
                    feedback("f1", value="up"),
                    feedback("f2", value={"value": "down"}),
                    feedback("f3", kind="comment", value="thanks"),
                ],
            )
        ]
    )
    row = trace_row(store)
    assert row["score_summary"] == {"relevance": 0.5, "toxicity": 0.25}
    assert row["feedback_summary"] == {"comment": {"count": 1}, "thumbs": {"down": 1, "up": 1}}

    # A re-sent score replaces its earlier value.
    store.write_batches([batch(scores=[score("late", value=1.0)])])
    assert trace_row(store)["score_summary"] == {"relevance": 1.0, "toxicity": 0.25}


# --- held spans --------------------------------------------------------------------------------


def test_held_spans_wait_and_are_released(signal_store: SignalStores) -> None:
    store = signal_store.store
    held = [
        span("r", trace_id="h1", is_root=True, end_time=T0 + 20 * MS, received_at=T0 + 7),
        span("c", trace_id="h1", parent_span_id="r", status="error", received_at=T0 + 3),
        span("o", trace_id="h1", parent_span_id="r", end_time=None, received_at=T0 + 5),
        span("x", trace_id="h2", end_time=None, entity_name="dropped", received_at=T0 + 9),
    ]
    more = [span("y", trace_id="h2", is_event=True, end_time=None, received_at=T0 + 11)]
    assert store.write_batches([batch(held_spans=held), batch(held_spans=more)]) == [True, True]

    assert records(store, trace_id="h1") is None
    assert store.held_traces() == [
        HeldTrace("p", "h1", T0 + 3, 3, 1, T0, T0 + 20 * MS, 1),
        HeldTrace("p", "h2", T0 + 9, 2, 0, None, None, 1),
    ]
    assert store.facet_value_count("p", "entity_name", "") == 0

    assert store.release_held("p", keep=["h1"], drop=["h2"]) == 3

    assert store.held_traces() == []
    found = records(store, trace_id="h1")
    assert [s["span_id"] for s in found.spans] == ["r", "c", "o"]
    assert found.spans[0] == held[0]
    assert (found.trace["span_count"], found.trace["error_count"], found.trace["received_at"]) == (
        3,
        1,
        T0 + 3,
    )
    assert records(store, trace_id="h2") is None
    assert store.facet_value_count("p", "entity_name", "") == 0
    # Releasing again moves nothing.
    assert store.release_held("p", keep=["h1"], drop=[]) == 0


def test_released_spans_join_spans_already_stored(signal_store: SignalStores) -> None:
    store = signal_store.store
    store.write_batches([batch(spans=[span("a", is_root=True, end_time=None)])])
    store.write_batches([batch(held_spans=[span("b", tags=["late"])])])

    assert store.release_held("p", keep=["t1"], drop=[]) == 1

    row = trace_row(store)
    assert (row["span_count"], row["root_span_id"]) == (2, "a")
    assert store.facet_value_count("p", "tag", "") == 1


def test_held_traces_of_two_projects_are_released_apart(signal_store: SignalStores) -> None:
    store = signal_store.store
    store.write_batches(
        [
            batch(held_spans=[span("a", received_at=T0 + 2)]),
            batch(project="q", held_spans=[span("a", project="q", received_at=T0 + 1)]),
        ]
    )
    assert [(h.project, h.trace_id) for h in store.held_traces()] == [("q", "t1"), ("p", "t1")]

    assert store.release_held("q", keep=[], drop=["t1"]) == 0

    assert [(h.project, h.trace_id) for h in store.held_traces()] == [("p", "t1")]


# --- facets ------------------------------------------------------------------------------------


def test_facets_are_recorded(signal_store: SignalStores) -> None:
    store = signal_store.store
    store.write_batches(
        [
            batch(
                spans=[
                    span("a", entity_kind="tool", entity_name="search", tags=["x", "y"]),
                    span("b", entity_kind="agent", entity_name="search", service_name="api"),
                ],
                logs=[log("l", service_name="worker", environment="prod")],
                metrics=[
                    metric("m1", name="latency", labels={"route": "/a", "code": 200}),
                    metric("m2", name="errors", labels={"route": "/b"}),
                ],
            )
        ]
    )
    # The same values again, later: still one each.
    store.write_batches(
        [batch(received_at=T0 + 99 * MS, spans=[span("c", entity_kind="tool", tags=["x"])])]
    )

    counts = {
        (facet, key): store.facet_value_count("p", facet, key)
        for facet, key in [
            ("entity_kind", ""),
            ("entity_name", ""),
            ("service_name", ""),
            ("environment", ""),
            ("tag", ""),
            ("metric_name", ""),
            ("metric_label_key", ""),
            ("metric_label_value", "route"),
            ("metric_label_value", "code"),
            ("metric_label_value", "other"),
        ]
    }
    assert counts == {
        ("entity_kind", ""): 2,
        ("entity_name", ""): 1,
        ("service_name", ""): 2,
        ("environment", ""): 1,
        ("tag", ""): 2,
        ("metric_name", ""): 2,
        ("metric_label_key", ""): 2,
        ("metric_label_value", "route"): 2,
        ("metric_label_value", "code"): 1,
        ("metric_label_value", "other"): 0,
    }
    assert store.facet_value_count("q", "tag", "") == 0


# --- tenancy and atomicity ---------------------------------------------------------------------


def test_one_trace_id_in_two_projects_is_two_traces(signal_store: SignalStores) -> None:
    store = signal_store.store
    store.write_batches(
        [
            batch(
                spans=[span("s1", is_root=True, name="p root"), span("s2")],
                scores=[score("sc", value=1.0)],
                logs=[log("l1")],
            ),
            batch(
                project="q",
                spans=[span("s1", project="q", name="q root", status="error")],
                scores=[score("sc", project="q", value=0.0)],
                feedback=[feedback("f", project="q")],
            ),
        ]
    )

    mine, theirs = records(store, "p"), records(store, "q")
    assert (mine.trace["name"], mine.trace["span_count"], mine.trace["status"]) == (
        "p root",
        2,
        "ok",
    )
    assert (theirs.trace["name"], theirs.trace["span_count"], theirs.trace["status"]) == (
        "q root",
        1,
        "error",
    )
    assert mine.trace["score_summary"] == {"relevance": 1.0}
    assert theirs.trace["score_summary"] == {"relevance": 0.0}
    assert (mine.feedback, [row["log_id"] for row in mine.logs]) == ([], ["l1"])
    assert (theirs.logs, len(theirs.feedback)) == ([], 1)
    assert {s["project"] for s in mine.spans} == {"p"}
    assert records(store, "r") is None


def test_nul_characters_are_replaced_alike_everywhere(signal_store: SignalStores) -> None:
    # PostgreSQL refuses NUL in text and JSON; every backend stores U+FFFD instead, so one
    # span cannot fail a group commit and the backends read back the same thing.
    written = span(
        "s1",
        name="a\x00b",
        input={"k\x00": ["v\x00"], "look-alike": "\\u0000"},
        tags=["t\x00"],
    )
    store = signal_store.store
    assert store.write_batches([batch(spans=[written])]) == [True]

    stored = records(store).spans[0]
    assert stored["name"] == "a\ufffdb"
    assert stored["input"] == {"k\ufffd": ["v\ufffd"], "look-alike": "\\u0000"}
    assert stored["tags"] == ["t\ufffd"]


def test_non_finite_numbers_are_stored_as_null_alike_everywhere(
    signal_store: SignalStores,
) -> None:
    # OTLP double attributes may be NaN or infinite; JSON has no spelling for them and the
    # databases' JSON functions refuse the tokens (on PostgreSQL, the whole batch). Every
    # backend stores null, next to a big integer that only the standard encoder writes.
    written = span(
        "s1",
        attributes={"score": math.nan, "limits": [math.inf, -math.inf, 0.5], "id": 2**70},
    )
    store = signal_store.store
    assert store.write_batches([batch(spans=[written])]) == [True]

    stored = records(store).spans[0]
    assert stored["attributes"] == {"score": None, "limits": [None, None, 0.5], "id": 2**70}


def test_a_failing_row_leaves_nothing_of_the_call(signal_store: SignalStores) -> None:
    store = signal_store.store
    good = batch(
        key="k-good",
        spans=[span("s1", service_name="api")],
        logs=[log("l1")],
        held_spans=[span("h")],
    )
    bad = batch(key="k-bad", spans=[span("s2", trace_id="t2", name=None)])

    with pytest.raises(WRITE_ERRORS):
        store.write_batches([good, bad])

    assert records(store) is None
    assert records(store, trace_id="t2") is None
    assert store.held_traces() == []
    assert store.facet_value_count("p", "service_name", "") == 0
    # Neither key was kept: both batches can be sent again.
    assert store.write_batches([good, batch(key="k-bad", spans=[span("s2")])]) == [True, True]
    assert trace_row(store)["span_count"] == 2
