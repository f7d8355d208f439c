"""The query service's gRPC surface: thin methods over injected domain objects."""

from __future__ import annotations

import asyncio
import json
import logging
import re
from collections.abc import Iterable, Mapping
from typing import Any, Protocol

import grpc
from google.protobuf.struct_pb2 import Struct

from mcpd import codec
from mcpd.model.v1 import query_pb2
from mcpd.query.v1 import query_service_pb2, query_service_pb2_grpc
from mcpd.runtime.errors import InvalidArgument, NotFound
from mcpd.runtime.servicers import pending_rpcs
from mcpd.signals import messages
from mcpd.signals.batch import TraceRecords
from mcpd.storage.records import AuditPage
from services.query.health import HealthReporter
from services.query.sessions.envelope import ToolResult, failure
from services.query.sessions.errors import INTERNAL_ERROR, ToolError
from services.query.sessions.paths import LaunchContext

log = logging.getLogger("mcpd.query")


class CapabilitySource(Protocol):
    """A trace store that can say what it supports."""

    def capabilities(self) -> query_pb2.StoreCapabilities:
        """What this backend supports, reported truthfully."""
        ...


class TraceReader(CapabilitySource, Protocol):
    """A trace store that says what it supports and reads one trace with what hangs off it."""

    def trace_records(
        self, project: str, trace_id: str, *, logs: bool, scores: bool, feedback: bool
    ) -> TraceRecords | None:
        """One trace of one project, or None (see `mcpd.storage.interfaces.TraceStore`)."""
        ...


class AuditLog(Protocol):
    """The control store's audit log, read newest first."""

    def list_audit(self, project: str, *, cursor: str | None, limit: int) -> AuditPage:
        """One page of a project's audit events."""
        ...


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
_TRACE_ID = re.compile(r"[0-9a-f]{32}")


@pending_rpcs("the query issue (traces, spans, logs, metrics, analytics)")
class QueryServicer(query_service_pb2_grpc.QueryServiceServicer):
    """Reads of stored signals. Storage calls are blocking, so they run in worker threads."""

    def __init__(
        self,
        store: TraceReader,
        audit: AuditLog,
        health: HealthReporter,
        sessions: SessionToolSet,
    ) -> None:
        self._store = store
        self._audit = audit
        self._health = health
        self._sessions = sessions

    async def GetTrace(
        self,
        request: query_service_pb2.GetTraceRequest,
        context: grpc.aio.ServicerContext[query_service_pb2.GetTraceRequest, query_pb2.TraceDetail],
    ) -> query_pb2.TraceDetail:
        # The auth interceptor has resolved request.project against the caller's grant.
        trace_id = request.trace_id.lower()
        if not _TRACE_ID.fullmatch(trace_id):
            raise InvalidArgument("trace_id must be 32 hex characters", field="trace_id")
        include = set(request.include)
        unknown = sorted(include - TRACE_INCLUDES)
        if unknown:
            raise InvalidArgument(
                f"include: unknown value {unknown[0]!r}; choose from "
                + ", ".join(sorted(TRACE_INCLUDES)),
                field="include",
            )
        records = await asyncio.to_thread(
            self._store.trace_records,
            request.project,
            trace_id,
            logs="logs" in include,
            scores="scores" in include,
            feedback="feedback" in include,
        )
        if records is None:
            raise NotFound(f"there is no trace {trace_id!r} in this project", field="trace_id")
        return query_pb2.TraceDetail(
            trace=messages.trace_message(records.trace),
            spans=[messages.span_message(row) for row in records.spans],
            logs=[messages.log_message(row) for row in records.logs],
            scores=[messages.score_message(row) for row in records.scores],
            feedback=[messages.feedback_message(row) for row in records.feedback],
        )

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
        page = await asyncio.to_thread(
            self._audit.list_audit,
            request.project,
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
        return _tool_response("search_sessions", result)

    async def Open(
        self,
        request: query_service_pb2.SessionToolRequest,
        context: grpc.aio.ServicerContext[
            query_service_pb2.SessionToolRequest, query_service_pb2.SessionToolResponse
        ],
    ) -> query_service_pb2.SessionToolResponse:
        result = await self._sessions.open(request.project, codec.encode(request.arguments))
        return _tool_response("open", result)

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
        return _tool_response("list_sessions", result)

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
        return _tool_response("file_attention", result)


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


def _tool_response(tool: str, result: ToolResult) -> query_service_pb2.SessionToolResponse:
    try:
        envelope = codec.decode(result.envelope, Struct, path="envelope")
    except codec.CodecError as exc:
        # An answer a Struct cannot carry (JSON nested past the codec's limit) is our failure,
        # not the caller's: an internal_error envelope, never INVALID_ARGUMENT.
        log.error("%s: the envelope cannot cross gRPC: %s", tool, exc.message)
        elapsed = result.envelope.get("performance", {}).get("elapsed_ms", 0)
        error = ToolError(INTERNAL_ERROR, f"{tool} produced an answer that cannot be sent")
        fallback = failure(tool, result.envelope.get("request", {}), error, elapsed)
        return query_service_pb2.SessionToolResponse(
            envelope=codec.decode(fallback.envelope, Struct), is_error=True
        )
    return query_service_pb2.SessionToolResponse(envelope=envelope, is_error=result.is_error)
