"""Datasets and experiments end to end: a real `mcpd serve` on each backend and a real worker
process (tests/e2e/experiment_worker.py) serving two definitions, `double` and `double_sloppy`.

- Datasets are created, filled and read over REST and gRPC alike; a taken name is refused.
- An experiment mcpd drives over a 30-item dataset runs `double` on every item, scores each run
  and ends succeeded with its summary; a candidate running `double_sloppy` (wrong on a third of
  the items) ends succeeded too, and compared against the first it has regressed, paired by item.
- A caller's experiment collects the runs and scores carrying its id, records which item a run
  was for, and finishes once.
- Cancelling an experiment cancels the runs it started.
- A capture keeps the run's trace; erasing the run's user empties the item in place.
"""

from __future__ import annotations

import math
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import httpx
import pytest

from mcpd import codec
from mcpd.evaluation.v1 import evaluation_service_pb2 as rpc
from mcpd.evaluation.v1.evaluation_service_pb2_grpc import EvaluationServiceStub
from mcpd.model.v1 import evaluation_pb2
from mcpd.testing.daemon import DaemonProcess
from mcpd.testing.eventually import eventually
from tests.e2e.conftest import BACKENDS, storage_env
from tests.e2e.ingest_payloads import new_span_id, new_trace_id, rfc3339

pytestmark = pytest.mark.e2e

REPO = Path(__file__).resolve().parents[2]
ITEMS = 30
# How long an experiment of ITEMS runs may take to end, runs and scoring included.
ENDED_S = 90


@pytest.fixture(scope="module", params=BACKENDS)
def daemon(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[DaemonProcess]:
    directory = tmp_path_factory.mktemp(f"experiments-{request.param}")
    env = {
        **storage_env(request.param, directory, request),
        "MCPD_EVALUATION_EXPERIMENT_INTERVAL_S": "0.2",
    }
    with DaemonProcess(extra_env=env) as running:
        worker = subprocess.Popen(
            [sys.executable, "-m", "tests.e2e.experiment_worker", running.grpc_addr], cwd=REPO
        )
        try:
            eventually(lambda: _registered(running), timeout=60)
            yield running
        finally:
            worker.terminate()
            worker.wait(timeout=30)


def _registered(daemon: DaemonProcess) -> None:
    """The worker has registered both definitions."""
    for definition_id in ("double", "double_sloppy"):
        answer = httpx.get(
            f"{daemon.http_url}/v1/api/definitions/{definition_id}/versions/1", timeout=10
        )
        assert answer.status_code == 200, answer.text


@pytest.fixture(scope="module")
def http(daemon: DaemonProcess) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=f"{daemon.http_url}/v1/api", timeout=30) as client:
        yield client


@pytest.fixture(scope="module")
def stub(daemon: DaemonProcess) -> Iterator[EvaluationServiceStub]:
    with grpc.insecure_channel(daemon.grpc_addr) as channel:
        yield EvaluationServiceStub(channel)


def ok(answer: httpx.Response) -> Any:
    assert answer.status_code == 200, answer.text
    return answer.json()


def dataset(http: httpx.Client, name: str, items: list[dict[str, Any]]) -> str:
    made = ok(http.post("/datasets", json={"name": name}))
    added = ok(http.post(f"/datasets/{made['dataset_id']}/items", json={"items": items}))
    assert added == {"added": len(items)}
    return str(made["dataset_id"])


def ended(http: httpx.Client, experiment_id: str, timeout: float = ENDED_S) -> dict[str, Any]:
    def done() -> dict[str, Any]:
        shown: dict[str, Any] = ok(http.get(f"/experiments/{experiment_id}"))
        assert shown["status"] not in ("pending", "running"), shown
        return shown

    return eventually(done, timeout=timeout)


