"""The query service's gRPC surface: thin methods over injected domain objects."""

from __future__ import annotations

import asyncio
import json
import logging
import re
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Protocol, TypeVar

import grpc
import orjson
from google.api import httpbody_pb2
from google.protobuf.struct_pb2 import Struct

from mcpd import codec
from mcpd.auth.principal import current_principal
from mcpd.codec import enum_names
from mcpd.model.v1 import enums_pb2, query_pb2, telemetry_pb2
from mcpd.query.v1 import query_service_pb2, query_service_pb2_grpc
from mcpd.runtime import cursors
from mcpd.runtime.clock import Clock, epoch_nanos
from mcpd.runtime.errors import (
    InvalidArgument,
    NotFound,
    PermissionDenied,
    ResourceExhausted,
    quoted,
)
from mcpd.signals import messages, series
from mcpd.signals.queries import ErasureSubject, Page, Window
from mcpd.storage.interfaces import (
    AuditReads,
    CapabilityReport,
    SignalAnalytics,
    SignalErasure,
    SignalLists,
    TraceReads,
)
from services.query import analytics, requests
from services.query.erasure import RunEraser, erasure_result
from services.query.health import HealthReporter
from services.query.sessions.envelope import ToolResult, failure
from services.query.sessions.errors import INTERNAL_ERROR, ToolError
from services.query.sessions.paths import LaunchContext

log = logging.getLogger("mcpd.query")


class QueryStore(
    CapabilityReport, TraceReads, SignalLists, SignalAnalytics, SignalErasure, Protocol
):
    """What the query service reads, deletes and erases in the trace store."""


class SessionToolSet(Protocol):
    """The four MCP session-search tools (`services.query.sessions.SessionTools`)."""

    async def search_sessions(self, project: str, arguments: Mapping[str, Any]) -> ToolResult:
        """search_sessions: the success or error envelope."""
        ...

    async def open(self, project: str, arguments: Mapping[str, Any]) -> ToolResult:
        """open: the success or error envelope."""
        ...

    async def list_sessions(self, project: str, arguments: Mapping[str, Any]) -> ToolResult:
        """list_sessions: the success or error envelope."""
        ...

    async def file_attention(
        self, project: str, arguments: Mapping[str, Any], *, launch: LaunchContext | None = None
    ) -> ToolResult:
        """file_attention: the success or error envelope; `launch` is the client's launch
        directory (without it, scope=project fails closed)."""
        ...


LAUNCH_METADATA = "x-mcpd-launch-bin"
"""Request metadata: the MCP client's launch context, as UTF-8 JSON
`{"cwd": ..., "git_root": ..., "git_common_dir": ...}` (a `-bin` key: paths need not be ASCII).
`mcpd mcp` sends it, so file_attention resolves relative paths and scope=project from where
the agent runs even when a daemon answers. It only narrows a search; it grants nothing."""


DEFAULT_AUDIT_PAGE = 100
TRACE_INCLUDES = frozenset({"logs", "scores", "feedback"})
JSON_CONTENT_TYPE = "application/json"
MAX_METRIC_POINTS = 1_000_000
"""Raw points one series request may aggregate; a wider window is refused, not truncated."""
_TRACE_ID = re.compile(r"[0-9a-f]{32}")
_Found = TypeVar("_Found")
_FACETS = enum_names(enums_pb2.Facet.DESCRIPTOR).by_number
_DELTA_SIGNALS = enum_names(enums_pb2.DeltaSignal.DESCRIPTOR).by_number
_LABEL_VALUE_FACET = "metric_label_value"


