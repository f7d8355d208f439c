"""Latency figures and quantiles (`mcpd.signals.stats`): PostgreSQL's percentile_cont, in ms."""

from __future__ import annotations

import random

import pytest

from mcpd.signals.queries import LatencyFigures
from mcpd.signals.stats import latency_figures, quantile
from tests.libs.signals.samples import MS


def test_nothing_measured_gives_no_figures() -> None:
    assert latency_figures([]) == LatencyFigures()


def test_quantiles_fall_on_observations_when_positions_are_whole() -> None:
    # 101 observations: q * (n - 1) is a whole position for every reported quantile.
    durations = [ms * MS for ms in range(101)]
    random.Random(3).shuffle(durations)

    assert latency_figures(durations) == LatencyFigures(
        p50=50.0, p90=90.0, p95=95.0, p99=99.0, mean=50.0, max=100.0
    )


def test_quantiles_interpolate_between_the_two_nearest_observations() -> None:
    figures = latency_figures([30 * MS, 10 * MS])

    assert figures.p50 == 20.0
    assert figures.p90 == pytest.approx(28.0)
    assert figures.p99 == pytest.approx(29.8)
    assert figures.mean == 20.0
    assert figures.max == 30.0


def test_one_observation_is_every_figure() -> None:
    assert latency_figures([1_500_000]) == LatencyFigures(
        p50=1.5, p90=1.5, p95=1.5, p99=1.5, mean=1.5, max=1.5
    )


def test_sub_millisecond_durations_keep_their_fraction() -> None:
    assert latency_figures([1, 3]).p50 == 2 / MS


@pytest.mark.parametrize(
    ("q", "expected"), [(0.0, 1.0), (0.25, 1.75), (0.5, 2.5), (1.0, 7.0), (5 / 6, 5.0)]
)
def test_quantile_of_ordered_values(q: float, expected: float) -> None:
    assert quantile([1, 2, 3, 7], q) == pytest.approx(expected)
