"""kill -9 of the daemon mid-run and of a worker mid-step, with real worker processes on SQLite:
every run ends in the right terminal state after the restart, nothing acknowledged is lost, and
no at_most_once body runs twice."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from mcpd.model.v1 import enums_pb2
from mcpd.sdk import Client
from mcpd.testing.daemon import DaemonProcess

pytestmark = pytest.mark.e2e

REPO = Path(__file__).resolve().parents[2]
LEASE_TTL_MS = 1000
FLOW = {
    "steps": [
        {"id": "prepare", "kind": "task"},
        {"id": "slow", "kind": "task", "retry": {"attempts": 3, "initial_ms": 100}},
        {"id": "pay", "kind": "task", "effect": "at_most_once"},
    ]
}


@contextmanager
def worker(target: str, log: Path) -> Iterator[subprocess.Popen[bytes]]:
    process = subprocess.Popen(
        [sys.executable, "-m", "tests.e2e.fault_worker", target, str(log)], cwd=REPO
    )
    try:
        yield process
    finally:
        if process.poll() is None:
            process.terminate()
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


def daemon_env(data_dir: Path) -> dict[str, str]:
    return {"MCPD_DATA_DIR": str(data_dir), "MCPD_ORCHESTRATOR_LEASE_TTL_MS": str(LEASE_TTL_MS)}


def bodies(log: Path) -> Counter[str]:
    """How often the `pay` body started, per run."""
    if not log.exists():
        return Counter()
    return Counter(line.split()[0] for line in log.read_text().splitlines() if line)


def ended(client: Client, run_ids: list[str], timeout_s: float = 90) -> dict[str, int]:
    return {
        run_id: client.wait(run_id, timeout_s=timeout_s, poll_s=0.1).status for run_id in run_ids
    }


def test_a_daemon_killed_mid_run_finishes_every_run_after_its_restart(tmp_path: Path) -> None:
    data_dir, log = tmp_path / "data", tmp_path / "pay.log"
    data_dir.mkdir()
    daemon = DaemonProcess(extra_env=daemon_env(data_dir))
    daemon.start()
    try:
        with Client(daemon.grpc_addr) as client:
            client.define("flow", FLOW)
            started = [client.start("flow", idempotency_key=f"k{n}").run_id for n in range(12)]
        with worker(daemon.grpc_addr, log):
            time.sleep(0.8)  # some runs are mid-step now
            assert daemon.pid is not None
            os.killpg(daemon.pid, signal.SIGKILL)
    finally:
        daemon.stop()
    assert sum(bodies(log).values()) < len(started), "the kill came after every run had paid"
    with (
        DaemonProcess(extra_env=daemon_env(data_dir)) as restarted,
        Client(restarted.grpc_addr) as client,
    ):
        # Acknowledged starts survived: the same keys answer the same runs.
        again = [client.start("flow", idempotency_key=f"k{n}").run_id for n in range(12)]
        assert again == started
        with worker(restarted.grpc_addr, log):
            statuses = ended(client, started)
        errors = {run_id: client.get(run_id).run.error for run_id in started}
    check_outcomes(statuses, errors, bodies(log))


def check_outcomes(statuses: dict[str, int], errors: dict[str, str], paid: Counter[str]) -> None:
    """No at_most_once body ran twice; a run succeeded with its body run once, or failed
    because that body lost its lease after it started."""
    for run_id, status in statuses.items():
        assert paid[run_id] <= 1, f"the at_most_once body of {run_id} ran {paid[run_id]} times"
        if status == enums_pb2.RUN_STATUS_SUCCEEDED:
            assert paid[run_id] == 1
        else:
            assert status == enums_pb2.RUN_STATUS_FAILED, (run_id, status)
            assert "at_most_once" in errors[run_id], errors[run_id]


def test_a_worker_killed_mid_step_is_replaced_by_another(tmp_path: Path) -> None:
    log = tmp_path / "pay.log"
    with (
        DaemonProcess(extra_env={"MCPD_ORCHESTRATOR_LEASE_TTL_MS": str(LEASE_TTL_MS)}) as daemon,
        Client(daemon.grpc_addr) as client,
    ):
        client.define("flow", FLOW)
        run_ids = [client.start("flow").run_id for _ in range(6)]
        with worker(daemon.grpc_addr, log) as doomed:
            time.sleep(0.9)
            doomed.kill()  # SIGKILL: its leases lapse, nobody reports them
            doomed.wait()
        with worker(daemon.grpc_addr, log):
            statuses = ended(client, run_ids)
        details = {run_id: client.get(run_id) for run_id in run_ids}
    check_outcomes(statuses, {r: d.run.error for r, d in details.items()}, bodies(log))
    # Runs whose worker died before `pay` started were finished by the second worker.
    assert any(status == enums_pb2.RUN_STATUS_SUCCEEDED for status in statuses.values())
