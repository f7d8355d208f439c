"""Rollups: the analytics figures of whole time buckets, kept as rows arrive.

A rollup row holds, for one project, one *dimension* (an analytics `group_by`, or `WHOLE` for
the ungrouped figures), one bucket of `LEVELS` (an hour or a day of `start_time`, aligned to the
Unix epoch) and one group key, exactly the parts `GroupFigures` and `CostPoint` are made of:
counts, errors, spans, tokens, cost (its sum and how many rows carried one), the sum and number
of durations, and a log-bucketed histogram of the durations (`Sketch`). Every part is a sum, so
rows are kept by adding a row's contribution when it is written and subtracting it when it is
replaced or deleted (`Delta`); no part is a minimum or a maximum, which could not be subtracted.

What contributes is what `mcpd.signals.queries.GroupFigures` counts: a trace row to `WHOLE` and
to every TRACE_GROUPS dimension (key: the column, "" when unset), in its start_time's bucket;
a span row to each SPAN_GROUPS dimension whose column is set, in its start_time's bucket. A
trace row is a projection that changes as its spans arrive, so each store subtracts the stored
projection and adds the new one in the transaction that writes it.

A window is answered from whole buckets inside it (days, then hours at either side of the days)
and the ragged edges, under an hour on each side, from the raw rows (`plan`). A window with no
whole hour inside is answered from the raw rows alone, exactly as before rollups.

**Score rollups** are a sibling table (`score_rollups`) kept by the same `Delta`: per project,
`scorer_id` and bucket of `LEVELS` of the score's `timestamp`, how many scores and the sum of
their values (`ScoreSums`), which is what a `score_mean` monitor asks (`ScoreStats`). A score
row is upserted by its id, so a write subtracts the stored row it replaces (whatever scorer and
time that row had) and adds the new one; a delete subtracts what it deletes. The count is
exact, the sum exact up to the rounding of adding floats in another order.

**The sketch and its error bound.** A duration `x` (ns) falls in bin `ceil(log_gamma(x))` with
`gamma = (1 + a) / (1 - a)` and `a = RELATIVE_ACCURACY` (1 %): the bin's values lie in
`(gamma**(i-1), gamma**i]`, and its representative `2 gamma**i / (gamma + 1)` is within `a` of
every one of them, relatively (DDSketch, Masson et al., VLDB 2019). Zero has a bin of its own
(exact) and negative values mirror the positive bins. A quantile interpolates, as
`percentile_cont` does, between the representatives of the bins that hold the two nearest order
statistics; each is within `a` of its statistic and the interpolation is a convex combination, so
the estimate is within `a` (relatively) of the exact `percentile_cont`. `max` is the
representative of the top bin, within `a` of the true maximum. Counts, errors, spans, tokens and
the duration sum (so `mean`) are exact; cost is a float sum, exact up to the rounding of adding
floats in another order (relative 1e-12 or so).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field, fields
from typing import Any

from mcpd.signals.queries import (
    SPAN_GROUPS,
    TRACE_GROUPS,
    CostPoint,
    GroupFigures,
    LatencyFigures,
    Window,
)

NS_PER_MS = 1_000_000
HOUR_NS = 3_600 * 1_000_000_000
DAY_NS = 24 * HOUR_NS
LEVELS: tuple[int, ...] = (HOUR_NS, DAY_NS)
"""Bucket widths in ns: every row contributes to one bucket of each."""

WHOLE = ""
"""The dimension of the ungrouped figures (its one key is "")."""
TRACE_DIMENSIONS: tuple[str, ...] = (WHOLE, *sorted(TRACE_GROUPS))
SPAN_DIMENSIONS: tuple[str, ...] = tuple(sorted(SPAN_GROUPS))

RELATIVE_ACCURACY = 0.01
"""The sketch's bound: every quantile (and max) is within 1 % of the exact figure."""
GAMMA = (1 + RELATIVE_ACCURACY) / (1 - RELATIVE_ACCURACY)
_LOG_GAMMA = math.log(GAMMA)
_QUANTILES = (0.50, 0.90, 0.95, 0.99)

# The columns of a trace row (and of a span row) a rollup reads.
TRACE_COLUMNS: tuple[str, ...] = (
    "trace_id",
    "start_time",
    "status",
    "span_count",
    "input_tokens",
    "output_tokens",
    "total_cost",
    "duration_ns",
    *sorted(TRACE_GROUPS),
)
SPAN_COLUMNS: tuple[str, ...] = (
    "trace_id",
    "span_id",
    "start_time",
    "status",
    "input_tokens",
    "output_tokens",
    "total_cost",
    "duration_ns",
    *sorted(SPAN_GROUPS),
)

