"""The overview figures: analytics summary, cost breakdown and score statistics, assembled from
the store's `GroupFigures`, `CostPoint`s and `ScoreStats`.

Spend is reported in USD, the currency of the shipped price book and of every estimated cost;
the window is always closed (the request module fills an absent end with now and an absent
start with the day before).
"""

from __future__ import annotations

from mcpd.model.v1 import query_pb2
from mcpd.query.v1 import query_service_pb2
from mcpd.signals import messages
from mcpd.signals.queries import GroupFigures, LatencyFigures, Window
from mcpd.storage.interfaces import SignalAnalytics

CURRENCY = "USD"
MAX_BUCKETS = 10_000
"""A cost series longer than this is refused: it would not fit a chart, and it is expensive."""


def summary(
    store: SignalAnalytics, project: str, window: Window, group_by: str | None
) -> query_pb2.AnalyticsSummary:
    """AnalyticsSummary: the whole window, plus one row per group when `group_by` is set."""
    whole = _whole(store, project, window)
    answer = query_pb2.AnalyticsSummary(
        trace_count=whole.count,
        span_count=whole.span_count,
        error_count=whole.error_count,
        error_rate=whole.error_count / whole.count if whole.count else 0.0,
        latency=latency_stats(whole.latency),
        input_tokens=whole.input_tokens,
        output_tokens=whole.output_tokens,
        total_cost=whole.total_cost or 0.0,
        currency=CURRENCY,
    )
    _set_window(answer, window)
    if group_by is not None:
        answer.groups.extend(
            grouped_stat(row) for row in store.group_figures(project, window, group_by)
        )
    return answer


def cost_breakdown(
    store: SignalAnalytics,
    project: str,
    window: Window,
    group_by: str | None,
    bucket_ns: int | None,
) -> query_pb2.CostBreakdown:
    """CostBreakdown: the total, groups largest spend first, and a series when `bucket_ns`."""
    whole = _whole(store, project, window)
    answer = query_pb2.CostBreakdown(currency=CURRENCY, total_cost=whole.total_cost or 0.0)
    _set_window(answer, window)
    if group_by is not None:
        groups = store.group_figures(project, window, group_by)
        groups.sort(key=lambda row: (-(row.total_cost or 0.0), row.key or ""))
        answer.groups.extend(grouped_stat(row) for row in groups)
    if bucket_ns is not None:
        answer.series.extend(
            query_pb2.CostBucket(
                timestamp=messages.timestamp_of(point.bucket_start),
                key=point.key,
                total_cost=point.total_cost,
                input_tokens=point.input_tokens,
                output_tokens=point.output_tokens,
            )
            for point in store.cost_points(project, window, group_by, bucket_ns)
        )
    return answer


def score_stats(
    store: SignalAnalytics, project: str, scorer_id: str, window: Window
) -> query_service_pb2.GetScoreStatsResponse:
    """GetScoreStatsResponse: the count and mean of the scorer's scores in the window."""
    stats = store.score_stats(project, scorer_id, window)
    answer = query_service_pb2.GetScoreStatsResponse(scorer_id=scorer_id, count=stats.count)
    if stats.mean is not None:
        answer.mean = stats.mean
    _set_window(answer, window)
    return answer


def grouped_stat(row: GroupFigures) -> query_pb2.GroupedStat:
    """One group's figures as the wire message."""
    stat = query_pb2.GroupedStat(
        key=row.key or "",
        count=row.count,
        error_count=row.error_count,
        input_tokens=row.input_tokens,
        output_tokens=row.output_tokens,
        latency=latency_stats(row.latency),
    )
    if row.total_cost is not None:
        stat.total_cost = row.total_cost
    return stat


def latency_stats(figures: LatencyFigures) -> query_pb2.LatencyStats:
    """LatencyFigures as the wire message; unmeasured figures stay absent."""
    stats = query_pb2.LatencyStats()
    for name in ("p50", "p90", "p95", "p99", "mean", "max"):
        value = getattr(figures, name)
        if value is not None:
            setattr(stats, name, value)
    return stats


def _whole(store: SignalAnalytics, project: str, window: Window) -> GroupFigures:
    rows = store.group_figures(project, window, None)
    if rows:
        return rows[0]
    return GroupFigures(None, 0, 0, 0, 0, 0, None, LatencyFigures())


def _set_window(
    answer: query_pb2.AnalyticsSummary
    | query_pb2.CostBreakdown
    | query_service_pb2.GetScoreStatsResponse,
    window: Window,
) -> None:
    assert window.start is not None
    assert window.end is not None
    getattr(answer, "from").CopyFrom(messages.timestamp_of(window.start))
    answer.to.CopyFrom(messages.timestamp_of(window.end))
