"""`mcpd serve` as a real process: health, reflection, capabilities over REST and gRPC, shutdown."""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
from collections.abc import Iterable
from pathlib import Path

import grpc
import httpx
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from mcpd import codec
from mcpd.query.v1 import query_service_pb2, query_service_pb2_grpc
from mcpd.testing.daemon import DaemonProcess, DaemonStartError
from mcpd.testing.eventually import eventually
from tests.e2e.conftest import BACKENDS, PROCESSES, storage_env

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
        no_theme = await http.get("/v1/api/intelligence/themes/no-such-theme")
        bad_json = await http.post(
            "/v1/api/ingest", content=b"{not json", headers={"content-type": "application/json"}
        )
    assert missing.status_code == 404
    assert no_theme.status_code == 404
    assert bad_json.status_code == 400
    for response in (missing, no_theme, bad_json):
        error = response.json()["error"]
        assert set(error) >= {"code", "status", "reason", "message"}
        assert error["code"] == response.status_code
    # A service's own refusal, mapped to the same shape as the gateway's.
    assert no_theme.json()["error"]["status"] == "NOT_FOUND"
    assert no_theme.json()["error"]["field"] == "theme_id"


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


# -- the server processes of `mcpd serve` ---------------------------------------------------------

needs_proc = pytest.mark.skipif(not Path("/proc/net/tcp").exists(), reason="reads Linux /proc")


def _servers(daemon: DaemonProcess) -> list[int]:
    """The daemon's server processes (the supervisor's children)."""
    assert daemon.pid is not None
    members = _group_members(daemon.pid)
    return sorted(pid for pid, (ppid, _) in members.items() if ppid == daemon.pid)


@needs_proc
def test_every_server_shares_every_port_and_dies_with_the_supervisor() -> None:
    with DaemonProcess(processes=PROCESSES) as daemon:
        assert daemon.pid is not None
        servers = _servers(daemon)
        assert len(servers) == PROCESSES
        banner = daemon.stderr_text()
        assert f"processes  supervisor {daemon.pid}, {PROCESSES} servers" in banner
        assert f"OTLP/HTTP  http://{daemon.http_addr}" in banner
        assert f"MCP stdio  {_mcpd()} mcp" in banner
        # Every server listens on HTTP, gRPC and OTLP/gRPC; the supervisor on none of them.
        members = _group_members(daemon.pid)
        for address in (daemon.http_addr, daemon.grpc_addr, daemon.otlp_grpc_addr):
            assert _listening_pids(_port(address), members) == set(servers), address
        assert httpx.get(f"{daemon.http_url}/v1/api/capabilities", timeout=10).status_code == 200

        os.kill(daemon.pid, signal.SIGKILL)  # the supervisor only, not the group

        def servers_gone() -> None:
            assert not any(_alive(pid) for pid in servers), "a server outlived its supervisor"
            assert not _accepts(daemon.http_addr), "the gateway still accepts connections"

        eventually(servers_gone, timeout=5)
    assert daemon.returncode == -signal.SIGKILL


@needs_proc
def test_a_dead_server_stops_the_daemon_with_a_failure() -> None:
    with DaemonProcess(processes=PROCESSES) as daemon:
        assert daemon.pid is not None
        os.kill(_servers(daemon)[-1], signal.SIGKILL)
        # The supervisor notices, stops the others and exits non-zero, for whatever supervises
        # mcpd to restart it.
        assert daemon.wait(15) == 1
        assert "died (killed by SIGKILL)" in daemon.stderr_text()
        assert not _group_members(daemon.pid)


@needs_proc
def test_sigterm_to_the_whole_group_stops_cleanly_and_says_so_once() -> None:
    # A terminal's Ctrl-C, or a service manager, signals every process of the group at once.
    with DaemonProcess(processes=PROCESSES) as daemon:
        assert daemon.pid is not None
        os.killpg(daemon.pid, signal.SIGTERM)
        assert daemon.wait(15) == 0, daemon.stderr_text()
        assert daemon.stderr_text().count('"msg":"stopped"') == 1, daemon.stderr_text()


@needs_proc
def test_requests_spread_over_every_server() -> None:
    with DaemonProcess(processes=PROCESSES) as daemon:
        servers = _servers(daemon)
        before = {pid: _cpu_seconds(pid) for pid in servers}
        trace_ids = [f"{index + 1:032x}" for index in range(16)]
        for trace_id in trace_ids:
            # A connection each: the kernel spreads connections, not requests, over the servers.
            answer = httpx.post(
                f"{daemon.http_url}/v1/api/ingest",
                json={"spans": _spans(trace_id, 200)},
                timeout=30,
            )
            assert answer.json()["accepted"] == 200, answer.text
        with httpx.Client(base_url=daemon.http_url, timeout=30) as http:
            for trace_id in trace_ids:
                detail = http.get(f"/v1/api/traces/{trace_id}").json()
                assert detail["trace"]["span_count"] == 200
        grown = {pid: _cpu_seconds(pid) - before[pid] for pid in servers}
        assert all(seconds > 0.05 for seconds in grown.values()), grown