RollupKey = tuple[str, str, int, int, str]
"""(project, dimension, level, bucket_start, key): one rollup row."""

SCORE_COLUMNS: tuple[str, ...] = ("score_id", "scorer_id", "timestamp", "value")
"""The columns of a score row a score rollup reads (with its project)."""
ScoreRollupKey = tuple[str, str, int, int]
"""(project, scorer_id, level, bucket_start): one score rollup row."""


def sketch_bin(value: int) -> int:
    """The bin of a duration in ns: 0 for 0, i + 1 for `(gamma**(i-1), gamma**i]`, negated for
    a negative duration."""
    if value == 0:
        return 0
    index = math.ceil(math.log(abs(value)) / _LOG_GAMMA) + 1
    return index if value > 0 else -index


def bin_value(index: int) -> float:
    """The representative of a bin (see the module docstring), in ns."""
    if index == 0:
        return 0.0
    magnitude = 2.0 * GAMMA ** (abs(index) - 1) / (GAMMA + 1.0)
    return magnitude if index > 0 else -magnitude


def sketch_quantile(ordered: list[tuple[float, int]], total: int, q: float) -> float:
    """The `q` quantile of a sketch given as (representative, count) in ascending order with
    `total` values, interpolated between the two nearest order statistics' bins."""
    position = q * (total - 1)
    below = math.floor(position)
    low = _at_rank(ordered, below)
    if below == position:
        return low
    high = _at_rank(ordered, below + 1)
    return low + (high - low) * (position - below)


def _at_rank(ordered: list[tuple[float, int]], rank: int) -> float:
    seen = 0
    for value, count in ordered:
        seen += count
        if rank < seen:
            return value
    return ordered[-1][0]


@dataclass(slots=True)
class Figures:
    """The summable parts of one group's figures (a rollup row, or a sum of them)."""

    count: int = 0
    error_count: int = 0
    span_count: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cost_count: int = 0
    total_cost: float = 0.0
    duration_count: int = 0
    duration_sum: int = 0
    bins: dict[int, int] = field(default_factory=dict)

    def add(self, row: Mapping[str, Any], sign: int, span_count: int) -> None:
        """Add (`sign` 1) or subtract (-1) one trace or span row."""
        self.count += sign
        if row.get("status") == "error":
            self.error_count += sign
        self.span_count += sign * span_count
        self.input_tokens += sign * (row.get("input_tokens") or 0)
        self.output_tokens += sign * (row.get("output_tokens") or 0)
        cost = row.get("total_cost")
        if cost is not None:
            self.cost_count += sign
            self.total_cost += sign * float(cost)
        duration = row.get("duration_ns")
        if duration is not None:
            self.duration_count += sign
            self.duration_sum += sign * int(duration)
            index = sketch_bin(int(duration))
            self.bins[index] = self.bins.get(index, 0) + sign

    def merge(self, other: Figures) -> None:
        """Add another group's parts to these."""
        self.count += other.count
        self.error_count += other.error_count
        self.span_count += other.span_count
        self.input_tokens += other.input_tokens
        self.output_tokens += other.output_tokens
        self.cost_count += other.cost_count
        self.total_cost += other.total_cost
        self.duration_count += other.duration_count
        self.duration_sum += other.duration_sum
        merge_bins(self.bins, other.bins.items())

    def is_empty(self) -> bool:
        """Whether every part is zero (a row whose contributions were all subtracted)."""
        return not (
            self.count
            or self.error_count
            or self.span_count
            or self.input_tokens
            or self.output_tokens
            or self.cost_count
            or self.duration_count
            or self.duration_sum
            or any(self.bins.values())
        )

    def sketch(self) -> dict[str, int]:
        """The bins as a JSON object (string keys, zero counts left out)."""
        return {str(index): count for index, count in sorted(self.bins.items()) if count}

    def latency(self) -> LatencyFigures:
        """The latency figures in ms: quantiles and max from the bins, mean exact."""
        if self.duration_count <= 0:
            return LatencyFigures()
        ordered = sorted(
            (bin_value(index), count) for index, count in self.bins.items() if count > 0
        )
        total = sum(count for _, count in ordered)
        if not ordered:
            return LatencyFigures()
        p50, p90, p95, p99 = (sketch_quantile(ordered, total, q) / NS_PER_MS for q in _QUANTILES)
        return LatencyFigures(
            p50=p50,
            p90=p90,
            p95=p95,
            p99=p99,
            mean=self.duration_sum / self.duration_count / NS_PER_MS,
            max=ordered[-1][0] / NS_PER_MS,
        )

    def group(self, key: str | None) -> GroupFigures:
        """These parts as one group's `GroupFigures`."""
        return GroupFigures(
            key=key,
            count=self.count,
            error_count=self.error_count,
            span_count=self.span_count,
            input_tokens=self.input_tokens,
            output_tokens=self.output_tokens,
            total_cost=self.total_cost if self.cost_count > 0 else None,
            latency=self.latency(),
        )


