"""Read requests become the store's questions, and everything a caller can get wrong is
refused with INVALID_ARGUMENT naming the field."""

from __future__ import annotations

import pytest
from google.protobuf.timestamp_pb2 import Timestamp

from mcpd.model.v1 import enums_pb2
from mcpd.query.v1 import query_service_pb2 as rpc
from mcpd.runtime import cursors
from mcpd.runtime.errors import InvalidArgument
from mcpd.signals.queries import DeltaPosition, TraceQuery, Window
from services.query import requests

NS = 1_000_000_000


def _hash(value: str) -> str:
    return f"hmac-sha256:{value}"


def _field_of(call: object) -> str | None:
    with pytest.raises(InvalidArgument) as raised:
        call()  # type: ignore[operator]
    return raised.value.field


def test_trace_query_maps_every_filter() -> None:
    request = rpc.ListTracesRequest(
        project="p",
        status=[enums_pb2.SPAN_STATUS_ERROR],
        kind=[enums_pb2.SPAN_KIND_AGENT_RUN],
        name="checkout",
        model="gpt-5",
        tags=["a", "b"],
        user_id="alice",
        min_duration_ms=2,
        max_cost=1.5,
        scorer_id="relevance",
        min_score=0.5,
        feedback_kind=enums_pb2.FEEDBACK_KIND_THUMBS,
        feedback_value="up",
        q="refund",
        order_by="-cost",
        limit=10,
    )
    getattr(request, "from").CopyFrom(Timestamp(seconds=100))
    request.to.CopyFrom(Timestamp(seconds=200))
    query = requests.trace_query(request, _hash)
    assert query == TraceQuery(
        window=Window(100 * NS, 200 * NS),
        statuses=("error",),
        kinds=("agent_run",),
        name="checkout",
        model="gpt-5",
        tags=("a", "b"),
        user_id="hmac-sha256:alice",
        min_duration_ns=2_000_000,
        max_cost=1.5,
        scorer_id="relevance",
        min_score=0.5,
        feedback_kind="thumbs",
        feedback_value="up",
        q="refund",
        order_column="total_cost",
        descending=True,
        limit=10,
    )


@pytest.mark.parametrize(
    ("order_by", "column", "descending"),
    [
        (None, "start_time", True),
        ("start_time", "start_time", False),
        ("-duration", "duration_ns", True),
        ("cost", "total_cost", False),
    ],
)
def test_trace_order(order_by: str | None, column: str, descending: bool) -> None:
    request = rpc.ListTracesRequest(project="p")
    if order_by is not None:
        request.order_by = order_by
    query = requests.trace_query(request, _hash)
    assert (query.order_column, query.descending) == (column, descending)


@pytest.mark.parametrize(
    ("request_", "field"),
    [
        (rpc.ListTracesRequest(order_by="price"), "order_by"),
        (rpc.ListTracesRequest(limit=0), "limit"),
        (rpc.ListTracesRequest(limit=1001), "limit"),
        (rpc.ListTracesRequest(min_score=0.1), "scorer_id"),
        (rpc.ListTracesRequest(feedback_value="up"), "feedback_kind"),
        (rpc.ListTracesRequest(status=[enums_pb2.SPAN_STATUS_UNSPECIFIED]), "status"),
        (rpc.ListTracesRequest(kind=[enums_pb2.SpanKind.ValueType(999)]), "kind"),
        (rpc.ListTracesRequest(q="  "), "q"),
        (rpc.ListTracesRequest(cursor="not a cursor"), "cursor"),
    ],
)
def test_trace_query_refusals_name_the_field(request_: rpc.ListTracesRequest, field: str) -> None:
    assert _field_of(lambda: requests.trace_query(request_, _hash)) == field


def test_window_must_be_ordered() -> None:
    request = rpc.ListSpansRequest()
    getattr(request, "from").CopyFrom(Timestamp(seconds=200))
    request.to.CopyFrom(Timestamp(seconds=200))
    assert _field_of(lambda: requests.span_query(request)) == "from"


def test_closed_window_defaults_to_the_last_day() -> None:
    request = rpc.GetAnalyticsSummaryRequest()
    window = requests.window_of(request, default_ns=requests.DEFAULT_WINDOW_NS, now_ns=10**18)
    assert window == Window(10**18 - 86_400 * NS, 10**18)


def test_ids_are_lowercased_and_checked() -> None:
    query = requests.span_query(rpc.ListSpansRequest(trace_id="AB" * 16))
    assert query.trace_id == "ab" * 16
    assert _field_of(lambda: requests.log_query(rpc.ListLogsRequest(span_id="xyz"))) == "span_id"


def test_cursor_round_trip_keeps_the_position() -> None:
    request = rpc.ListTracesRequest(project="p", environment="prod", order_by="-cost")
    cursor = cursors.next_cursor(request, "traces", [None, "ab" * 16])
    follow = rpc.ListTracesRequest(project="p", environment="prod", order_by="-cost", limit=5)
    follow.cursor = cursor
    query = requests.trace_query(follow, _hash)
    assert (query.after, query.limit) == ((None, "ab" * 16), 5)


def test_cursor_is_refused_under_other_filters_or_another_list() -> None:
    request = rpc.ListTracesRequest(environment="prod")
    cursor = cursors.next_cursor(request, "traces", [1.0, "ab" * 16])
    changed = rpc.ListTracesRequest(environment="staging", cursor=cursor)
    assert _field_of(lambda: requests.trace_query(changed, _hash)) == "cursor"
    spans = rpc.ListSpansRequest(cursor=cursor)
    assert _field_of(lambda: requests.span_query(spans)) == "cursor"


def test_damaged_cursor_positions_are_refused() -> None:
    forged = cursors.encode(
        "spans", cursors.fingerprint(rpc.ListSpansRequest()), ["not a time", "a", "b"]
    )
    request = rpc.ListSpansRequest(cursor=forged)
    assert _field_of(lambda: requests.span_query(request)) == "cursor"


def test_delta_cursor_round_trip() -> None:
    request = rpc.ListDeltasRequest(signal=enums_pb2.DELTA_SIGNAL_SPANS)
    cursor = requests.delta_cursor(request, "spans", DeltaPosition(7, ("t", "s")))
    request.cursor = cursor
    assert requests.delta_position(request, "spans") == DeltaPosition(7, ("t", "s"))
    page_cursor = cursors.next_cursor(rpc.ListSpansRequest(), "spans", [1, "t", "s"])
    request.cursor = page_cursor
    assert _field_of(lambda: requests.delta_position(request, "spans")) == "cursor"


def test_group_by_is_one_of_the_dimensions() -> None:
    assert requests.group_by(rpc.GetAnalyticsSummaryRequest(group_by="model")) == "model"
    bad = rpc.GetAnalyticsSummaryRequest(group_by="user_id")
    assert _field_of(lambda: requests.group_by(bad)) == "group_by"