class QueryServicer(query_service_pb2_grpc.QueryServiceServicer):
    """Reads of stored signals. Storage calls are blocking, so they run in worker threads.

    The auth interceptor has resolved every request's `project` against the caller's grant
    before a method runs, and writes the audit events the RPCs' access options name."""

    def __init__(
        self,
        store: QueryStore,
        audit: AuditReads,
        health: HealthReporter,
        sessions: SessionToolSet,
        *,
        clock: Clock,
        hash_user: requests.HashUser,
        runs: RunEraser | None = None,
    ) -> None:
        self._store = store
        self._audit = audit
        self._health = health
        self._sessions = sessions
        self._clock = clock
        self._hash_user = hash_user
        self._runs = runs

    async def ListTraces(
        self,
        request: query_service_pb2.ListTracesRequest,
        context: grpc.aio.ServicerContext[
            query_service_pb2.ListTracesRequest, query_pb2.TraceListResponse
        ],
    ) -> query_pb2.TraceListResponse:
        query = requests.trace_query(request, self._hash_user)
        page = await asyncio.to_thread(self._store.list_traces, request.project, query)
        return query_pb2.TraceListResponse(
            traces=[messages.trace_message(r) for r in page.rows],
            page=_page(request, "traces", page, lambda r: [r[query.order_column], r["trace_id"]]),
        )

    async def ListSpans(
        self,
        request: query_service_pb2.ListSpansRequest,
        context: grpc.aio.ServicerContext[
            query_service_pb2.ListSpansRequest, query_pb2.SpanListResponse
        ],
    ) -> query_pb2.SpanListResponse:
        query = requests.span_query(request)
        page = await asyncio.to_thread(self._store.list_spans, request.project, query)
        return query_pb2.SpanListResponse(
            spans=[messages.span_message(r) for r in page.rows],
            page=_page(
                request, "spans", page, lambda r: [r["start_time"], r["trace_id"], r["span_id"]]
            ),
        )

    async def ListLogs(
        self,
        request: query_service_pb2.ListLogsRequest,
        context: grpc.aio.ServicerContext[
            query_service_pb2.ListLogsRequest, query_pb2.LogListResponse
        ],
    ) -> query_pb2.LogListResponse:
        query = requests.log_query(request)
        page = await asyncio.to_thread(self._store.list_logs, request.project, query)
        return query_pb2.LogListResponse(
            logs=[messages.log_message(r) for r in page.rows],
            page=_page(request, "logs", page, lambda r: [r["timestamp"], r["log_id"]]),
        )

    async def ListScores(
        self,
        request: query_service_pb2.ListScoresRequest,
        context: grpc.aio.ServicerContext[
            query_service_pb2.ListScoresRequest, query_pb2.ScoreListResponse
        ],
    ) -> query_pb2.ScoreListResponse:
        query = requests.score_query(request)
        page = await asyncio.to_thread(self._store.list_scores, request.project, query)
        return query_pb2.ScoreListResponse(
            scores=[messages.score_message(r) for r in page.rows],
            page=_page(request, "scores", page, lambda r: [r["timestamp"], r["score_id"]]),
        )

    async def ListFeedback(
        self,
        request: query_service_pb2.ListFeedbackRequest,
        context: grpc.aio.ServicerContext[
            query_service_pb2.ListFeedbackRequest, query_pb2.FeedbackListResponse
        ],
    ) -> query_pb2.FeedbackListResponse:
        query = requests.feedback_query(request)
        page = await asyncio.to_thread(self._store.list_feedback, request.project, query)
        return query_pb2.FeedbackListResponse(
            feedback=[messages.feedback_message(r) for r in page.rows],
            page=_page(request, "feedback", page, lambda r: [r["timestamp"], r["feedback_id"]]),
        )

    async def GetMetricSeries(
        self,
        request: query_service_pb2.GetMetricSeriesRequest,
        context: grpc.aio.ServicerContext[
            query_service_pb2.GetMetricSeriesRequest, query_pb2.MetricSeriesResponse
        ],
    ) -> query_pb2.MetricSeriesResponse:
        if not request.name:
            raise InvalidArgument("name is required", field="name")
        window = self._closed_window(request)
        bucket_s = series.choose_bucket(window, requests.optional(request, "bucket"))
        points = await asyncio.to_thread(
            self._store.metric_points,
            request.project,
            request.name,
            window,
            limit=MAX_METRIC_POINTS + 1,
        )
        if len(points) > MAX_METRIC_POINTS:
            raise ResourceExhausted(
                f"the window holds more than {MAX_METRIC_POINTS:,} points of"
                f" {quoted(request.name)}; narrow it",
                field="from",
            )
        answer = series.aggregate(
            points,
            window=window,
            bucket_s=bucket_s,
            agg=requests.optional(request, "agg"),
            group_by=list(request.group_by),
        )
        answer.name = request.name
        return answer

    async def GetAnalyticsSummary(
        self,
        request: query_service_pb2.GetAnalyticsSummaryRequest,
        context: grpc.aio.ServicerContext[
            query_service_pb2.GetAnalyticsSummaryRequest, query_pb2.AnalyticsSummary
        ],
    ) -> query_pb2.AnalyticsSummary:
        window = self._closed_window(request)
        group_by = requests.group_by(request)
        return await asyncio.to_thread(
            analytics.summary, self._store, request.project, window, group_by
        )

    async def GetScoreStats(
        self,
        request: query_service_pb2.GetScoreStatsRequest,
        context: grpc.aio.ServicerContext[
            query_service_pb2.GetScoreStatsRequest, query_service_pb2.GetScoreStatsResponse
        ],
    ) -> query_service_pb2.GetScoreStatsResponse:
        if not request.scorer_id:
            raise InvalidArgument("scorer_id is required", field="scorer_id")
        window = self._closed_window(request)
        return await asyncio.to_thread(
            analytics.score_stats, self._store, request.project, request.scorer_id, window
        )

    async def GetCostBreakdown(
        self,
        request: query_service_pb2.GetCostBreakdownRequest,
        context: grpc.aio.ServicerContext[
            query_service_pb2.GetCostBreakdownRequest, query_pb2.CostBreakdown
        ],
    ) -> query_pb2.CostBreakdown:
        window = self._closed_window(request)
        group_by = requests.group_by(request)
        bucket_ns = _cost_bucket(request, window)
        return await asyncio.to_thread(
            analytics.cost_breakdown, self._store, request.project, window, group_by, bucket_ns
        )

    async def Discover(
        self,
        request: query_service_pb2.DiscoverRequest,
        context: grpc.aio.ServicerContext[
            query_service_pb2.DiscoverRequest, query_pb2.DiscoveryResponse
        ],
    ) -> query_pb2.DiscoveryResponse:
        facet = _FACETS.get(request.facet)
        if facet is None:
            raise InvalidArgument(
                "facet is required; choose from " + ", ".join(_FACETS.values()), field="facet"
            )
        key = requests.optional(request, "key")
        if facet == _LABEL_VALUE_FACET and not key:
            raise InvalidArgument("key is required for metric_label_value", field="key")
        if facet != _LABEL_VALUE_FACET and key is not None:
            raise InvalidArgument("key applies to metric_label_value only", field="key")
        limit = cursors.limit_of(request, requests.DEFAULT_DISCOVERY)
        values = await asyncio.to_thread(
            self._store.discover,
            request.project,
            facet,
            key or "",
            requests.optional(request, "prefix"),
            limit,
        )
        answer = query_pb2.DiscoveryResponse(
            facet=request.facet,
            values=[
                query_pb2.DiscoveredValue(value=value, last_seen=messages.timestamp_of(seen))
                for value, seen in values
            ],
        )
        if key is not None:
            answer.key = key
        return answer

    async def ListDeltas(
        self,
        request: query_service_pb2.ListDeltasRequest,
        context: grpc.aio.ServicerContext[
            query_service_pb2.ListDeltasRequest, query_pb2.DeltaResponse
        ],
    ) -> query_pb2.DeltaResponse:
        signal = _DELTA_SIGNALS.get(request.signal)
        if signal is None:
            raise InvalidArgument(
                "signal is required; choose from " + ", ".join(_DELTA_SIGNALS.values()),
                field="signal",
            )
        after = requests.delta_position(request, signal)
        limit = cursors.limit_of(request, requests.DEFAULT_DELTAS)
        page = await asyncio.to_thread(
            self._store.deltas, request.project, signal, after, limit=limit
        )
        answer = query_pb2.DeltaResponse(
            signal=request.signal,
            cursor=(
                request.cursor
                if after is not None and page.position == after
                else requests.delta_cursor(request, signal, page.position)
            ),
            has_more=page.has_more,
        )
        match signal:
            case "traces":
                answer.traces.extend(messages.trace_message(r) for r in page.rows)  # type: ignore[arg-type]
            case "spans":
                answer.spans.extend(messages.span_message(r) for r in page.rows)  # type: ignore[arg-type]
            case _:
                answer.logs.extend(messages.log_message(r) for r in page.rows)  # type: ignore[arg-type]
        return answer

    async def DeleteTrace(
        self,
        request: query_service_pb2.DeleteTraceRequest,
        context: grpc.aio.ServicerContext[
            query_service_pb2.DeleteTraceRequest, query_pb2.DeleteResult
        ],
    ) -> query_pb2.DeleteResult:
        trace_id = _trace_id(request.trace_id)
        deleted = await asyncio.to_thread(self._store.delete_trace, request.project, trace_id)
        if not deleted:
            raise NotFound(f"there is no trace {trace_id!r} in this project", field="trace_id")
        return query_pb2.DeleteResult(deleted=deleted)

    async def Erase(
        self,
        request: query_service_pb2.EraseRequest,
        context: grpc.aio.ServicerContext[query_service_pb2.EraseRequest, query_pb2.ErasureResult],
    ) -> query_pb2.ErasureResult:
        user_id = requests.text(request, "user_id")
        session_id = requests.text(request, "session_id")
        if user_id is None and session_id is None:
            raise InvalidArgument("name the subject: user_id, session_id or both", field="user_id")
        user_ids = (
            () if user_id is None else tuple(dict.fromkeys((self._hash_user(user_id), user_id)))
        )
        subject = ErasureSubject(user_ids=user_ids, session_id=session_id)
        runs = None
        if self._runs is not None:
            # First: an orchestrator that cannot be reached fails the request before anything
            # is erased, and the caller sends it again.
            runs = await self._runs.erase_subject_runs(
                request.project, user_ids, deadline_s=context.time_remaining()
            )
        counts = await asyncio.to_thread(self._store.erase_subject, request.project, subject)
        return erasure_result(request.project, counts, runs)

    def _closed_window(self, request: Any) -> Window:
        return requests.window_of(
            request, default_ns=requests.DEFAULT_WINDOW_NS, now_ns=epoch_nanos(self._clock.now())
        )

    async def GetTrace(
        self,
        request: query_service_pb2.GetTraceRequest,
        context: grpc.aio.ServicerContext[query_service_pb2.GetTraceRequest, query_pb2.TraceDetail],
    ) -> query_pb2.TraceDetail:
        records = await _one_trace(self._store.trace_records, request)
        return query_pb2.TraceDetail(
            trace=messages.trace_message(records.trace),
            spans=[messages.span_message(row) for row in records.spans],
            logs=[messages.log_message(row) for row in records.logs],
            scores=[messages.score_message(row) for row in records.scores],
            feedback=[messages.feedback_message(row) for row in records.feedback],
        )

    async def GetTraceJson(
        self,
        request: query_service_pb2.GetTraceRequest,
        context: grpc.aio.ServicerContext[query_service_pb2.GetTraceRequest, httpbody_pb2.HttpBody],
    ) -> httpbody_pb2.HttpBody:
        body = await _one_trace(self._store.trace_detail_json, request)
        return httpbody_pb2.HttpBody(content_type=JSON_CONTENT_TYPE, data=body)

    async def GetHealth(
        self,
        request: query_service_pb2.GetHealthRequest,
        context: grpc.aio.ServicerContext[
            query_service_pb2.GetHealthRequest, query_pb2.HealthStatus
        ],
    ) -> query_pb2.HealthStatus:
        return self._health.report()

    async def GetCapabilities(
        self,
        request: query_service_pb2.GetCapabilitiesRequest,
        context: grpc.aio.ServicerContext[
            query_service_pb2.GetCapabilitiesRequest, query_pb2.StoreCapabilities
        ],
    ) -> query_pb2.StoreCapabilities:
        return await asyncio.to_thread(self._store.capabilities)

    async def ListAuditEvents(
        self,
        request: query_service_pb2.ListAuditEventsRequest,
        context: grpc.aio.ServicerContext[
            query_service_pb2.ListAuditEventsRequest, query_service_pb2.ListAuditEventsResponse
        ],
    ) -> query_service_pb2.ListAuditEventsResponse:
        # The auth interceptor has resolved request.project against the caller's grant.
        project = request.project
        if request.unattributed:
            if not current_principal().is_operator:
                raise PermissionDenied(
                    "refusals that name no project are the operator's to read: use a key "
                    "declared in the keys file",
                    field="unattributed",
                    reason="OPERATOR_REQUIRED",
                )
            project = ""  # what refusals before any request was read are filed under
        page = await asyncio.to_thread(
            self._audit.list_audit,
            project,
            cursor=request.cursor if request.HasField("cursor") else None,
            limit=request.limit if request.HasField("limit") else DEFAULT_AUDIT_PAGE,
        )
        answer = query_service_pb2.ListAuditEventsResponse(events=page.events)
        answer.page.has_more = page.next_cursor is not None
        if page.next_cursor is not None:
            answer.page.next_cursor = page.next_cursor
        return answer

    # The session tools answer in-band: a rejected request is an error envelope with
    # is_error, not a gRPC error, so MCP and REST callers get the spec's envelope either way.
    # The auth interceptor has resolved request.project; arguments cross as a Struct, and
    # codec.encode gives integral numbers back as integers.

    async def SearchSessions(
        self,
        request: query_service_pb2.SessionToolRequest,
        context: grpc.aio.ServicerContext[
            query_service_pb2.SessionToolRequest, query_service_pb2.SessionToolResponse
        ],
    ) -> query_service_pb2.SessionToolResponse:
        result = await self._sessions.search_sessions(
            request.project, codec.encode(request.arguments)
        )
        return _tool_response("search_sessions", result, json_envelope=request.json_envelope)

    async def Open(
        self,
        request: query_service_pb2.SessionToolRequest,
        context: grpc.aio.ServicerContext[
            query_service_pb2.SessionToolRequest, query_service_pb2.SessionToolResponse
        ],
    ) -> query_service_pb2.SessionToolResponse:
        result = await self._sessions.open(request.project, codec.encode(request.arguments))
        return _tool_response("open", result, json_envelope=request.json_envelope)

    async def ListSessions(
        self,
        request: query_service_pb2.SessionToolRequest,
        context: grpc.aio.ServicerContext[
            query_service_pb2.SessionToolRequest, query_service_pb2.SessionToolResponse
        ],
    ) -> query_service_pb2.SessionToolResponse:
        result = await self._sessions.list_sessions(
            request.project, codec.encode(request.arguments)
        )
        return _tool_response("list_sessions", result, json_envelope=request.json_envelope)

    async def FileAttention(
        self,
        request: query_service_pb2.SessionToolRequest,
        context: grpc.aio.ServicerContext[
            query_service_pb2.SessionToolRequest, query_service_pb2.SessionToolResponse
        ],
    ) -> query_service_pb2.SessionToolResponse:
        result = await self._sessions.file_attention(
            request.project,
            codec.encode(request.arguments),
            launch=_launch_context(context.invocation_metadata()),
        )
        return _tool_response("file_attention", result, json_envelope=request.json_envelope)


