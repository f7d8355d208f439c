"""The dataset and helpers of the trace store's query behaviour suite (test_query_store*.py).

Everything is fixed: times are int ns around 2026-11-01T00:00:00Z (`B`), every row is written
with its `received_at` set, and every expectation in the suite is worked out by hand from the
tables below (the comments say how), never read back from a store.

Project "p" holds six traces (times in ms after B; `workflow` is workflow_run, `agent` is
agent_run):

| trace | start ms | duration ms | root name / kind     | status    | env        | service  | $    |
|-------|----------|-------------|----------------------|-----------|------------|----------|------|
| tr-f  |   50_000 |      10_000 | batch job / workflow | cancelled | production | worker   | 2.0  |
| tr-a  |  100_000 |       2_000 | agent / agent_run    | ok        | production | checkout | 0.5  |
| tr-b  |  200_000 |       5_250 | agent / agent_run    | error     | staging    | search   | 1.25 |
| tr-c  |  300_000 |       1_125 | workflow / workflow  | ok        | (unset)    | checkout | -    |
| tr-d  |  300_000 |       2_000 | agent turn / agent   | error     | production | checkout | 0.5  |
| tr-e  |  400_000 |      (open) | agent / agent_run    | unset     | production | search   | -    |

Tokens in/out: tr-f 500/100, tr-a 100/20, tr-b 300/50, tr-d 40/10 (tr-c and tr-e none).

Plus a held (tail-sampled) trace tr-h, and project "other" holding a copy of all of it (same
ids) and one more trace, tr-z, that matches nearly every filter: a store that leaks across
projects shows duplicates or tr-z.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import ExitStack
from typing import Any, TypeVar, cast

import pytest
from sqlalchemy import text

from mcpd.model.v1 import enums_pb2
from mcpd.signals.batch import SignalBatch
from mcpd.signals.queries import Page
from mcpd.signals.rows import FeedbackRow, LogRow, MetricRow, ScoreRow, SpanRow
from mcpd.testing.eventually import eventually
from tests.libs.signals.samples import feedback, log, metric, score, span
from tests.libs.storage.helpers import Migrated, OpenedStore

Row = TypeVar("Row")

# 2026-11-01T00:00:00Z in ns: on a whole hour (and day), so epoch-aligned buckets start on it.
B = 1_793_491_200_000_000_000
MS = 1_000_000
S = 1_000 * MS
# When the main dataset arrived (every row's and the batch's received_at).
R0 = B + 3_600 * S

P = "p"
OTHER = "other"


def at(ms: int) -> int:
    """B plus `ms` milliseconds, in ns."""
    return B + ms * MS


# --- rows --------------------------------------------------------------------------------------


def sp(
    span_id: str,
    trace_id: str,
    start_ms: int,
    end_ms: int | None,
    *,
    project: str = P,
    received_at: int = R0,
    **fields: Any,
) -> SpanRow:
    """A span of `trace_id` from `start_ms` to `end_ms` (None: still open)."""
    return span(
        span_id,
        project=project,
        trace_id=trace_id,
        start_time=at(start_ms),
        end_time=None if end_ms is None else at(end_ms),
        duration_ns=None if end_ms is None else (end_ms - start_ms) * MS,
        received_at=received_at,
        **fields,
    )


def usd(total: float) -> dict[str, Any]:
    """Cost columns of a span priced at `total` USD (split evenly in and out)."""
    return {
        "cost_currency": "USD",
        "input_cost": total / 2,
        "output_cost": total / 2,
        "total_cost": total,
        "cost_price_book": "book-1",
        "cost_is_estimated": False,
    }


def tokens(prompt: int, completion: int) -> dict[str, Any]:
    """Token columns: `prompt` in, `completion` out."""
    return {
        "input_tokens": prompt,
        "output_tokens": completion,
        "total_tokens": prompt + completion,
    }


def correlated(
    environment: str | None, service: str, user: str, session: str | None = None
) -> dict[str, Any]:
    return {
        "environment": environment,
        "service_name": service,
        "user_id": user,
        "session_id": session,
    }


CORR_F = correlated("production", "worker", "user-4")
CORR_A = correlated("production", "checkout", "user-1", "sess-1")
CORR_B = correlated("staging", "search", "user-2", "sess-2")
CORR_C = correlated(None, "checkout", "user-1")
CORR_D = correlated("production", "checkout", "user-3", "sess-1")
CORR_E = correlated("production", "search", "user-2")

# Tags of tr-e's root: values for discovery's prefix rules ('%' and '_' literal, case-sensitive).
ODD_TAGS = ["50%off", "50x", "Check", "a_b", "abc"]


def main_spans(project: str = P) -> list[SpanRow]:
    """The stored (not held) spans of the six traces."""
    rows = [
        sp(
            "f-root",
            "tr-f",
            50_000,
            60_000,
            name="batch job",
            kind="workflow_run",
            status="cancelled",
            is_root=True,
            model="gpt-4o-mini",
            provider="openai",
            **CORR_F,
            **tokens(500, 100),
            **usd(2.0),
        ),
        sp(
            "a-root",
            "tr-a",
            100_000,
            102_000,
            name="agent",
            kind="agent_run",
            is_root=True,
            tags=["vip", "eu"],
            entity_kind="agent",
            entity_name="support",
            input={"role": "user", "content": "I want a refund please"},
            output="Done",
            **CORR_A,
        ),
        sp(
            "a-gen",
            "tr-a",
            100_500,
            101_500,
            name="generate",
            kind="model_generation",
            parent_span_id="a-root",
            model="gpt-4o",
            provider="openai",
            output="Your refund is on its way",
            **CORR_A,
            **tokens(100, 20),
            **usd(0.5),
        ),
        sp(
            "b-root",
            "tr-b",
            200_000,
            205_250,
            name="agent",
            kind="agent_run",
            is_root=True,
            tags=["vip"],
            input="where is my parcel",
            **CORR_B,
        ),
        sp(
            "b-gen",
            "tr-b",
            201_000,
            203_000,
            name="answer",
            kind="model_generation",
            parent_span_id="b-root",
            model="claude-3",
            provider="anthropic",
            output="refunds are processed in 5 days",
            **CORR_B,
            **tokens(300, 50),
            **usd(1.25),
        ),
        sp(
            "b-tool",
            "tr-b",
            203_000,
            204_000,
            name="lookup",
            kind="tool_call",
            status="error",
            parent_span_id="b-root",
            entity_kind="tool",
            entity_name="lookup",
            input={"order": "use snake_case names"},
            **CORR_B,
        ),
        sp(
            "c-root",
            "tr-c",
            300_000,
            301_125,
            name="workflow",
            kind="workflow_run",
            is_root=True,
            input="checkout flow started",
            **CORR_C,
        ),
        sp(
            "c-step",
            "tr-c",
            300_200,
            300_400,
            name="café order",
            kind="workflow_step",
            parent_span_id="c-root",
            **CORR_C,
        ),
        sp(
            "d-root",
            "tr-d",
            300_000,
            302_000,
            name="agent turn",
            kind="agent_run",
            is_root=True,
            tags=["eu"],
            input={"role": "user", "content": "hello"},
            **CORR_D,
        ),
        sp(
            "d-gen",
            "tr-d",
            300_500,
            301_000,
            name="generate",
            kind="model_generation",
            status="error",
            parent_span_id="d-root",
            model="gpt-4o",
            provider="openai",
            output=["discount 100% off"],
            **CORR_D,
            **tokens(40, 10),
            **usd(0.5),
        ),
        sp(
            "e-root",
            "tr-e",
            400_000,
            None,
            name="agent",
            kind="agent_run",
            status="unset",
            is_root=True,
            tags=ODD_TAGS,
            input={"items": ["1000 items"]},
            **CORR_E,
        ),
        sp(
            "e-x",
            "tr-e",
            400_000,
            400_100,
            name="snakeXcase names",
            parent_span_id="e-root",
            **CORR_E,
        ),
    ]
    return [cast(SpanRow, {**row, "project": project}) for row in rows]


def held_spans(project: str = P) -> list[SpanRow]:
    """A tail-sampled trace still waiting for its decision: never listed, counted or found."""
    return [
        sp(
            "h-root",
            "tr-h",
            150_000,
            151_000,
            project=project,
            name="refund held",
            kind="model_generation",
            is_root=True,
            model="gpt-4o",
            provider="openai",
            tags=["held-tag"],
            input="refund held",
            **correlated("held-env", "held-svc", "u-h"),
            **tokens(7, 7),
            **usd(9.0),
        )
    ]


def main_logs(project: str = P) -> list[LogRow]:
    """Eight log records; l7 and l8 share a timestamp."""

    def line(log_id: str, ms: int, level: str, message: str, **fields: Any) -> LogRow:
        return log(
            log_id,
            project=project,
            timestamp=at(ms),
            level=level,
            message=message,
            received_at=R0,
            **fields,
        )

    return [
        line("l1", 100_100, "info", "refund requested", trace_id="tr-a", span_id="a-root"),
        line("l2", 101_000, "debug", "calling model", trace_id="tr-a", span_id="a-gen"),
        line("l3", 203_500, "error", "lookup failed for parcel", trace_id="tr-b", span_id="b-tool"),
        line("l4", 204_000, "warn", "retrying lookup", trace_id="tr-b"),
        line("l5", 250_000, "fatal", "worker crashed", trace_id=None),
        line("l6", 260_000, "trace", "tick", trace_id=None),
        line("l7", 300_100, "info", "refunds batch", trace_id="tr-d"),
        line("l8", 300_100, "info", "Café visited", trace_id="tr-d"),
    ]


def main_scores(project: str = P) -> list[ScoreRow]:
    def scored(
        score_id: str, trace_id: str, ms: int, scorer: str, value: float, source: str
    ) -> ScoreRow:
        return score(
            score_id,
            project=project,
            trace_id=trace_id,
            scorer_id=scorer,
            value=value,
            source=source,
            timestamp=at(ms),
            received_at=R0,
        )

    return [
        scored("sc-a1", "tr-a", 110_000, "relevance", 0.9, "live"),
        scored("sc-b1", "tr-b", 210_000, "relevance", 0.25, "offline"),
        scored("sc-d1", "tr-d", 310_000, "relevance", 0.5, "live"),
        scored("sc-d2", "tr-d", 310_000, "toxicity", 0.125, "live"),
    ]


def main_feedback(project: str = P) -> list[FeedbackRow]:
    def given(feedback_id: str, trace_id: str, ms: int, kind: str, value: Any) -> FeedbackRow:
        return feedback(
            feedback_id,
            project=project,
            trace_id=trace_id,
            kind=kind,
            value=value,
            timestamp=at(ms),
            received_at=R0,
        )

    return [
        given("fb-a1", "tr-a", 120_000, "thumbs", "up"),
        given("fb-b1", "tr-b", 220_000, "thumbs", "down"),
        given("fb-c1", "tr-c", 320_000, "comment", "nice"),
        given("fb-d1", "tr-d", 320_000, "rating", 4),
    ]


def main_metrics(project: str = P) -> list[MetricRow]:
    """Five `latency` points (two at 20 s) and one `queue.depth` point."""

    def point(metric_id: str, ms: int, name: str, labels: dict[str, Any]) -> MetricRow:
        return metric(
            metric_id,
            project=project,
            name=name,
            timestamp=at(ms),
            value=float(ms) / 1000,
            labels=labels,
            received_at=R0,
        )

    return [
        point("m-40", 40_000, "latency", {"route": "/pay"}),
        point("m-20b", 20_000, "latency", {"route": "/cart"}),
        point("m-10", 10_000, "latency", {"route": "/pay"}),
        point("m-30", 30_000, "latency", {"route": "/pay"}),
        point("m-20a", 20_000, "latency", {"route": "/pay", "code": 200}),
        point("q-15", 15_000, "queue.depth", {"route": "/pay"}),
    ]


def other_only() -> list[SpanRow]:
    """A trace only project `other` has, matching nearly every filter and search of the suite."""
    return [
        sp(
            "z-root",
            "tr-z",
            350_000,
            352_000,
            project=OTHER,
            name="agent",
            kind="agent_run",
            is_root=True,
            tags=["vip", "eu", "zz"],
            model="gpt-4o",
            provider="openai",
            input="refund please hello café checkout 100% snake_case role",
            **correlated("production", "zeta", "user-1", "sess-1"),
            **tokens(1, 1),
            **usd(0.5),
        )
    ]


def main_batches() -> list[SignalBatch]:
    """The whole dataset: project p, then project other, one batch each, both arriving at R0."""
    mine = SignalBatch(
        key_project=P,
        ingest_key="main-p",
        received_at=R0,
        spans=main_spans(),
        logs=main_logs(),
        metrics=main_metrics(),
        scores=main_scores(),
        feedback=main_feedback(),
        held_spans=held_spans(),
    )
    theirs = SignalBatch(
        key_project=OTHER,
        ingest_key="main-other",
        received_at=R0,
        spans=[*main_spans(OTHER), *other_only()],
        logs=main_logs(OTHER),
        metrics=main_metrics(OTHER),
        scores=main_scores(OTHER),
        feedback=main_feedback(OTHER),
        held_spans=held_spans(OTHER),
    )
    return [mine, theirs]


def load(store: Any) -> None:
    """Write the dataset (one group commit)."""
    assert store.write_batches(main_batches()) == [True, True]


def batch(project: str = P, received_at: int = R0, **rows: Any) -> SignalBatch:
    """A batch without an ingest key."""
    return SignalBatch(key_project=project, ingest_key=None, received_at=received_at, **rows)


# --- a loaded store shared by a module's read-only tests ---------------------------------------

BACKENDS: list[Any] = ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres), "clickhouse"]


@pytest.fixture(scope="module", params=BACKENDS)
def loaded(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Any]:
    """A migrated trace store on each backend holding the dataset, shared by the READ-ONLY
    tests of one module (loading it once per backend instead of once per test). A test that
    writes takes the conftest's function-scoped `trace_store` instead."""
    backend: str = request.param
    with ExitStack() as stack:
        migrated = Migrated(request, tmp_path_factory.mktemp(f"query-{backend}"), stack)
        opened = migrated.open("trace", backend)
        stack.callback(opened.store.close)
        load(opened.store)
        yield opened.store