def test_datasets_over_rest_and_grpc(http: httpx.Client, stub: EvaluationServiceStub) -> None:
    made = ok(http.post("/datasets", json={"name": "both ways", "description": "golden"}))
    dataset_id = made["dataset_id"]
    request = rpc.AddDatasetItemsRequest(
        dataset_id=dataset_id,
        items=[
            codec.decode({"input": {"q": "one"}, "expected": 1}, evaluation_pb2.DatasetItem),
            codec.decode({"input": {"q": "two"}}, evaluation_pb2.DatasetItem),
        ],
    )
    assert stub.AddDatasetItems(request, timeout=30).added == 2
    over_grpc = stub.GetDataset(rpc.GetDatasetRequest(dataset_id=dataset_id), timeout=30)
    assert (over_grpc.name, over_grpc.item_count) == ("both ways", 2)
    items = ok(http.get(f"/datasets/{dataset_id}/items"))["items"]
    assert [(item["input"], item.get("expected")) for item in items] == [
        ({"q": "one"}, 1),
        ({"q": "two"}, None),
    ]
    listed = stub.ListDatasets(rpc.ListDatasetsRequest(limit=1000), timeout=30)
    assert dataset_id in [shown.dataset_id for shown in listed.datasets]

    taken = http.post("/datasets", json={"name": "both ways"})
    assert (taken.status_code, taken.json()["error"]["field"]) == (409, "name")
    with pytest.raises(grpc.RpcError) as refused:
        stub.CreateDataset(evaluation_pb2.Dataset(name="both ways"), timeout=30)
    assert refused.value.code() is grpc.StatusCode.ALREADY_EXISTS
    missing = http.post(f"/datasets/{dataset_id}/items", json={"items": [{"expected": 1}]})
    assert (missing.status_code, missing.json()["error"]["field"]) == (400, "items[0].input")


def test_an_experiment_mcpd_drives_ends_with_its_summary_and_compares(
    http: httpx.Client,
) -> None:
    dataset_id = dataset(
        http, "sums", [{"input": {"n": n}, "expected": 2 * n} for n in range(1, ITEMS + 1)]
    )
    plan = {"scorers": ["exact_match"], "concurrency": 10}
    baseline = ok(
        http.post(
            "/experiments",
            json={
                "name": "double",
                "dataset_id": dataset_id,
                "metadata": {"definition_id": "double", **plan},
            },
        )
    )
    assert baseline["status"] == "pending"
    candidate = ok(
        http.post(
            "/experiments",
            json={
                "name": "sloppy",
                "dataset_id": dataset_id,
                "baseline_id": baseline["experiment_id"],
                "metadata": {"definition_id": "double_sloppy", **plan},
            },
        )
    )

    first = ended(http, baseline["experiment_id"])
    assert first["status"] == "succeeded", first.get("error")
    assert first["item_count"] == ITEMS
    assert first["summary"] == {"exact_match": {"mean": 1.0, "stdev": 0.0, "count": ITEMS}}
    second = ended(http, candidate["experiment_id"])
    assert second["status"] == "succeeded", second
    wrong = ITEMS // 3
    assert second["summary"]["exact_match"]["count"] == ITEMS
    assert math.isclose(second["summary"]["exact_match"]["mean"], (ITEMS - wrong) / ITEMS)

    compared = ok(
        http.get(
            "/experiments/compare",
            params={"baseline": baseline["experiment_id"], "candidate": candidate["experiment_id"]},
        )
    )
    (row,) = compared["scorers"]
    assert (row["scorer_id"], row["baseline_n"], row["candidate_n"]) == (
        "exact_match",
        ITEMS,
        ITEMS,
    )
    assert (row["decidable"], row["paired"], compared["regressed"]) == (True, True, True)
    assert math.isclose(row["delta"], -wrong / ITEMS)
    # Paired: ten differences of -1 and twenty of 0.
    differences = [-1.0] * wrong + [0.0] * (ITEMS - wrong)
    mean = sum(differences) / ITEMS
    stdev = math.sqrt(sum((d - mean) ** 2 for d in differences) / (ITEMS - 1))
    assert math.isclose(row["delta_se"], stdev / math.sqrt(ITEMS))


def _span(trace_id: str, **fields: Any) -> dict[str, Any]:
    return {
        "trace_id": trace_id,
        "span_id": new_span_id(),
        "name": "answer",
        "kind": "agent_run",
        "status": "ok",
        "start_time": rfc3339(1_700_000_000_000_000_000),
        "end_time": rfc3339(1_700_000_001_000_000_000),
        **fields,
    }


