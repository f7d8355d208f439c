"""The SDK against a real `mcpd serve` on SQLite and PostgreSQL: the example worker in
docs/examples runs as a process of its own, registers the `refunds` workflow and serves its
steps (an agent step, a parallel with an at_most_once branch); the client starts runs, waits for
them and reads their output; SIGTERM stops the worker once its steps are reported."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from mcpd.model.v1 import enums_pb2
from mcpd.runtime.errors import InvalidArgument
from mcpd.sdk import Client
from mcpd.signals.messages import python_of
from mcpd.testing.daemon import DaemonProcess
from tests.e2e.security_fixture import key_secret

pytestmark = pytest.mark.e2e

EXAMPLE = Path(__file__).resolve().parents[2] / "docs" / "examples" / "refunds_worker.py"


@pytest.fixture(scope="module")
def worker(orchestrator_daemon: DaemonProcess) -> Iterator[subprocess.Popen[bytes]]:
    env = {
        **os.environ,
        "MCPD_GRPC_ADDR": orchestrator_daemon.grpc_addr,
        "MCPD_API_KEY": key_secret("alpha", "worker"),
    }
    process = subprocess.Popen([sys.executable, str(EXAMPLE)], env=env)
    try:
        yield process
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


@pytest.fixture
def client(orchestrator_daemon: DaemonProcess) -> Iterator[Client]:
    """A client starting runs with an `execute` key."""
    with Client(orchestrator_daemon.grpc_addr, api_key=key_secret("alpha", "execute")) as made:
        yield made


@pytest.fixture
def reader(orchestrator_daemon: DaemonProcess) -> Iterator[Client]:
    """A client reading runs with a `read` key."""
    with Client(orchestrator_daemon.grpc_addr, api_key=key_secret("alpha", "read")) as made:
        yield made


def _start_when_registered(
    worker: subprocess.Popen[bytes], client: Client, run_input: object
) -> str:
    """Start a `refunds` run once the worker has registered the definition."""
    deadline = time.monotonic() + 30
    while True:
        assert worker.poll() is None, f"the example worker exited with {worker.returncode}"
        try:
            return client.start("refunds", run_input).run_id
        except Exception:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)


def test_the_example_worker_serves_the_refunds_workflow(
    worker: subprocess.Popen[bytes], client: Client, reader: Client
) -> None:
    refund = _start_when_registered(worker, client, {"ticket": "T-1", "text": "Please REFUND me"})
    other = client.start("refunds", {"ticket": "T-2", "text": "where is my parcel"}).run_id
    done = reader.wait(refund, timeout_s=30)
    assert done.status == enums_pb2.RUN_STATUS_SUCCEEDED
    output = python_of(done.output)
    assert output["kind"] == "refund"
    assert output["refund"]["refunded"] == 12.5
    assert python_of(done.state) == {"classified": "refund"}
    detail = reader.get(refund)
    issue = next(a for a in detail.attempts if a.step_key == "refund/issue")
    # The at_most_once branch posted started before its body ran.
    assert issue.HasField("started_at")
    skipped = reader.wait(other, timeout_s=30)
    assert python_of(skipped.output) == {"kind": "other", "refund": None}
    with pytest.raises(InvalidArgument) as caught:
        client.start("refunds", {"ticket": "T-3"})
    assert caught.value.field == "input"


def test_a_failing_handler_fails_the_run_with_its_message(
    worker: subprocess.Popen[bytes], client: Client, reader: Client
) -> None:
    run_id = _start_when_registered(worker, client, {"ticket": "T-4", "text": "   "})
    failed = reader.wait(run_id, timeout_s=30)
    assert failed.status == enums_pb2.RUN_STATUS_FAILED
    assert failed.error == "the ticket has no text"


def test_sigterm_stops_the_worker(worker: subprocess.Popen[bytes], client: Client) -> None:
    _start_when_registered(worker, client, {"ticket": "T-5", "text": "refund"})
    worker.send_signal(signal.SIGTERM)
    assert worker.wait(timeout=40) == 0
