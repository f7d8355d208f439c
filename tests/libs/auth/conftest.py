"""A real grpc.aio server with the ErrorInterceptor then the AuthInterceptor, test servicers
that record who called them, and a channel to it."""

from __future__ import annotations

import contextlib
import functools
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

import grpc
import grpc.aio
import pytest

from mcpd.account.v1 import account_service_pb2, account_service_pb2_grpc
from mcpd.auth.access import AccessRule, access_rules
from mcpd.auth.audit import StoreAuditSink
from mcpd.auth.authenticator import Authenticator
from mcpd.auth.interceptor import AuthInterceptor
from mcpd.auth.keys_file import ConfiguredKey
from mcpd.auth.metadata import client_address
from mcpd.auth.principal import Principal, current_principal
from mcpd.auth.tokens import digest
from mcpd.ingest.v1 import ingest_service_pb2_grpc
from mcpd.model.v1 import account_pb2, enums_pb2, query_pb2, telemetry_pb2
from mcpd.orchestrator.v1 import orchestrator_service_pb2, orchestrator_service_pb2_grpc
from mcpd.query.v1 import query_service_pb2, query_service_pb2_grpc
from mcpd.runtime.channels import open_channel
from mcpd.runtime.clock import ManualClock
from mcpd.runtime.config import GrpcSettings
from mcpd.runtime.server import GrpcServer, ServiceRegistration
from tests.libs.auth.memory_store import MemoryControlStore

_Context = grpc.aio.ServicerContext[Any, Any]

QUERY = "mcpd.query.v1.QueryService"
ACCOUNT = "mcpd.account.v1.AccountService"
ORCHESTRATOR = "mcpd.orchestrator.v1.OrchestratorService"
INGEST = "mcpd.ingest.v1.IngestService"
STREAMS = "mcpd.test.v1.Streams"

READ_SECRET = "read-key-for-project-a"
INGEST_SECRET = "ingest-key-for-project-a"
ADMIN_SECRET = "admin-key-for-projects-a-and-b"
SERVICE_SECRET = "mcpd_c_the-service-credential-of-this-deployment"

CONFIGURED = (
    ConfiguredKey("reader", enums_pb2.KEY_SCOPE_READ, frozenset({"a"}), digest(READ_SECRET)),
    ConfiguredKey("ingester", enums_pb2.KEY_SCOPE_INGEST, frozenset({"a"}), digest(INGEST_SECRET)),
    ConfiguredKey("admin", enums_pb2.KEY_SCOPE_ADMIN, frozenset({"a", "b"}), digest(ADMIN_SECRET)),
)

# Test-only RPCs: a server-streaming one and a client-streaming one, with raw bytes messages.
EXTRA_RULES: Mapping[str, AccessRule] = {
    f"/{STREAMS}/Count": AccessRule("mcpd.test.v1.Streams.Count", enums_pb2.KEY_SCOPE_READ),
    f"/{STREAMS}/Upload": AccessRule("mcpd.test.v1.Streams.Upload", enums_pb2.KEY_SCOPE_READ),
}


@dataclass
class Call:
    """What a servicer saw: the bound principal and the request as the handler received it."""

    method: str
    principal: Principal
    request: Any
    address: str = ""
    direct_address: str = ""


@dataclass
class Recorder:
    """Every call that reached a servicer, and what the probe saw once the handler was done."""

    calls: list[Call] = field(default_factory=list)
    bound_after: list[Principal | None] = field(default_factory=list)