def test_a_callers_experiment_collects_its_runs_and_finishes_once(http: httpx.Client) -> None:
    dataset_id = dataset(http, "by hand", [{"input": "ping"}])
    made = ok(http.post("/experiments", json={"name": "by hand", "dataset_id": dataset_id}))
    assert made["status"] == "running"
    experiment_id = made["experiment_id"]
    traces = [new_trace_id() for _ in range(3)]
    spans = [
        _span(
            trace_id,
            output="pong" if index else "peng",
            correlation={"project": "", "experiment_id": experiment_id},
            cost={"currency": "USD", "total_cost": 0.5},
        )
        for index, trace_id in enumerate(traces)
    ]
    assert ok(http.post("/ingest", json={"spans": spans}))["accepted"] == 3
    scored = ok(
        http.post(
            "/scorers/run",
            json={
                "trace_ids": traces,
                "scorers": ["exact_match"],
                "config": {"expected": "pong"},
                "source": "experiment",
            },
        )
    )
    assert scored["scores_written"] == 3

    def joined() -> dict[str, Any]:
        shown: dict[str, Any] = ok(http.get(f"/experiments/{experiment_id}"))
        assert shown["summary"].get("exact_match", {}).get("count") == 3, shown
        return shown

    (item,) = ok(http.get(f"/datasets/{dataset_id}/items"))["items"]
    runs = [{"item_id": item["item_id"], "trace_id": trace_id} for trace_id in traces[:1]]
    recorded = ok(http.post(f"/experiments/{experiment_id}/runs", json={"runs": runs}))
    assert recorded == {"recorded": 1}
    shown = eventually(joined, timeout=30)
    assert math.isclose(shown["summary"]["exact_match"]["mean"], 2 / 3)
    assert (shown["item_count"], shown["cost"]["total_cost"]) == (3, 1.5)
    done = ok(http.post(f"/experiments/{experiment_id}/finish", json={}))
    assert done["status"] == "succeeded"
    again = http.post(f"/experiments/{experiment_id}/finish", json={"error": "late"})
    assert (again.status_code, again.json()["error"]["reason"]) == (400, "EXPERIMENT_ENDED")


def test_cancelling_an_experiment_cancels_its_runs(http: httpx.Client) -> None:
    idle = {"steps": [{"id": "never_served", "kind": "task"}]}
    ok(http.post("/definitions", json={"id": "idle", "body": idle}))
    dataset_id = dataset(http, "idle", [{"input": {"n": n}} for n in range(3)])
    made = ok(
        http.post(
            "/experiments",
            json={"name": "idle", "dataset_id": dataset_id, "metadata": {"definition_id": "idle"}},
        )
    )

    def started() -> list[dict[str, Any]]:
        runs: list[dict[str, Any]] = ok(http.get("/runs", params={"definition_id": "idle"}))["runs"]
        assert len(runs) == 3, runs
        return runs

    runs = eventually(started, timeout=30)
    assert {run["correlation"]["experiment_id"] for run in runs} == {made["experiment_id"]}
    cancelled = ok(http.post(f"/experiments/{made['experiment_id']}/cancel"))
    assert cancelled["status"] == "cancelled"

    # A run the driver started while the cancel read the experiment's items is cancelled by
    # the driver's round, once it sees the experiment ended: a moment after the answer.
    def statuses() -> list[str]:
        found = [ok(http.get(f"/runs/{run['run_id']}"))["run"]["status"] for run in runs]
        assert found == ["cancelled"] * len(runs), found
        return found

    eventually(statuses, timeout=30)


def test_a_captured_item_is_emptied_when_its_user_is_erased(http: httpx.Client) -> None:
    trace_id = new_trace_id()
    span = _span(
        trace_id,
        input={"question": "my card is 4242"},
        output="refunded",
        correlation={"project": "", "user_id": "erase-me"},
    )
    assert ok(http.post("/ingest", json={"spans": [span]}))["accepted"] == 1
    dataset_id = ok(http.post("/datasets", json={"name": "captured"}))["dataset_id"]

    def captured() -> None:
        result = ok(
            http.post(
                f"/datasets/{dataset_id}/capture",
                json={"trace_ids": [trace_id], "use_output_as_expected": True},
            )
        )
        assert result == {"captured": 1, "requested": 1}

    eventually(captured, timeout=30)
    (item,) = ok(http.get(f"/datasets/{dataset_id}/items"))["items"]
    assert (item["input"], item["expected"], item["source_trace_id"]) == (
        {"question": "my card is 4242"},
        "refunded",
        trace_id,
    )

    erased = ok(http.post("/erasure", json={"user_id": "erase-me"}))
    assert (erased["dataset_items_erased"], erased["datasets"]) == (1, [dataset_id])

    def emptied() -> None:
        (kept,) = ok(http.get(f"/datasets/{dataset_id}/items"))["items"]
        assert kept == {
            "item_id": item["item_id"],
            "dataset_id": dataset_id,
            "source_trace_id": trace_id,
        }

    eventually(emptied, timeout=30)
