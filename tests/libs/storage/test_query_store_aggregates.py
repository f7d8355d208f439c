"""The trace store's query surface, part 3: analytics figures and cost points, on every backend
(the dataset is `query_data`; the expected figures are worked out from its table)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest

from mcpd.signals.queries import CostPoint, GroupFigures, LatencyFigures, Window
from mcpd.signals.rollups import RELATIVE_ACCURACY
from tests.libs.storage import query_data
from tests.libs.storage.query_data import (
    OTHER,
    B,
    P,
    S,
    at,
    percentile_cont,
)

# The dataset in a migrated store per backend, loaded once for this module's read-only tests.
store = query_data.loaded


def latency(durations_ms: Sequence[float]) -> LatencyFigures:
    """The figures of a distribution, as PostgreSQL's percentile_cont computes them."""
    if not durations_ms:
        return LatencyFigures()
    return LatencyFigures(
        p50=percentile_cont(durations_ms, 0.5),
        p90=percentile_cont(durations_ms, 0.9),
        p95=percentile_cont(durations_ms, 0.95),
        p99=percentile_cont(durations_ms, 0.99),
        mean=sum(durations_ms) / len(durations_ms),
        max=max(durations_ms),
    )


def figures(
    key: str | None,
    count: int,
    errors: int,
    span_count: int,
    tokens: tuple[int, int],
    cost: float | None,
    durations_ms: Sequence[float],
) -> GroupFigures:
    return GroupFigures(
        key=key,
        count=count,
        error_count=errors,
        span_count=span_count,
        input_tokens=tokens[0],
        output_tokens=tokens[1],
        total_cost=cost,
        latency=latency(durations_ms),
    )


def assert_figures(found: list[GroupFigures], expected: list[GroupFigures]) -> None:
    """Exact keys, counts and tokens; costs and the mean to floating-point precision; quantiles
    and max within the rollups' sketch bound (`RELATIVE_ACCURACY`: a window holding a whole
    hour is answered from rollups)."""
    assert [f.key for f in found] == [f.key for f in expected]
    for got, want in zip(found, expected, strict=True):
        assert (got.count, got.error_count, got.span_count) == (
            want.count,
            want.error_count,
            want.span_count,
        ), got.key
        assert (got.input_tokens, got.output_tokens) == (want.input_tokens, want.output_tokens)
        assert type(got.input_tokens) is int
        assert type(got.output_tokens) is int
        if want.total_cost is None:
            assert got.total_cost is None, got.key
        else:
            assert got.total_cost == pytest.approx(want.total_cost, rel=1e-9), got.key
        for name in ("p50", "p90", "p95", "p99", "mean", "max"):
            value, wanted = getattr(got.latency, name), getattr(want.latency, name)
            if wanted is None:
                assert value is None, (got.key, name)
            else:
                bound = 1e-9 if name == "mean" else RELATIVE_ACCURACY + 1e-9
                assert value == pytest.approx(wanted, rel=bound), (got.key, name)


# Trace durations in ms: f 10000, a 2000, b 5250, c 1125, d 2000 (tr-e is still open).
# Model spans: a-gen gpt-4o 1000 ms ok 100/20 $0.5; b-gen claude-3 2000 ms 300/50 $1.25;
# d-gen gpt-4o 500 ms ERROR 40/10 $0.5; f-root gpt-4o-mini 10000 ms 500/100 $2.0.


def test_figures_over_the_whole_project(store: Any) -> None:
    found = store.group_figures(P, Window(), None)

    assert_figures(
        found,
        [figures(None, 6, 2, 12, (940, 180), 4.25, [10_000, 2_000, 5_250, 1_125, 2_000])],
    )


def test_figures_over_a_half_open_window(store: Any) -> None:
    # [100 s, 300 s): tr-a and tr-b; tr-c and tr-d start at 300 s.
    found = store.group_figures(P, Window(at(100_000), at(300_000)), None)

    assert_figures(found, [figures(None, 2, 1, 5, (400, 70), 1.75, [2_000, 5_250])])


def test_figures_of_an_empty_window(store: Any) -> None:
    found = store.group_figures(P, Window(at(900_000), at(901_000)), None)

    assert_figures(found, [figures(None, 0, 0, 0, (0, 0), None, [])])


