"""The rollup rows a window's whole buckets select, on ClickHouse: one condition on `level` and
`bucket_start` shared by the trace rollups and the score rollups (`mcpd.signals.rollups.plan`
splits a window into those ranges)."""

from __future__ import annotations

from collections.abc import Sequence

from mcpd.signals.rollups import Range

__all__ = ["in_ranges"]


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
