"""OTLP Export behind the auth interceptor: a real server, the real OTLP collector stubs."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import Any

import grpc
import grpc.aio
import pytest
from opentelemetry.proto.collector.logs.v1 import logs_service_pb2, logs_service_pb2_grpc
from opentelemetry.proto.collector.metrics.v1 import (
    metrics_service_pb2,
    metrics_service_pb2_grpc,
)
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc

from mcpd.auth.access import access_rules
from mcpd.auth.audit import StoreAuditSink
from mcpd.auth.authenticator import Authenticator
from mcpd.auth.interceptor import AuthInterceptor
from mcpd.auth.principal import Principal, current_principal
from mcpd.auth.tokens import audit_id
from mcpd.model.v1 import enums_pb2, telemetry_pb2
from mcpd.runtime.channels import open_channel
from mcpd.runtime.clock import ManualClock
from mcpd.runtime.config import GrpcSettings
from mcpd.runtime.errors_grpc import rpc_failure_from
from mcpd.runtime.server import GrpcServer
from services.ingest.incoming import IncomingBatch
from services.ingest.otlp import otlp_registrations
from tests.libs.auth.conftest import CONFIGURED, INGEST_SECRET, READ_SECRET
from tests.libs.auth.memory_store import MemoryControlStore


@dataclass
class RecordingIngestor:
    """Accepts everything; remembers who sent each batch."""

    calls: list[tuple[Principal, IncomingBatch]] = field(default_factory=list)

    def admit(self, size: int) -> AbstractContextManager[None]:
        return contextlib.nullcontext()

    async def ingest(self, incoming: IncomingBatch) -> telemetry_pb2.IngestResult:
        self.calls.append((current_principal(), incoming))
        return telemetry_pb2.IngestResult(accepted=len(incoming.spans))


@dataclass
class Served:
    channel: grpc.aio.Channel
    store: MemoryControlStore
    ingestor: RecordingIngestor


@pytest.fixture
async def served() -> AsyncIterator[Served]:
    store, clock, ingestor = MemoryControlStore(), ManualClock(), RecordingIngestor()
    authenticator = Authenticator(store, CONFIGURED, clock=clock, local_project="default")
    auth = AuthInterceptor(authenticator, StoreAuditSink(store), clock=clock, rules=access_rules())
    settings = GrpcSettings(shutdown_grace_s=0.0)
    async with GrpcServer(
        "127.0.0.1:0", otlp_registrations(ingestor), settings, interceptors=[auth]
    ) as server:
        channel = open_channel(f"127.0.0.1:{server.port}", settings)
        try:
            yield Served(channel, store, ingestor)
        finally:
            await channel.close()


def _stub(stub: Any, channel: grpc.aio.Channel) -> Any:
    """A generated OTLP stub (opentelemetry-proto ships no types for its grpc modules)."""
    return stub(channel)


def bearer(secret: str) -> tuple[tuple[str, str], ...]:
    return (("authorization", f"Bearer {secret}"),)


async def test_trace_export_without_a_key_is_unauthenticated_and_audited(served: Served) -> None:
    stub = _stub(trace_service_pb2_grpc.TraceServiceStub, served.channel)
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await stub.Export(trace_service_pb2.ExportTraceServiceRequest())
    failure = rpc_failure_from(caught.value)
    assert (failure.code, failure.reason) == (
        grpc.StatusCode.UNAUTHENTICATED,
        "CREDENTIALS_REQUIRED",
    )
    assert served.ingestor.calls == []
    [event] = served.store.audit
    assert (event.principal, event.action, event.result) == (
        "anonymous",
        "export",
        enums_pb2.AUDIT_RESULT_REFUSED,
    )


async def test_trace_export_with_a_read_key_is_permission_denied(served: Served) -> None:
    stub = _stub(trace_service_pb2_grpc.TraceServiceStub, served.channel)
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await stub.Export(
            trace_service_pb2.ExportTraceServiceRequest(), metadata=bearer(READ_SECRET)
        )
    failure = rpc_failure_from(caught.value)
    assert (failure.code, failure.reason, failure.metadata) == (
        grpc.StatusCode.PERMISSION_DENIED,
        "SCOPE_REQUIRED",
        {"scope": "ingest"},
    )
    assert served.ingestor.calls == []


async def test_every_export_with_an_ingest_key_reaches_the_ingestor_unaudited(
    served: Served,
) -> None:
    metadata = bearer(INGEST_SECRET)
    traces = await _stub(trace_service_pb2_grpc.TraceServiceStub, served.channel).Export(
        trace_service_pb2.ExportTraceServiceRequest(), metadata=metadata
    )
    logs = await _stub(logs_service_pb2_grpc.LogsServiceStub, served.channel).Export(
        logs_service_pb2.ExportLogsServiceRequest(), metadata=metadata
    )
    metrics = await _stub(metrics_service_pb2_grpc.MetricsServiceStub, served.channel).Export(
        metrics_service_pb2.ExportMetricsServiceRequest(), metadata=metadata
    )
    assert not traces.HasField("partial_success")
    assert not logs.HasField("partial_success")
    assert not metrics.HasField("partial_success")
    assert [principal.audit_id for principal, _ in served.ingestor.calls] == [
        audit_id(INGEST_SECRET)
    ] * 3
    assert [principal.projects for principal, _ in served.ingestor.calls] == [frozenset({"a"})] * 3
    assert served.store.audit == []  # allowed ingest is not audited: it is the hot path
