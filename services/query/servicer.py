"""The query service's gRPC surface: thin methods over injected domain objects."""

from __future__ import annotations

import asyncio
from typing import Protocol

import grpc

from mcpd.model.v1 import query_pb2
from mcpd.query.v1 import query_service_pb2, query_service_pb2_grpc
from mcpd.runtime.servicers import pending_rpcs
from mcpd.storage.records import AuditPage
from services.query.health import HealthReporter


class CapabilitySource(Protocol):
    """A trace store that can say what it supports."""

    def capabilities(self) -> query_pb2.StoreCapabilities:
        """What this backend supports, reported truthfully."""
        ...


class AuditLog(Protocol):
    """The control store's audit log, read newest first."""

    def list_audit(self, project: str, *, cursor: str | None, limit: int) -> AuditPage:
        """One page of a project's audit events."""
        ...


DEFAULT_AUDIT_PAGE = 100


@pending_rpcs("the query issue (traces, spans, logs, metrics, analytics)")
class QueryServicer(query_service_pb2_grpc.QueryServiceServicer):
    """Reads of stored signals. Storage calls are blocking, so they run in worker threads."""

    def __init__(self, store: CapabilitySource, audit: AuditLog, health: HealthReporter) -> None:
        self._store = store
        self._audit = audit
        self._health = health

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
