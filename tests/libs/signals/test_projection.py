"""The trace projection, rule by rule (see `mcpd.signals.projection`)."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from mcpd.signals.batch import HeldTrace
from mcpd.signals.projection import (
    PROJECTION_SPAN_COLUMNS,
    feedback_value_text,
    order_spans,
    project_trace,
    summarize_held,
)
from mcpd.signals.rows import FeedbackRow, ScoreRow, SpanRow, TraceRow
from tests.libs.signals.samples import MS, T0, feedback, score, span


def project(
    *spans: SpanRow,
    scores: Sequence[ScoreRow] = (),
    feedback_rows: Sequence[FeedbackRow] = (),
) -> TraceRow | None:
    return project_trace("p", "t1", list(spans), list(scores), list(feedback_rows))


def test_no_spans_no_trace() -> None:
    assert project_trace("p", "t1", [], [score("x")], []) is None


def test_root_gives_name_kind_correlation_and_tags() -> None:
    root = span(
        "r",
        is_root=True,
        name="agent",
        kind="agent_run",
        start_time=T0 + 5,
        tags=["vip"],
        service_name="checkout",
        environment="prod",
    )
    child = span("c", parent_span_id="r", start_time=T0, name="early", service_name="other")

    row = project(child, root)

    assert row is not None
    assert (row["root_span_id"], row["name"], row["kind"]) == ("r", "agent", "agent_run")
    assert (row["tags"], row["service_name"], row["environment"]) == (["vip"], "checkout", "prod")
    assert (row["project"], row["trace_id"]) == ("p", "t1")


def test_several_roots_earliest_then_smallest_id() -> None:
    late = span("a", is_root=True, start_time=T0 + 2)
    tie_b = span("c", is_root=True, start_time=T0 + 1)
    tie_a = span("b", is_root=True, start_time=T0 + 1)
    row = project(late, tie_b, tie_a)
    assert row is not None
    assert row["root_span_id"] == "b"


def test_without_a_root_the_earliest_span_names_the_trace() -> None:
    first = span("b", start_time=T0, name="first", kind="tool_call", tags=["x"], release="r1")
    tie = span("c", start_time=T0, name="tie")
    later = span("a", start_time=T0 + 1, name="later")

    row = project(later, tie, first)

    assert row is not None
    assert row["root_span_id"] is None
    assert (row["name"], row["kind"], row["tags"], row["release"]) == (
        "first",
        "tool_call",
        ["x"],
        "r1",
    )
    assert row["status"] == "unset"
    assert row["is_complete"] is False


def test_the_session_id_is_the_roots_else_the_earliest_span_that_carries_one() -> None:
    root = span("r", is_root=True, start_time=T0 + 5, session_id=None, user_id=None)
    late = span("l", parent_span_id="r", start_time=T0 + 9, session_id="s-late")
    early = span("e", parent_span_id="r", start_time=T0 + 7, session_id="s-early", user_id="u")

    row = project(late, root, early)
    assert row is not None
    # Only the session id falls back: the rest of the correlation stays the root's.
    assert (row["session_id"], row["user_id"]) == ("s-early", None)
    with_own = project(late, {**root, "session_id": "s-root"}, early)
    assert with_own is not None
    assert with_own["session_id"] == "s-root"
    alone = project(span("x", session_id=None))
    assert alone is not None
    assert alone["session_id"] is None


def test_status_is_error_when_any_span_failed_else_the_roots() -> None:
    root = span("r", is_root=True, status="cancelled")
    assert (project(root) or {})["status"] == "cancelled"
    row = project(root, span("c", status="error"), span("d", status="error"))
    assert row is not None
    assert (row["status"], row["error_count"]) == ("error", 2)


def test_times_and_completeness() -> None:
    root = span("r", is_root=True, start_time=T0, end_time=T0 + 100 * MS)
    child = span("c", parent_span_id="r", start_time=T0 + MS, end_time=T0 + 120 * MS)
    event = span("e", is_event=True, start_time=T0 + 150 * MS, end_time=None)

    row = project(root, child, event)

    assert row is not None
    assert (row["start_time"], row["end_time"], row["duration_ns"]) == (
        T0,
        T0 + 150 * MS,
        150 * MS,
    )
    assert row["is_complete"] is True
    assert row["span_count"] == 3


def test_an_open_span_leaves_the_end_unknown() -> None:
    root = span("r", is_root=True, end_time=T0 + 100 * MS)
    running = span("c", parent_span_id="r", end_time=None)

    row = project(root, running)

    assert row is not None
    assert (row["end_time"], row["duration_ns"], row["is_complete"]) == (None, None, False)


def test_an_open_root_is_not_complete() -> None:
    row = project(span("r", is_root=True, end_time=None))
    assert row is not None
    assert (row["end_time"], row["is_complete"]) == (None, False)


def test_a_resent_span_replaces_the_earlier_one() -> None:
    started = span("r", is_root=True, end_time=None, status="unset", received_at=T0 + 1)
    ended = span("r", is_root=True, end_time=T0 + 7 * MS, status="ok", received_at=T0 + 9)

    row = project(started, ended)

    assert row is not None
    assert (row["span_count"], row["status"], row["end_time"], row["is_complete"]) == (
        1,
        "ok",
        T0 + 7 * MS,
        True,
    )
    assert row["received_at"] == T0 + 9


def test_received_at_is_the_earliest_arrival() -> None:
    row = project(span("a", received_at=T0 + 30), span("b", received_at=T0 + 20))
    assert row is not None
    assert row["received_at"] == T0 + 20


def usage(
    span_id: str, parent: str | None, kind: str, tokens: int | None, **more: object
) -> SpanRow:
    extra: dict[str, object] = {}
    if tokens is not None:
        extra = {
            "input_tokens": tokens,
            "output_tokens": 1,
            "total_tokens": tokens + 1,
            "usage_details": {"input": {"cache_read": tokens // 2}},
        }
    return span(span_id, parent_span_id=parent, kind=kind, **extra, **more)


def test_usage_is_not_counted_twice_up_the_tree() -> None:
    # A generation reporting the total of its two inferences, which report their own.
    spans = [
        span("root", is_root=True, kind="agent_run"),
        usage("gen", "root", "model_generation", 300),
        usage("step", "gen", "model_step", None),
        usage("inf1", "step", "model_inference", 100),
        usage("inf2", "step", "model_inference", 200),
        # A generation without inference children: its own report counts.
        usage("gen2", "root", "model_generation", 50),
    ]

    row = project(*spans)

    assert row is not None
    assert (row["input_tokens"], row["output_tokens"], row["total_tokens"]) == (350, 3, 353)
    assert row["usage_details"] == {"input": {"cache_read": 175}}
    # Model calls are the leaves of the model kinds: inf1, inf2 and gen2.
    assert row["model_count"] == 3


def test_usage_details_sum_field_by_field() -> None:
    a = span("a", usage_details={"input": {"text": 3}, "output": {"reasoning": 2}})
    b = span("b", usage_details={"input": {"text": 4, "audio": 1}}, input_tokens=9)
    row = project(a, b)
    assert row is not None
    assert row["usage_details"] == {"input": {"text": 7, "audio": 1}, "output": {"reasoning": 2}}
    assert (row["input_tokens"], row["output_tokens"], row["total_tokens"]) == (9, None, None)


def test_no_usage_leaves_the_totals_none() -> None:
    row = project(span("a"))
    assert row is not None
    assert (row["input_tokens"], row["usage_details"], row["total_cost"]) == (None, None, None)
    assert (row["cost_currency"], row["cost_price_book"], row["cost_is_estimated"]) == (
        None,
        None,
        None,
    )


def cost(span_id: str, parent: str | None, total: float, **more: object) -> SpanRow:
    fields: dict[str, object] = {
        "cost_currency": "USD",
        "input_cost": total / 4,
        "output_cost": total * 3 / 4,
        "total_cost": total,
        "cost_price_book": "pb1",
        "cost_is_estimated": False,
    }
    fields.update(more)
    return span(span_id, parent_span_id=parent, **fields)


def test_cost_is_summed_over_the_most_specific_reports() -> None:
    spans = [
        cost("gen", None, 1.0, start_time=T0),
        cost("inf1", "gen", 0.25, start_time=T0 + 1),
        cost("inf2", "gen", 0.5, start_time=T0 + 2, cost_is_estimated=True),
        cost("other", None, 2.0, start_time=T0 + 3),
    ]

    row = project(*spans)

    assert row is not None
    assert row["total_cost"] == pytest.approx(2.75)
    assert row["input_cost"] == pytest.approx(2.75 / 4)
    assert row["output_cost"] == pytest.approx(2.75 * 3 / 4)
    assert (row["cost_currency"], row["cost_price_book"], row["cost_is_estimated"]) == (
        "USD",
        "pb1",
        True,
    )


def test_mixed_price_books_and_currencies() -> None:
    spans = [
        cost("a", None, 1.0, start_time=T0, cost_currency="EUR"),
        cost("b", None, 1.0, start_time=T0 + 1, cost_price_book="pb2"),
    ]
    row = project(*spans)
    assert row is not None
    # The first currency in start order is kept; the price book is shared by none.
    assert (row["cost_currency"], row["cost_price_book"], row["cost_is_estimated"]) == (
        "EUR",
        None,
        False,
    )
    assert row["total_cost"] == 2.0


def test_tool_and_model_counts() -> None:
    spans = [
        span("r", is_root=True, kind="agent_run"),
        span("t1", parent_span_id="r", kind="tool_call"),
        span("t2", parent_span_id="r", kind="client_tool_call"),
        span("t3", parent_span_id="r", kind="provider_tool_call"),
        span("t4", parent_span_id="r", kind="mcp_tool_call"),
        span("g", parent_span_id="r", kind="model_generation"),
        span("s1", parent_span_id="g", kind="model_step"),
        span("s2", parent_span_id="g", kind="model_step"),
        span("i2", parent_span_id="s2", kind="model_inference"),
        span("lone", parent_span_id="r", kind="model_inference"),
    ]
    row = project(*spans)
    assert row is not None
    # Leaves of the model kinds: s1, i2 and lone.
    assert (row["tool_count"], row["model_count"]) == (4, 3)


def test_a_parent_cycle_does_not_hang_or_double_count() -> None:
    a = span("a", parent_span_id="b", kind="model_generation", input_tokens=5)
    b = span("b", parent_span_id="a", kind="model_step", input_tokens=7)
    row = project(a, b)
    assert row is not None
    assert row["span_count"] == 2
    assert row["input_tokens"] in (5, 7)  # the cycle is broken at one of the two
    assert row["model_count"] == 1


def test_score_summary_is_the_mean_per_scorer() -> None:
    scores = [
        score("s1", scorer_id="relevance", value=1.0),
        score("s2", scorer_id="relevance", value=0.5),
        score("s3", scorer_id="toxicity", value=0.0),
        score("s2", scorer_id="relevance", value=0.0),  # re-sent: replaces the 0.5
    ]
    row = project(span("a"), scores=scores)
    assert row is not None
    assert row["score_summary"] == {"relevance": 0.5, "toxicity": 0.0}
    assert (project(span("a")) or {})["score_summary"] is None


def test_feedback_summary_counts_values_and_notes() -> None:
    rows = [
        feedback("f1", kind="thumbs", value="up"),
        feedback("f2", kind="thumbs", value={"value": "up"}),
        feedback("f3", kind="thumbs", value="down"),
        feedback("f4", kind="rating", value=4),
        feedback("f5", kind="rating", value=4.0),
        feedback("f6", kind="tag", value="billing"),
        feedback("f7", kind="correction", value="The answer is 42."),
        feedback("f8", kind="comment", value="nice"),
        feedback("f9", kind="comment", value="thanks"),
    ]
    row = project(span("a"), feedback_rows=rows)
    assert row is not None
    assert row["feedback_summary"] == {
        "comment": {"count": 2},
        "correction": {"count": 1},
        "rating": {"4": 2},
        "tag": {"billing": 1},
        "thumbs": {"down": 1, "up": 2},
    }
    assert (project(span("a")) or {})["feedback_summary"] is None


def test_feedback_value_text() -> None:
    assert [feedback_value_text(v) for v in ("up", {"value": 5}, 2.5, True, None, [1])] == [
        "up",
        "5",
        "2.5",
        "true",
        "null",
        "[1]",
    ]


def test_projection_reads_only_its_columns() -> None:
    full = span("r", is_root=True, kind="agent_run", input_tokens=3, tags=["x"])
    narrow = {name: full[name] for name in PROJECTION_SPAN_COLUMNS}  # type: ignore[literal-required]
    assert project_trace("p", "t1", [narrow], [], []) == project(full)  # type: ignore[list-item]


def test_read_order_is_start_then_depth_then_id() -> None:
    spans = [
        span("child", parent_span_id="root", start_time=T0),
        span("b", parent_span_id="child", start_time=T0),
        span("root", start_time=T0),
        span("a", start_time=T0 + 1),
        span("orphan", parent_span_id="missing", start_time=T0),
    ]
    assert [s["span_id"] for s in order_spans(spans)] == ["orphan", "root", "child", "b", "a"]


def test_held_summary() -> None:
    held = [
        span("r", is_root=True, start_time=T0, end_time=None, received_at=T0 + 9),
        span("c", status="error", received_at=T0 + 3),
        span("open", end_time=None, received_at=T0 + 5),
        span("ev", is_event=True, end_time=None, received_at=T0 + 7),
    ]
    assert summarize_held("p", "t1", held) == HeldTrace(
        project="p",
        trace_id="t1",
        first_received_at=T0 + 3,
        span_count=4,
        error_count=1,
        root_start_time=T0,
        root_end_time=None,
        open_count=2,
    )
