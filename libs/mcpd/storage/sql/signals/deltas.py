"""Delta polling on SQLite and PostgreSQL: the rows of one signal that arrived after a position.

Every write transaction stamps the spans, traces and logs it writes with one `arrival_seq`
(`statements.next_arrival`), and a poll walks (arrival_seq, identity) forwards from the caller's
`DeltaPosition`, served by the (project, arrival_seq) index. What makes it safe to walk is that
no row can later appear behind a position already handed out:

* SQLite serialises writers (BEGIN IMMEDIATE), and the sequence comes from a counter bumped
  inside the write transaction, so sequences commit in the order they are handed out: a poll
  sees every committed row, and any later one carries a larger sequence.
* PostgreSQL commits concurrent writers out of order. The sequence there is the writing
  transaction's id, and a poll only returns rows whose id is below the oldest transaction still
  in flight (`pg_snapshot_xmin` of the statement's own snapshot): everything below it has
  committed (or aborted) and is visible, and anything still to commit carries an id at or above
  it, so it lands ahead of the position. A long transaction anywhere in the cluster holds polls
  back until it ends; it never makes them skip.

A position of `(seq, ())` stands before every row of `seq` (the end handed out for `after` None:
the SQLite counter's next value, PostgreSQL's xmin). A re-written row (a re-projected trace, a
re-sent span) carries its new transaction's sequence, so it arrives again, further on.
"""

from __future__ import annotations

from typing import Any, assert_never

from sqlalchemy import BigInteger, ColumnElement, Connection, Table, Text, func, select, tuple_

from mcpd.runtime.errors import InvalidArgument, quoted
from mcpd.signals.queries import DeltaPage, DeltaPosition
from mcpd.storage.sql.dialect import SqlDialect
from mcpd.storage.sql.schema.trace import (
    ARRIVAL_SEQ,
    arrival_clock,
    logs,
    row_columns,
    spans,
    traces,
)

SIGNALS: dict[str, tuple[Table, tuple[str, ...]]] = {
    "traces": (traces, ("trace_id",)),
    "spans": (spans, ("trace_id", "span_id")),
    "logs": (logs, ("log_id",)),
}
"""The pollable signals (the spec's DeltaSignal): each one's table and identity columns."""

_XMIN = func.pg_snapshot_xmin(func.pg_current_snapshot()).cast(Text).cast(BigInteger)


def deltas(
    conn: Connection,
    dialect: SqlDialect,
    project: str,
    signal: str,
    after: DeltaPosition | None,
    *,
    limit: int,
) -> DeltaPage:
    """`TraceStore.deltas` on one read connection (see the module docstring)."""
    if signal not in SIGNALS:
        raise InvalidArgument(
            f"signal {quoted(signal)} cannot be polled; choose one of {', '.join(SIGNALS)}",
            field="signal",
        )
    if limit < 1:
        raise InvalidArgument("limit must be at least 1", field="limit")
    table, identity = SIGNALS[signal]
    if after is None:
        return DeltaPage(rows=[], position=DeltaPosition(_end(conn, dialect)), has_more=False)
    if after.key and len(after.key) != len(identity):
        raise InvalidArgument(f"the position is not one of a {signal} poll", field="cursor")
    seq = table.c[ARRIVAL_SEQ]
    names = [column.name for column in row_columns(table)]
    statement = (
        select(*row_columns(table), seq)
        .where(table.c.project == project, *_after(table, identity, after))
        .order_by(seq, *[table.c[name] for name in identity])
        .limit(limit + 1)
    )
    if dialect is SqlDialect.POSTGRES:
        statement = statement.where(seq < _XMIN)
    found = conn.execute(statement).all()
    if not found:
        return DeltaPage(rows=[], position=after, has_more=False)
    page = found[:limit]
    # Each result row is the table row's columns, then its arrival sequence.
    rows = [dict(zip(names, tuple(values)[:-1], strict=True)) for values in page]
    position = DeltaPosition(
        seq=int(page[-1][-1]), key=tuple(str(rows[-1][name]) for name in identity)
    )
    return DeltaPage(rows=rows, position=position, has_more=len(found) > limit)


def _after(
    table: Table, identity: tuple[str, ...], after: DeltaPosition
) -> list[ColumnElement[bool]]:
    """Strictly after `after` in (arrival_seq, identity) order. The plain `>=` on the sequence
    comes first so the index range does the narrowing; the row comparison only sorts out the
    rows of `after.seq` itself."""
    seq = table.c[ARRIVAL_SEQ]
    if not after.key:
        return [seq >= after.seq]
    keys = tuple_(*[table.c[name] for name in identity])
    return [seq >= after.seq, (seq > after.seq) | (keys > tuple_(*after.key))]


def _end(conn: Connection, dialect: SqlDialect) -> int:
    """The sequence every row still to come is at or above."""
    match dialect:
        case SqlDialect.SQLITE:
            last = conn.execute(
                select(arrival_clock.c.seq).where(arrival_clock.c.id == 1)
            ).scalar_one_or_none()
            return int(last or 0) + 1
        case SqlDialect.POSTGRES:
            xmin: Any = conn.execute(select(_XMIN)).scalar_one()
            return int(xmin)
        case _:
            assert_never(dialect)