class QueryServicer(query_service_pb2_grpc.QueryServiceServicer):
    """Answers the RPCs the tests use, recording the principal and the request."""

    def __init__(self, recorder: Recorder) -> None:
        self._recorder = recorder

    def _record(self, method: str, request: Any, context: _Context | None = None) -> None:
        call = Call(method, current_principal(), request)
        if context is not None:
            call.address = client_address(context)
            call.direct_address = client_address(context, trust_forwarded_for=False)
        self._recorder.calls.append(call)

    async def GetHealth(  # noqa: N802 - the generated RPC name
        self, request: query_service_pb2.GetHealthRequest, context: _Context
    ) -> query_pb2.HealthStatus:
        return query_pb2.HealthStatus(status="ok")

    async def GetCapabilities(  # noqa: N802
        self, request: query_service_pb2.GetCapabilitiesRequest, context: _Context
    ) -> query_pb2.StoreCapabilities:
        self._record("GetCapabilities", request, context)
        return query_pb2.StoreCapabilities(backend=request.project)

    async def GetTrace(  # noqa: N802
        self, request: query_service_pb2.GetTraceRequest, context: _Context
    ) -> query_pb2.TraceDetail:
        self._record("GetTrace", request)
        return query_pb2.TraceDetail()

    async def ListSpans(  # noqa: N802
        self, request: query_service_pb2.ListSpansRequest, context: _Context
    ) -> query_pb2.SpanListResponse:
        self._record("ListSpans", request)
        return query_pb2.SpanListResponse()

    async def DeleteTrace(  # noqa: N802
        self, request: query_service_pb2.DeleteTraceRequest, context: _Context
    ) -> query_pb2.DeleteResult:
        self._record("DeleteTrace", request)
        return query_pb2.DeleteResult(deleted=1)


class AccountServicer(account_service_pb2_grpc.AccountServiceServicer):
    """GetAccount only: a session-only RPC."""

    def __init__(self, recorder: Recorder) -> None:
        self._recorder = recorder

    async def GetAccount(  # noqa: N802
        self, request: account_service_pb2.GetAccountRequest, context: _Context
    ) -> account_pb2.Account:
        principal = current_principal()
        self._recorder.calls.append(Call("GetAccount", principal, request))
        (project,) = principal.projects
        return account_pb2.Account(email=principal.account_email or "", project=project)


class OrchestratorServicer(orchestrator_service_pb2_grpc.OrchestratorServiceServicer):
    """EraseSubjectRuns only: the internal RPC."""

    def __init__(self, recorder: Recorder) -> None:
        self._recorder = recorder

    async def EraseSubjectRuns(  # noqa: N802
        self, request: orchestrator_service_pb2.EraseSubjectRunsRequest, context: _Context
    ) -> orchestrator_service_pb2.EraseSubjectRunsResponse:
        self._recorder.calls.append(Call("EraseSubjectRuns", current_principal(), request))
        return orchestrator_service_pb2.EraseSubjectRunsResponse(runs_erased=len(request.user_ids))


class IngestServicer(ingest_service_pb2_grpc.IngestServiceServicer):
    """Ingest only: a public RPC that services may call too."""

    def __init__(self, recorder: Recorder) -> None:
        self._recorder = recorder

    async def Ingest(  # noqa: N802
        self, request: telemetry_pb2.IngestBatch, context: _Context
    ) -> telemetry_pb2.IngestResult:
        self._recorder.calls.append(Call("Ingest", current_principal(), request))
        return telemetry_pb2.IngestResult(accepted=len(request.spans))


def _add_streams(recorder: Recorder, server: grpc.aio.Server) -> None:
    async def count(request: bytes, context: _Context) -> AsyncIterator[bytes]:
        for index in range(int(request.decode())):
            recorder.calls.append(Call("Count", current_principal(), request))
            yield str(index).encode()

    async def upload(requests: AsyncIterator[bytes], context: _Context) -> bytes:
        return b"".join([chunk async for chunk in requests])

    def identity(data: bytes) -> bytes:
        return data

    handlers = {
        "Count": grpc.unary_stream_rpc_method_handler(
            count, request_deserializer=identity, response_serializer=identity
        ),
        "Upload": grpc.stream_unary_rpc_method_handler(
            upload, request_deserializer=identity, response_serializer=identity
        ),
    }
    server.add_generic_rpc_handlers([grpc.method_handlers_generic_handler(STREAMS, handlers)])