@dataclass(slots=True)
class ScoreSums:
    """The summable parts of a scorer's scores in one bucket (a score rollup row, or a sum)."""

    count: int = 0
    value_sum: float = 0.0

    def is_empty(self) -> bool:
        """Whether both parts are zero (contributions that cancelled out)."""
        return not self.count and not self.value_sum


ROLLUP_KEY = ("project", "dimension", "level", "bucket_start", "key")
"""The columns that name a rollup row."""
ROLLUP_PARTS = tuple(part.name for part in fields(Figures) if part.name != "bins")
"""A rollup row's summable columns, as `Figures` names them (the sketch is kept apart)."""
SCORE_ROLLUP_KEY = ("project", "scorer_id", "level", "bucket_start")
"""The columns that name a score rollup row."""
SCORE_ROLLUP_PARTS = tuple(part.name for part in fields(ScoreSums))
"""A score rollup row's summable columns, as `ScoreSums` names them."""


def merge_bins(into: dict[int, int], bins: Iterable[tuple[Any, int]]) -> None:
    """Add bins (keys as int or as the JSON object's strings) into `into`."""
    for index, count in bins:
        index = int(index)
        into[index] = into.get(index, 0) + int(count)


class Delta:
    """What a write (or a delete) changes in the rollups: per rollup row, the parts to add."""

    def __init__(self) -> None:
        self.rows: dict[RollupKey, Figures] = {}
        self.scores: dict[ScoreRollupKey, ScoreSums] = {}

    def _figures(self, key: RollupKey) -> Figures:
        found = self.rows.get(key)
        if found is None:
            found = self.rows[key] = Figures()
        return found

    def add_trace(self, row: Mapping[str, Any], sign: int = 1) -> None:
        """A trace row's contribution (TRACE_DIMENSIONS), added or subtracted."""
        project, start = row["project"], int(row["start_time"])
        span_count = int(row.get("span_count") or 0)
        for dimension in TRACE_DIMENSIONS:
            key = "" if dimension == WHOLE else _text(row.get(dimension) or "")
            for level in LEVELS:
                rollup = (project, dimension, level, start - start % level, key)
                self._figures(rollup).add(row, sign, span_count)

    def add_span(self, row: Mapping[str, Any], sign: int = 1) -> None:
        """A span row's contribution (each SPAN_DIMENSIONS column it carries)."""
        project, start = row["project"], int(row["start_time"])
        for dimension in SPAN_DIMENSIONS:
            key = row.get(dimension)
            if key is None:
                continue
            key = _text(key)
            for level in LEVELS:
                rollup = (project, dimension, level, start - start % level, key)
                self._figures(rollup).add(row, sign, 1)

    def add_traces(self, rows: Iterable[Mapping[str, Any]], sign: int = 1) -> None:
        for row in rows:
            self.add_trace(row, sign)

    def add_spans(self, rows: Iterable[Mapping[str, Any]], sign: int = 1) -> None:
        for row in rows:
            self.add_span(row, sign)

    def changes(self) -> Iterator[tuple[RollupKey, Figures]]:
        """The rows that change, in key order (writers lock rows in one order), without the
        contributions that cancelled out."""
        for key in sorted(self.rows):
            figures = self.rows[key]
            if not figures.is_empty():
                yield key, figures

    def add_score(self, row: Mapping[str, Any], sign: int = 1) -> None:
        """A score row's contribution (SCORE_COLUMNS and its project), added or subtracted."""
        project, scorer_id, at = row["project"], _text(row["scorer_id"]), int(row["timestamp"])
        value = sign * float(row["value"])
        for level in LEVELS:
            key = (project, scorer_id, level, at - at % level)
            found = self.scores.get(key)
            if found is None:
                found = self.scores[key] = ScoreSums()
            found.count += sign
            found.value_sum += value

    def add_scores(self, rows: Iterable[Mapping[str, Any]], sign: int = 1) -> None:
        for row in rows:
            self.add_score(row, sign)

    def score_changes(self) -> Iterator[tuple[ScoreRollupKey, ScoreSums]]:
        """The score rollup rows that change, in key order, as `changes`."""
        for key in sorted(self.scores):
            sums = self.scores[key]
            if not sums.is_empty():
                yield key, sums


