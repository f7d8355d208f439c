"""The buckets of the rollup tables on ClickHouse, shared by the trace rollups and the score
rollups: the rows a window's whole buckets select (`mcpd.signals.rollups.plan` splits a window
into those ranges), and the rows of hours a delete touched, cleared before they are rebuilt."""

from __future__ import annotations

from collections.abc import Sequence

from mcpd.signals.rollups import DAY_NS, HOUR_NS, Range
from mcpd.storage.clickhouse.executor import ClickHouseExecutor

__all__ = ["clear_hours", "in_ranges"]


def in_ranges(ranges: Sequence[Range], params: dict[str, object]) -> str:
    """The condition on `level` and `bucket_start` selecting the rollup rows of `ranges`,
    their bounds added to `params`."""
    clauses = []
    for index, part in enumerate(ranges):
        conditions = [f"level = {int(part.level)}"]
        if part.start is not None:
            conditions.append(f"bucket_start >= {{start_{index}:Int64}}")
            params[f"start_{index}"] = part.start
        if part.end is not None:
            conditions.append(f"bucket_start < {{end_{index}:Int64}}")
            params[f"end_{index}"] = part.end
        clauses.append("(" + " AND ".join(conditions) + ")")
    return "(" + " OR ".join(clauses) + ")"


def clear_hours(
    executor: ClickHouseExecutor, table: str, project: str, pending: set[int]
) -> dict[str, object] | None:
    """Delete `table`'s rows of the project's `pending` hours and of the days holding them, and
    empty `pending`; the parameters naming them (`project`, `hours`, `days`) for the statements
    that write them again, or None when no hour is pending."""
    if not pending:
        return None
    hours = sorted(pending)
    days = sorted({hour - hour % DAY_NS for hour in hours})
    pending.clear()
    params: dict[str, object] = {"project": project, "hours": hours, "days": days}
    in_hours = f"bucket_start IN {{hours:Array(Int64)}} AND level = {HOUR_NS}"
    in_days = f"bucket_start IN {{days:Array(Int64)}} AND level = {DAY_NS}"
    executor.command(
        f"DELETE FROM {table} WHERE project = {{project:String}} AND (({in_hours}) OR ({in_days}))",
        params,
    )
    return params
