"""Score rollups on SQLite and PostgreSQL: the `score_rollups` table (`mcpd.signals.rollups` says
what a row holds), kept in the transaction of every write and delete of scores, and read by
`score_stats`.

* **Keeping.** A score row is upserted by (project, score_id), and a re-sent score may carry
  another scorer, time or value, so a write subtracts the stored row of each id it writes and
  adds the new one (`replace_scores`). Two things make that exact on PostgreSQL, where writers
  and deletes run at once. Every writer takes an advisory lock per score id it writes
  (`lock_keys`), in the same ordered call as its traces' locks, so two writers of one new score
  cannot both find nothing stored and both add. And the stored rows are read `FOR UPDATE`: a
  delete that got to a row first has removed it by the time the read returns (nothing to
  subtract), and a delete that comes second waits and removes what this write stored. Deletes
  subtract exactly the rows they removed, handed back by `RETURNING` (`SCORE_RETURNING`,
  `subtract_deleted`), however they matched them. Every change ends in `apply`, one upsert in
  key order right after the rollups' (`rollups.apply` calls it), so writers lock rollup rows,
  then score rollup rows, in one order; a row left counting nothing is deleted.
* **Reading.** `score_stats`: a window's whole days and hours from rollup rows, its ragged edges
  (under an hour each) from the scores themselves, and a window without a whole hour from the
  scores alone (`plan`), through the (project, scorer_id, timestamp) index.
* `rebuild` recomputes every row from the stored scores (migration 0009's backfill).
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from sqlalchemy import (
    ColumnElement,
    Connection,
    Select,
    TextClause,
    and_,
    bindparam,
    delete,
    func,
    or_,
    select,
    text,
)

from mcpd.signals.queries import ScoreStats, Window
from mcpd.signals.rollups import (
    SCORE_COLUMNS,
    SCORE_ROLLUP_KEY,
    SCORE_ROLLUP_PARTS,
    Delta,
    Range,
    plan,
)
from mcpd.storage.sql.dialect import SqlDialect
from mcpd.storage.sql.schema.rollups import score_rollups
from mcpd.storage.sql.schema.trace import scores
from mcpd.storage.sql.signals.reproject import chunks
from mcpd.storage.sql.signals.statements import lock_key

Row = Mapping[str, Any]

_KEY, _PARTS = SCORE_ROLLUP_KEY, SCORE_ROLLUP_PARTS
_LOCK_KIND = b"mcpd-score"

SCORE_RETURNING = (scores.c.scorer_id, scores.c.timestamp, scores.c.value)
"""What a delete of scores returns, for `subtract_deleted`."""


# --- keeping -----------------------------------------------------------------------------------


def lock_keys(rows: Iterable[Row]) -> list[int]:
    """The advisory lock keys of the score ids of `rows` (see the module docstring)."""
    return [lock_key(_LOCK_KIND, row["project"], _stored_text(row["score_id"])) for row in rows]


def replace_scores(conn: Connection, written: Sequence[Row], delta: Delta) -> None:
    """Into `delta`: the score rows `written` less the stored rows of their ids, read now
    (before the caller writes; locked on PostgreSQL)."""
    if not written:
        return
    by_project: dict[str, list[str]] = {}
    for row in written:
        by_project.setdefault(row["project"], []).append(_stored_text(row["score_id"]))
    for project, score_ids in sorted(by_project.items()):
        for chunk in chunks(sorted(set(score_ids))):
            stored = conn.execute(_stored_statement(), {"project": project, "ids": chunk})
            delta.add_scores(({"project": project, **row} for row in stored.mappings()), -1)
    delta.add_scores(written)


@functools.cache
def _stored_statement() -> Select[Any]:
    # FOR UPDATE renders nothing on SQLite, whose BEGIN IMMEDIATE made this the only writer.
    return (
        select(*[scores.c[name] for name in SCORE_COLUMNS])
        .where(
            scores.c.project == bindparam("project"),
            scores.c.score_id.in_(bindparam("ids", expanding=True)),
        )
        .order_by(scores.c.score_id)
        .with_for_update()
    )


def _stored_text(value: str) -> str:
    """Text as the stores keep it: NUL, which PostgreSQL refuses, as U+FFFD."""
    return value.replace("\x00", "\ufffd")


def subtract_deleted(delta: Delta, project: str, rows: Iterable[Any]) -> int:
    """Subtract score rows a delete returned (`SCORE_RETURNING`); how many there were."""
    removed = 0
    for scorer_id, timestamp, value in rows:
        delta.add_score(
            {"project": project, "scorer_id": scorer_id, "timestamp": timestamp, "value": value},
            -1,
        )
        removed += 1
    return removed


def apply(conn: Connection, dialect: SqlDialect, delta: Delta) -> None:
    """Add the delta's score parts to the score rollup rows, in key order; rows left counting
    nothing go. (One statement on both dialects.)"""
    del dialect
    params: list[dict[str, Any]] = []
    emptied: list[dict[str, Any]] = []
    for key, sums in delta.score_changes():
        row = dict(zip(_KEY, key, strict=True))
        params.append({**row, "count": sums.count, "value_sum": sums.value_sum})
        if sums.count < 0:
            emptied.append(row)
    if not params:
        return
    conn.execute(_upsert(), params)
    if emptied:
        conn.execute(_delete_empty(), emptied)


@functools.cache
def _upsert() -> TextClause:
    columns = [*_KEY, *_PARTS]
    added = ", ".join(f"{name} = score_rollups.{name} + excluded.{name}" for name in _PARTS)
    return text(
        f"INSERT INTO score_rollups ({', '.join(columns)}) "
        f"VALUES ({', '.join(f':{name}' for name in columns)}) "
        f"ON CONFLICT ({', '.join(_KEY)}) DO UPDATE SET {added}"
    )


@functools.cache
def _delete_empty() -> TextClause:
    where = " AND ".join(f"{name} = :{name}" for name in _KEY)
    return text(f"DELETE FROM score_rollups WHERE {where} AND count = 0")


def rebuild(conn: Connection, dialect: SqlDialect) -> None:
    """Every score rollup row again, from the stored scores (migration 0009's backfill); a
    project at a time."""
    conn.execute(delete(score_rollups))
    projects = list(conn.execute(select(scores.c.project).distinct()).scalars())
    for project in sorted(projects):
        delta = Delta()
        rows = select(*[scores.c[name] for name in SCORE_COLUMNS]).where(
            scores.c.project == project
        )
        delta.add_scores({"project": project, **row} for row in conn.execute(rows).mappings())
        apply(conn, dialect, delta)


# --- reading -----------------------------------------------------------------------------------


def _in_ranges(ranges: Sequence[Range]) -> ColumnElement[bool]:
    clauses = []
    for part in ranges:
        conditions = [score_rollups.c.level == part.level]
        if part.start is not None:
            conditions.append(score_rollups.c.bucket_start >= part.start)
        if part.end is not None:
            conditions.append(score_rollups.c.bucket_start < part.end)
        clauses.append(and_(*conditions))
    return or_(*clauses)


def score_stats(conn: Connection, project: str, scorer_id: str, window: Window) -> ScoreStats:
    """`SignalAnalytics.score_stats`: whole buckets from rollup rows, edges from the scores."""
    shape = plan(window)
    scorer_id = _stored_text(scorer_id)
    count, total = 0, 0.0
    if shape.ranges:
        c = score_rollups.c
        found = conn.execute(
            select(func.sum(c.count), func.sum(c.value_sum)).where(
                c.project == project, c.scorer_id == scorer_id, _in_ranges(shape.ranges)
            )
        ).one()
        count += int(found[0] or 0)
        total += float(found[1] or 0.0)
    for edge in shape.raw:
        conditions = [scores.c.project == project, scores.c.scorer_id == scorer_id]
        if edge.start is not None:
            conditions.append(scores.c.timestamp >= edge.start)
        if edge.end is not None:
            conditions.append(scores.c.timestamp < edge.end)
        statement = select(func.count(), func.sum(scores.c.value)).where(*conditions)
        edge_count, edge_sum = conn.execute(statement).one()
        count += int(edge_count)
        total += float(edge_sum or 0.0)
    return ScoreStats(count=count, value_sum=total if count else 0.0)
