"""A real grpc.aio server on port 0 with recording test servicers, and the gateway before it."""

# ruff: noqa: N802 - servicer method names are the RPC names the proto fixes

from __future__ import annotations

import dataclasses
import json
from collections.abc import AsyncIterator
from typing import Any

import grpc
import grpc.aio
import httpx
import pytest
from google.api import httpbody_pb2
from starlette.applications import Starlette

from gateway.app import create_app
from gateway.tests.access_stub import AccessCheckStub
from mcpd import codec
from mcpd.evaluation.v1 import evaluation_service_pb2, evaluation_service_pb2_grpc
from mcpd.ingest.v1 import ingest_service_pb2_grpc
from mcpd.model.v1 import enums_pb2, evaluation_pb2, query_pb2, telemetry_pb2
from mcpd.orchestrator.v1 import orchestrator_service_pb2_grpc
from mcpd.query.v1 import query_service_pb2, query_service_pb2_grpc
from mcpd.runtime.errors import NotFound, ResourceExhausted
from mcpd.runtime.interceptors import ErrorInterceptor

Context = grpc.aio.ServicerContext[Any, Any]

CAPABILITIES = query_pb2.StoreCapabilities(
    backend="sqlite",
    text_search=enums_pb2.TEXT_SEARCH_WORDS,
    unicode_case_folding=True,
    discovery=True,
    partitioning=enums_pb2.PARTITIONING_NONE,
)


def trace_json(trace_id: str, include: list[str]) -> bytes:
    """The TraceDetail JSON the fake query service renders: indented, unlike anything the
    gateway would write, so a test can tell the bytes passed through untouched."""
    trace = telemetry_pb2.Trace(trace_id=trace_id, tags=include)
    return json.dumps(codec.encode(query_pb2.TraceDetail(trace=trace)), indent=1).encode()


@dataclasses.dataclass
class Seen:
    """What the upstream received: each request message and its invocation metadata, in order."""

    requests: list[Any] = dataclasses.field(default_factory=list)
    metadata: list[dict[str, str]] = dataclasses.field(default_factory=list)
    deadlines: list[float | None] = dataclasses.field(default_factory=list)

    def record(self, request: Any, context: Context) -> None:
        self.requests.append(request)
        self.metadata.append(
            {
                key: value
                for key, value in context.invocation_metadata() or ()
                if isinstance(value, str)
            }
        )
        self.deadlines.append(context.time_remaining())


class QueryServicer(query_service_pb2_grpc.QueryServiceServicer):
    """Answers capabilities, echoes trace ids and include, refuses the trace id `missing`.

    The trace id `raw` answers a body without a content type.
    """

    def __init__(self, seen: Seen) -> None:
        self.seen = seen

    async def GetCapabilities(
        self, request: query_service_pb2.GetCapabilitiesRequest, context: Context
    ) -> query_pb2.StoreCapabilities:
        self.seen.record(request, context)
        return CAPABILITIES

    async def GetHealth(
        self, request: query_service_pb2.GetHealthRequest, context: Context
    ) -> query_pb2.HealthStatus:
        self.seen.record(request, context)
        return query_pb2.HealthStatus(status="ok", version="test", spec_version="v1")

    async def GetTraceJson(
        self, request: query_service_pb2.GetTraceRequest, context: Context
    ) -> httpbody_pb2.HttpBody:
        self.seen.record(request, context)
        if request.trace_id == "missing":
            raise NotFound(
                "no trace missing in this project", field="trace_id", reason="TRACE_NOT_FOUND"
            )
        if request.trace_id == "raw":
            return httpbody_pb2.HttpBody(data=b"\x00raw")
        data = trace_json(request.trace_id, list(request.include))
        return httpbody_pb2.HttpBody(content_type="application/json", data=data)

    async def ListTraces(
        self, request: query_service_pb2.ListTracesRequest, context: Context
    ) -> query_pb2.TraceListResponse:
        self.seen.record(request, context)
        trace = telemetry_pb2.Trace(trace_id="t1", tags=list(request.tags))
        if request.kind:
            trace.kind = request.kind[0]
        trace.start_time.CopyFrom(getattr(request, "from"))
        return query_pb2.TraceListResponse(traces=[trace], page=telemetry_pb2.Page())


class IngestServicer(ingest_service_pb2_grpc.IngestServiceServicer):
    """Accepts every signal it is sent; the ingest key `busy` is refused as a full queue is."""

    def __init__(self, seen: Seen) -> None:
        self.seen = seen

    async def Ingest(
        self, request: telemetry_pb2.IngestBatch, context: Context
    ) -> telemetry_pb2.IngestResult:
        self.seen.record(request, context)
        if request.ingest_key == "busy":
            raise ResourceExhausted("ingest queue is full; retry later", retry_after_s=1.5)
        return telemetry_pb2.IngestResult(accepted=len(request.spans) + len(request.logs))


class EvaluationServicer(evaluation_service_pb2_grpc.EvaluationServiceServicer):
    """Tells which of the two experiment routes a request reached."""

    def __init__(self, seen: Seen) -> None:
        self.seen = seen

    async def CompareExperiments(
        self, request: evaluation_service_pb2.CompareExperimentsRequest, context: Context
    ) -> evaluation_pb2.ExperimentComparison:
        self.seen.record(request, context)
        return evaluation_pb2.ExperimentComparison(
            baseline=request.baseline, candidate=request.candidate
        )

    async def GetExperiment(
        self, request: evaluation_service_pb2.GetExperimentRequest, context: Context
    ) -> evaluation_pb2.Experiment:
        self.seen.record(request, context)
        return evaluation_pb2.Experiment(experiment_id=request.experiment_id, name="got")


@dataclasses.dataclass
class Upstream:
    """The running server, the channel the gateway uses, and what the servicers saw."""

    channel: grpc.aio.Channel
    seen: Seen
    asked_for: list[str]
    access: AccessCheckStub

    def channel_for(self, service: str) -> grpc.aio.Channel:
        self.asked_for.append(service)
        return self.channel


@pytest.fixture
async def upstream() -> AsyncIterator[Upstream]:
    seen = Seen()
    access = AccessCheckStub()
    server = grpc.aio.server(interceptors=[ErrorInterceptor(), access])
    # The generated servicer bases are abstract in their stubs, but at runtime every method they
    # leave alone answers UNIMPLEMENTED, which is what these tests rely on: hence the ignores.
    query_service_pb2_grpc.add_QueryServiceServicer_to_server(
        QueryServicer(seen),
        server,
    )
    ingest_service_pb2_grpc.add_IngestServiceServicer_to_server(
        IngestServicer(seen),
        server,
    )
    evaluation_service_pb2_grpc.add_EvaluationServiceServicer_to_server(
        EvaluationServicer(seen),
        server,
    )
    # The generated base servicer: every orchestrator RPC answers UNIMPLEMENTED.
    orchestrator_service_pb2_grpc.add_OrchestratorServiceServicer_to_server(
        orchestrator_service_pb2_grpc.OrchestratorServiceServicer(),
        server,
    )
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    channel = grpc.aio.insecure_channel(f"127.0.0.1:{port}")
    try:
        yield Upstream(channel, seen, [], access)
    finally:
        await channel.close()
        await server.stop(None)


@pytest.fixture
def app(upstream: Upstream) -> Starlette:
    return create_app(upstream.channel_for, default_deadline_s=7.0)


@pytest.fixture
async def client(app: Starlette) -> AsyncIterator[httpx.AsyncClient]:
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://gateway") as client:
        yield client
