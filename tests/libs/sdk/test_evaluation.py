"""`EvaluationClient` against fake EvaluationService and IngestService servicers on a real
in-process gRPC server: what the SDK decides by itself, which a real daemon rarely shows
(a trace not readable yet, ingest unavailable, a refused batch, batching).
tests/e2e/test_sdk_evaluation.py runs it against a real daemon."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import grpc
import pytest

from mcpd.evaluation.v1 import evaluation_service_pb2 as rpc
from mcpd.evaluation.v1.evaluation_service_pb2_grpc import (
    EvaluationServiceServicer,
    add_EvaluationServiceServicer_to_server,
)
from mcpd.ingest.v1.ingest_service_pb2_grpc import (
    IngestServiceServicer,
    add_IngestServiceServicer_to_server,
)
from mcpd.model.v1 import enums_pb2, evaluation_pb2, telemetry_pb2
from mcpd.runtime.errors import InvalidArgument
from mcpd.sdk import EvaluationClient
from mcpd.signals.messages import python_of, value_of


class FakeDaemon(EvaluationServiceServicer, IngestServiceServicer):
    """Just enough of both services for `run_experiment`, recording what it was sent.

    A run's trace becomes readable after `unreadable_passes` passes over it (never when
    None); the first `unavailable` Ingest calls answer UNAVAILABLE; `refuse_spans` makes ingest
    refuse every span."""

    def __init__(self, items: list[dict[str, Any]]) -> None:
        self.items = [
            evaluation_pb2.DatasetItem(item_id=f"i{index}", dataset_id="d", **fields)
            for index, fields in enumerate(items)
        ]
        self.unreadable_passes: int | None = 0
        self.unavailable = 0
        self.refuse_spans = False
        self.batches: list[telemetry_pb2.IngestBatch] = []
        self.added: list[int] = []
        self.recorded: list[rpc.ExperimentRun] = []
        self.passes: list[evaluation_pb2.ScoreRunRequest] = []
        self.finished: list[rpc.FinishExperimentRequest] = []
        self._lock = threading.Lock()

    def Ingest(  # noqa: N802 - the generated RPC name
        self, request: telemetry_pb2.IngestBatch, context: Any
    ) -> Any:
        with self._lock:
            self.batches.append(request)
            if self.unavailable:
                self.unavailable -= 1
                context.abort(grpc.StatusCode.UNAVAILABLE, "ingest is restarting")
        if self.refuse_spans:
            refused = telemetry_pb2.IngestError(index=0, message="no")
            return telemetry_pb2.IngestResult(rejected=len(request.spans), errors=[refused])
        return telemetry_pb2.IngestResult(accepted=len(request.spans))

    def AddDatasetItems(  # noqa: N802 - the generated RPC name
        self, request: rpc.AddDatasetItemsRequest, context: Any
    ) -> Any:
        self.added.append(len(request.items))
        return evaluation_pb2.ItemsAdded(added=len(request.items))

    def ListDatasetItems(  # noqa: N802 - the generated RPC name
        self, request: rpc.ListDatasetItemsRequest, context: Any
    ) -> Any:
        return rpc.ListDatasetItemsResponse(items=self.items)

    def CreateExperiment(  # noqa: N802 - the generated RPC name
        self, request: evaluation_pb2.Experiment, context: Any
    ) -> Any:
        made = evaluation_pb2.Experiment(
            experiment_id="e", status=enums_pb2.EXPERIMENT_STATUS_RUNNING
        )
        made.MergeFrom(request)
        return made

    def RecordExperimentRuns(  # noqa: N802 - the generated RPC name
        self, request: rpc.RecordExperimentRunsRequest, context: Any
    ) -> Any:
        self.recorded += request.runs
        return rpc.RecordExperimentRunsResponse(recorded=len(request.runs))

    def RunScorers(  # noqa: N802 - the generated RPC name
        self, request: evaluation_pb2.ScoreRunRequest, context: Any
    ) -> Any:
        with self._lock:
            self.passes.append(request)
            (trace_id,) = request.trace_ids
            seen = sum(trace_id in earlier.trace_ids for earlier in self.passes)
        if self.unreadable_passes is None or seen <= self.unreadable_passes:
            skipped = evaluation_pb2.SkippedScorer(
                scorer_id="exact_match", trace_id=trace_id, reason="not stored"
            )
            return evaluation_pb2.ScoreRunResult(skipped=[skipped])
        return evaluation_pb2.ScoreRunResult(traces_scored=1, scores_written=1)

    def FinishExperiment(  # noqa: N802 - the generated RPC name
        self, request: rpc.FinishExperimentRequest, context: Any
    ) -> Any:
        self.finished.append(request)
        failed = request.HasField("error")
        ended = evaluation_pb2.Experiment(
            experiment_id=request.experiment_id,
            status=enums_pb2.EXPERIMENT_STATUS_FAILED
            if failed
            else enums_pb2.EXPERIMENT_STATUS_SUCCEEDED,
        )
        if failed:
            ended.error = request.error
        return ended


ITEMS: list[dict[str, Any]] = [
    {"input": value_of({"n": 1}), "expected": value_of({"answer": 2})},
    {"input": value_of({"n": 2}), "expected": value_of("four")},
    {"input": value_of({"n": 3})},
]


@pytest.fixture
def fake() -> FakeDaemon:
    return FakeDaemon(ITEMS)


@pytest.fixture
def client(fake: FakeDaemon) -> Iterator[EvaluationClient]:
    server = grpc.server(ThreadPoolExecutor(max_workers=8))
    add_EvaluationServiceServicer_to_server(fake, server)
    add_IngestServiceServicer_to_server(fake, server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        with EvaluationClient(f"127.0.0.1:{port}", timeout_s=5) as made:
            yield made
    finally:
        server.stop(None)


def answer(item: dict[str, int]) -> int:
    return 2 * item["n"]


def test_passes_wait_for_their_traces_and_ingest_is_retried_under_its_key(
    client: EvaluationClient, fake: FakeDaemon
) -> None:
    fake.unreadable_passes, fake.unavailable = 2, 1
    result = client.run_experiment(
        "x", "d", answer, scorers=["exact_match"], config={"case_sensitive": True}
    )
    assert result.experiment.status == enums_pb2.EXPERIMENT_STATUS_SUCCEEDED
    assert [run.output for run in result.runs] == [2, 4, 6]
    assert result.skipped == ()
    first, again = fake.batches
    assert first == again  # the same spans under the same key: stored once
    assert first.ingest_key.startswith("experiment:e:")
    spans = list(first.spans)
    assert [python_of(span.input) for span in spans] == [{"n": 1}, {"n": 2}, {"n": 3}]
    assert {span.name for span in spans} == {"answer"}
    assert {span.correlation.experiment_id for span in spans} == {"e"}
    assert [(run.item_id, run.trace_id) for run in fake.recorded] == [
        (f"i{index}", span.trace_id) for index, span in enumerate(spans)
    ]
    assert len(fake.passes) == 3 * 3
    by_trace = {request.trace_ids[0]: request.config for request in fake.passes}
    configs = [by_trace[span.trace_id] for span in spans]
    assert [config.HasField("expected") for config in configs] == [True, True, False]
    assert [config.expected for config in configs[:2]] == ['{"answer": 2}', "four"]
    assert all(config.case_sensitive for config in configs)
    assert {request.source for request in fake.passes} == {enums_pb2.SCORE_SOURCE_EXPERIMENT}


def test_a_trace_never_readable_fails_the_experiment(
    client: EvaluationClient, fake: FakeDaemon
) -> None:
    fake.unreadable_passes = None
    result = client.run_experiment("x", "d", answer, scorers=["exact_match"], trace_wait_s=0.2)
    assert result.experiment.status == enums_pb2.EXPERIMENT_STATUS_FAILED
    assert result.experiment.error == (
        "3 of the runs' traces were not readable within 0.2 s, so they were not scored (does "
        "the project sample its traces?)"
    )
    assert {skip.reason for skip in result.skipped} == {"not stored"}


def test_an_answer_that_is_not_json_fails_its_item(
    client: EvaluationClient, fake: FakeDaemon
) -> None:
    def odd(item: dict[str, int]) -> object:
        return {1, 2} if item["n"] == 2 else item["n"]

    result = client.run_experiment("x", "d", odd, scorers=[])
    assert [run.error for run in result.failed] == ["the task's answer: a set is not a JSON value"]
    assert result.experiment.error == (
        "1 of 3 items failed; the first, i1: the task's answer: a set is not a JSON value"
    )
    (batch,) = fake.batches
    assert [span.status for span in batch.spans] == [
        enums_pb2.SPAN_STATUS_OK,
        enums_pb2.SPAN_STATUS_ERROR,
        enums_pb2.SPAN_STATUS_OK,
    ]
    assert len(fake.passes) == 2  # the failed item is not scored


def test_a_refused_batch_ends_the_experiment_failed_and_is_raised(
    client: EvaluationClient, fake: FakeDaemon
) -> None:
    fake.refuse_spans = True
    with pytest.raises(InvalidArgument, match="ingest refused 3 of the experiment's runs: no"):
        client.run_experiment("x", "d", answer, scorers=["exact_match"])
    (finished,) = fake.finished
    assert finished.error.startswith("the SDK's run stopped: InvalidArgument: ingest refused")
    assert fake.recorded == []


def test_items_are_added_in_batches_and_checked_before_sending(
    client: EvaluationClient, fake: FakeDaemon
) -> None:
    items = ({"input": {"i": i}} for i in range(2500))
    assert client.add_items("d", items).added == 2500
    assert fake.added == [1000, 1000, 500]
    with pytest.raises(InvalidArgument) as refused:
        client.add_items("d", [{"input": 1}, {"input": 2, "expectd": 3}])
    assert refused.value.field == "items[1].expectd"


def test_arguments_that_cannot_mean_what_they_say_are_refused(client: EvaluationClient) -> None:
    with pytest.raises(TypeError, match="not one string"):
        client.run_experiment("x", "d", answer, scorers="exact_match")
    with pytest.raises(ValueError, match="concurrency"):
        client.run_experiment("x", "d", answer, scorers=[], concurrency=0)
    with pytest.raises(ValueError, match="definition_id"):
        client.run_experiment("x", "d", answer, scorers=[], metadata={"definition_id": "d"})
