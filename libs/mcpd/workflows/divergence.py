"""How far a run strays from the usual step count of its definition version: the modified
z-score, 0.6745 (x - median) / MAD, of its step count against the step counts of the version's
newest succeeded runs (Iglewicz and Hoaglin). The median and the MAD tolerate up to half the
baseline being outliers, so a runaway cohort cannot redefine normal. A MAD of 0 (more than half
the baseline took exactly the median count) is taken as one step, the least two step counts can
differ by. Shared by the evaluation service's divergence watch and the intelligence service's
derived outcome notes, so both call the same run unusual."""

from __future__ import annotations

import statistics
from collections.abc import Sequence

__all__ = ["BASELINE_RUNS", "MIN_BASELINE", "OUTLIER_Z", "modified_z"]

# Fewer completed runs of a version than this and its runs are not measured.
MIN_BASELINE = 12
# The newest succeeded runs of a version that make its baseline.
BASELINE_RUNS = 200
# The score past which Iglewicz and Hoaglin call an observation an outlier.
OUTLIER_Z = 3.5
# 0.6745 is the 0.75 quantile of the standard normal: MAD / 0.6745 estimates the standard
# deviation of normally distributed counts, so the score reads like a z-score.
_CONSISTENCY = 0.6745


def modified_z(steps: int, baseline: Sequence[int]) -> float:
    """The modified z-score of a run that took `steps` against a non-empty `baseline` of step
    counts, a MAD of 0 taken as one step."""
    median = statistics.median(baseline)
    mad = statistics.median(abs(count - median) for count in baseline) or 1.0
    return _CONSISTENCY * (steps - median) / mad
