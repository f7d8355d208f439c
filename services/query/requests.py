"""Read requests -> the store's questions (`mcpd.signals.queries`), checked field by field.

Everything a caller can get wrong is refused here with INVALID_ARGUMENT naming the field, so
a store only ever sees a well-formed question: enumerations as the spec's names, times as
nanoseconds, the `user_id` filter hashed the way ingest hashed it, the cursor's position.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from typing import Any

from google.protobuf.descriptor import EnumDescriptor

from mcpd.codec import enum_names
from mcpd.model.v1 import enums_pb2
from mcpd.query.v1 import query_service_pb2 as rpc
from mcpd.runtime import cursors
from mcpd.runtime.cursors import paging
from mcpd.runtime.errors import InvalidArgument, quoted
from mcpd.signals import messages
from mcpd.signals.queries import (
    LOG_LEVELS,
    SPAN_GROUPS,
    TRACE_GROUPS,
    TRACE_ORDER_COLUMNS,
    DeltaPosition,
    FeedbackQuery,
    LogQuery,
    ScoreQuery,
    SpanQuery,
    TraceQuery,
    Window,
)
from mcpd.signals.rows import MIN_TIME_NS, storable_time

DEFAULT_DISCOVERY = 100
DEFAULT_DELTAS = 100
DEFAULT_WINDOW_NS = 24 * 3600 * 1_000_000_000
"""Analytics, cost and metric series cover the last 24 hours when `from` is absent."""
GROUP_BY = SPAN_GROUPS | TRACE_GROUPS

_HEX_ID = {"trace_id": re.compile(r"[0-9a-f]{32}"), "span_id": re.compile(r"[0-9a-f]{16}")}
_NS_PER_MS = 1_000_000

# Position element types per list, checked when a cursor is decoded.
_TRACE_POSITION = ((int, float, type(None)), str)
_SPAN_POSITION = (int, str, str)
_TIMED_POSITION = (int, str)
_DELTA_POSITION = (int, list)

HashUser = Callable[[str], str]
"""The server's keyed hash of an end-user id (`Redactor.hash_identifier`)."""


# --- shared pieces -----------------------------------------------------------------------------


def window_of(request: Any, *, default_ns: int | None = None, now_ns: int | None = None) -> Window:
    """`from` (inclusive) and `to` (exclusive) in ns. With `default_ns`, an absent `to` is now
    and an absent `from` is `default_ns` before `to` (analytics need a closed window)."""
    start = _time(request, "from")
    end = _time(request, "to")
    if default_ns is not None:
        assert now_ns is not None
        end = now_ns if end is None else end
        start = max(end - default_ns, MIN_TIME_NS) if start is None else start
    if start is not None and end is not None and start >= end:
        raise InvalidArgument("from must be before to", field="from")
    return Window(start, end)


def optional(request: Any, name: str) -> Any:
    """The field's value when present, else None."""
    return getattr(request, name) if request.HasField(name) else None


def hex_id(request: Any, name: str) -> str | None:
    """A trace or span id filter, lowercased; refused unless it is the spec's hex form."""
    value = optional(request, name)
    if value is None:
        return None
    value = value.lower()
    if not _HEX_ID[name].fullmatch(value):
        size = 32 if name == "trace_id" else 16
        raise InvalidArgument(f"{name} must be {size} hex characters", field=name)
    return str(value)


def enum_values(enum: EnumDescriptor, numbers: Iterable[int], field: str) -> tuple[str, ...]:
    """Enumeration numbers as the spec's names; UNSPECIFIED or unknown numbers are refused."""
    names = enum_names(enum).by_number
    found: list[str] = []
    for number in numbers:
        name = names.get(number)
        if name is None:
            raise InvalidArgument(f"{field}: {number} is not a value", field=field)
        found.append(name)
    return tuple(found)


def enum_value(request: Any, enum: EnumDescriptor, field: str) -> str | None:
    """One optional enumeration field as its spec name."""
    if not request.HasField(field):
        return None
    return enum_values(enum, [getattr(request, field)], field)[0]


def text(request: Any, name: str) -> str | None:
    """An optional text filter; an empty string is refused (it would match nothing)."""
    value = optional(request, name)
    if value is not None and not value.strip():
        raise InvalidArgument(f"{name} must not be empty", field=name)
    return value if value is None else str(value)


def group_by(request: Any) -> str | None:
    """The analytics dimension, one of GROUP_BY."""
    value = optional(request, "group_by")
    if value is not None and value not in GROUP_BY:
        raise InvalidArgument(
            f"group_by: {quoted(value)} is not a dimension; choose from "
            + ", ".join(sorted(GROUP_BY)),
            field="group_by",
        )
    return value if value is None else str(value)


# --- one function per list ---------------------------------------------------------------------


