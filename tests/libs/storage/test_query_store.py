"""The trace store's query surface, part 1: ListTraces and text search, on every backend.

THE behaviour suite of `mcpd.signals.queries` (with test_query_store_lists.py,
test_query_store_aggregates.py and test_query_store_lifecycle.py): the backends must not be
told apart by it, except where their declared capabilities differ (text_search words vs
substring, which each test reads from the store itself). The dataset is `query_data`; every
expected value below is worked out from its table by hand.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from mcpd.signals.queries import Page, TraceQuery, Window
from mcpd.signals.rows import TraceRow
from tests.libs.storage import query_data
from tests.libs.storage.query_data import (
    OTHER,
    P,
    at,
    page_through,
    search_mode,
)

ALL_NEWEST_FIRST = ["tr-e", "tr-d", "tr-c", "tr-b", "tr-a", "tr-f"]


# The dataset in a migrated store per backend, loaded once for this module's read-only tests.
store = query_data.loaded


def ids(page: Page[TraceRow]) -> list[str]:
    return [row["trace_id"] for row in page.rows]


def listed(store: Any, project: str = P, **fields: Any) -> list[str]:
    """The trace ids of one page (limit 50) of `TraceQuery(**fields)`; asserts it is the last."""
    page = store.list_traces(project, TraceQuery(**fields))
    assert not page.has_more
    assert {row["project"] for row in page.rows} <= {project}
    return ids(page)


# --- order and rows ----------------------------------------------------------------------------


def test_default_order_is_newest_first_with_trace_id_breaking_ties(store: Any) -> None:
    page = store.list_traces(P, TraceQuery())

    # tr-c and tr-d both start at 300 s: trace_id descending puts tr-d first.
    assert ids(page) == ALL_NEWEST_FIRST
    assert page.has_more is False


def test_rows_are_the_stored_trace_rows(store: Any) -> None:
    page = store.list_traces(P, TraceQuery())

    for row in page.rows:
        stored = store.trace_records(P, row["trace_id"], logs=False, scores=False, feedback=False)
        assert row == stored.trace
    by_id = {row["trace_id"]: row for row in page.rows}
    assert (by_id["tr-b"]["status"], by_id["tr-b"]["span_count"], by_id["tr-b"]["total_cost"]) == (
        "error",
        3,
        1.25,
    )
    assert by_id["tr-e"]["duration_ns"] is None


def test_ascending_start_time(store: Any) -> None:
    assert listed(store, descending=False) == ["tr-f", "tr-a", "tr-b", "tr-c", "tr-d", "tr-e"]


@pytest.mark.parametrize(
    ("column", "descending", "expected"),
    [
        # durations ms: f 10000, b 5250, d 2000, a 2000, c 1125; tr-e has none (last).
        ("duration_ns", True, ["tr-f", "tr-b", "tr-d", "tr-a", "tr-c", "tr-e"]),
        ("duration_ns", False, ["tr-c", "tr-a", "tr-d", "tr-b", "tr-f", "tr-e"]),
        # costs: f 2.0, b 1.25, d 0.5, a 0.5; tr-c and tr-e have none (last, trace_id order).
        ("total_cost", True, ["tr-f", "tr-b", "tr-d", "tr-a", "tr-e", "tr-c"]),
        ("total_cost", False, ["tr-a", "tr-d", "tr-b", "tr-f", "tr-c", "tr-e"]),
    ],
)
def test_order_columns_put_rows_without_a_value_last(
    store: Any, column: str, descending: bool, expected: list[str]
) -> None:
    assert listed(store, order_column=column, descending=descending) == expected


# --- filters, one at a time ----------------------------------------------------------------------


def test_window_is_half_open_on_start_time(store: Any) -> None:
    # [200 s, 300 s): tr-b starts at 200 s (in); tr-c and tr-d at 300 s (out).
    assert listed(store, window=Window(at(200_000), at(300_000))) == ["tr-b"]
    assert listed(store, window=Window(at(200_000), at(300_001))) == ["tr-d", "tr-c", "tr-b"]
    assert listed(store, window=Window(start=at(300_000))) == ["tr-e", "tr-d", "tr-c"]
    assert listed(store, window=Window(end=at(100_000))) == ["tr-f"]
    assert listed(store, window=Window(at(500_000), at(600_000))) == []


@pytest.mark.parametrize(
    ("fields", "expected"),
    [
        ({"statuses": ("error",)}, ["tr-d", "tr-b"]),
        ({"statuses": ("cancelled", "unset")}, ["tr-e", "tr-f"]),
        ({"statuses": ("ok",)}, ["tr-c", "tr-a"]),
        ({"kinds": ("workflow_run",)}, ["tr-c", "tr-f"]),
        ({"kinds": ("agent_run", "workflow_run")}, ALL_NEWEST_FIRST),
        # The root's kind, not any span's.
        ({"kinds": ("model_generation",)}, []),
        # The root's name, exactly: "agent turn" (tr-d) is not "agent".
        ({"name": "agent"}, ["tr-e", "tr-b", "tr-a"]),
        ({"name": "agent turn"}, ["tr-d"]),
        ({"name": "generate"}, []),
        # Carried by a non-root span (a-gen, d-gen).
        ({"model": "gpt-4o"}, ["tr-d", "tr-a"]),
        ({"model": "gpt-4o-mini"}, ["tr-f"]),
        ({"provider": "openai"}, ["tr-d", "tr-a", "tr-f"]),
        ({"provider": "anthropic"}, ["tr-b"]),
        # A held span's model does not count (tr-h is not stored).
        ({"model": "nope"}, []),
        # Every tag must be there.
        ({"tags": ("vip",)}, ["tr-b", "tr-a"]),
        ({"tags": ("eu",)}, ["tr-d", "tr-a"]),
        ({"tags": ("vip", "eu")}, ["tr-a"]),
        ({"tags": ("vip", "zz")}, []),
        ({"tags": ("50%off", "a_b")}, ["tr-e"]),
        ({"environment": "production"}, ["tr-e", "tr-d", "tr-a", "tr-f"]),
        ({"environment": "staging"}, ["tr-b"]),
        ({"service_name": "checkout"}, ["tr-d", "tr-c", "tr-a"]),
        ({"service_name": "held-svc"}, []),
        ({"session_id": "sess-1"}, ["tr-d", "tr-a"]),
        ({"user_id": "user-1"}, ["tr-c", "tr-a"]),
        ({"user_id": "user-2"}, ["tr-e", "tr-b"]),
    ],
)
def test_filters(store: Any, fields: dict[str, Any], expected: list[str]) -> None:
    assert listed(store, **fields) == expected


@pytest.mark.parametrize(
    ("fields", "expected"),
    [
        # Inclusive at both ends; tr-e (no duration) never matches a duration range.
        ({"min_duration_ns": 2_000 * 1_000_000}, ["tr-d", "tr-b", "tr-a", "tr-f"]),
        ({"max_duration_ns": 2_000 * 1_000_000}, ["tr-d", "tr-c", "tr-a"]),
        (
            {"min_duration_ns": 2_000 * 1_000_000, "max_duration_ns": 5_250 * 1_000_000},
            ["tr-d", "tr-b", "tr-a"],
        ),
        ({"min_duration_ns": 0}, ["tr-d", "tr-c", "tr-b", "tr-a", "tr-f"]),
        ({"min_duration_ns": 2_000 * 1_000_000 + 1, "max_duration_ns": 5_250 * 1_000_000 - 1}, []),
        # Inclusive; tr-c and tr-e (no cost) never match a cost range, even [0, inf).
        ({"min_cost": 0.5, "max_cost": 1.25}, ["tr-d", "tr-b", "tr-a"]),
        ({"min_cost": 0.0}, ["tr-d", "tr-b", "tr-a", "tr-f"]),
        ({"max_cost": 0.5}, ["tr-d", "tr-a"]),
        ({"min_cost": 1.25}, ["tr-b", "tr-f"]),
        ({"min_cost": 0.51, "max_cost": 1.24}, []),
    ],
)
def test_ranges(store: Any, fields: dict[str, Any], expected: list[str]) -> None:
    assert listed(store, **fields) == expected


@pytest.mark.parametrize(
    ("fields", "expected"),
    [
        # relevance: a 0.9, b 0.25, d 0.5; toxicity: d 0.125.
        ({"scorer_id": "relevance"}, ["tr-d", "tr-b", "tr-a"]),
        ({"scorer_id": "toxicity"}, ["tr-d"]),
        ({"scorer_id": "nope"}, []),
        ({"scorer_id": "relevance", "min_score": 0.5}, ["tr-d", "tr-a"]),
        ({"scorer_id": "relevance", "max_score": 0.5}, ["tr-d", "tr-b"]),
        ({"scorer_id": "relevance", "min_score": 0.25, "max_score": 0.25}, ["tr-b"]),
        ({"scorer_id": "relevance", "min_score": 0.91}, []),
        # A trace without the scorer does not match a bound on it.
        ({"scorer_id": "toxicity", "max_score": 1.0}, ["tr-d"]),
        ({"feedback_kind": "thumbs"}, ["tr-b", "tr-a"]),
        ({"feedback_kind": "thumbs", "feedback_value": "up"}, ["tr-a"]),
        ({"feedback_kind": "thumbs", "feedback_value": "down"}, ["tr-b"]),
        ({"feedback_kind": "thumbs", "feedback_value": "sideways"}, []),
        ({"feedback_kind": "rating", "feedback_value": "4"}, ["tr-d"]),
        ({"feedback_kind": "comment"}, ["tr-c"]),
        ({"feedback_kind": "tag"}, []),
    ],
)
def test_score_and_feedback_filters(
    store: Any, fields: dict[str, Any], expected: list[str]
) -> None:
    assert listed(store, **fields) == expected


@pytest.mark.parametrize(
    ("fields", "expected"),
    [
        ({"environment": "production", "model": "gpt-4o"}, ["tr-d", "tr-a"]),
        ({"environment": "production", "model": "gpt-4o", "statuses": ("ok",)}, ["tr-a"]),
        ({"tags": ("eu",), "min_cost": 0.5, "max_cost": 0.5}, ["tr-d", "tr-a"]),
        ({"tags": ("eu",), "scorer_id": "relevance", "min_score": 0.6}, ["tr-a"]),
        ({"service_name": "checkout", "window": Window(at(300_000), None)}, ["tr-d", "tr-c"]),
        ({"service_name": "checkout", "user_id": "user-1", "kinds": ("agent_run",)}, ["tr-a"]),
        ({"provider": "openai", "max_duration_ns": 2_000 * 1_000_000}, ["tr-d", "tr-a"]),
        ({"environment": "staging", "model": "gpt-4o"}, []),
    ],
)
def test_combined_filters(store: Any, fields: dict[str, Any], expected: list[str]) -> None:
    assert listed(store, **fields) == expected


def test_filters_keep_the_requested_order(store: Any) -> None:
    assert listed(store, provider="openai", order_column="total_cost", descending=False) == [
        "tr-a",
        "tr-d",
        "tr-f",
    ]
    assert listed(store, environment="production", order_column="duration_ns") == [
        "tr-f",
        "tr-d",
        "tr-a",
        "tr-e",
    ]


# --- paging -----------------------------------------------------------------------------------

ORDERS = [
    ("start_time", True),
    ("start_time", False),
    ("duration_ns", True),
    ("duration_ns", False),
    ("total_cost", True),
    ("total_cost", False),
]


@pytest.mark.parametrize(("column", "descending"), ORDERS)
@pytest.mark.parametrize("limit", [1, 2, 4])
def test_keyset_paging_gives_every_row_once(
    store: Any, column: str, descending: bool, limit: int
) -> None:
    # Ties in every order: start (tr-c/tr-d), duration (tr-a/tr-d), cost (tr-a/tr-d), and
    # rows without a value (tr-e; tr-c and tr-e for cost), so the cursor holds None too.
    query = TraceQuery(order_column=column, descending=descending)  # type: ignore[arg-type]
    everything = ids(store.list_traces(P, query))

    pages = page_through(
        lambda after, n: store.list_traces(P, replace(query, after=after, limit=n)),
        lambda row: (row[column], row["trace_id"]),
        limit,
    )

    assert [trace_id for page in pages for trace_id in ids(page)] == everything
    assert len(everything) == 6
    assert [len(page.rows) for page in pages] == [min(limit, 6 - i) for i in range(0, 6, limit)]
    assert [page.has_more for page in pages] == [True] * (len(pages) - 1) + [False]


def test_has_more_is_exact(store: Any) -> None:
    assert store.list_traces(P, TraceQuery(limit=5)).has_more is True
    assert store.list_traces(P, TraceQuery(limit=6)).has_more is False
    assert store.list_traces(P, TraceQuery(limit=7)).has_more is False
    first = store.list_traces(P, TraceQuery(limit=3))
    assert (ids(first), first.has_more) == (["tr-e", "tr-d", "tr-c"], True)
    # Exactly three remain after tr-c: a full last page without has_more.
    second = store.list_traces(P, TraceQuery(limit=3, after=(at(300_000), "tr-c")))
    assert (ids(second), second.has_more) == (["tr-b", "tr-a", "tr-f"], False)
    # Nothing after the last row.
    assert store.list_traces(P, TraceQuery(after=(at(50_000), "tr-f"))) == Page([], False)


def test_a_filtered_list_pages_too(store: Any) -> None:
    query = TraceQuery(environment="production", order_column="total_cost", limit=1)
    pages = page_through(
        lambda after, n: store.list_traces(P, replace(query, after=after, limit=n)),
        lambda row: (row["total_cost"], row["trace_id"]),
        1,
    )
    # production: f 2.0, d 0.5, a 0.5, e (no cost).
    assert [ids(page) for page in pages] == [["tr-f"], ["tr-d"], ["tr-a"], ["tr-e"]]


def test_cost_cursor_with_none_value(store: Any) -> None:
    # After the first row without a cost (tr-e, descending): only tr-c, also without one.
    page = store.list_traces(P, TraceQuery(order_column="total_cost", after=(None, "tr-e")))
    assert (ids(page), page.has_more) == (["tr-c"], False)
    ascending = TraceQuery(order_column="total_cost", descending=False, after=(None, "tr-c"))
    assert ids(store.list_traces(P, ascending)) == ["tr-e"]
    # After the last costed row ascending: the rows without a cost.
    ascending = TraceQuery(order_column="total_cost", descending=False, after=(2.0, "tr-f"))
    assert ids(store.list_traces(P, ascending)) == ["tr-c", "tr-e"]


# --- tenancy -----------------------------------------------------------------------------------


def test_another_projects_traces_never_appear(store: Any) -> None:
    # `other` holds the same six traces (same ids) and tr-z, which matches nearly everything.
    assert listed(store) == ALL_NEWEST_FIRST
    assert listed(store, tags=("vip", "eu")) == ["tr-a"]
    assert listed(store, service_name="zeta") == []
    assert listed(store, OTHER) == ["tr-e", "tr-z", "tr-d", "tr-c", "tr-b", "tr-a", "tr-f"]
    assert listed(store, OTHER, tags=("vip", "eu")) == ["tr-z", "tr-a"]
    assert listed(store, "nobody") == []


# --- text search (q) ---------------------------------------------------------------------------

# q -> traces found, per text_search mode. Span texts (name, then string values of input/output):
#   a-root "agent" / "I want a refund please" / "Done"; a-gen "generate" / "Your refund is on
#   its way"; b-gen "answer" / "refunds are processed in 5 days"; b-tool "lookup" / "use
#   snake_case names"; c-root "workflow" / "checkout flow started"; c-step "café order";
#   d-root "agent turn" / "user" "hello"; d-gen "generate" / "discount 100% off"; e-root
#   "agent" / "1000 items"; e-x "snakeXcase names"; held h-root "refund held".
SEARCHES: list[tuple[str, list[str], list[str]]] = [
    # (q, words, substring)
    # A whole word: "refund" is not "refunds" (words); substring finds both.
    ("refund", ["tr-a"], ["tr-b", "tr-a"]),
    ("REFUND", ["tr-a"], ["tr-b", "tr-a"]),
    # Every word, in any order, in ONE span (name and payload of the same span count).
    ("refund please", ["tr-a"], ["tr-a"]),
    ("please refund", ["tr-a"], []),
    ("agent refund", ["tr-a"], []),
    ("refund tomorrow", [], []),
    # Words spread over two spans of a trace (a-gen "generate", a-root "please") do not match.
    ("generate please", [], []),
    # Non-ASCII case folding, found through a non-root span (c-step).
    ("CAFÉ", ["tr-c"], ["tr-c"]),
    ("café", ["tr-c"], ["tr-c"]),
    # JSON keys are not text (d-root's input is {"role": "user", "content": "hello"}).
    ("role", [], []),
    ("content", [], []),
    ("hello", ["tr-d"], ["tr-d"]),
    # Part of a word: substring only.
    ("heck", [], ["tr-c"]),
    ("efun", [], ["tr-b", "tr-a"]),
    # LIKE wildcards are literal: % is not "anything", _ is not "any one character".
    ("100%", ["tr-d"], ["tr-d"]),
    ("snake_case", ["tr-b"], ["tr-b"]),
    ("ref%", [], []),
    ("re_und", [], []),
    ("1%", [], []),
    ("e_c", [], ["tr-b"]),
    # A held span is not searchable.
    ("held", [], []),
]


@pytest.mark.parametrize(("q", "words", "substring"), SEARCHES)
def test_text_search_on_traces(store: Any, q: str, words: list[str], substring: list[str]) -> None:
    expected = words if search_mode(store) == "words" else substring
    assert listed(store, q=q) == expected


def test_text_search_finds_values_in_another_project_only_there(store: Any) -> None:
    # tr-z's input holds the word "role" as a value: found in `other`, not in `p`.
    assert listed(store, OTHER, q="role") == ["tr-z"]
    assert listed(store, q="role") == []


def test_text_search_combines_with_filters_and_order(store: Any) -> None:
    mode = search_mode(store)
    found = listed(store, q="refund", order_column="total_cost", descending=False)
    assert found == (["tr-a"] if mode == "words" else ["tr-a", "tr-b"])
    assert listed(store, q="refund", environment="staging") == ([] if mode == "words" else ["tr-b"])
    assert listed(store, q="generate", statuses=("error",)) == ["tr-d"]


def test_text_search_pages(store: Any) -> None:
    pages = page_through(
        lambda after, n: store.list_traces(P, TraceQuery(q="generate", after=after, limit=n)),
        lambda row: (row["start_time"], row["trace_id"]),
        1,
    )
    assert [ids(page) for page in pages] == [["tr-d"], ["tr-a"]]
