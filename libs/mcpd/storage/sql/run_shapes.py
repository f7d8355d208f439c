"""The shapes of a window's runs, on SQLite and PostgreSQL: what the evaluation service's run
watches read (`RunReads.run_shapes`).

The window holds the runs that ended in [start, end) and the runs still running whose row
last changed in it (a completed step moves `updated_at`), newest first by that instant, at most
`limit` of them; `runs(project, ended_at)` finds both kinds (a running run's `ended_at` is
NULL).

A run's `max_node_attempts` is computed in the same statement from `step_attempts`, grouped by
the node of the definition each attempt ran. A step key names its node (`libs/mcpd/workflows/
step_keys.py`): `classify`, `refund/issue` (a branch), `classify[3]` (a foreach item: a step of
its own, since each item is different work) and `poll[7]/check` (the body of a loop in one
iteration: the same node each time, so every iteration counts towards `poll/check`). Retries
are further attempts at one step key, so a retry and a loop iteration of a node count alike.
Wait frames (kind `wait`, the row every non-claimable construct keeps) and skipped steps are
no attempts at work and are left out.
"""

from __future__ import annotations

from typing import Any, assert_never

from sqlalchemy import (
    ColumnElement,
    Connection,
    Integer,
    Text,
    and_,
    case,
    func,
    literal,
    select,
    union_all,
)

from mcpd.storage.run_records import RunShape, RunShapes
from mcpd.storage.sql.dialect import SqlDialect
from mcpd.storage.sql.schema.run import runs, step_attempts

__all__ = ["run_shapes"]

# Every run status but this one is terminal.
RUNNING = "running"
SUCCEEDED = "succeeded"


def run_shapes(
    conn: Connection,
    dialect: SqlDialect,
    project: str,
    *,
    start: int,
    end: int,
    limit: int,
    baseline: int,
) -> RunShapes:
    """`RunReads.run_shapes` inside the caller's (read) transaction."""
    c = runs.c
    shape = (c.run_id, c.definition_id, c.definition_version, c.status, c.steps_used, c.ended_at)
    ended = select(*shape, c.ended_at.label("at")).where(
        c.project == project, c.ended_at >= start, c.ended_at < end
    )
    moving = select(*shape, c.updated_at.label("at")).where(
        c.project == project,
        c.ended_at.is_(None),
        c.status == RUNNING,
        c.updated_at >= start,
        c.updated_at < end,
    )
    every = union_all(ended, moving).subquery("every")
    window = (
        select(every)
        .order_by(every.c.at.desc(), every.c.run_id.desc())
        .limit(limit + 1)
        .cte("window")
    )
    most = _most_attempts(dialect, window.c.run_id)
    statement = (
        select(window, func.coalesce(most.c.most, 0).label("most"))
        .select_from(window.outerjoin(most, most.c.run_id == window.c.run_id))
        .order_by(window.c.at.desc(), window.c.run_id.desc())
    )
    rows = conn.execute(statement).mappings().all()
    shapes = tuple(
        RunShape(
            run_id=row["run_id"],
            definition_id=row["definition_id"],
            definition_version=int(row["definition_version"]),
            status=row["status"],
            steps_used=int(row["steps_used"]),
            ended_at=None if row["ended_at"] is None else int(row["ended_at"]),
            max_node_attempts=int(row["most"]),
        )
        for row in rows[:limit]
    )
    versions = sorted({(run.definition_id, run.definition_version) for run in shapes})
    baselines = {
        version: _completed_steps(conn, project, *version, baseline) for version in versions
    }
    return RunShapes(runs=shapes, truncated=len(rows) > limit, baselines=baselines)


def _most_attempts(dialect: SqlDialect, window_runs: ColumnElement[Any]) -> Any:
    """(run_id, most) for the window's runs: the most attempts at one node of the definition."""
    a = step_attempts.c
    key = a.step_key
    # `node[i]/body` is the loop node's body in iteration i: `node/body` whatever i is.
    opening, closing = _position(dialect, key, "["), _position(dialect, key, "]/")
    node = case(
        (closing > 0, func.substr(key, 1, opening - 1, type_=Text) + func.substr(key, closing + 1)),
        else_=key,
    )
    keyed = (
        select(a.run_id, node.label("node"))
        .where(a.run_id.in_(select(window_runs)), a.kind != "wait", a.status != "skipped")
        .subquery("keyed")
    )
    per_node = (
        select(keyed.c.run_id, func.count().label("attempts"))
        .group_by(keyed.c.run_id, keyed.c.node)
        .subquery("per_node")
    )
    return (
        select(per_node.c.run_id, func.max(per_node.c.attempts).label("most"))
        .group_by(per_node.c.run_id)
        .subquery("most")
    )


def _position(dialect: SqlDialect, text: ColumnElement[str], part: str) -> ColumnElement[int]:
    """Where `part` first occurs in `text`, from 1; 0 when it does not."""
    needle = literal(part)
    match dialect:
        case SqlDialect.SQLITE:
            return func.instr(text, needle, type_=Integer)
        case SqlDialect.POSTGRES:
            return func.strpos(text, needle, type_=Integer)
        case _:
            assert_never(dialect)


def _completed_steps(
    conn: Connection, project: str, definition_id: str, version: int, limit: int
) -> tuple[int, ...]:
    """The steps_used of the version's newest `limit` succeeded runs (by start), newest first."""
    if limit == 0:
        return ()
    c = runs.c
    statement = (
        select(c.steps_used)
        .where(
            and_(
                c.project == project,
                c.definition_id == definition_id,
                c.definition_version == version,
                c.status == SUCCEEDED,
            )
        )
        .order_by(c.created_at.desc(), c.run_id.desc())
        .limit(limit)
    )
    return tuple(int(steps) for steps in conn.execute(statement).scalars())