def trace_query(request: rpc.ListTracesRequest, hash_user: HashUser) -> TraceQuery:
    """ListTracesRequest -> TraceQuery."""
    column, descending = _trace_order(optional(request, "order_by"))
    page = paging(request, "traces", _TRACE_POSITION)
    scorer_id = text(request, "scorer_id")
    if scorer_id is None and (request.HasField("min_score") or request.HasField("max_score")):
        raise InvalidArgument("min_score and max_score need scorer_id", field="scorer_id")
    feedback_kind = enum_value(request, enums_pb2.FeedbackKind.DESCRIPTOR, "feedback_kind")
    if feedback_kind is None and request.HasField("feedback_value"):
        raise InvalidArgument("feedback_value needs feedback_kind", field="feedback_kind")
    user_id = text(request, "user_id")
    return TraceQuery(
        window=window_of(request),
        statuses=enum_values(enums_pb2.SpanStatus.DESCRIPTOR, request.status, "status"),
        kinds=enum_values(enums_pb2.SpanKind.DESCRIPTOR, request.kind, "kind"),
        name=text(request, "name"),
        model=text(request, "model"),
        provider=text(request, "provider"),
        tags=tuple(request.tags),
        environment=text(request, "environment"),
        service_name=text(request, "service_name"),
        session_id=text(request, "session_id"),
        user_id=hash_user(user_id) if user_id is not None else None,
        min_duration_ns=_ms(request, "min_duration_ms"),
        max_duration_ns=_ms(request, "max_duration_ms"),
        min_cost=optional(request, "min_cost"),
        max_cost=optional(request, "max_cost"),
        scorer_id=scorer_id,
        min_score=optional(request, "min_score"),
        max_score=optional(request, "max_score"),
        feedback_kind=feedback_kind,
        feedback_value=optional(request, "feedback_value"),
        q=text(request, "q"),
        order_column=column,  # type: ignore[arg-type]
        descending=descending,
        after=(page.after[0], page.after[1]) if page.after else None,
        limit=page.limit,
    )


def span_query(request: rpc.ListSpansRequest) -> SpanQuery:
    """ListSpansRequest -> SpanQuery."""
    page = paging(request, "spans", _SPAN_POSITION)
    return SpanQuery(
        window=window_of(request),
        trace_id=hex_id(request, "trace_id"),
        kinds=enum_values(enums_pb2.SpanKind.DESCRIPTOR, request.kind, "kind"),
        statuses=enum_values(enums_pb2.SpanStatus.DESCRIPTOR, request.status, "status"),
        name=text(request, "name"),
        model=text(request, "model"),
        q=text(request, "q"),
        after=(page.after[0], page.after[1], page.after[2]) if page.after else None,
        limit=page.limit,
    )


def log_query(request: rpc.ListLogsRequest) -> LogQuery:
    """ListLogsRequest -> LogQuery."""
    page = paging(request, "logs", _TIMED_POSITION)
    level = enum_value(request, enums_pb2.LogLevel.DESCRIPTOR, "level")
    assert level is None or level in LOG_LEVELS
    return LogQuery(
        window=window_of(request),
        min_level=level,
        trace_id=hex_id(request, "trace_id"),
        span_id=hex_id(request, "span_id"),
        q=text(request, "q"),
        after=(page.after[0], page.after[1]) if page.after else None,
        limit=page.limit,
    )


def score_query(request: rpc.ListScoresRequest) -> ScoreQuery:
    """ListScoresRequest -> ScoreQuery."""
    page = paging(request, "scores", _TIMED_POSITION)
    return ScoreQuery(
        trace_id=hex_id(request, "trace_id"),
        scorer_id=text(request, "scorer_id"),
        source=enum_value(request, enums_pb2.ScoreSource.DESCRIPTOR, "source"),
        after=(page.after[0], page.after[1]) if page.after else None,
        limit=page.limit,
    )


def feedback_query(request: rpc.ListFeedbackRequest) -> FeedbackQuery:
    """ListFeedbackRequest -> FeedbackQuery."""
    page = paging(request, "feedback", _TIMED_POSITION)
    return FeedbackQuery(
        trace_id=hex_id(request, "trace_id"),
        kind=enum_value(request, enums_pb2.FeedbackKind.DESCRIPTOR, "kind"),
        after=(page.after[0], page.after[1]) if page.after else None,
        limit=page.limit,
    )


def delta_position(request: rpc.ListDeltasRequest, signal: str) -> DeltaPosition | None:
    """The position of a poll's cursor (None: start at the current end)."""
    if not request.HasField("cursor"):
        return None
    seq, key = cursors.decode(
        request.cursor, f"delta:{signal}", cursors.fingerprint(request), _DELTA_POSITION
    )
    if not all(isinstance(part, str) for part in key):
        raise InvalidArgument("cursor cannot be used: it is damaged", field="cursor")
    return DeltaPosition(seq, tuple(key))


def delta_cursor(request: rpc.ListDeltasRequest, signal: str, position: DeltaPosition) -> str:
    """The cursor a poll answers with."""
    return cursors.encode(
        f"delta:{signal}", cursors.fingerprint(request), [position.seq, list(position.key)]
    )


def _trace_order(order_by: str | None) -> tuple[str, bool]:
    # Newest first when absent: what a run list opens on. An explicit name sorts ascending
    # and a leading "-" descending, as the request documents.
    if order_by is None:
        return "start_time", True
    descending = order_by.startswith("-")
    column = TRACE_ORDER_COLUMNS.get(order_by.removeprefix("-"))
    if column is None:
        choices = ", ".join(TRACE_ORDER_COLUMNS)
        raise InvalidArgument(
            f"order_by: {quoted(order_by)} is not an ordering; choose from {choices}, "
            "optionally prefixed with - for descending",
            field="order_by",
        )
    return column, descending


def _ms(request: Any, name: str) -> int | None:
    value = optional(request, name)
    if value is None:
        return None
    if not storable_time(value * _NS_PER_MS):
        raise InvalidArgument(f"{name} is longer than any stored duration", field=name)
    return int(value) * _NS_PER_MS


def _time(request: Any, name: str) -> int | None:
    if not request.HasField(name):
        return None
    value = messages.nanos_of(getattr(request, name))
    if not storable_time(value):
        raise InvalidArgument(f"{name} must be between 1970-01-01 and 2262-04-11 (UTC)", field=name)
    return value
