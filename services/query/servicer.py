"""The query service's gRPC surface: thin methods over injected domain objects."""

from __future__ import annotations

import asyncio
from typing import Protocol

import grpc

from mcpd.model.v1 import query_pb2
from mcpd.query.v1 import query_service_pb2, query_service_pb2_grpc
from mcpd.runtime.servicers import pending_rpcs
from services.query.health import HealthReporter


class CapabilitySource(Protocol):
    """A trace store that can say what it supports."""

    def capabilities(self) -> query_pb2.StoreCapabilities:
        """What this backend supports, reported truthfully."""
        ...


@pending_rpcs("the query issue (traces, spans, logs, metrics, analytics)")
class QueryServicer(query_service_pb2_grpc.QueryServiceServicer):
    """Reads of stored signals. Storage calls are blocking, so they run in worker threads."""

    def __init__(self, store: CapabilitySource, health: HealthReporter) -> None:
        self._store = store
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
