"""The evaluation SDK (`mcpd.sdk.EvaluationClient`) against a real `mcpd serve` with API keys,
each of one scope, given to the client as `ScopedKeys`.

SQLite only: what the SDK adds is client-side (batching, paging, running a function, recording
its traces, scoring, finishing); the daemon's side of every RPC it calls runs on every backend in
test_experiments.py and test_scoring.py.

- Datasets are created, found by name, filled past one batch and read back past one page; runs
  are captured into one.
- `run_experiment` over a 25-item dataset with a task right on all but one item ends succeeded
  with its summary, item count and traces; a candidate wrong on six items, run with
  `baseline=`, compares paired, decidable and regressed, the numbers checked against those
  computed here from the two tasks.
- A task that raises on one item fails the experiment with that item's reason; the others are
  scored.
- A key of the wrong scope is refused as PermissionDenied.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterator

import httpx
import pytest

from mcpd.model.v1 import enums_pb2
from mcpd.runtime.errors import PermissionDenied
from mcpd.sdk import EvaluationClient, ScopedKeys
from mcpd.signals.messages import python_of
from mcpd.testing.daemon import DaemonProcess
from tests.e2e.conftest import storage_env
from tests.e2e.security_fixture import bearer, key_secret, write_keys_file

pytestmark = pytest.mark.e2e

PROJECT = "alpha"
ITEMS = 25
BASELINE_WRONG = {7}
CANDIDATE_WRONG = {n for n in range(1, ITEMS + 1) if n % 4 == 0}


@pytest.fixture(scope="module")
def daemon(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[DaemonProcess]:
    directory = tmp_path_factory.mktemp("sdk-evaluation")
    env = {
        **storage_env("sqlite", directory, request),
        "MCPD_SECURITY_KEYS_FILE": str(write_keys_file(directory / "keys.toml")),
    }
    with DaemonProcess(extra_env=env) as running:
        yield running


@pytest.fixture(scope="module")
def client(daemon: DaemonProcess) -> Iterator[EvaluationClient]:
    keys = ScopedKeys(
        read=key_secret(PROJECT, "read"),
        write=key_secret(PROJECT, "write"),
        ingest=key_secret(PROJECT, "ingest"),
    )
    with EvaluationClient(daemon.grpc_addr, api_key=keys) as made:
        yield made


def double(item: dict[str, int]) -> int:
    """Right except on BASELINE_WRONG."""
    n = item["n"]
    return 0 if n in BASELINE_WRONG else 2 * n


def sloppy_double(item: dict[str, int]) -> int:
    """Right except on CANDIDATE_WRONG."""
    n = item["n"]
    return 0 if n in CANDIDATE_WRONG else 2 * n


def fragile_double(item: dict[str, int]) -> int:
    """Raises on 13."""
    if item["n"] == 13:
        raise ValueError("thirteen is unlucky")
    return 2 * item["n"]


@pytest.fixture(scope="module")
def sums(client: EvaluationClient) -> str:
    """A dataset of ITEMS items: {"n": n} expecting 2n."""
    made = client.create_dataset("sdk sums")
    items = [{"input": {"n": n}, "expected": 2 * n} for n in range(1, ITEMS + 1)]
    assert client.add_items(made, items).added == ITEMS
    return made.dataset_id


def test_datasets_are_created_found_filled_and_read(client: EvaluationClient) -> None:
    made = client.create_dataset("sdk many", description="more than a batch")
    assert client.find_dataset("sdk many") == made
    assert client.find_dataset("no such dataset") is None

    count = 1001  # past one batch of 1,000 and one page of 1,000
    items = ({"input": {"i": i}, "metadata": {"even": i % 2 == 0}} for i in range(count))
    assert client.add_items(made.dataset_id, items).added == count
    read = list(client.items(made))
    assert [python_of(item.input) for item in read] == [{"i": i} for i in range(count)]
    assert python_of(read[2].metadata) == {"even": True}
    assert not read[0].HasField("expected")
    assert client.get_dataset(made).item_count == count
    assert made.dataset_id in [found.dataset_id for found in client.datasets()]


def _mean_and_stdev(values: list[float]) -> tuple[float, float]:
    return statistics.fmean(values), statistics.stdev(values)


def test_experiments_run_a_function_score_it_and_compare(
    client: EvaluationClient, sums: str, daemon: DaemonProcess
) -> None:
    first = client.run_experiment("double", sums, double, scorers=["exact_match"])
    baseline = first.experiment
    assert baseline.status == enums_pb2.EXPERIMENT_STATUS_SUCCEEDED, baseline.error
    assert (baseline.item_count, first.failed, first.skipped) == (ITEMS, (), ())
    right = [0.0 if n in BASELINE_WRONG else 1.0 for n in range(1, ITEMS + 1)]
    mean, stdev = _mean_and_stdev(right)
    assert first.status == "succeeded"
    shown = first.summary["exact_match"]
    assert shown["count"] == ITEMS
    assert math.isclose(shown["mean"], mean)
    assert math.isclose(shown["stdev"], stdev)
    assert [run.output for run in first.runs] == [double({"n": n}) for n in range(1, ITEMS + 1)]

    # Each run is a stored trace: one agent_run root named after the task, in the experiment.
    run = first.runs[0]
    with httpx.Client(base_url=f"{daemon.http_url}/v1/api", timeout=30) as http:
        answer = http.get(f"/traces/{run.trace_id}", headers=bearer(PROJECT, "read"))
    assert answer.status_code == 200, answer.text
    (root,) = answer.json()["spans"]
    assert (root["name"], root["kind"], root["status"]) == ("double", "agent_run", "ok")
    assert (root["input"], root["output"]) == ({"n": 1}, 2)
    assert root["correlation"]["experiment_id"] == baseline.experiment_id

    second = client.run_experiment(
        "sloppy", sums, sloppy_double, scorers=["exact_match"], baseline=baseline, concurrency=3
    )
    candidate = second.experiment
    assert candidate.status == enums_pb2.EXPERIMENT_STATUS_SUCCEEDED, candidate.error
    assert candidate.baseline_id == baseline.experiment_id
    listed = [found.experiment_id for found in client.experiments(dataset=sums)]
    assert {baseline.experiment_id, candidate.experiment_id} <= set(listed)

    compared = client.compare(baseline, candidate.experiment_id)
    (row,) = compared.scorers
    assert (row.scorer_id, row.baseline_n, row.candidate_n) == ("exact_match", ITEMS, ITEMS)
    assert (row.paired, row.decidable, compared.regressed) == (True, True, True)
    sloppy = [0.0 if n in CANDIDATE_WRONG else 1.0 for n in range(1, ITEMS + 1)]
    assert math.isclose(row.baseline_mean, mean)
    assert math.isclose(row.candidate_mean, statistics.fmean(sloppy))
    differences = [c - b for b, c in zip(right, sloppy, strict=True)]
    assert math.isclose(row.delta, statistics.fmean(differences))
    assert math.isclose(row.delta_se, statistics.stdev(differences) / math.sqrt(ITEMS))

    # A run's trace captured back into a dataset keeps its input and answer.
    kept = client.create_dataset("sdk captured")
    captured = client.capture(kept, [run.trace_id or ""], use_output_as_expected=True)
    assert (captured.captured, captured.requested) == (1, 1)
    (item,) = client.items(kept)
    assert (python_of(item.input), python_of(item.expected)) == ({"n": 1}, 2)
    assert item.source_trace_id == run.trace_id


def test_a_task_that_raises_fails_its_item_and_the_experiment(
    client: EvaluationClient, sums: str
) -> None:
    result = client.run_experiment(
        "fragile", sums, fragile_double, scorers=["exact_match"], metadata={"model": "m-1"}
    )
    ended = result.experiment
    assert result.status == "failed"
    (failed,) = result.failed
    assert failed.error == "ValueError: thirteen is unlucky"
    assert ended.error == (
        f"1 of {ITEMS} items failed; the first, {failed.item_id}: ValueError: thirteen is unlucky"
    )
    assert result.summary["exact_match"]["count"] == ITEMS - 1
    assert result.summary["exact_match"]["mean"] == 1.0
    assert python_of(ended.metadata) == {"model": "m-1"}


def test_a_key_of_the_wrong_scope_is_refused(daemon: DaemonProcess) -> None:
    one_key = EvaluationClient(daemon.grpc_addr, api_key=key_secret(PROJECT, "read"))
    with one_key, pytest.raises(PermissionDenied):
        one_key.create_dataset("not with a read key")
    only_read = EvaluationClient(
        daemon.grpc_addr, api_key=ScopedKeys(read=key_secret(PROJECT, "read"))
    )
    with only_read, pytest.raises(ValueError, match="CreateDataset needs a key of scope write"):
        only_read.create_dataset("no write key")
