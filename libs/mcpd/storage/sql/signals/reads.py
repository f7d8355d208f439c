"""Reading signals back: one trace with what hangs off it, a session's spans, held traces,
facet counts.

Rows come back as `mcpd.signals.rows` dicts keyed by column name, every column of the row
present and nothing else (`select_rows` leaves out what the store keeps for itself: arrival
sequences, search vectors); the query service's lists (`lists`) read rows the same way. Spans
are put in read order in Python (`order_spans`), since their depth in the tree is not a column.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any, cast

from sqlalchemy import Connection, Select, Table, Text, func, select
from sqlalchemy import cast as sql_cast

from mcpd.signals import documents
from mcpd.signals.batch import HeldTrace, TraceRecords
from mcpd.signals.documents import PAYLOADS
from mcpd.signals.projection import HELD_SPAN_FIELDS, order_spans, summarize_held
from mcpd.signals.rows import (
    FeedbackRow,
    LogRow,
    ScoreRow,
    SpanRow,
    TraceRow,
)
from mcpd.storage.sql.schema import trace as schema
from mcpd.storage.sql.schema.trace import HEAD_JSON, facet_values, held_spans, row_columns

# Each held-span field read out of the JSON row as text (portable: SQLite's json_extract and
# PostgreSQL's ->> agree on text), then converted here.
_HELD_FIELDS = [
    held_spans.c.row[name].as_string() for name in HELD_SPAN_FIELDS if name != "received_at"
]


def trace_records(
    conn: Connection, project: str, trace_id: str, *, logs: bool, scores: bool, feedback: bool
) -> TraceRecords | None:
    """One trace of one project and what hangs off it (see `TraceStore.trace_records`)."""
    traces = schema.traces
    found = rows_of(
        conn,
        select_rows(traces).where(traces.c.project == project, traces.c.trace_id == trace_id),
    )
    if not found:
        return None
    span_rows = rows_of(conn, _of_trace(schema.spans, project, trace_id))
    attached = _attached(
        conn, project, trace_id, found[0], logs=logs, scores=scores, feedback=feedback
    )
    return dataclasses.replace(attached, spans=order_spans(cast(list[SpanRow], span_rows)))


def _attached(
    conn: Connection,
    project: str,
    trace_id: str,
    trace: dict[str, Any],
    *,
    logs: bool,
    scores: bool,
    feedback: bool,
) -> TraceRecords:
    """The trace's records without its spans: the trace row and, as asked, what hangs off it."""
    return TraceRecords(
        trace=cast(TraceRow, trace),
        spans=[],
        logs=cast(list[LogRow], _timed(conn, schema.logs, "log_id", project, trace_id, logs)),
        scores=cast(
            list[ScoreRow], _timed(conn, schema.scores, "score_id", project, trace_id, scores)
        ),
        feedback=cast(
            list[FeedbackRow],
            _timed(conn, schema.feedback, "feedback_id", project, trace_id, feedback),
        ),
    )


def trace_detail_json(
    conn: Connection, project: str, trace_id: str, *, logs: bool, scores: bool, feedback: bool
) -> bytes | None:
    """The spec JSON of one trace's TraceDetail (see `TraceStore.trace_detail_json`): each span
    put together from its stored `head_json` and payload texts, none of them parsed. A trace
    holding a span written before `head_json` existed is rendered from its rows."""
    found = rows_of(conn, _of_trace(schema.traces, project, trace_id))
    if not found:
        return None
    spans = schema.spans
    stored = conn.execute(
        select(
            spans.c.span_id,
            spans.c.parent_span_id,
            spans.c.start_time,
            spans.c[HEAD_JSON],
            *(sql_cast(spans.c[name], Text) for name in PAYLOADS),
        ).where(spans.c.project == project, spans.c.trace_id == trace_id)
    ).all()
    attached = _attached(
        conn, project, trace_id, found[0], logs=logs, scores=scores, feedback=feedback
    )
    if any(row.head_json is None for row in stored):
        span_rows = order_spans(
            cast(list[SpanRow], rows_of(conn, _of_trace(spans, project, trace_id)))
        )
        return documents.trace_detail_json(dataclasses.replace(attached, spans=span_rows))
    # Read order needs only the tree and the start times; each key carries its stored texts.
    keys = [
        {
            "span_id": row.span_id,
            "parent_span_id": row.parent_span_id,
            "start_time": row.start_time,
            "texts": row[3:],
        }
        for row in stored
    ]
    ordered = cast(list[dict[str, Any]], order_spans(cast(list[SpanRow], keys)))
    spans_json = documents.stored_spans_json([key["texts"] for key in ordered])
    return documents.detail_json(attached, spans_json)


def held_traces(conn: Connection) -> list[HeldTrace]:
    """Every trace with held spans, summarised; oldest first arrival first."""
    result = conn.execute(
        select(held_spans.c.project, held_spans.c.trace_id, held_spans.c.received_at, *_HELD_FIELDS)
    )
    groups: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for project, trace_id, received_at, span_id, status, is_root, is_event, start, end in result:
        groups.setdefault((project, trace_id), []).append(
            {
                "span_id": span_id,
                "status": status,
                "is_root": _truthy(is_root),
                "is_event": _truthy(is_event),
                "start_time": int(start),
                "end_time": int(end) if end is not None else None,
                "received_at": received_at,
            }
        )
    summaries = [
        summarize_held(project, trace_id, rows) for (project, trace_id), rows in groups.items()
    ]
    summaries.sort(key=lambda held: (held.first_received_at, held.project, held.trace_id))
    return summaries


def facet_value_count(conn: Connection, project: str, facet: str, key: str) -> int:
    """Distinct values stored for (project, facet, key)."""
    count = conn.execute(
        select(func.count()).where(
            facet_values.c.project == project,
            facet_values.c.facet == facet,
            facet_values.c.key == key,
        )
    ).scalar_one()
    return int(count)


def _truthy(text: Any) -> bool:
    # SQLite hands a JSON true back as 1 (or '1' through the text cast), PostgreSQL as 'true'.
    return text in (1, "1", "true", True)


def _of_trace(table: Table, project: str, trace_id: str) -> Any:
    return select_rows(table).where(table.c.project == project, table.c.trace_id == trace_id)


def _timed(
    conn: Connection, table: Table, id_column: str, project: str, trace_id: str, wanted: bool
) -> list[dict[str, Any]]:
    if not wanted:
        return []
    statement = _of_trace(table, project, trace_id).order_by(table.c.timestamp, table.c[id_column])
    return rows_of(conn, statement)


def select_rows(table: Table) -> Select[Any]:
    """SELECT the columns of `table`'s rows (see the module docstring)."""
    return select(*row_columns(table))


def rows_of(conn: Connection, statement: Any) -> list[dict[str, Any]]:
    """The statement's result as dicts keyed by column name."""
    result = conn.execute(statement)
    names: Sequence[str] = list(result.keys())
    return [dict(zip(names, values, strict=True)) for values in result]