async def _one_trace(
    read: Callable[..., _Found | None], request: query_service_pb2.GetTraceRequest
) -> _Found:
    """What `read` (a TraceStore read of one trace) finds for a GetTrace request, in a worker
    thread; InvalidArgument for a bad id or include, NotFound when there is no such trace."""
    trace_id = _trace_id(request.trace_id)
    include = set(request.include)
    unknown = sorted(include - TRACE_INCLUDES)
    if unknown:
        raise InvalidArgument(
            f"include: unknown value {quoted(unknown[0])}; choose from "
            + ", ".join(sorted(TRACE_INCLUDES)),
            field="include",
        )
    wanted = {name: name in include for name in sorted(TRACE_INCLUDES)}
    found = await asyncio.to_thread(read, request.project, trace_id, **wanted)
    if found is None:
        raise NotFound(f"there is no trace {trace_id!r} in this project", field="trace_id")
    return found


def _trace_id(value: str) -> str:
    trace_id = value.lower()
    if not _TRACE_ID.fullmatch(trace_id):
        raise InvalidArgument("trace_id must be 32 hex characters", field="trace_id")
    return trace_id


def _page(
    request: Any, kind: str, page: Page[Any], position: Callable[[Any], list[Any]]
) -> telemetry_pb2.Page:
    """The Page of an answer: `has_more`, and the cursor after the last row (its sort key,
    `position`) when another page follows."""
    answer = telemetry_pb2.Page(has_more=page.has_more)
    if page.rows and page.has_more:
        answer.next_cursor = cursors.next_cursor(request, kind, position(page.rows[-1]))
    return answer


