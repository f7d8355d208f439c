"""Monitors and objectives end to end: a real `mcpd serve` on SQLite and PostgreSQL, both from
its configuration file, evaluated every half second over the runs ingest stored, read over REST
and gRPC, acknowledged, and announced to a real webhook receiver once per transition; and the
two watches over orchestrator runs tripped by real runs that a real worker (the SDK's, in this
process) walks through a loop."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any

import grpc
import httpx
import pytest

from mcpd.evaluation.v1 import evaluation_service_pb2, evaluation_service_pb2_grpc
from mcpd.model.v1 import enums_pb2
from mcpd.sdk import Client, Step, Worker, definitions_of
from mcpd.testing.daemon import DaemonProcess
from mcpd.testing.eventually import eventually
from services.evaluation.tests.receiver import Receiver
from tests.e2e.conftest import storage_env
from tests.e2e.ingest_payloads import new_trace_id, simple_trace

pytestmark = pytest.mark.e2e

SECOND = 1_000_000_000


@pytest.fixture(scope="module")
def receiver() -> Iterator[Receiver]:
    made = Receiver()
    yield made
    made.server.shutdown()


@pytest.fixture(scope="module")
def run_hooks() -> Iterator[Receiver]:
    """The receiver of the run watches' webhook."""
    made = Receiver()
    yield made
    made.server.shutdown()


@pytest.fixture(
    scope="module", params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]
)
def daemon(
    request: pytest.FixtureRequest,
    tmp_path_factory: pytest.TempPathFactory,
    receiver: Receiver,
    run_hooks: Receiver,
) -> Iterator[DaemonProcess]:
    directory = tmp_path_factory.mktemp(f"monitors-{request.param}")
    config = directory / "mcpd.toml"
    config.write_text(
        f"""
[evaluation]
monitor_interval_s = 0.5

[[monitors]]
id = "failing"
name = "Runs failing"
watch = "error_rate"
compare = "above"
threshold = 0.4
window_seconds = 3600
min_samples = 2
webhook = "http://{receiver.host}/hooks/secret-token"

[[monitors]]
id = "silent"
name = "Nothing arrives"
watch = "trace_count"
compare = "below"
threshold = 1
window_seconds = 5
min_samples = 100

[[monitors]]
id = "scores"
name = "Answers get worse"
watch = "score_mean"
scorer_id = "e2e_quality"
compare = "below"
threshold = 0.5
window_seconds = 3600
min_samples = 2

[[monitors]]
id = "divergent"
name = "Runs stray from their shape"
watch = "step_count_divergence"
window_seconds = 3600

[[monitors]]
id = "repeating"
name = "Runs repeat themselves"
watch = "run_repetition"
compare = "above"
threshold = 5
window_seconds = 3600
min_samples = 3
webhook = "http://{run_hooks.host}/hooks/runs"

[[slos]]
id = "answers"
name = "Runs succeed"
objective = 0.95
window_days = 1
min_samples = 2
webhook = "http://{receiver.host}/hooks/slo-token"
"""
    )
    env = {**storage_env(request.param, directory, request), "MCPD_CONFIG": str(config)}
    with DaemonProcess(extra_env=env) as running:
        yield running


def _ingest(daemon: DaemonProcess, *, failing: bool, count: int) -> None:
    now = time.time_ns()
    spans = []
    for _ in range(count):
        run = simple_trace(new_trace_id(), start_ns=now - 10 * SECOND, end_ns=now - SECOND)
        if failing:
            run[0]["status"] = "error"
            run[0]["error"] = {"message": "it broke"}
        spans += run
    answer = httpx.post(f"{daemon.http_url}/v1/api/ingest", json={"spans": spans}, timeout=30)
    assert answer.status_code == 200, answer.text


def _score(daemon: DaemonProcess, trace_id: str, values: list[float]) -> None:
    """Scores of scorer `e2e_quality`, ids `quality-<n>`, produced ten seconds ago."""
    at = datetime.fromtimestamp(time.time() - 10, UTC).isoformat().replace("+00:00", "Z")
    scores = [
        {
            "score_id": f"quality-{number}",
            "trace_id": trace_id,
            "scorer_id": "e2e_quality",
            "source": "live",
            "value": value,
            "timestamp": at,
        }
        for number, value in enumerate(values)
    ]
    answer = httpx.post(f"{daemon.http_url}/v1/api/ingest", json={"scores": scores}, timeout=30)
    assert answer.status_code == 200, answer.text


