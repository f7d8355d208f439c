"""The trace store's query surface, part 2: the span, log, score and feedback lists, metric
points and discovery, on every backend (the dataset is `query_data`)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from mcpd.signals.queries import (
    LOG_LEVELS,
    FeedbackQuery,
    LogQuery,
    Page,
    ScoreQuery,
    SpanQuery,
    Window,
)
from tests.libs.storage import query_data
from tests.libs.storage.query_data import (
    OTHER,
    R0,
    P,
    at,
    main_feedback,
    main_logs,
    main_metrics,
    main_scores,
    main_spans,
    page_through,
    search_mode,
)

# The dataset in a migrated store per backend, loaded once for this module's read-only tests.
store = query_data.loaded


def keys(page: Page[Any], name: str) -> list[str]:
    return [row[name] for row in page.rows]


# --- spans -------------------------------------------------------------------------------------

# start_time, trace_id, span_id, all descending. e-x/e-root tie on start and trace; d-root and
# c-root tie on start (300 s). The held span h-root (150 s) is never listed.
ALL_SPANS = [
    "e-x",
    "e-root",
    "d-gen",
    "c-step",
    "d-root",
    "c-root",
    "b-tool",
    "b-gen",
    "b-root",
    "a-gen",
    "a-root",
    "f-root",
]


def spans(store: Any, project: str = P, **fields: Any) -> list[str]:
    page = store.list_spans(project, SpanQuery(**fields))
    assert not page.has_more
    assert {row["project"] for row in page.rows} <= {project}
    return keys(page, "span_id")


def test_spans_newest_first_held_spans_excluded(store: Any) -> None:
    page = store.list_spans(P, SpanQuery())

    assert keys(page, "span_id") == ALL_SPANS
    assert page.has_more is False
    written = {row["span_id"]: row for row in main_spans()}
    assert page.rows == [written[span_id] for span_id in ALL_SPANS]
    assert spans(store, trace_id="tr-h") == []


@pytest.mark.parametrize(
    ("fields", "expected"),
    [
        ({"trace_id": "tr-b"}, ["b-tool", "b-gen", "b-root"]),
        ({"trace_id": "nope"}, []),
        ({"kinds": ("model_generation",)}, ["d-gen", "b-gen", "a-gen"]),
        ({"kinds": ("tool_call", "workflow_step")}, ["c-step", "b-tool"]),
        ({"statuses": ("error",)}, ["d-gen", "b-tool"]),
        ({"statuses": ("unset", "cancelled")}, ["e-root", "f-root"]),
        # The span's name, exactly ("agent turn" is not "agent").
        ({"name": "agent"}, ["e-root", "b-root", "a-root"]),
        ({"name": "generate"}, ["d-gen", "a-gen"]),
        ({"model": "gpt-4o"}, ["d-gen", "a-gen"]),
        ({"model": "claude-3"}, ["b-gen"]),
        # Half-open on start_time.
        ({"window": Window(at(200_000), at(300_000))}, ["b-tool", "b-gen", "b-root"]),
        ({"window": Window(at(300_000), at(300_200))}, ["d-root", "c-root"]),
        ({"window": Window(start=at(300_500))}, ["e-x", "e-root", "d-gen"]),
        ({"window": Window(end=at(100_000))}, ["f-root"]),
        ({"trace_id": "tr-d", "kinds": ("model_generation",)}, ["d-gen"]),
        ({"model": "gpt-4o", "statuses": ("ok",)}, ["a-gen"]),
        ({"trace_id": "tr-a", "window": Window(at(100_500), None)}, ["a-gen"]),
    ],
)
def test_span_filters(store: Any, fields: dict[str, Any], expected: list[str]) -> None:
    assert spans(store, **fields) == expected


@pytest.mark.parametrize(
    ("q", "words", "substring"),
    [
        ("refund", ["a-gen", "a-root"], ["b-gen", "a-gen", "a-root"]),
        ("agent refund", ["a-root"], []),
        ("CAFÉ", ["c-step"], ["c-step"]),
        ("role", [], []),
        ("heck", [], ["c-root"]),
        ("snake_case", ["b-tool"], ["b-tool"]),
        ("e_c", [], ["b-tool"]),
        ("held", [], []),
        ("generate", ["d-gen", "a-gen"], ["d-gen", "a-gen"]),
    ],
)
def test_span_text_search(store: Any, q: str, words: list[str], substring: list[str]) -> None:
    expected = words if search_mode(store) == "words" else substring
    assert spans(store, q=q) == expected


@pytest.mark.parametrize("limit", [1, 2, 5])
def test_span_paging(store: Any, limit: int) -> None:
    pages = page_through(
        lambda after, n: store.list_spans(P, SpanQuery(after=after, limit=n)),
        lambda row: (row["start_time"], row["trace_id"], row["span_id"]),
        limit,
    )

    assert [span_id for page in pages for span_id in keys(page, "span_id")] == ALL_SPANS
    assert [page.has_more for page in pages][-1] is False
    assert all(len(page.rows) == limit for page in pages[:-1])


def test_span_paging_with_a_filter(store: Any) -> None:
    query = SpanQuery(kinds=("model_generation", "agent_run"), limit=2)
    first = store.list_spans(P, query)
    assert (keys(first, "span_id"), first.has_more) == (["e-root", "d-gen"], True)
    last = first.rows[-1]
    second = store.list_spans(
        P, replace(query, after=(last["start_time"], last["trace_id"], last["span_id"]))
    )
    assert (keys(second, "span_id"), second.has_more) == (["d-root", "b-gen"], True)
    third = store.list_spans(P, replace(query, after=(at(201_000), "tr-b", "b-gen")))
    assert (keys(third, "span_id"), third.has_more) == (["b-root", "a-gen"], True)
    fourth = store.list_spans(P, replace(query, after=(at(100_500), "tr-a", "a-gen")))
    assert (keys(fourth, "span_id"), fourth.has_more) == (["a-root"], False)


# --- logs --------------------------------------------------------------------------------------

# timestamp, log_id, both descending; l7 and l8 share a timestamp.
ALL_LOGS = ["l8", "l7", "l6", "l5", "l4", "l3", "l2", "l1"]


def logs(store: Any, project: str = P, **fields: Any) -> list[str]:
    page = store.list_logs(project, LogQuery(**fields))
    assert not page.has_more
    assert {row["project"] for row in page.rows} <= {project}
    return keys(page, "log_id")


def test_logs_newest_first(store: Any) -> None:
    page = store.list_logs(P, LogQuery())

    assert keys(page, "log_id") == ALL_LOGS
    written = {row["log_id"]: row for row in main_logs()}
    assert page.rows == [written[log_id] for log_id in ALL_LOGS]


@pytest.mark.parametrize(
    ("level", "expected"),
    [
        # l6 trace, l2 debug, l1/l7/l8 info, l4 warn, l3 error, l5 fatal.
        ("trace", ALL_LOGS),
        ("debug", ["l8", "l7", "l5", "l4", "l3", "l2", "l1"]),
        ("info", ["l8", "l7", "l5", "l4", "l3", "l1"]),
        ("warn", ["l5", "l4", "l3"]),
        ("error", ["l5", "l3"]),
        ("fatal", ["l5"]),
    ],
)
def test_min_level_keeps_that_level_and_above(store: Any, level: str, expected: list[str]) -> None:
    assert level in LOG_LEVELS
    assert logs(store, min_level=level) == expected


@pytest.mark.parametrize(
    ("fields", "expected"),
    [
        ({"trace_id": "tr-b"}, ["l4", "l3"]),
        ({"span_id": "a-gen"}, ["l2"]),
        ({"trace_id": "tr-a", "min_level": "info"}, ["l1"]),
        ({"window": Window(at(203_500), at(260_000))}, ["l5", "l4", "l3"]),
        ({"window": Window(at(300_100), None)}, ["l8", "l7"]),
        ({"window": Window(None, at(100_100))}, []),
        ({"trace_id": "tr-d", "window": Window(at(300_100), at(300_101))}, ["l8", "l7"]),
    ],
)
def test_log_filters(store: Any, fields: dict[str, Any], expected: list[str]) -> None:
    assert logs(store, **fields) == expected


@pytest.mark.parametrize(
    ("q", "words", "substring"),
    [
        ("refund", ["l1"], ["l7", "l1"]),
        ("CAFÉ", ["l8"], ["l8"]),
        ("lookup", ["l4", "l3"], ["l4", "l3"]),
        ("parcel lookup", ["l3"], []),
        ("ook", [], ["l4", "l3"]),
        ("l%", [], []),
    ],
)
def test_log_text_search(store: Any, q: str, words: list[str], substring: list[str]) -> None:
    expected = words if search_mode(store) == "words" else substring
    assert logs(store, q=q) == expected


@pytest.mark.parametrize("limit", [1, 3])
def test_log_paging(store: Any, limit: int) -> None:
    pages = page_through(
        lambda after, n: store.list_logs(P, LogQuery(after=after, limit=n)),
        lambda row: (row["timestamp"], row["log_id"]),
        limit,
    )

    assert [log_id for page in pages for log_id in keys(page, "log_id")] == ALL_LOGS
    assert [len(page.rows) for page in pages] == [min(limit, 8 - i) for i in range(0, 8, limit)]


def test_log_paging_with_min_level(store: Any) -> None:
    first = store.list_logs(P, LogQuery(min_level="warn", limit=2))
    assert (keys(first, "log_id"), first.has_more) == (["l5", "l4"], True)
    second = store.list_logs(P, LogQuery(min_level="warn", limit=2, after=(at(204_000), "l4")))
    assert (keys(second, "log_id"), second.has_more) == (["l3"], False)


# --- scores and feedback -----------------------------------------------------------------------

ALL_SCORES = ["sc-d2", "sc-d1", "sc-b1", "sc-a1"]
ALL_FEEDBACK = ["fb-d1", "fb-c1", "fb-b1", "fb-a1"]


@pytest.mark.parametrize(
    ("fields", "expected"),
    [
        ({}, ALL_SCORES),
        ({"trace_id": "tr-d"}, ["sc-d2", "sc-d1"]),
        ({"scorer_id": "relevance"}, ["sc-d1", "sc-b1", "sc-a1"]),
        ({"source": "offline"}, ["sc-b1"]),
        ({"source": "live", "scorer_id": "relevance"}, ["sc-d1", "sc-a1"]),
        ({"scorer_id": "nope"}, []),
    ],
)
def test_scores(store: Any, fields: dict[str, Any], expected: list[str]) -> None:
    page = store.list_scores(P, ScoreQuery(**fields))

    assert (keys(page, "score_id"), page.has_more) == (expected, False)
    written = {row["score_id"]: row for row in main_scores()}
    assert page.rows == [written[score_id] for score_id in expected]


def test_score_paging(store: Any) -> None:
    pages = page_through(
        lambda after, n: store.list_scores(P, ScoreQuery(after=after, limit=n)),
        lambda row: (row["timestamp"], row["score_id"]),
        1,
    )
    assert [keys(page, "score_id") for page in pages] == [[s] for s in ALL_SCORES]
    assert [page.has_more for page in pages] == [True, True, True, False]


@pytest.mark.parametrize(
    ("fields", "expected"),
    [
        ({}, ALL_FEEDBACK),
        ({"kind": "thumbs"}, ["fb-b1", "fb-a1"]),
        ({"kind": "rating"}, ["fb-d1"]),
        ({"trace_id": "tr-c"}, ["fb-c1"]),
        ({"trace_id": "tr-c", "kind": "thumbs"}, []),
    ],
)
def test_feedback(store: Any, fields: dict[str, Any], expected: list[str]) -> None:
    page = store.list_feedback(P, FeedbackQuery(**fields))

    assert (keys(page, "feedback_id"), page.has_more) == (expected, False)
    written = {row["feedback_id"]: row for row in main_feedback()}
    assert page.rows == [written[feedback_id] for feedback_id in expected]


def test_feedback_paging(store: Any) -> None:
    pages = page_through(
        lambda after, n: store.list_feedback(P, FeedbackQuery(after=after, limit=n)),
        lambda row: (row["timestamp"], row["feedback_id"]),
        3,
    )
    assert [keys(page, "feedback_id") for page in pages] == [ALL_FEEDBACK[:3], ALL_FEEDBACK[3:]]
    assert [page.has_more for page in pages] == [True, False]


# --- metric points -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "window", "limit", "expected"),
    [
        # Oldest first, metric_id breaking the tie at 20 s.
        ("latency", Window(), 100, ["m-10", "m-20a", "m-20b", "m-30", "m-40"]),
        ("latency", Window(at(20_000), at(40_000)), 100, ["m-20a", "m-20b", "m-30"]),
        ("latency", Window(start=at(20_001)), 100, ["m-30", "m-40"]),
        # The limit keeps the OLDEST points.
        ("latency", Window(), 2, ["m-10", "m-20a"]),
        ("latency", Window(at(20_000), at(40_000)), 2, ["m-20a", "m-20b"]),
        ("queue.depth", Window(), 100, ["q-15"]),
        ("nope", Window(), 100, []),
    ],
)
def test_metric_points(
    store: Any, name: str, window: Window, limit: int, expected: list[str]
) -> None:
    points = store.metric_points(P, name, window, limit=limit)

    written = {row["metric_id"]: row for row in main_metrics()}
    assert [row["metric_id"] for row in points] == expected
    assert points == [written[metric_id] for metric_id in expected]


# --- discovery ---------------------------------------------------------------------------------

TAGS = ["50%off", "50x", "Check", "a_b", "abc", "eu", "vip"]


@pytest.mark.parametrize(
    ("facet", "key", "expected"),
    [
        # Held spans' values (held-svc, held-env, held-tag) and project other's are absent.
        ("service_name", "", ["checkout", "search", "worker"]),
        ("environment", "", ["production", "staging"]),
        ("tag", "", TAGS),
        ("entity_kind", "", ["agent", "tool"]),
        ("entity_name", "", ["lookup", "support"]),
        ("metric_name", "", ["latency", "queue.depth"]),
        ("metric_label_key", "", ["code", "route"]),
        ("metric_label_value", "route", ["/cart", "/pay"]),
        ("metric_label_value", "code", ["200"]),
        ("metric_label_value", "nope", []),
    ],
)
def test_discover_values_ordered_by_value(
    store: Any, facet: str, key: str, expected: list[str]
) -> None:
    found = store.discover(P, facet, key, None, 100)

    assert found == [(value, R0) for value in expected]
    assert all(type(seen) is int for _, seen in found)


@pytest.mark.parametrize(
    ("prefix", "limit", "expected"),
    [
        ("50", 100, ["50%off", "50x"]),
        # '%' and '_' are literal, not LIKE wildcards.
        ("50%", 100, ["50%off"]),
        ("a_", 100, ["a_b"]),
        ("%", 100, []),
        ("_", 100, []),
        # Case-sensitive.
        ("Check", 100, ["Check"]),
        ("check", 100, []),
        ("C", 100, ["Check"]),
        ("a", 100, ["a_b", "abc"]),
        ("vip", 100, ["vip"]),
        ("vipx", 100, []),
        # The limit keeps the first values in value order.
        (None, 3, TAGS[:3]),
        ("a", 1, ["a_b"]),
    ],
)
def test_discover_prefix_and_limit(
    store: Any, prefix: str | None, limit: int, expected: list[str]
) -> None:
    assert store.discover(P, "tag", "", prefix, limit) == [(value, R0) for value in expected]


# --- tenancy -----------------------------------------------------------------------------------


def test_another_projects_rows_never_appear(store: Any) -> None:
    # `other` holds a copy of every row (same ids) plus tr-z: a leak shows as a duplicate.
    assert spans(store) == ALL_SPANS
    assert spans(store, trace_id="tr-z") == []
    assert spans(store, OTHER, trace_id="tr-z") == ["z-root"]
    assert logs(store) == ALL_LOGS
    assert keys(store.list_scores(P, ScoreQuery()), "score_id") == ALL_SCORES
    assert keys(store.list_feedback(P, FeedbackQuery()), "feedback_id") == ALL_FEEDBACK
    assert len(store.metric_points(P, "latency", Window(), limit=100)) == 5
    assert [v for v, _ in store.discover(OTHER, "service_name", "", "z", 10)] == ["zeta"]
    assert store.discover(P, "service_name", "", "z", 10) == []
    assert spans(store, "nobody") == []
    assert logs(store, "nobody") == []
    assert store.metric_points("nobody", "latency", Window(), limit=100) == []
    assert store.discover("nobody", "tag", "", None, 10) == []
