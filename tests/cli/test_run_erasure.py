"""The query role erases a subject's runs through the orchestrator's internal RPC, with the
service credential, as `mcpd serve` wires the two roles (cli.roles, cli.security), over a real
gRPC server and real SQLite stores."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import grpc
import pytest

from cli.roles import ROLE_STORES, registrations, stores_of
from cli.security import build_security, service_credential
from mcpd.auth.tokens import audit_id
from mcpd.model.v1 import query_pb2
from mcpd.query.v1 import query_service_pb2, query_service_pb2_grpc
from mcpd.runtime.channels import open_channel
from mcpd.runtime.clock import SystemClock
from mcpd.runtime.config import SecuritySettings, Settings
from mcpd.runtime.errors_grpc import rpc_failure_from
from mcpd.runtime.server import GrpcServer
from mcpd.storage import Stores, open_stores
from mcpd.testing.daemon import free_port
from tests.e2e.security_fixture import key_secret, write_keys_file
from tests.e2e.seed import add_run, run_ids

ADMIN = key_secret("alpha", "admin")


@dataclass
class Roles:
    """The query and orchestrator roles serving on one port, and a client channel to it."""

    stores: Stores
    channel: grpc.aio.Channel
    data_dir: Path

    async def erase(self, user_id: str) -> query_pb2.ErasureResult:
        stub = query_service_pb2_grpc.QueryServiceStub(self.channel)
        request = query_service_pb2.EraseRequest(project="alpha", user_id=user_id)
        answer: query_pb2.ErasureResult = await stub.Erase(
            request, metadata=(("authorization", f"Bearer {ADMIN}"),), timeout=10
        )
        return answer


@contextlib.asynccontextmanager
async def serving(tmp_path: Path, roles: list[str]) -> AsyncIterator[Roles]:
    data_dir = tmp_path / "data"
    settings = Settings(
        data_dir=data_dir,
        grpc_addr=f"127.0.0.1:{free_port()}",
        security=SecuritySettings(keys_file=write_keys_file(tmp_path / "keys.toml")),
    )
    with open_stores(
        "sqlite", data_dir=data_dir, postgres_url=None, clickhouse_url=None, stores=stores_of(roles)
    ) as stores:
        clock = SystemClock()
        credential = service_credential(settings)
        security = await build_security(
            settings.security, stores.control, clock, [settings.grpc_addr], service=credential
        )
        async with contextlib.AsyncExitStack() as stack:
            stack.push_async_callback(security.close)
            channel = open_channel(settings.grpc_addr, settings.grpc)
            stack.push_async_callback(channel.close)
            served = registrations(
                roles,
                stores,
                settings,
                clock=clock,
                peers=lambda service: channel,
                service=credential,
            )
            await stack.enter_async_context(
                GrpcServer(
                    settings.grpc_addr, served, settings.grpc, interceptors=[security.interceptor]
                )
            )
            yield Roles(stores, channel, data_dir)


async def test_erasure_removes_the_subjects_ended_runs_and_audits_the_calling_service(
    tmp_path: Path,
) -> None:
    async with serving(tmp_path, ["query", "orchestrator"]) as roles:
        for project, run_id, user_id, status in [
            ("alpha", "r-done", "erin", "succeeded"),
            ("alpha", "r-live", "erin", "running"),
            ("alpha", "r-other", "finn", "failed"),
            ("beta", "r-beta", "erin", "failed"),
        ]:
            add_run(roles.data_dir, project=project, run_id=run_id, user_id=user_id, status=status)

        result = await roles.erase("erin")

        assert (result.runs_erased, result.runs_in_flight) == (1, 1)
        assert "r-live" in result.note
        assert run_ids(roles.data_dir, "alpha") == {"r-live", "r-other"}
        assert run_ids(roles.data_dir, "beta") == {"r-beta"}
        events = roles.stores.control.list_audit("alpha", cursor=None, limit=10).events
    rows = [(e.principal, e.action, e.project, e.result) for e in events]
    # Newest first: the orchestrator's row is written inside the query service's call.
    assert rows == [
        ("service:query", "erase_subject_runs", "alpha", 1),
        (audit_id(ADMIN), "erase", "alpha", 1),
    ]


async def test_a_query_role_without_its_orchestrator_erases_nothing_and_says_so(
    tmp_path: Path,
) -> None:
    # The query role alone: the orchestrator's service is not served on the port it calls.
    assert "run" not in ROLE_STORES["query"]
    async with serving(tmp_path, ["query"]) as roles:
        with pytest.raises(grpc.aio.AioRpcError) as refused:
            await roles.erase("erin")
        with pytest.raises(LookupError):
            _ = roles.stores.run
    failure = rpc_failure_from(refused.value)
    assert (failure.code, failure.reason) == (
        grpc.StatusCode.UNAVAILABLE,
        "RUN_ERASURE_UNAVAILABLE",
    )
    assert "nothing was erased" in failure.message