def _states(daemon: DaemonProcess) -> dict[str, dict[str, Any]]:
    answer = httpx.get(f"{daemon.http_url}/v1/api/monitors", timeout=30)
    assert answer.status_code == 200, answer.text
    return {state["monitor"]["id"]: state for state in answer.json()["monitors"]}


def _condition(daemon: DaemonProcess, monitor_id: str, condition: str) -> dict[str, Any]:
    state = _states(daemon)[monitor_id]
    assert state["condition"] == condition, state
    return state


def _objective(daemon: DaemonProcess, condition: str) -> dict[str, Any]:
    answer = httpx.get(f"{daemon.http_url}/v1/api/slos", timeout=30)
    assert answer.status_code == 200, answer.text
    (state,) = answer.json()["slos"]
    assert state["condition"] == condition, state
    return dict(state)


def test_a_monitor_and_an_objective_trip_are_acknowledged_and_clear(
    daemon: DaemonProcess, receiver: Receiver
) -> None:
    before = len(receiver.bodies)
    _ingest(daemon, failing=True, count=3)
    tripped = eventually(lambda: _condition(daemon, "failing", "tripped"), timeout=20)
    # Every run failed against a 5 % budget: both burn windows at 20x.
    burning = eventually(lambda: _objective(daemon, "tripped"), timeout=20)
    assert burning["last"]["burn_fast"] == pytest.approx(20.0)
    assert burning["last"]["burn_slow"] == pytest.approx(20.0)
    assert (burning["last"]["success_rate"], burning["last"]["samples"]) == (0.0, 3)
    assert burning["slo"]["webhook"] == receiver.host
    acknowledged_slo = httpx.post(
        f"{daemon.http_url}/v1/api/slos/answers/acknowledge", json={}, timeout=30
    )
    assert acknowledged_slo.json()["condition"] == "acknowledged", acknowledged_slo.text
    assert tripped["monitor"]["webhook"] == receiver.host  # never the path with its token
    assert tripped["last"]["value"] == 1.0
    assert tripped["last"]["samples"] == 3
    assert tripped["tripped_at"] <= tripped["last"]["at"]

    with grpc.insecure_channel(daemon.grpc_addr) as channel:
        stub = evaluation_service_pb2_grpc.EvaluationServiceStub(channel)
        acknowledged = stub.AcknowledgeMonitor(
            evaluation_service_pb2.AcknowledgeMonitorRequest(monitor_id="failing"), timeout=30
        )
        assert acknowledged.condition == enums_pb2.MONITOR_CONDITION_ACKNOWLEDGED
        with pytest.raises(grpc.RpcError) as refused:
            stub.AcknowledgeMonitor(
                evaluation_service_pb2.AcknowledgeMonitorRequest(monitor_id="nope"), timeout=30
            )
        assert refused.value.code() is grpc.StatusCode.NOT_FOUND

    _ingest(daemon, failing=False, count=6)
    cleared = eventually(lambda: _condition(daemon, "failing", "nominal"), timeout=20)
    assert cleared["last"]["samples"] == 9
    assert "tripped_at" not in cleared

    # 3 of 9 failed: a third against a 5 % budget burns at 6.67x, under the hour's 14.4.
    # A reading reads its three windows one after another: wait for one that saw all nine runs.
    def nine_runs() -> dict[str, Any]:
        state = _objective(daemon, "nominal")
        assert state["last"]["samples"] == 9, state
        return state

    recovered = eventually(nine_runs, timeout=20)
    assert recovered["last"]["budget_remaining"] == pytest.approx(1 - (3 / 9) / 0.05)

    def announced() -> list[tuple[str, str, str]]:
        found = [
            (body["kind"], body["transition"], body.get("monitor_id") or body["slo_id"])
            for body in receiver.bodies[before:]
        ]
        assert len(found) == 4
        return found

    assert sorted(eventually(announced, timeout=10)) == [
        ("monitor", "cleared", "failing"),
        ("monitor", "tripped", "failing"),
        ("slo", "cleared", "answers"),
        ("slo", "tripped", "answers"),
    ]


def test_a_score_mean_monitor_counts_each_score_once(daemon: DaemonProcess) -> None:
    # Read through the query service's GetScoreStats with the service credential.
    trace_id = new_trace_id()
    _score(daemon, trace_id, [0.0, 0.25])
    tripped = eventually(lambda: _condition(daemon, "scores", "tripped"), timeout=20)
    assert (tripped["last"]["value"], tripped["last"]["samples"]) == (0.125, 2)

    # Scored again under the same ids: each still counts once, at its new value.
    _score(daemon, trace_id, [1.0, 0.75])
    cleared = eventually(lambda: _condition(daemon, "scores", "nominal"), timeout=20)
    assert (cleared["last"]["value"], cleared["last"]["samples"]) == (0.875, 2)


