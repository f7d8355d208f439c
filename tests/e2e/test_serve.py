"""`mcpd serve` as a real process: health, reflection, capabilities over REST and gRPC, shutdown."""

from __future__ import annotations

import asyncio
import shutil
import subprocess
import sys
from pathlib import Path

import grpc
import httpx
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from mcpd import codec
from mcpd.query.v1 import query_service_pb2, query_service_pb2_grpc
from mcpd.testing.daemon import DaemonProcess
from tests.e2e.conftest import BACKENDS, storage_env

pytestmark = pytest.mark.e2e

MCPD_SERVICES = [
    "mcpd.account.v1.AccountService",
    "mcpd.evaluation.v1.EvaluationService",
    "mcpd.ingest.v1.IngestService",
    "mcpd.intelligence.v1.IntelligenceService",
    "mcpd.orchestrator.v1.OrchestratorService",
    "mcpd.query.v1.QueryService",
]
GRPCURL = Path(sys.executable).parent / "grpcurl"


async def _grpc_capabilities(address: str) -> dict[str, object]:
    async with grpc.aio.insecure_channel(address) as channel:
        stub = query_service_pb2_grpc.QueryServiceStub(channel)
        answer = await stub.GetCapabilities(query_service_pb2.GetCapabilitiesRequest(), timeout=10)
    return codec.encode(answer)


async def test_all_in_one_daemon_is_healthy_and_discoverable() -> None:
    async with DaemonProcess() as daemon, httpx.AsyncClient(base_url=daemon.http_url) as http:
        health = await http.get("/healthz")
        assert health.status_code == 200
        body = health.json()
        assert body["status"] == "ok"
        assert body["storage"] == "sqlite"
        assert body["spec_version"] == "v1"

        listed = (await asyncio.to_thread(_grpcurl_list, daemon.grpc_addr)).split()
        assert set(MCPD_SERVICES) <= set(listed)
        assert "grpc.health.v1.Health" in listed
        assert any(name.startswith("grpc.reflection.") for name in listed)

        async with grpc.aio.insecure_channel(daemon.grpc_addr) as channel:
            health_stub = health_pb2_grpc.HealthStub(channel)
            for service in ["", *MCPD_SERVICES]:
                reply = await health_stub.Check(health_pb2.HealthCheckRequest(service=service))
                assert reply.status == health_pb2.HealthCheckResponse.SERVING, service
    # SIGTERM stops it cleanly.
    assert daemon.shutdown_signal == "SIGTERM"
    assert daemon.returncode == 0


@pytest.mark.parametrize("backend", BACKENDS)
async def test_capabilities_over_rest_equal_grpc(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    env = storage_env(backend, tmp_path, request)
    async with DaemonProcess(extra_env=env) as daemon:
        async with httpx.AsyncClient(base_url=daemon.http_url) as http:
            rest = await http.get("/v1/api/capabilities")
            health = (await http.get("/healthz")).json()
        assert rest.status_code == 200
        assert rest.headers["content-type"].startswith("application/json")
        over_rest = rest.json()
        assert over_rest == await _grpc_capabilities(daemon.grpc_addr)
        assert over_rest["backend"] == backend
        assert health["storage"] == backend
        assert over_rest["text_search"] in {"substring", "words"}
        assert isinstance(over_rest["immediate_deletes"], bool)


async def test_rest_errors_share_one_shape_through_the_daemon() -> None:
    async with DaemonProcess() as daemon, httpx.AsyncClient(base_url=daemon.http_url) as http:
        missing = await http.get("/v1/api/no-such-route")
        unimplemented = await http.get("/v1/api/runs")
        bad_json = await http.post(
            "/v1/api/ingest", content=b"{not json", headers={"content-type": "application/json"}
        )
    assert missing.status_code == 404
    assert unimplemented.status_code == 501
    assert bad_json.status_code == 400
    for response in (missing, unimplemented, bad_json):
        error = response.json()["error"]
        assert set(error) >= {"code", "status", "reason", "message"}
        assert error["code"] == response.status_code
    assert unimplemented.json()["error"]["status"] == "UNIMPLEMENTED"
    assert "OrchestratorService/ListRuns" in unimplemented.json()["error"]["message"]


async def test_query_and_gateway_as_separate_processes() -> None:
    query_role = DaemonProcess(command=[str(_mcpd()), "serve", "--service", "query"], ready="grpc")
    async with query_role as query:
        gateway_env = {"MCPD_QUERY_ADDR": query.grpc_addr}
        gateway = DaemonProcess(
            command=[str(_mcpd()), "serve", "--service", "gateway"], extra_env=gateway_env
        )
        async with gateway, httpx.AsyncClient(base_url=gateway.http_url) as http:
            rest = await http.get("/v1/api/capabilities")
            health = await http.get("/healthz")
        assert rest.status_code == 200, rest.text
        assert rest.json() == await _grpc_capabilities(query.grpc_addr)
        assert health.json()["status"] == "ok"
        # The gateway process serves no gRPC; the query process serves no HTTP.
        async with httpx.AsyncClient() as http:
            with pytest.raises(httpx.ConnectError):
                await http.get(f"{query.http_url}/healthz", timeout=2)
    assert query.returncode == 0
    assert gateway.returncode == 0


def test_make_run_honours_the_environment(tmp_path: Path) -> None:
    make = shutil.which("make")
    assert make is not None, "make is required"
    root = Path(__file__).resolve().parents[2]
    with DaemonProcess(command=[make, "-s", "-C", str(root), "run"]) as daemon:
        # DaemonProcess chose free ports and passed them as MCPD_HTTP_ADDR/MCPD_GRPC_ADDR.
        health = httpx.get(f"{daemon.http_url}/healthz", timeout=5).json()
        assert health["status"] == "ok"
        assert health["storage"] == "sqlite"
        assert (daemon.data_dir / "trace.db").exists()


def _grpcurl_list(address: str) -> str:
    command = [str(GRPCURL), "-plaintext", address, "list"]
    return subprocess.run(command, capture_output=True, text=True, check=True, timeout=30).stdout


def _mcpd() -> Path:
    return Path(sys.executable).parent / "mcpd"
