"""Comparing two experiments, scorer by scorer, with the sample sizes beside every delta.

For each scorer present on either side: each side's mean and number of observations, `delta`
(candidate mean minus baseline mean) when both sides have one, and `decidable`, the spec's blunt
rule: at least `DECIDABLE_N` observations on each side. The experiment `regressed` when any
decidable scorer's delta is below zero (higher is better on every scorer, so down is worse).

`delta_se`, the standard error of the delta, says how far the delta could move by chance:

- **paired**, when at least two items were scored on both sides: the per-item differences
  d_i = candidate_i - baseline_i (an item scored more than once on a side counts by its mean),
  se = stdev(d) / sqrt(pairs), `stdev` the sample standard deviation (n - 1). Pairing removes
  what varies from item to item, so it is the sharper measure when the same items ran;
- **Welch**, otherwise: se = sqrt(s_b^2 / n_b + s_c^2 / n_c), with each side's sample variance;
- absent when a side has fewer than two observations.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from mcpd.model.v1 import evaluation_pb2

__all__ = ["DECIDABLE_N", "Observation", "compare"]

DECIDABLE_N = 20


@dataclass(frozen=True, slots=True)
class Observation:
    """One score of one scorer in an experiment: its value and the dataset item it scored (None
    when the run was not an item's)."""

    value: float
    item_id: str | None = None


def compare(
    baseline_id: str,
    candidate_id: str,
    baseline: Mapping[str, Sequence[Observation]],
    candidate: Mapping[str, Sequence[Observation]],
) -> evaluation_pb2.ExperimentComparison:
    """The comparison of two experiments' observations, keyed by scorer id (see the module
    docstring); rows in scorer id order."""
    rows = [
        _delta(scorer_id, baseline.get(scorer_id, ()), candidate.get(scorer_id, ()))
        for scorer_id in sorted(set(baseline) | set(candidate))
    ]
    return evaluation_pb2.ExperimentComparison(
        baseline=baseline_id,
        candidate=candidate_id,
        scorers=rows,
        regressed=any(row.decidable and row.delta < 0 for row in rows),
    )


def _delta(
    scorer_id: str, baseline: Sequence[Observation], candidate: Sequence[Observation]
) -> evaluation_pb2.ScorerDelta:
    row = evaluation_pb2.ScorerDelta(
        scorer_id=scorer_id,
        baseline_n=len(baseline),
        candidate_n=len(candidate),
        decidable=len(baseline) >= DECIDABLE_N and len(candidate) >= DECIDABLE_N,
    )
    if baseline:
        row.baseline_mean = statistics.fmean(o.value for o in baseline)
    if candidate:
        row.candidate_mean = statistics.fmean(o.value for o in candidate)
    if baseline and candidate:
        row.delta = row.candidate_mean - row.baseline_mean
    differences = _paired_differences(baseline, candidate)
    if len(differences) >= 2:
        row.delta_se = statistics.stdev(differences) / math.sqrt(len(differences))
        row.paired = True
    elif len(baseline) >= 2 and len(candidate) >= 2:
        row.delta_se = math.sqrt(
            statistics.variance(o.value for o in baseline) / len(baseline)
            + statistics.variance(o.value for o in candidate) / len(candidate)
        )
    return row


def _paired_differences(
    baseline: Sequence[Observation], candidate: Sequence[Observation]
) -> list[float]:
    """candidate - baseline of each item scored on both sides, by item id."""
    before, after = _item_means(baseline), _item_means(candidate)
    return [after[item] - before[item] for item in sorted(before.keys() & after.keys())]


def _item_means(observations: Sequence[Observation]) -> dict[str, float]:
    values: dict[str, list[float]] = {}
    for observation in observations:
        if observation.item_id is not None:
            values.setdefault(observation.item_id, []).append(observation.value)
    return {item: statistics.fmean(scored) for item, scored in values.items()}