def _spans(trace_id: str, count: int) -> list[dict[str, object]]:
    return [
        {
            "trace_id": trace_id,
            "span_id": f"{index + 1:016x}",
            "name": "step",
            "kind": "generic",
            "status": "ok",
            "start_time": "2026-11-29T10:00:00Z",
            "end_time": "2026-11-29T10:00:01Z",
            "input": {"text": "x" * 200},
        }
        for index in range(count)
    ]


def _cpu_seconds(pid: int) -> float:
    stat = Path(f"/proc/{pid}/stat").read_text()
    fields = stat[stat.rfind(")") + 2 :].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def test_a_port_in_use_fails_the_start() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        daemon = DaemonProcess(extra_env={"MCPD_HTTP_ADDR": f"127.0.0.1:{port}"})
        with pytest.raises(DaemonStartError) as caught:
            daemon.start()
    assert f"mcpd: cannot start: cannot listen on 127.0.0.1:{port}" in str(caught.value)
    assert daemon.returncode == 1
    assert daemon.pid is not None
    assert not _group_members(daemon.pid)


def test_a_second_daemon_cannot_share_the_first_ones_ports(tmp_path: Path) -> None:
    # The servers bind with SO_REUSEPORT; a second daemon (another data directory) must still
    # find the ports taken instead of silently receiving part of the first one's traffic.
    with DaemonProcess(processes=PROCESSES) as first:
        env = {
            "MCPD_HTTP_ADDR": first.http_addr,
            "MCPD_GRPC_ADDR": first.grpc_addr,
            "MCPD_OTLP_GRPC_ADDR": first.otlp_grpc_addr,
        }
        second = DaemonProcess(extra_env=env)
        with pytest.raises(DaemonStartError) as caught:
            second.start()
        assert f"cannot listen on {first.http_addr}" in str(caught.value)
        assert second.returncode == 1
        assert httpx.get(f"{first.http_url}/healthz", timeout=10).status_code == 200


def test_a_second_daemon_on_the_same_data_directory_fails_naming_the_first(
    tmp_path: Path,
) -> None:
    with DaemonProcess() as first:
        env = {"MCPD_DATA_DIR": str(first.data_dir)}
        second = DaemonProcess(extra_env=env)
        with pytest.raises(DaemonStartError) as caught:
            second.start()
        assert f"another mcpd process (pid {first.pid})" in str(caught.value)
        assert "DATA_DIR_LOCKED" in str(caught.value)
        assert second.returncode == 1
        # One line says why: no traceback.
        assert "Traceback" not in str(caught.value)
        assert httpx.get(f"{first.http_url}/healthz", timeout=10).status_code == 200


def _port(address: str) -> int:
    return int(address.rpartition(":")[2])


def _group_members(pgid: int) -> dict[int, tuple[int, list[str]]]:
    """The live processes of group `pgid`: pid -> (parent pid, argv)."""
    members: dict[int, tuple[int, list[str]]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            argv = (entry / "cmdline").read_bytes().decode().split("\0")[:-1]
        except OSError:
            continue
        state, ppid, group = stat[stat.rfind(")") + 2 :].split()[:3]
        if int(group) == pgid and state != "Z":
            members[int(entry.name)] = (int(ppid), argv)
    return members


def _listening_pids(port: int, pids: Iterable[int]) -> set[int]:
    """Which of `pids` hold a socket listening on TCP `port` (gRPC may bind IPv4 addresses
    through an IPv6 socket)."""
    inodes = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with contextlib.suppress(OSError):
            for line in Path(table).read_text().splitlines()[1:]:
                fields = line.split()
                if int(fields[1].rpartition(":")[2], 16) == port and fields[3] == "0A":
                    inodes.add(f"socket:[{fields[9]}]")
    found = set()
    for pid in pids:
        try:
            descriptors = list(Path(f"/proc/{pid}/fd").iterdir())
        except OSError:
            continue
        for descriptor in descriptors:
            try:
                if os.readlink(descriptor) in inodes:
                    found.add(pid)
            except OSError:
                continue
    return found


def _alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat[stat.rfind(")") + 2] != "Z"


def _accepts(address: str) -> bool:
    host, _, port = address.rpartition(":")
    try:
        with socket.create_connection((host, int(port)), timeout=1):
            return True
    except OSError:
        return False


def _grpcurl_list(address: str) -> str:
    command = [str(GRPCURL), "-plaintext", address, "list"]
    return subprocess.run(command, capture_output=True, text=True, check=True, timeout=30).stdout


def _mcpd() -> Path:
    return Path(sys.executable).parent / "mcpd"