class ProbeInterceptor(grpc.aio.ServerInterceptor):
    """Sits between the error and auth interceptors; records whether a principal is still bound
    once the auth-wrapped handler has finished."""

    def __init__(self, recorder: Recorder) -> None:
        self._recorder = recorder

    async def intercept_service(
        self,
        continuation: Callable[
            [grpc.HandlerCallDetails], Awaitable[grpc.RpcMethodHandler[Any, Any] | None]
        ],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler[Any, Any] | None:
        handler = await continuation(handler_call_details)
        if handler is None or handler.request_streaming or handler.response_streaming:
            return handler
        # Typed as a sync callable by the stubs; grpc.aio handlers return awaitables.
        inner: Any = handler.unary_unary

        async def call(request: Any, context: _Context) -> Any:
            try:
                return await inner(request, context)
            finally:
                self._recorder.bound_after.append(self._bound())

        return grpc.unary_unary_rpc_method_handler(
            call,
            request_deserializer=handler.request_deserializer,
            response_serializer=handler.response_serializer,
        )

    @staticmethod
    def _bound() -> Principal | None:
        try:
            return current_principal()
        except LookupError:
            return None


@dataclass
class Served:
    """A running server and what the tests need to talk to it and inspect it."""

    channel: grpc.aio.Channel
    store: MemoryControlStore
    clock: ManualClock
    recorder: Recorder
    server: GrpcServer

    @property
    def query(self) -> query_service_pb2_grpc.QueryServiceAsyncStub:
        return query_service_pb2_grpc.QueryServiceStub(self.channel)

    @property
    def account(self) -> account_service_pb2_grpc.AccountServiceAsyncStub:
        return account_service_pb2_grpc.AccountServiceStub(self.channel)

    @property
    def orchestrator(self) -> orchestrator_service_pb2_grpc.OrchestratorServiceAsyncStub:
        return orchestrator_service_pb2_grpc.OrchestratorServiceStub(self.channel)

    @property
    def ingest(self) -> ingest_service_pb2_grpc.IngestServiceAsyncStub:
        return ingest_service_pb2_grpc.IngestServiceStub(self.channel)

    def session(self, email: str = "bob@example.com", project: str = "bobs") -> str:
        return self.store.add_session(
            email=email, project=project, now=self.clock.now(), ttl=timedelta(hours=1)
        )


@contextlib.asynccontextmanager
async def serve(
    configured: tuple[ConfiguredKey, ...], *, service_secret: str | None = SERVICE_SECRET
) -> AsyncIterator[Served]:
    """Start a server whose operator declared `configured` keys (none: local mode), accepting
    `service_secret` as the service credential (None: no service credential)."""
    store, clock, recorder = MemoryControlStore(), ManualClock(), Recorder()
    authenticator = Authenticator(
        store,
        configured,
        clock=clock,
        local_project="default",
        service_digest=digest(service_secret) if service_secret is not None else None,
    )
    auth = AuthInterceptor(
        authenticator,
        StoreAuditSink(store),
        clock=clock,
        rules={**access_rules(), **EXTRA_RULES},
    )
    registrations = [
        ServiceRegistration(
            QUERY,
            functools.partial(
                query_service_pb2_grpc.add_QueryServiceServicer_to_server, QueryServicer(recorder)
            ),
        ),
        ServiceRegistration(
            ACCOUNT,
            functools.partial(
                account_service_pb2_grpc.add_AccountServiceServicer_to_server,
                AccountServicer(recorder),
            ),
        ),
        ServiceRegistration(
            ORCHESTRATOR,
            functools.partial(
                orchestrator_service_pb2_grpc.add_OrchestratorServiceServicer_to_server,
                OrchestratorServicer(recorder),
            ),
        ),
        ServiceRegistration(
            INGEST,
            functools.partial(
                ingest_service_pb2_grpc.add_IngestServiceServicer_to_server,
                IngestServicer(recorder),
            ),
        ),
        ServiceRegistration(STREAMS, functools.partial(_add_streams, recorder)),
    ]
    settings = GrpcSettings(shutdown_grace_s=0.0)
    # GrpcServer puts the ErrorInterceptor first; the probe and then auth follow it.
    async with GrpcServer(
        "127.0.0.1:0", registrations, settings, interceptors=[ProbeInterceptor(recorder), auth]
    ) as server:
        channel = open_channel(f"127.0.0.1:{server.port}", settings)
        try:
            yield Served(channel, store, clock, recorder, server)
        finally:
            await channel.close()


@pytest.fixture
async def served() -> AsyncIterator[Served]:
    """A server with operator keys: every request needs credentials."""
    async with serve(CONFIGURED) as running:
        yield running


@pytest.fixture
async def local() -> AsyncIterator[Served]:
    """A server in local mode: no keys, no accounts."""
    async with serve(()) as running:
        yield running
