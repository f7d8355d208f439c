"""The trace store's query surface, part 4: reads while writes arrive, delta polling, deleting a
trace, erasing a subject and retention, on every backend (every test here writes, so each has a
store of its own).

ClickHouse declares `delta_polling` false (deltas must raise Unimplemented there) and
`immediate_deletes` false (counts are what matched, and rows leave once the mutation is
applied): these tests assert the counts a call returns on every backend, then wait for
ClickHouse's mutations (`query_data.settle`) and check what is left, so every backend is held
to the same end state.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from mcpd.runtime.errors import Unimplemented
from mcpd.signals.batch import SignalBatch
from mcpd.signals.queries import (
    STAT_SIGNALS,
    DeltaPage,
    DeltaPosition,
    ErasureCounts,
    ErasureSubject,
    FeedbackQuery,
    LogQuery,
    Page,
    ScoreQuery,
    SpanQuery,
    TraceQuery,
    Window,
)
from mcpd.signals.rows import SpanRow, TraceRow
from tests.libs.signals.samples import aspect_note, feedback, log, metric, score
from tests.libs.storage.helpers import OpenedStore
from tests.libs.storage.query_data import (
    OTHER,
    R0,
    P,
    S,
    at,
    batch,
    load,
    page_through,
    quiesce,
    settle,
    sp,
)
from tests.libs.storage.sessions.builders import USER, assemble

Q = "q"


@pytest.fixture
def opened(migrated_trace_store: OpenedStore) -> OpenedStore:
    """A migrated trace store on each backend (empty)."""
    return migrated_trace_store


def trace_ids(store: Any, project: str = P) -> list[str]:
    return [row["trace_id"] for row in store.list_traces(project, TraceQuery()).rows]


def span_ids(store: Any, project: str = P, **fields: Any) -> list[str]:
    return [row["span_id"] for row in store.list_spans(project, SpanQuery(**fields)).rows]


def log_ids(store: Any, project: str = P, **fields: Any) -> list[str]:
    return [row["log_id"] for row in store.list_logs(project, LogQuery(**fields)).rows]


def score_ids(store: Any, project: str = P, **fields: Any) -> list[str]:
    return [row["score_id"] for row in store.list_scores(project, ScoreQuery(**fields)).rows]


def feedback_ids(store: Any, project: str = P, **fields: Any) -> list[str]:
    rows = store.list_feedback(project, FeedbackQuery(**fields)).rows
    return [row["feedback_id"] for row in rows]


def metric_ids(store: Any, project: str = P, name: str = "work") -> list[str]:
    return [row["metric_id"] for row in store.metric_points(project, name, Window(), limit=100)]


# --- writes while reading ----------------------------------------------------------------------


@pytest.fixture
def fresh(opened: OpenedStore) -> Any:
    """A store of its own holding the `query_data` dataset, for a test that writes to it (the
    read-only suites share one loaded store per backend, and chdb serves one database per
    process at a time, so writers live here)."""
    load(opened.store)
    return opened.store


def page_ids(page: Page[TraceRow]) -> list[str]:
    return [row["trace_id"] for row in page.rows]


def test_rows_arriving_while_paging(fresh: Any) -> None:
    store = fresh
    first = store.list_traces(P, TraceQuery(limit=2))
    assert page_ids(first) == ["tr-e", "tr-d"]
    cursor = (first.rows[-1]["start_time"], first.rows[-1]["trace_id"])

    arriving = [
        # Newer than the cursor: never shown on the pages that follow.
        sp("n-root", "tr-new", 500_000, 501_000, is_root=True, received_at=R0 + 1),
        # At the cursor's start time but before it in (start, trace_id) descending order.
        sp("dz-root", "tr-dz", 300_000, 300_500, is_root=True, received_at=R0 + 1),
        # At the cursor's start time, after it: shown.
        sp("c0-root", "tr-c0", 300_000, 300_500, is_root=True, received_at=R0 + 1),
        # Older than everything: shown, last.
        sp("o-root", "tr-old", 10_000, 11_000, is_root=True, received_at=R0 + 1),
    ]
    assert store.write_batches([batch(received_at=R0 + 1, spans=arriving)]) == [True]

    rest = page_through(
        lambda after, n: store.list_traces(P, TraceQuery(after=after or cursor, limit=n)),
        lambda row: (row["start_time"], row["trace_id"]),
        2,
    )

    seen = [trace_id for page in rest for trace_id in page_ids(page)]
    assert seen == ["tr-c0", "tr-c", "tr-b", "tr-a", "tr-f", "tr-old"]
    # A fresh first page shows the newcomers in their place.
    assert trace_ids(store)[:4] == ["tr-new", "tr-e", "tr-dz", "tr-d"]


def test_released_held_spans_are_listed(fresh: Any) -> None:
    store = fresh
    assert span_ids(store, trace_id="tr-h") == []

    assert store.release_held(P, keep=["tr-h"], drop=[]) == 1

    assert span_ids(store, trace_id="tr-h") == ["h-root"]
    assert span_ids(store, model="gpt-4o") == ["d-gen", "h-root", "a-gen"]
    assert "tr-h" in trace_ids(store)


def test_discover_last_seen_is_the_latest_arrival(fresh: Any) -> None:
    store = fresh
    # Two minutes later: beyond the 60 s a ClickHouse writer may let last_seen lag
    # (`mcpd.storage.clickhouse.signals.writes.FACET_REFRESH_NS`).
    later = R0 + 120 * S
    written = batch(
        received_at=later,
        spans=[sp("late", "tr-late", 500_000, 500_001, received_at=later, service_name="checkout")],
    )
    elsewhere = batch(
        OTHER,
        received_at=later + S,
        spans=[
            sp(
                "late",
                "tr-late",
                500_000,
                500_001,
                project=OTHER,
                received_at=later + S,
                service_name="search",
            )
        ],
    )
    assert store.write_batches([written, elsewhere]) == [True, True]

    assert store.discover(P, "service_name", "", None, 10) == [
        ("checkout", later),
        ("search", R0),
        ("worker", R0),
    ]
    assert store.discover(OTHER, "service_name", "", None, 10) == [
        ("checkout", R0),
        ("search", later + S),
        ("worker", R0),
        ("zeta", R0),
    ]


# --- deltas ------------------------------------------------------------------------------------


def polls(store: Any) -> bool:
    """Whether the store declares delta polling; when it does not, every call must refuse."""
    if store.capabilities().delta_polling:
        return True
    for signal in ("traces", "spans", "logs"):
        for after in (None, DeltaPosition(1, ("x",))):
            with pytest.raises(Unimplemented) as refused:
                store.deltas(P, signal, after, limit=10)
            assert refused.value.field == "signal"
    return False


def root(trace_id: str, ms: int, received_at: int, project: str = P, **fields: Any) -> SpanRow:
    return sp(
        f"{trace_id}-root",
        trace_id,
        ms,
        ms + 1_000,
        project=project,
        received_at=received_at,
        is_root=True,
        **fields,
    )


def poll(
    opened: OpenedStore, signal: str, after: DeltaPosition | None, limit: int = 10
) -> DeltaPage:
    """One poll of project p, once no transaction older than now is in flight (`quiesce`)."""
    quiesce(opened)
    page: DeltaPage = opened.store.deltas(P, signal, after, limit=limit)
    assert isinstance(page.position, DeltaPosition)
    assert {row["project"] for row in page.rows} <= {P}
    return page


def test_deltas_are_refused_exactly_where_not_declared(opened: OpenedStore) -> None:
    store = opened.store
    if polls(store):
        for signal in ("traces", "spans", "logs"):
            page = poll(opened, signal, None)
            assert (page.rows, page.has_more) == ([], False)
    else:
        assert opened.backend == "clickhouse"


def test_trace_deltas(opened: OpenedStore) -> None:
    store = opened.store
    if not polls(store):
        return
    # Written before the first poll: a None cursor starts after it.
    store.write_batches([batch(received_at=R0, spans=[root("t-pre", 0, R0)])])
    start = poll(opened, "traces", None)
    assert (start.rows, start.has_more) == ([], False)

    r1 = R0 + S
    store.write_batches(
        [
            batch(received_at=r1, spans=[root("t-b", 10_000, r1), root("t-a", 20_000, r1)]),
            batch(Q, received_at=r1, spans=[root("t-q", 10_000, r1, project=Q)]),
        ]
    )
    first = poll(opened, "traces", start.position)
    # One arrival: the rows in key order.
    assert [row["trace_id"] for row in first.rows] == ["t-a", "t-b"]
    assert first.has_more is False
    for row in first.rows:
        stored = store.trace_records(P, row["trace_id"], logs=False, scores=False, feedback=False)
        assert row == stored.trace
    assert first.position.key == ("t-b",)

    # A later arrival comes after, whatever its key.
    r2 = R0 + 2 * S
    store.write_batches([batch(received_at=r2, spans=[root("t-0", 30_000, r2)])])
    second = poll(opened, "traces", first.position)
    assert [row["trace_id"] for row in second.rows] == ["t-0"]

    # Nothing new: no rows, the same position.
    empty = poll(opened, "traces", second.position)
    assert empty == DeltaPage([], second.position, False)

    # A score re-projects t-a: it comes again, with its new summary.
    r3 = R0 + 3 * S
    store.write_batches(
        [batch(received_at=r3, scores=[score("s1", trace_id="t-a", value=0.5, received_at=r3)])]
    )
    third = poll(opened, "traces", second.position)
    assert [row["trace_id"] for row in third.rows] == ["t-a"]
    assert third.rows[0]["score_summary"] == {"relevance": 0.5}

    # From the start again, two at a time: each row once, at its latest arrival.
    page = poll(opened, "traces", start.position, limit=2)
    assert ([row["trace_id"] for row in page.rows], page.has_more) == (["t-b", "t-0"], True)
    page = poll(opened, "traces", page.position, limit=2)
    assert ([row["trace_id"] for row in page.rows], page.has_more) == (["t-a"], False)
    assert page.position == third.position


def test_span_deltas(opened: OpenedStore) -> None:
    store = opened.store
    if not polls(store):
        return
    start = poll(opened, "spans", None)

    r1 = R0 + S
    s2 = sp("s2", "t1", 1_000, 2_000, received_at=r1)
    s1 = sp("s1", "t1", 0, None, received_at=r1, is_root=True)
    held = sp("h", "t9", 0, 1_000, received_at=r1)
    store.write_batches([batch(received_at=r1, spans=[s2, s1], held_spans=[held])])
    first = poll(opened, "spans", start.position)
    assert first.rows == [s1, s2]
    assert first.position.key == ("t1", "s2")

    # The root, re-sent when it ends, arrives again with the new span of another trace.
    r2 = R0 + 2 * S
    s0 = sp("s0", "t0", 5_000, 6_000, received_at=r2)
    s1_ended = sp("s1", "t1", 0, 3_000, received_at=r2, is_root=True)
    store.write_batches([batch(received_at=r2, spans=[s1_ended, s0])])
    second = poll(opened, "spans", first.position)
    assert second.rows == [s0, s1_ended]

    every = poll(opened, "spans", start.position)
    assert every.rows == [s2, s0, s1_ended]
    assert every.position == second.position


def test_log_deltas_page_with_limit(opened: OpenedStore) -> None:
    store = opened.store
    if not polls(store):
        return
    start = poll(opened, "logs", None)

    def line(log_id: str, received_at: int) -> Any:
        return log(log_id, received_at=received_at, timestamp=at(1_000))

    arrivals = [
        [line("l-c", R0 + S), line("l-a", R0 + S)],
        [line("l-b", R0 + 2 * S)],
        [line("l-e", R0 + 3 * S), line("l-d", R0 + 3 * S)],
    ]
    for number, rows in enumerate(arrivals, start=1):
        store.write_batches(
            [
                batch(received_at=R0 + number * S, logs=rows),
                batch(Q, received_at=R0 + number * S, logs=[log(f"q{number}", project=Q)]),
            ]
        )

    pages = []
    position = start.position
    for _ in range(4):
        page = poll(opened, "logs", position, limit=2)
        pages.append(([row["log_id"] for row in page.rows], page.has_more))
        position = page.position
    assert pages == [
        (["l-a", "l-c"], True),
        (["l-b", "l-d"], True),
        (["l-e"], False),
        ([], False),
    ]
    assert position.key == ("l-e",)
    assert poll(opened, "logs", start.position, limit=5).rows[0] == line("l-a", R0 + S)


# --- delete_trace ------------------------------------------------------------------------------


def trace_and_what_names_it(project: str, trace_id: str, prefix: str) -> SignalBatch:
    """A trace of three spans (one held), two logs, a metric, a score, two feedback and a note;
    and the same for nothing else."""
    return batch(
        project,
        received_at=R0,
        spans=[
            sp(f"{prefix}-root", trace_id, 0, 3_000, project=project, is_root=True),
            sp(
                f"{prefix}-1",
                trace_id,
                1_000,
                2_000,
                project=project,
                parent_span_id=f"{prefix}-root",
            ),
            sp(
                f"{prefix}-2",
                trace_id,
                2_000,
                3_000,
                project=project,
                parent_span_id=f"{prefix}-root",
            ),
        ],
        held_spans=[sp(f"{prefix}-h", trace_id, 2_500, 2_600, project=project)],
        logs=[
            log(f"{prefix}-l1", project=project, trace_id=trace_id, received_at=R0),
            log(f"{prefix}-l2", project=project, trace_id=trace_id, received_at=R0),
        ],
        metrics=[
            metric(f"{prefix}-m", project=project, name="work", trace_id=trace_id, received_at=R0)
        ],
        scores=[score(f"{prefix}-s", project=project, trace_id=trace_id, received_at=R0)],
        feedback=[
            feedback(f"{prefix}-f1", project=project, trace_id=trace_id, received_at=R0),
            feedback(f"{prefix}-f2", project=project, trace_id=trace_id, received_at=R0),
        ],
        aspect_notes=[
            aspect_note(f"{prefix}-n", project=project, trace_id=trace_id, received_at=R0)
        ],
    )


def test_delete_trace(opened: OpenedStore) -> None:
    store = opened.store
    store.write_batches(
        [
            trace_and_what_names_it(P, "tr-x", "x"),
            trace_and_what_names_it(P, "tr-y", "y"),
            trace_and_what_names_it(Q, "tr-x", "x"),
        ]
    )

    # 1 trace row + 3 spans + 1 held span + 2 logs + 1 metric + 1 score + 2 feedback + 1 note.
    assert store.delete_trace(P, "tr-x") == 12
    settle(opened)

    assert store.trace_records(P, "tr-x", logs=True, scores=True, feedback=True) is None
    assert trace_ids(store) == ["tr-y"]
    assert span_ids(store, trace_id="tr-x") == []
    assert log_ids(store, trace_id="tr-x") == []
    assert score_ids(store, trace_id="tr-x") == []
    assert feedback_ids(store, trace_id="tr-x") == []
    assert metric_ids(store) == ["y-m"]
    assert sorted((held.project, held.trace_id) for held in store.held_traces()) == [
        (P, "tr-y"),
        (Q, "tr-x"),
    ]
    # The other trace, and the same id in another project, are whole.
    kept = store.trace_records(P, "tr-y", logs=True, scores=True, feedback=True)
    assert (len(kept.spans), len(kept.logs), len(kept.scores), len(kept.feedback)) == (3, 2, 1, 2)
    theirs = store.trace_records(Q, "tr-x", logs=True, scores=True, feedback=True)
    assert (len(theirs.spans), len(theirs.logs), len(theirs.scores), len(theirs.feedback)) == (
        3,
        2,
        1,
        2,
    )
    assert metric_ids(store, Q) == ["x-m"]

    # Gone: deleting again, or an id that never existed, removes nothing.
    assert store.delete_trace(P, "tr-x") == 0
    assert store.delete_trace(P, "nope") == 0


def test_delete_counts_a_re_sent_span_once(opened: OpenedStore) -> None:
    store = opened.store
    started = sp("r", "tr-1", 0, None, is_root=True, received_at=R0)
    ended = sp("r", "tr-1", 0, 1_000, is_root=True, received_at=R0 + S)
    store.write_batches([batch(received_at=R0, spans=[started])])
    store.write_batches([batch(received_at=R0 + S, spans=[ended])])

    # One trace row and one span, however many times each was written.
    assert store.delete_trace(P, "tr-1") == 2
    settle(opened)
    assert trace_ids(store) == []
    assert span_ids(store) == []


# --- erase_subject -----------------------------------------------------------------------------


def subject_rows() -> list[SignalBatch]:
    """Users hash-1 (raw-1 before hashing), hash-2, hash-3 in project p, and hash-1 in q.

    tr-u1: root of hash-1 (session sess-1) + a child without a user, with a log, metric, score,
           feedback and note hanging off it;
    tr-u2: root of raw-1;
    tr-w:  root of hash-3, child of hash-1 (so the whole trace is hash-1's too);
    tr-v:  root of hash-2 (session sess-2) + child, with a log, metric, score, feedback, and a
           note stamped with hash-1;
    loose rows: a log, metric and score of hash-1, feedback of raw-1, a log of session sess-2.
    """

    def user(user_id: str | None, session: str | None = None) -> dict[str, Any]:
        return {"user_id": user_id, "session_id": session, "service_name": "svc"}

    spans = [
        sp("u1-root", "tr-u1", 10_000, 11_000, is_root=True, **user("hash-1", "sess-1")),
        sp("u1-child", "tr-u1", 10_100, 10_200, parent_span_id="u1-root", **user(None)),
        sp("u2-root", "tr-u2", 20_000, 21_000, is_root=True, **user("raw-1")),
        sp("w-root", "tr-w", 30_000, 31_000, is_root=True, **user("hash-3")),
        sp("w-child", "tr-w", 30_100, 30_200, parent_span_id="w-root", **user("hash-1")),
        sp("v-root", "tr-v", 40_000, 41_000, is_root=True, **user("hash-2", "sess-2")),
        sp("v-child", "tr-v", 40_100, 40_200, parent_span_id="v-root", **user("hash-2", "sess-2")),
    ]
    logs = [
        log("l-u1", trace_id="tr-u1", timestamp=at(10_500), received_at=R0),
        log("l-v", trace_id="tr-v", timestamp=at(40_500), user_id="hash-2", received_at=R0),
        log("l-loose", trace_id=None, timestamp=at(50_000), user_id="hash-1", received_at=R0),
        log("l-sess", trace_id=None, timestamp=at(60_000), session_id="sess-2", received_at=R0),
    ]
    metrics = [
        metric("m-u1", name="work", trace_id="tr-u1", timestamp=at(10_000), received_at=R0),
        metric("m-v", name="work", trace_id="tr-v", timestamp=at(40_000), received_at=R0),
        metric("m-loose", name="work", user_id="hash-1", timestamp=at(50_000), received_at=R0),
    ]
    scores = [
        score("sc-u1", trace_id="tr-u1", timestamp=at(10_000), received_at=R0),
        score("sc-v", trace_id="tr-v", timestamp=at(40_000), received_at=R0),
        score("sc-loose", trace_id=None, user_id="hash-1", timestamp=at(50_000), received_at=R0),
    ]
    opinions = [
        feedback("fb-u1", trace_id="tr-u1", timestamp=at(10_000), received_at=R0),
        feedback("fb-v", trace_id="tr-v", timestamp=at(40_000), received_at=R0),
        feedback("fb-loose", trace_id=None, user_id="raw-1", timestamp=at(50_000), received_at=R0),
    ]
    notes = [
        aspect_note("n-u1", trace_id="tr-u1", received_at=R0),
        aspect_note("n-v", trace_id="tr-v", user_id="hash-1", received_at=R0),
    ]
    theirs = batch(
        Q,
        spans=[
            sp(
                "u1-root",
                "tr-u1",
                10_000,
                11_000,
                project=Q,
                is_root=True,
                **user("hash-1", "sess-1"),
            )
        ],
        logs=[log("l-loose", project=Q, trace_id=None, user_id="hash-1", received_at=R0)],
    )
    mine = batch(
        spans=spans,
        logs=logs,
        metrics=metrics,
        scores=scores,
        feedback=opinions,
        aspect_notes=notes,
    )
    return [mine, theirs]


def pending(opened: OpenedStore) -> bool:
    return not opened.store.capabilities().immediate_deletes


def test_erase_a_users_rows(opened: OpenedStore) -> None:
    store = opened.store
    store.write_batches(subject_rows())

    counts = store.erase_subject(P, ErasureSubject(user_ids=("hash-1", "raw-1")))

    assert counts == ErasureCounts(
        traces=3,  # tr-u1, tr-u2, tr-w
        spans=5,  # all their spans, w-root (hash-3) and u1-child (no user) included
        logs=2,  # l-u1 (its trace), l-loose (its user)
        metrics=2,  # m-u1, m-loose
        scores=2,  # sc-u1, sc-loose
        feedback=2,  # fb-u1, fb-loose (raw-1)
        aspect_notes=2,  # n-u1 (its trace), n-v (its user)
        sessions=0,
        deletes_pending=pending(opened),
    )
    settle(opened)

    # Another user's rows survive; so does the same user in another project.
    assert trace_ids(store) == ["tr-v"]
    assert span_ids(store) == ["v-child", "v-root"]
    assert log_ids(store) == ["l-sess", "l-v"]
    assert metric_ids(store) == ["m-v"]
    assert score_ids(store) == ["sc-v"]
    assert feedback_ids(store) == ["fb-v"]
    assert trace_ids(store, Q) == ["tr-u1"]
    assert log_ids(store, Q) == ["l-loose"]


def test_erase_a_session(opened: OpenedStore) -> None:
    store = opened.store
    store.write_batches(subject_rows())

    counts = store.erase_subject(P, ErasureSubject(session_id="sess-2"))

    assert counts == ErasureCounts(
        traces=1,  # tr-v
        spans=2,
        logs=2,  # l-v (its trace), l-sess (its session)
        metrics=1,
        scores=1,
        feedback=1,
        aspect_notes=1,  # n-v hangs off tr-v
        sessions=0,
        deletes_pending=pending(opened),
    )
    settle(opened)

    assert trace_ids(store) == ["tr-w", "tr-u2", "tr-u1"]
    assert log_ids(store) == ["l-loose", "l-u1"]
    assert metric_ids(store) == ["m-u1", "m-loose"]
    assert score_ids(store) == ["sc-loose", "sc-u1"]
    assert feedback_ids(store) == ["fb-loose", "fb-u1"]


def test_erase_a_user_and_a_session_together(opened: OpenedStore) -> None:
    store = opened.store
    store.write_batches(subject_rows())

    counts = store.erase_subject(
        P, ErasureSubject(user_ids=("hash-1", "raw-1"), session_id="sess-2")
    )

    # Everything of project p; each row counted once.
    assert counts == ErasureCounts(
        traces=4,
        spans=7,
        logs=4,
        metrics=3,
        scores=3,
        feedback=3,
        aspect_notes=2,
        sessions=0,
        deletes_pending=pending(opened),
    )
    settle(opened)
    assert (trace_ids(store), span_ids(store), log_ids(store), metric_ids(store)) == (
        [],
        [],
        [],
        [],
    )
    assert trace_ids(store, Q) == ["tr-u1"]


def test_erase_nobody(opened: OpenedStore) -> None:
    store = opened.store
    store.write_batches(subject_rows())

    counts = store.erase_subject(P, ErasureSubject(user_ids=("hash-9",)))

    assert counts == ErasureCounts(deletes_pending=counts.deletes_pending)
    assert len(trace_ids(store)) == 4


@pytest.fixture
def sessions(opened: OpenedStore, tmp_path: Path) -> Iterator[Any]:
    """The session read model on the trace store's database."""
    if opened.backend == "clickhouse":
        from mcpd.storage.clickhouse.sessions import ClickHouseSessionStore

        yield ClickHouseSessionStore(opened.store.executor)
        return
    from mcpd.storage.sql.sessions import SqlSessionStore

    assert opened.engine is not None
    index_dir = tmp_path / "search" if opened.backend == "sqlite" else None
    session_store = SqlSessionStore(opened.engine, index_dir=index_dir)
    try:
        yield session_store
    finally:
        session_store.close()


def test_erasure_removes_the_sessions_built_from_erased_traces(
    opened: OpenedStore, sessions: Any
) -> None:
    store = opened.store
    store.write_batches(subject_rows())
    # The sessions trace ingest builds: harness mcpd, key = the session id.
    for key in ("sess-1", "sess-2", "sess-9"):
        sessions.write_session(
            P, assemble(key, [[(USER, f"hello {key}")]], harness="mcpd", source="svc")
        )
    sessions.write_session(
        Q, assemble("sess-1", [[(USER, "hello")]], project=Q, harness="mcpd", source="svc")
    )

    # tr-u1 (erased) belongs to sess-1.
    by_user = store.erase_subject(P, ErasureSubject(user_ids=("hash-1", "raw-1")))
    assert by_user.sessions == 1
    # Named directly.
    by_session = store.erase_subject(P, ErasureSubject(session_id="sess-2"))
    assert by_session.sessions == 1
    settle(opened)

    assert sessions.session_of_key(P, "svc", "sess-1") is None
    assert sessions.session_of_key(P, "svc", "sess-2") is None
    assert sessions.session_of_key(P, "svc", "sess-9") is not None
    assert sessions.session_of_key(Q, "svc", "sess-1") is not None


# --- retention ---------------------------------------------------------------------------------

OLD = R0
NEW = R0 + 2 * 3_600 * S
CUTOFF = R0 + 3_600 * S


def aged(project: str = P) -> list[SignalBatch]:
    """tr-old and its rows arrived at OLD; tr-new and its rows at NEW."""

    def rows(received: int, name: str) -> dict[str, Any]:
        stamp: dict[str, Any] = {"project": project, "received_at": received}
        return {
            "spans": [
                sp(f"{name}-root", f"tr-{name}", 0, 1_000, is_root=True, **stamp),
                sp(f"{name}-1", f"tr-{name}", 100, 200, **stamp),
            ],
            "scores": [score(f"sc-{name}", trace_id=f"tr-{name}", **stamp)],
            "feedback": [feedback(f"fb-{name}", trace_id=f"tr-{name}", **stamp)],
            "aspect_notes": [aspect_note(f"n-{name}", trace_id=f"tr-{name}", **stamp)],
        }

    old = batch(
        project,
        received_at=OLD,
        **rows(OLD, "old"),
        held_spans=[sp("h", "tr-held", 0, 100, project=project, received_at=OLD)],
        logs=[log(i, project=project, received_at=OLD) for i in ("lo1", "lo2")],
        metrics=[metric("mo1", project=project, name="work", received_at=OLD)],
    )
    new = batch(
        project,
        received_at=NEW,
        **rows(NEW, "new"),
        logs=[log("ln1", project=project, received_at=NEW)],
        metrics=[metric(i, project=project, name="work", received_at=NEW) for i in ("mn1", "mn2")],
    )
    return [old, new]


def removed(counts: dict[str, int]) -> dict[str, int]:
    assert set(counts) <= set(STAT_SIGNALS)
    return {signal: n for signal, n in counts.items() if n}


def test_retention_removes_what_arrived_before_the_cutoff(opened: OpenedStore) -> None:
    store = opened.store
    store.write_batches([*aged(), *aged(Q)])

    counts = store.apply_retention(P, dict.fromkeys(STAT_SIGNALS, CUTOFF))

    assert set(counts) <= set(STAT_SIGNALS)
    # The `spans` figure is pinned by test_retention_counts_every_row_the_spans_window_covers.
    assert {signal: n for signal, n in removed(counts).items() if signal != "spans"} == {
        "logs": 2,
        "metrics": 1,
        "scores": 1,
        "feedback": 1,
    }
    settle(opened)

    assert trace_ids(store) == ["tr-new"]
    assert store.trace_records(P, "tr-old", logs=True, scores=True, feedback=True) is None
    assert span_ids(store) == ["new-1", "new-root"]
    assert [(h.project, h.trace_id) for h in store.held_traces()] == [(Q, "tr-held")]
    assert log_ids(store) == ["ln1"]
    assert metric_ids(store) == ["mn1", "mn2"]
    assert score_ids(store) == ["sc-new"]
    assert feedback_ids(store) == ["fb-new"]
    # Another project's old rows are its own retention's business.
    assert trace_ids(store, Q) == ["tr-old", "tr-new"]
    assert len(log_ids(store, Q)) == 3
    assert len(span_ids(store, Q)) == 4


def test_retention_counts_every_row_the_spans_window_covers(opened: OpenedStore) -> None:
    # "Returns rows removed ... per signal", and `spans` "also covers traces, held spans and
    # aspect notes": the rows removed under the spans window are tr-old's 2 spans, its trace
    # row, the held span and tr-old's aspect note.
    store = opened.store
    store.write_batches(aged())

    counts = store.apply_retention(P, {"spans": CUTOFF})

    assert removed(counts) == {"spans": 5}


def test_retention_cutoffs_are_per_signal(opened: OpenedStore) -> None:
    store = opened.store
    store.write_batches(aged())

    # Logs lose what is older than the cutoff; spans keep a cutoff before everything; metrics,
    # scores and feedback have none.
    counts = store.apply_retention(P, {"logs": CUTOFF, "spans": OLD})

    assert removed(counts) == {"logs": 2}
    settle(opened)
    assert log_ids(store) == ["ln1"]
    assert trace_ids(store) == ["tr-old", "tr-new"]
    assert len(span_ids(store)) == 4
    assert metric_ids(store) == ["mn1", "mn2", "mo1"]
    assert len(score_ids(store)) == 2
    # The cutoff itself is kept: only strictly before it goes.
    assert removed(store.apply_retention(P, {"metrics": OLD})) == {}
    assert removed(store.apply_retention(P, {"metrics": OLD + 1})) == {"metrics": 1}


def test_ingest_keys_recorded_before_the_cutoff_are_forgotten(opened: OpenedStore) -> None:
    store = opened.store

    def keyed(key: str, received_at: int, project: str = P) -> SignalBatch:
        rows = [sp(f"{key}-root", f"tr-{key}", 0, 100, project=project, received_at=received_at)]
        return SignalBatch(key_project=project, ingest_key=key, received_at=received_at, spans=rows)

    assert store.write_batches([keyed("k-old", OLD), keyed("k-new", NEW)]) == [True, True]
    assert store.write_batches([keyed("k-old", OLD, Q)]) == [True]

    assert store.expire_ingest_keys(P, CUTOFF) == 1
    settle(opened)
    # The forgotten key's batch is written again; the remembered one is still a replay; another
    # project's key with the same name is its own.
    assert store.write_batches([keyed("k-old", NEW)]) == [True]
    assert store.write_batches([keyed("k-new", NEW)]) == [False]
    assert store.write_batches([keyed("k-old", NEW, Q)]) == [False]
    # The cutoff itself is kept: only strictly before it goes.
    assert store.expire_ingest_keys(P, NEW) == 0