def _cost_bucket(request: query_service_pb2.GetCostBreakdownRequest, window: Window) -> int | None:
    if not request.HasField("bucket"):
        return None
    assert window.start is not None
    assert window.end is not None
    if request.bucket < 1:
        raise InvalidArgument("bucket must be at least 1 second", field="bucket")
    bucket_ns = request.bucket * 1_000_000_000
    if (window.end - window.start) // bucket_ns > analytics.MAX_BUCKETS:
        raise InvalidArgument(
            f"bucket is too small for the window: more than {analytics.MAX_BUCKETS:,} buckets",
            field="bucket",
        )
    return int(bucket_ns)


def _launch_context(metadata: Iterable[tuple[str, str | bytes]] | None) -> LaunchContext | None:
    raw = next((value for key, value in metadata or () if key == LAUNCH_METADATA), None)
    if not isinstance(raw, bytes):
        return None
    try:
        fields = json.loads(raw.decode("utf-8"))
    except ValueError:
        fields = None
    cwd = fields.get("cwd") if isinstance(fields, dict) else None
    if not isinstance(cwd, str) or not cwd:
        log.warning("ignoring malformed %s metadata", LAUNCH_METADATA)
        return None
    git_root, common_dir = fields.get("git_root"), fields.get("git_common_dir")
    return LaunchContext(
        cwd,
        git_root if isinstance(git_root, str) and git_root else None,
        common_dir if isinstance(common_dir, str) and common_dir else None,
    )