def test_trace_groups_put_unset_values_under_the_empty_key(store: Any) -> None:
    found = store.group_figures(P, Window(), "environment")

    assert_figures(
        found,
        [
            # tr-c: no environment, no cost.
            figures("", 1, 0, 2, (0, 0), None, [1_125]),
            # tr-a, tr-d, tr-e, tr-f.
            figures("production", 4, 1, 7, (640, 130), 3.0, [2_000, 2_000, 10_000]),
            figures("staging", 1, 1, 3, (300, 50), 1.25, [5_250]),
        ],
    )


@pytest.mark.parametrize(
    ("group_by", "expected"),
    [
        (
            "status",
            [
                figures("cancelled", 1, 0, 1, (500, 100), 2.0, [10_000]),
                figures("error", 2, 2, 5, (340, 60), 1.75, [5_250, 2_000]),
                figures("ok", 2, 0, 4, (100, 20), 0.5, [2_000, 1_125]),
                figures("unset", 1, 0, 2, (0, 0), None, []),
            ],
        ),
        (
            "name",
            [
                figures("agent", 3, 1, 7, (400, 70), 1.75, [2_000, 5_250]),
                figures("agent turn", 1, 1, 2, (40, 10), 0.5, [2_000]),
                figures("batch job", 1, 0, 1, (500, 100), 2.0, [10_000]),
                figures("workflow", 1, 0, 2, (0, 0), None, [1_125]),
            ],
        ),
        (
            "service_name",
            [
                figures("checkout", 3, 1, 6, (140, 30), 1.0, [2_000, 1_125, 2_000]),
                figures("search", 2, 1, 5, (300, 50), 1.25, [5_250]),
                figures("worker", 1, 0, 1, (500, 100), 2.0, [10_000]),
            ],
        ),
        (
            "release",
            [figures("", 6, 2, 12, (940, 180), 4.25, [10_000, 2_000, 5_250, 1_125, 2_000])],
        ),
    ],
)
def test_trace_groups(store: Any, group_by: str, expected: list[GroupFigures]) -> None:
    assert_figures(store.group_figures(P, Window(), group_by), expected)


def test_span_groups_count_the_spans_that_carry_the_dimension(store: Any) -> None:
    found = store.group_figures(P, Window(), "model")

    # The held span h-root (gpt-4o) is not stored, so not counted; spans without a model are
    # not a group.
    assert_figures(
        found,
        [
            figures("claude-3", 1, 0, 1, (300, 50), 1.25, [2_000]),
            figures("gpt-4o", 2, 1, 2, (140, 30), 1.0, [1_000, 500]),
            figures("gpt-4o-mini", 1, 0, 1, (500, 100), 2.0, [10_000]),
        ],
    )


def test_span_groups_by_provider_in_a_window(store: Any) -> None:
    assert_figures(
        store.group_figures(P, Window(), "provider"),
        [
            figures("anthropic", 1, 0, 1, (300, 50), 1.25, [2_000]),
            figures("openai", 3, 1, 3, (640, 130), 3.0, [1_000, 500, 10_000]),
        ],
    )
    # Spans starting in [100 s, 300 s): a-gen (100.5 s) and b-gen (201 s).
    assert_figures(
        store.group_figures(P, Window(at(100_000), at(300_000)), "provider"),
        [
            figures("anthropic", 1, 0, 1, (300, 50), 1.25, [2_000]),
            figures("openai", 1, 0, 1, (100, 20), 0.5, [1_000]),
        ],
    )


def test_figures_stay_in_their_project(store: Any) -> None:
    # `other` holds the same traces plus tr-z (production, gpt-4o, 2000 ms, 1/1 tokens, $0.5).
    assert_figures(
        store.group_figures(OTHER, Window(), None),
        [figures(None, 7, 2, 13, (941, 181), 4.75, [10_000, 2_000, 5_250, 1_125, 2_000, 2_000])],
    )
    assert_figures(
        store.group_figures(P, Window(), "model")[1:2],
        [figures("gpt-4o", 2, 1, 2, (140, 30), 1.0, [1_000, 500])],
    )
    assert store.group_figures("nobody", Window(), "model") == []


# --- cost points -------------------------------------------------------------------------------

TWO_MINUTES = 120 * S


def point(bucket_ms: int, key: str, cost: float, prompt: int, completion: int) -> CostPoint:
    return CostPoint(at(bucket_ms), key, cost, prompt, completion)


