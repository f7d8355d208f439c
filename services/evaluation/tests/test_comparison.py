"""Comparison statistics against values worked out by hand: means, counts, the delta, its
standard error paired and unpaired, the decidable rule at 19 and 20, and regressed."""

from __future__ import annotations

import pytest

from services.evaluation.comparison import Observation, compare


def _items(values: dict[str, float]) -> list[Observation]:
    return [Observation(value, item) for item, value in values.items()]


def test_items_scored_on_both_sides_are_paired() -> None:
    # Differences 0.1, -0.1, 0.1: mean 1/30, deviations 1/15, -2/15, 1/15, squares summing to
    # 6/225, over n - 1 = 2: variance 1/75; over 3 pairs: se = sqrt(1/225) = 1/15.
    found = compare(
        "base",
        "cand",
        {"accuracy": _items({"a": 0.5, "b": 0.7, "c": 0.9})},
        {"accuracy": _items({"a": 0.6, "b": 0.6, "c": 1.0})},
    )
    (row,) = found.scorers
    assert (found.baseline, found.candidate, found.regressed) == ("base", "cand", False)
    assert (row.scorer_id, row.baseline_n, row.candidate_n) == ("accuracy", 3, 3)
    assert row.baseline_mean == pytest.approx(0.7)
    assert row.candidate_mean == pytest.approx(2.2 / 3)
    assert row.delta == pytest.approx(1 / 30)
    assert row.delta_se == pytest.approx(1 / 15)
    assert (row.paired, row.decidable) == (True, False)


def test_an_item_scored_twice_counts_by_its_mean() -> None:
    # Item a's candidate scores 0.2 and 0.4 pair as 0.3: differences 0.3 - 0.1 and 0.5 - 0.3,
    # both 0.2, so the paired standard error is 0.
    found = compare(
        "base",
        "cand",
        {"s": [Observation(0.1, "a"), Observation(0.3, "b")]},
        {"s": [Observation(0.2, "a"), Observation(0.4, "a"), Observation(0.5, "b")]},
    )
    (row,) = found.scorers
    assert (row.baseline_n, row.candidate_n) == (2, 3)
    assert row.delta == pytest.approx(1.1 / 3 - 0.2)
    assert row.delta_se == pytest.approx(0.0)
    assert row.paired is True


def test_without_shared_items_the_error_is_welchs() -> None:
    # Baseline 1, 0, 1, 0: mean 0.5, variance 1/3. Candidate 1, 1, 1, 0: mean 0.75, variance
    # 0.25. se = sqrt(1/12 + 1/16) = sqrt(7/48).
    found = compare(
        "base",
        "cand",
        {"ok": [Observation(v) for v in (1, 0, 1, 0)]},
        {"ok": [Observation(v) for v in (1, 1, 1, 0)]},
    )
    (row,) = found.scorers
    assert (row.baseline_mean, row.candidate_mean, row.delta) == (0.5, 0.75, 0.25)
    assert row.delta_se == pytest.approx((7 / 48) ** 0.5)
    assert row.paired is False


def test_one_shared_item_is_not_enough_to_pair() -> None:
    found = compare(
        "base",
        "cand",
        {"ok": [Observation(1, "a"), Observation(0, "b")]},
        {"ok": [Observation(1, "a"), Observation(1, "c")]},
    )
    (row,) = found.scorers
    # Welch: baseline variance 0.5, candidate 0: sqrt(0.5 / 2) = 0.5.
    assert (row.delta_se, row.paired) == (0.5, False)


@pytest.mark.parametrize(("candidate_n", "decidable"), [(19, False), (20, True)])
def test_a_drop_regresses_only_when_decidable(candidate_n: int, decidable: bool) -> None:
    baseline = [Observation(1.0) for _ in range(20)]
    candidate = [Observation(0.0)] + [Observation(1.0) for _ in range(candidate_n - 1)]
    found = compare("base", "cand", {"pass": baseline}, {"pass": candidate})
    (row,) = found.scorers
    assert (row.baseline_n, row.candidate_n, row.decidable) == (20, candidate_n, decidable)
    assert row.delta == pytest.approx(-1 / candidate_n)
    assert found.regressed is decidable
    if candidate_n == 20:
        # Baseline variance 0; candidate mean 0.95, variance (19 * 0.0025 + 0.9025) / 19 = 0.05:
        # se = sqrt(0.05 / 20) = 0.05.
        assert row.delta_se == pytest.approx(0.05)


def test_a_scorer_on_one_side_only_has_a_row_without_a_delta() -> None:
    found = compare(
        "base",
        "cand",
        {"latency_budget": [Observation(1.0)]},
        {"contains": [Observation(1.0), Observation(0.0)]},
    )
    only_base, only_cand = sorted(found.scorers, key=lambda row: row.scorer_id, reverse=True)
    assert [row.scorer_id for row in found.scorers] == ["contains", "latency_budget"]
    assert only_base.scorer_id == "latency_budget"
    assert (only_base.baseline_n, only_base.candidate_n) == (1, 0)
    assert only_base.HasField("baseline_mean")
    assert not only_base.HasField("candidate_mean")
    assert not only_base.HasField("delta")
    assert not only_base.HasField("delta_se")
    assert (only_cand.baseline_n, only_cand.candidate_n, only_cand.candidate_mean) == (0, 2, 0.5)
    assert not only_cand.HasField("delta")
    assert found.regressed is False


def test_a_rise_is_not_a_regression_and_a_drop_below_twenty_is_not_one_either() -> None:
    up = compare("b", "c", {"x": [Observation(0.0)] * 20}, {"x": [Observation(1.0)] * 20})
    assert (up.scorers[0].delta, up.scorers[0].decidable, up.regressed) == (1.0, True, False)