# --- helpers -----------------------------------------------------------------------------------


def search_mode(store: Any) -> str:
    """`words` or `substring`: the text search the store declares."""
    declared = store.capabilities().text_search
    if declared == enums_pb2.TEXT_SEARCH_WORDS:
        return "words"
    if declared == enums_pb2.TEXT_SEARCH_SUBSTRING:
        return "substring"
    raise AssertionError(f"unexpected text_search {declared}")


def settle(opened: OpenedStore, timeout_s: float = 60.0) -> None:
    """Wait until a ClickHouse store has applied every mutation (deletes are asynchronous
    there); nothing to wait for on a backend with immediate deletes."""
    if opened.store.capabilities().immediate_deletes:
        return

    def no_mutation_pending() -> None:
        rows = opened.store.executor.query("SELECT count() FROM system.mutations WHERE is_done = 0")
        assert int(rows[0][0]) == 0, "ClickHouse mutations did not finish in time"

    eventually(no_mutation_pending, timeout=timeout_s)


def quiesce(opened: OpenedStore, timeout_s: float = 60.0) -> None:
    """Before a delta poll on PostgreSQL: wait until every transaction that began before now
    has ended. A poll there returns only rows below the oldest transaction in flight anywhere
    in the cluster (`mcpd.storage.sql.signals.deltas`), so a concurrent test's transaction may
    hold a just-committed row back (never skip it); waiting it out makes a poll's answer
    exact. Nothing to wait for on the other backends."""
    if opened.backend != "postgres":
        return
    assert opened.engine is not None
    with opened.engine.connect() as conn:
        horizon = int(conn.execute(text("SELECT pg_current_xact_id()::text::bigint")).scalar_one())
        conn.commit()
    engine = opened.engine

    def every_older_transaction_ended() -> None:
        with engine.connect() as conn:
            oldest = int(
                conn.execute(
                    text("SELECT pg_snapshot_xmin(pg_current_snapshot())::text::bigint")
                ).scalar_one()
            )
        assert oldest > horizon, "a PostgreSQL transaction stayed open for over a minute"

    eventually(every_older_transaction_ended, timeout=timeout_s)


def page_through(
    fetch: Callable[[Any, int], Page[Row]], cursor: Callable[[Row], Any], limit: int
) -> list[Page[Row]]:
    """Every page of a keyset-paged list, `limit` rows at a time (at most 100 pages)."""
    pages: list[Page[Row]] = []
    after: Any = None
    for _ in range(100):
        page = fetch(after, limit)
        pages.append(page)
        if not page.has_more:
            return pages
        assert page.rows, "has_more on an empty page"
        after = cursor(page.rows[-1])
    raise AssertionError("paging did not end")


def percentile_cont(values: Sequence[float], fraction: float) -> float:
    """PostgreSQL's percentile_cont: linear interpolation between the two nearest ranks."""
    ordered = sorted(values)
    position = fraction * (len(ordered) - 1)
    low = int(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def column(rows: Iterable[Any], name: str) -> list[Any]:
    """One column of a list of row dicts."""
    return [row[name] for row in rows]