def _tool_response(
    tool: str, result: ToolResult, *, json_envelope: bool
) -> query_service_pb2.SessionToolResponse:
    """The envelope as the caller asked for it: a Struct, or JSON text (`json_envelope`)."""
    try:
        return _tool_envelope(result.envelope, result.is_error, json_envelope=json_envelope)
    except (codec.CodecError, orjson.JSONEncodeError) as exc:
        # An answer that cannot be sent (JSON nested past the codec's or the encoder's limit)
        # is our failure, not the caller's: an internal_error envelope, never INVALID_ARGUMENT.
        log.error("%s: the envelope cannot cross gRPC: %s", tool, exc)
        elapsed = result.envelope.get("performance", {}).get("elapsed_ms", 0)
        error = ToolError(INTERNAL_ERROR, f"{tool} produced an answer that cannot be sent")
        fallback = failure(tool, result.envelope.get("request", {}), error, elapsed)
        return _tool_envelope(fallback.envelope, True, json_envelope=json_envelope)


def _tool_envelope(
    envelope: Mapping[str, Any], is_error: bool, *, json_envelope: bool
) -> query_service_pb2.SessionToolResponse:
    if json_envelope:
        return query_service_pb2.SessionToolResponse(
            envelope_json=orjson.dumps(envelope), is_error=is_error
        )
    return query_service_pb2.SessionToolResponse(
        envelope=codec.decode(envelope, Struct, path="envelope"), is_error=is_error
    )
