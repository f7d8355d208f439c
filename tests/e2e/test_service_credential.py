"""The service credential against real daemons with a keys file: the query role's erasure reaches
the orchestrator's run store with it and the audit log names the calling service; a client that
presents it is refused, through the gateway and on gRPC; the query role never opens the run store.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import httpx
import pytest

from mcpd.auth.metadata import SERVICE_CREDENTIAL
from mcpd.auth.service_identity import ServiceCredential
from mcpd.auth.tokens import audit_id
from mcpd.orchestrator.v1 import orchestrator_service_pb2, orchestrator_service_pb2_grpc
from mcpd.query.v1 import query_service_pb2, query_service_pb2_grpc
from mcpd.runtime.errors_grpc import rpc_failure_from
from mcpd.testing.daemon import DaemonProcess
from tests.e2e.security_fixture import key_secret, write_keys_file
from tests.e2e.seed import add_run, run_ids

pytestmark = pytest.mark.e2e

ADMIN = key_secret("alpha", "admin")
READER = key_secret("alpha", "read")


def _mcpd() -> str:
    return str(Path(sys.executable).parent / "mcpd")


def _migrated(tmp_path: Path) -> dict[str, str]:
    """The environment of daemons sharing one migrated data directory and a keys file, with
    two runs of erin (one ended, one live) and one of finn in project alpha."""
    data_dir = tmp_path / "data"
    env = {
        "MCPD_DATA_DIR": str(data_dir),
        "MCPD_SECURITY_KEYS_FILE": str(write_keys_file(tmp_path / "keys.toml")),
    }
    subprocess.run([_mcpd(), "migrate"], env={**os.environ, **env}, check=True, timeout=60)
    for run_id, user_id, status in [
        ("r-done", "erin", "succeeded"),
        ("r-live", "erin", "running"),
        ("r-finn", "finn", "failed"),
    ]:
        add_run(data_dir, project="alpha", run_id=run_id, user_id=user_id, status=status)
    return env


@pytest.fixture(scope="module")
def daemon(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DaemonProcess]:
    """Every role in one `mcpd serve`, its service credential made in the data directory."""
    with DaemonProcess(extra_env=_migrated(tmp_path_factory.mktemp("all"))) as process:
        yield process


def _credential(daemon: DaemonProcess) -> ServiceCredential:
    data_dir = Path(daemon.extra_env["MCPD_DATA_DIR"])
    return ServiceCredential((data_dir / "service.credential").read_text().strip())


def _audit(http_url: str, project: str = "alpha") -> list[dict[str, Any]]:
    answer = httpx.get(
        f"{http_url}/v1/api/audit",
        params={"project": project, "limit": "1000"},
        headers={"authorization": f"Bearer {key_secret(project, 'admin')}"},
    )
    assert answer.status_code == 200, answer.text
    events: list[dict[str, Any]] = answer.json()["events"]
    return events


def test_an_erasure_reaches_the_orchestrator_with_the_credential_and_is_audited_as_it(
    daemon: DaemonProcess,
) -> None:
    data_dir = Path(daemon.extra_env["MCPD_DATA_DIR"])
    answer = httpx.post(
        f"{daemon.http_url}/v1/api/erasure",
        json={"user_id": "erin"},
        headers={"authorization": f"Bearer {ADMIN}"},
    )
    assert answer.status_code == 200, answer.text
    result = answer.json()
    assert (result["runs_erased"], result["runs_in_flight"]) == (1, 1)
    assert "r-live" in result["note"]
    assert run_ids(data_dir, "alpha") == {"r-live", "r-finn"}
    rows = [(e["principal"], e["action"], e["result"]) for e in _audit(daemon.http_url)]
    assert ("service:query", "erase_subject_runs", "allowed") in rows
    assert (audit_id(ADMIN), "erase", "allowed") in rows
    # The credential itself is written nowhere a reader of the log or the daemon's output sees.
    secret = _credential(daemon).secret
    assert secret not in answer.text
    assert secret not in str(rows)
    assert secret not in daemon.stderr_text(limit=1_000_000)


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("GET", "/v1/api/capabilities"),
        ("POST", "/v1/api/erasure"),
        ("POST", "/v1/api/ingest"),
        ("POST", "/v1/traces"),
        ("POST", "/mcp"),
    ],
)
def test_a_client_presenting_the_credential_through_the_gateway_is_refused(
    daemon: DaemonProcess, method: str, path: str
) -> None:
    credential = _credential(daemon)
    (header,) = credential.metadata("query")
    answer = httpx.request(
        method,
        f"{daemon.http_url}{path}",
        headers=dict([header, ("content-type", "application/json")]),
        content=b"{}",
    )
    assert answer.status_code == 403, answer.text
    assert answer.json()["error"]["reason"] == "SERVICE_CREDENTIAL_REFUSED"
    # Beside a valid key too: the header alone is enough to be turned away.
    with_key = httpx.request(
        method,
        f"{daemon.http_url}{path}",
        headers={SERVICE_CREDENTIAL: header[1], "authorization": f"Bearer {READER}"},
        content=b"{}",
    )
    assert with_key.status_code == 403


async def test_a_client_presenting_the_credential_on_grpc_reaches_no_public_rpc(
    daemon: DaemonProcess,
) -> None:
    credential = _credential(daemon).metadata("query")
    async with grpc.aio.insecure_channel(daemon.grpc_addr) as channel:
        query = query_service_pb2_grpc.QueryServiceStub(channel)
        orchestrator = orchestrator_service_pb2_grpc.OrchestratorServiceStub(channel)
        for call in (
            query.GetCapabilities(
                query_service_pb2.GetCapabilitiesRequest(project="alpha"), metadata=credential
            ),
            query.Erase(
                query_service_pb2.EraseRequest(project="alpha", user_id="finn"),
                metadata=credential,
            ),
        ):
            with pytest.raises(grpc.aio.AioRpcError) as refused:
                await call
            failure = rpc_failure_from(refused.value)
            assert (failure.code, failure.reason) == (
                grpc.StatusCode.PERMISSION_DENIED,
                "SERVICE_NOT_ACCEPTED",
            )
        # ... and no client key reaches the internal RPC, not even the project's admin.
        request = orchestrator_service_pb2.EraseSubjectRunsRequest(
            project="alpha", user_ids=["finn"]
        )
        with pytest.raises(grpc.aio.AioRpcError) as internal:
            await orchestrator.EraseSubjectRuns(
                request, metadata=(("authorization", f"Bearer {ADMIN}"),)
            )
        assert rpc_failure_from(internal.value).reason == "INTERNAL_RPC"
    assert "r-finn" in run_ids(Path(daemon.extra_env["MCPD_DATA_DIR"]), "alpha")


def _open_databases(pid: int | None) -> set[str]:
    """The names of the SQLite database files process `pid` holds open."""
    assert pid is not None
    found = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            target = os.readlink(fd)
        except OSError:
            continue
        if target.endswith(".db"):
            found.add(Path(target).name)
    return found


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="reads Linux /proc")
async def test_query_and_orchestrator_as_separate_processes_share_only_the_credential(
    tmp_path: Path,
) -> None:
    env = _migrated(tmp_path)
    # Mounted as Kubernetes does: one file both processes name, written by the operator.
    credential_file = tmp_path / "secret" / "service.credential"
    credential_file.parent.mkdir()
    credential_file.write_text("0123456789abcdef" * 4 + "\n")
    env["MCPD_SECURITY_SERVICE_CREDENTIAL_FILE"] = str(credential_file)
    serve = [_mcpd(), "serve", "--service"]
    async with DaemonProcess(
        command=[*serve, "orchestrator"], ready="grpc", extra_env=env
    ) as orchestrator:
        query_env = {**env, "MCPD_ORCHESTRATOR_ADDR": orchestrator.grpc_addr}
        async with (
            DaemonProcess(command=[*serve, "query"], ready="grpc", extra_env=query_env) as query,
            grpc.aio.insecure_channel(query.grpc_addr) as channel,
        ):
            result = await query_service_pb2_grpc.QueryServiceStub(channel).Erase(
                query_service_pb2.EraseRequest(project="alpha", user_id="erin"),
                metadata=(("authorization", f"Bearer {ADMIN}"),),
                timeout=30,
            )
            query_files = _open_databases(query.pid)
            orchestrator_files = _open_databases(orchestrator.pid)
    assert (result.runs_erased, result.runs_in_flight) == (1, 1)
    assert run_ids(tmp_path / "data", "alpha") == {"r-live", "r-finn"}
    # Each role opened the stores it owns, and the control store to authenticate.
    assert query_files == {"trace.db", "control.db"}
    assert orchestrator_files == {"run.db", "control.db"}
    # No credential was made in the data directory: both read the mounted one.
    assert not (tmp_path / "data" / "service.credential").exists()