def test_a_silent_window_trips_a_trace_count_monitor(daemon: DaemonProcess) -> None:
    # The runs of this module start ten seconds before they are sent: never in the last five.
    state = eventually(lambda: _condition(daemon, "silent", "tripped"), timeout=20)
    assert (state["last"]["value"], state["last"]["samples"]) == (0.0, 0)
    assert "webhook" not in state["monitor"]
    assert state["monitor"]["min_samples"] == 100  # which a silent window does not need
    monitors = f"{daemon.http_url}/v1/api/monitors"
    over_rest = httpx.post(f"{monitors}/silent/acknowledge", json={}, timeout=30)
    assert over_rest.status_code == 200, over_rest.text
    assert over_rest.json()["condition"] == "acknowledged"
    unknown = httpx.post(f"{monitors}/nope/acknowledge", json={}, timeout=30)
    assert (unknown.status_code, unknown.json()["error"]["field"]) == (404, "monitor_id")


# A loop whose body runs until the iteration named by the run's input: `last + 1` steps, every
# one an attempt at the same node (poll/check).
PROBE = {
    "steps": [
        {
            "id": "poll",
            "kind": "loop",
            "max_iterations": 60,
            "until": {"gte": ["${iteration}", "${input.last}"]},
            "body": {"id": "check", "kind": "task"},
        }
    ]
}


@contextmanager
def _worker(daemon: DaemonProcess) -> Iterator[Client]:
    """A client of the local project, with a real worker serving PROBE in a thread."""

    def check(step: Step) -> dict[str, int]:
        return {"attempt": step.attempt}

    with Client(daemon.grpc_addr) as client:
        client.define("probe", PROBE)
        worker = Worker(
            client,
            worker_id="probe-worker",
            handlers={"poll/check": check},
            definitions=definitions_of([("probe", PROBE)]),
            wait_ms=500,
        )
        thread = threading.Thread(target=worker.run, name="probe-worker", daemon=True)
        thread.start()
        try:
            yield client
        finally:
            worker.stop()
            thread.join(timeout=10)


def _ended(client: Client, run_ids: list[str]) -> None:
    for run_id in run_ids:
        assert client.wait(run_id, timeout_s=60).status == enums_pb2.RUN_STATUS_SUCCEEDED


def test_real_runs_trip_the_run_watches(daemon: DaemonProcess, run_hooks: Receiver) -> None:
    before = len(run_hooks.bodies)
    with _worker(daemon) as client:
        # Twelve usual runs, of 2, 3 and 4 steps: median 3, MAD 1.
        _ended(client, [client.start("probe", {"last": 1 + n % 3}).run_id for n in range(12)])

        def usual(monitor_id: str) -> dict[str, Any]:
            state = _condition(daemon, monitor_id, "nominal")
            assert state["last"]["samples"] == 12, state
            return state

        assert eventually(lambda: usual("divergent"), timeout=20)["last"]["value"] == (
            pytest.approx(0.6745)
        )
        assert eventually(lambda: usual("repeating"), timeout=20)["last"]["value"] == 3.0

        # A runaway: 40 steps, every one at the same node.
        runaway = client.start("probe", {"last": 39}).run_id
        _ended(client, [runaway])

    def tripped(monitor_id: str, value: float) -> dict[str, Any]:
        state = _condition(daemon, monitor_id, "tripped")
        assert (state["last"]["samples"], state["last"]["value"]) == (13, pytest.approx(value))
        return state

    divergent = eventually(lambda: tripped("divergent", 0.6745 * 37), timeout=20)
    assert divergent["monitor"]["threshold"] == 3.5  # the spec's bound, by default
    assert f"run {runaway} of probe v1 took 40 steps" in divergent["last"]["detail"]
    eventually(lambda: tripped("repeating", (4 * 2 + 4 * 3 + 4 * 4 + 40) / 13), timeout=20)

    def announced() -> list[tuple[str, str]]:
        found = [(body["transition"], body["monitor_id"]) for body in run_hooks.bodies[before:]]
        assert found, "no announcement yet"
        return found

    assert eventually(announced, timeout=10) == [("tripped", "repeating")]