def assert_points(found: list[CostPoint], expected: list[CostPoint]) -> None:
    assert [(p.bucket_start, p.key) for p in found] == [(p.bucket_start, p.key) for p in expected]
    for got, want in zip(found, expected, strict=True):
        assert got.total_cost == pytest.approx(want.total_cost, rel=1e-9)
        assert (got.input_tokens, got.output_tokens) == (want.input_tokens, want.output_tokens)
        assert type(got.bucket_start) is int


# The window ends before tr-e (400 s), the one trace that carries neither cost nor tokens.
UNTIL_400 = Window(None, at(400_000))


def test_cost_points_ungrouped(store: Any) -> None:
    # Buckets of 2 min from B (a whole hour): [0,120) tr-f + tr-a, [120,240) tr-b,
    # [240,360) tr-c (nothing) + tr-d.
    assert_points(
        store.cost_points(P, UNTIL_400, None, TWO_MINUTES),
        [
            point(0, "", 2.5, 600, 120),
            point(120_000, "", 1.25, 300, 50),
            point(240_000, "", 0.5, 40, 10),
        ],
    )


def test_cost_points_by_a_trace_dimension(store: Any) -> None:
    assert_points(
        store.cost_points(P, UNTIL_400, "service_name", TWO_MINUTES),
        [
            point(0, "checkout", 0.5, 100, 20),
            point(0, "worker", 2.0, 500, 100),
            point(120_000, "search", 1.25, 300, 50),
            point(240_000, "checkout", 0.5, 40, 10),
        ],
    )


def test_cost_points_by_a_span_dimension(store: Any) -> None:
    # Model spans, bucketed on their own start: f-root 50 s, a-gen 100.5 s, b-gen 201 s,
    # d-gen 300.5 s.
    assert_points(
        store.cost_points(P, Window(), "model", TWO_MINUTES),
        [
            point(0, "gpt-4o", 0.5, 100, 20),
            point(0, "gpt-4o-mini", 2.0, 500, 100),
            point(120_000, "claude-3", 1.25, 300, 50),
            point(240_000, "gpt-4o", 0.5, 40, 10),
        ],
    )


def test_cost_buckets_are_aligned_to_the_epoch_not_the_window(store: Any) -> None:
    # 7 s buckets: B is 4 s past a multiple of 7 s, so bucket starts are not on B.
    width = 7 * S
    found = store.cost_points(P, Window(at(100_000), at(300_000)), None, width)

    tr_a, tr_b = at(100_000), at(200_000)
    assert (B // S) % 7 == 4
    assert_points(
        found,
        [
            CostPoint(tr_a - tr_a % width, "", 0.5, 100, 20),
            CostPoint(tr_b - tr_b % width, "", 1.25, 300, 50),
        ],
    )
    assert all(p.bucket_start % width == 0 for p in found)


def test_cost_points_of_one_bucket_per_window(store: Any) -> None:
    hour = 3_600 * S
    assert_points(
        store.cost_points(P, UNTIL_400, "status", hour),
        [
            point(0, "cancelled", 2.0, 500, 100),
            point(0, "error", 1.75, 340, 60),
            point(0, "ok", 0.5, 100, 20),
        ],
    )


def test_cost_points_of_a_bucket_of_rows_without_cost(store: Any) -> None:
    # [400 s, 500 s) holds tr-e only, which has rows but neither cost nor tokens: a bucket with
    # rows is kept, at zero ("buckets without rows are left out").
    assert_points(
        store.cost_points(P, Window(at(400_000), at(500_000)), None, TWO_MINUTES),
        [point(360_000, "", 0.0, 0, 0)],
    )


def test_cost_points_outside_the_data_and_other_projects(store: Any) -> None:
    assert store.cost_points(P, Window(at(900_000), None), None, TWO_MINUTES) == []
    assert store.cost_points("nobody", Window(), "model", TWO_MINUTES) == []
    # tr-z (other only): 350 s, $0.5, 1/1 tokens, in the [240, 360) bucket.
    assert_points(
        store.cost_points(OTHER, UNTIL_400, None, TWO_MINUTES),
        [
            point(0, "", 2.5, 600, 120),
            point(120_000, "", 1.25, 300, 50),
            point(240_000, "", 1.0, 41, 11),
        ],
    )