def _text(value: str) -> str:
    """A group key as every store keeps text: NUL, which PostgreSQL refuses, as U+FFFD."""
    return value.replace("\x00", "\ufffd")


def carries_spans(row: Mapping[str, Any]) -> bool:
    """Whether a span row contributes to any rollup (it carries a SPAN_GROUPS column)."""
    return any(row.get(dimension) is not None for dimension in SPAN_DIMENSIONS)


@dataclass(frozen=True, slots=True)
class Range:
    """Buckets of one level: those whose start is in [start, end) (None: open)."""

    level: int
    start: int | None
    end: int | None


@dataclass(frozen=True, slots=True)
class Plan:
    """How a window is answered: whole buckets from rollups, the rest from raw rows."""

    ranges: tuple[Range, ...]
    raw: tuple[Window, ...]


def _floor(value: int, width: int) -> int:
    return value - value % width


def _ceil(value: int, width: int) -> int:
    return -_floor(-value, width)


def plan(window: Window, levels: tuple[int, ...] = LEVELS) -> Plan:
    """Whole buckets inside `window` (the widest level first, the next level at either side),
    and the ragged edges, under one bucket of the finest level each, as raw windows. A window
    with no whole bucket of the finest level inside is all raw (no ranges)."""
    finest = levels[0]
    start = None if window.start is None else _ceil(window.start, finest)
    end = None if window.end is None else _floor(window.end, finest)
    if start is not None and end is not None and start >= end:
        return Plan((), (window,))
    ranges = _ranges(start, end, levels)
    raw: list[Window] = []
    if window.start is not None and start is not None and window.start < start:
        raw.append(Window(window.start, start))
    if window.end is not None and end is not None and end < window.end:
        raw.append(Window(end, window.end))
    return Plan(tuple(ranges), tuple(raw))


def _ranges(start: int | None, end: int | None, levels: tuple[int, ...]) -> list[Range]:
    """[start, end) (aligned to levels[0]) as ranges of whole buckets, widest first."""
    if len(levels) == 1:
        return [Range(levels[0], start, end)]
    wide = levels[-1]
    inner_start = None if start is None else _ceil(start, wide)
    inner_end = None if end is None else _floor(end, wide)
    if inner_start is not None and inner_end is not None and inner_start >= inner_end:
        return _ranges(start, end, levels[:-1])
    found = [Range(wide, inner_start, inner_end)]
    if start is not None and inner_start is not None and start < inner_start:
        found.extend(_ranges(start, inner_start, levels[:-1]))
    if end is not None and inner_end is not None and inner_end < end:
        found.extend(_ranges(inner_end, end, levels[:-1]))
    return found


def series_plan(window: Window, bucket_ns: int) -> Plan:
    """`plan` for a cost series of `bucket_ns` buckets: hour rows only (a bucket sums whole
    hours), and no rollups unless `bucket_ns` is a whole number of hours."""
    if bucket_ns % HOUR_NS:
        return Plan((), (window,))
    return plan(window, (HOUR_NS,))


class Groups:
    """Figures per group key, summed from rollup rows and raw rows."""

    def __init__(self) -> None:
        self.figures: dict[str, Figures] = {}

    def of(self, key: str) -> Figures:
        found = self.figures.get(key)
        if found is None:
            found = self.figures[key] = Figures()
        return found

    def add_durations(self, key: str, durations: Iterable[int]) -> None:
        """Raw durations (ns) of a group, into its bins."""
        figures = self.of(key)
        bins = figures.bins
        for duration in durations:
            index = sketch_bin(duration)
            bins[index] = bins.get(index, 0) + 1
            figures.duration_sum += duration
            figures.duration_count += 1

    def answer(self, grouped: bool) -> list[GroupFigures]:
        """GroupFigures in key order (code points), groups that count nothing left out; an
        ungrouped answer is always one group, of key None (zeros when nothing was counted)."""
        if not grouped:
            return [self.figures.get(WHOLE, Figures()).group(None)]
        return [
            figures.group(key) for key, figures in sorted(self.figures.items()) if figures.count > 0
        ]


def cost_point(bucket_start: int, key: str, figures: Figures) -> CostPoint:
    """A series point from summed parts."""
    return CostPoint(
        bucket_start=bucket_start,
        key=key,
        total_cost=figures.total_cost if figures.cost_count > 0 else 0.0,
        input_tokens=figures.input_tokens,
        output_tokens=figures.output_tokens,
    )
