"""Experiments over a real SQLite trace store: creation and its plan, what an experiment reports
from its scores and traces, finishing, cancelling and comparing."""

from __future__ import annotations

import math
import statistics
from typing import Any

import pytest

from mcpd import codec
from mcpd.evaluation.v1 import evaluation_service_pb2 as rpc
from mcpd.model.v1 import enums_pb2, evaluation_pb2
from mcpd.runtime.clock import ManualClock
from mcpd.runtime.errors import FailedPrecondition, InvalidArgument, NotFound
from mcpd.signals.batch import SignalBatch
from mcpd.storage.evaluation_records import DatasetRow, ExperimentItemRow
from mcpd.storage.sql.stores import SqlTraceStore
from services.evaluation.experiments import Experiments, plan_of
from services.evaluation.scorers import SCORERS
from services.evaluation.tests.doubles import Orchestrator, StartedRun
from tests.libs.signals.samples import score, span

P = "proj"
PLAN = {"definition_id": "answer", "scorers": ["exact_match"]}


@pytest.fixture
def orchestrator() -> Orchestrator:
    return Orchestrator()


@pytest.fixture
def experiments(
    traces: SqlTraceStore, orchestrator: Orchestrator, clock: ManualClock
) -> Experiments:
    traces.create_dataset(P, DatasetRow("ds-1", "golden", 0))
    return Experiments(traces, traces, orchestrator, SCORERS, clock)


async def create(experiments: Experiments, **fields: Any) -> evaluation_pb2.Experiment:
    body = {"project": P, "name": "candidate", "dataset_id": "ds-1", **fields}
    return await experiments.create(codec.decode(body, evaluation_pb2.Experiment))


def joined(traces: SqlTraceStore, experiment_id: str, values: dict[str, list[float]]) -> None:
    """One priced run per value of the first scorer, each scored by every scorer in turn."""
    spans, scores = [], []
    runs = len(next(iter(values.values())))
    for index in range(runs):
        trace_id = f"{experiment_id[-6:]}{index:026x}"
        spans.append(
            span(
                f"s{index}",
                project=P,
                trace_id=trace_id,
                is_root=True,
                experiment_id=experiment_id,
                cost_currency="USD",
                total_cost=0.25,
                input_cost=0.05,
                output_cost=0.2,
                cost_is_estimated=True,
            )
        )
        for scorer_id, found in values.items():
            scores.append(
                score(
                    f"{trace_id}-{scorer_id}",
                    project=P,
                    trace_id=trace_id,
                    scorer_id=scorer_id,
                    value=found[index],
                    experiment_id=experiment_id,
                )
            )
    assert traces.write_batches(
        [SignalBatch(key_project=P, ingest_key=None, received_at=1, spans=spans, scores=scores)]
    ) == [True]


async def test_a_callers_experiment_runs_from_its_creation(
    experiments: Experiments, clock: ManualClock
) -> None:
    made = await create(experiments, metadata={"model": "gpt-4o"})
    assert made.status == enums_pb2.EXPERIMENT_STATUS_RUNNING
    assert codec.encode(made)["started_at"] == "2026-12-01T00:00:00.000Z"
    assert codec.encode(made.metadata) == {"model": "gpt-4o"}
    assert (made.item_count, codec.encode(made.summary)) == (0, {})
    assert not made.HasField("finished_at")


async def test_an_experiment_naming_a_definition_waits_for_mcpd(experiments: Experiments) -> None:
    made = await create(experiments, metadata=PLAN)
    assert made.status == enums_pb2.EXPERIMENT_STATUS_PENDING
    assert not made.HasField("started_at")


@pytest.mark.parametrize(
    ("fields", "error", "field"),
    [
        ({"dataset_id": "nope"}, NotFound, "dataset_id"),
        ({"baseline_id": "nope"}, NotFound, "baseline_id"),
        ({"name": " "}, InvalidArgument, "name"),
        ({"experiment_id": "mine"}, InvalidArgument, "experiment_id"),
        ({"status": "succeeded"}, InvalidArgument, "status"),
        ({"metadata": {"definition_id": 7}}, InvalidArgument, "metadata.definition_id"),
        ({"metadata": {**PLAN, "scorers": ["vibes"]}}, InvalidArgument, "metadata.scorers"),
        ({"metadata": {**PLAN, "concurrency": 0}}, InvalidArgument, "metadata.concurrency"),
        (
            {"metadata": {**PLAN, "definition_version": 1.5}},
            InvalidArgument,
            "metadata.definition_version",
        ),
        (
            {"metadata": {**PLAN, "scorer_config": {"max_ms": "soon"}}},
            InvalidArgument,
            "metadata.scorer_config",
        ),
        ({"metadata": {**PLAN, "rubric": 3}}, InvalidArgument, "metadata.rubric"),
    ],
)
async def test_a_bad_experiment_is_refused_naming_the_field(
    experiments: Experiments,
    traces: SqlTraceStore,
    fields: dict[str, Any],
    error: type[Exception],
    field: str,
) -> None:
    with pytest.raises(error) as raised:
        await create(experiments, **fields)
    assert getattr(raised.value, "field", None) == field
    assert traces.experiments(P, dataset_id=None, after=None, limit=10) == []


def test_a_plan_reads_every_key() -> None:
    plan = plan_of(
        {
            **PLAN,
            "definition_version": 3,
            "scorer_config": {"max_ms": 500, "rubric": "own"},
            "rubric": "ignored: scorer_config has one",
            "concurrency": 4,
        }
    )
    assert plan is not None
    assert (plan.definition_id, plan.definition_version, plan.scorers) == (
        "answer",
        3,
        ("exact_match",),
    )
    assert (plan.config.max_ms, plan.config.rubric, plan.concurrency) == (500, "own", 4)
    bare = plan_of({"definition_id": "answer", "rubric": "be kind"})
    assert bare is not None
    assert (bare.scorers, bare.config.rubric, bare.concurrency) == ((), "be kind", 10)
    assert plan_of({"model": "x"}) is None
    assert plan_of(None) is None


async def test_an_experiment_reports_its_scores_cost_and_runs(
    experiments: Experiments, traces: SqlTraceStore
) -> None:
    made = await create(experiments)
    joined(traces, made.experiment_id, {"exact_match": [1, 0, 1, 1], "contains": [0.5, 1, 1, 0]})
    joined(traces, "someone-else", {"exact_match": [0, 0]})

    shown = await experiments.get(P, made.experiment_id)
    assert shown.item_count == 4
    assert codec.encode(shown.summary) == {
        "contains": {"mean": 0.625, "stdev": statistics.stdev([0.5, 1, 1, 0]), "count": 4},
        "exact_match": {"mean": 0.75, "stdev": 0.5, "count": 4},
    }
    assert codec.encode(shown.cost) == {
        "currency": "USD",
        "total_cost": 1.0,
        "input_cost": 0.2,
        "output_cost": 0.8,
        "is_estimated": True,
    }


async def test_a_callers_experiment_finishes_once(experiments: Experiments) -> None:
    made = await create(experiments)
    done = await experiments.finish(
        rpc.FinishExperimentRequest(project=P, experiment_id=made.experiment_id)
    )
    assert done.status == enums_pb2.EXPERIMENT_STATUS_SUCCEEDED
    assert done.HasField("finished_at")
    with pytest.raises(FailedPrecondition) as raised:
        await experiments.finish(
            rpc.FinishExperimentRequest(project=P, experiment_id=made.experiment_id, error="late")
        )
    assert raised.value.reason == "EXPERIMENT_ENDED"
    assert (await experiments.get(P, made.experiment_id)).status == done.status


async def test_a_finish_with_an_error_fails_it(experiments: Experiments) -> None:
    made = await create(experiments)
    done = await experiments.finish(
        rpc.FinishExperimentRequest(project=P, experiment_id=made.experiment_id, error="OOM")
    )
    assert (done.status, done.error) == (enums_pb2.EXPERIMENT_STATUS_FAILED, "OOM")


async def test_mcpd_ends_the_experiments_it_drives(experiments: Experiments) -> None:
    made = await create(experiments, metadata=PLAN)
    with pytest.raises(FailedPrecondition) as raised:
        await experiments.finish(
            rpc.FinishExperimentRequest(project=P, experiment_id=made.experiment_id)
        )
    assert raised.value.field == "experiment_id"


async def test_a_cancel_stops_the_runs_not_yet_ended(
    experiments: Experiments, traces: SqlTraceStore, orchestrator: Orchestrator
) -> None:
    made = await create(experiments, metadata=PLAN)
    traces.put_experiment_items(
        P,
        made.experiment_id,
        [
            ExperimentItemRow("i-1", "started", 1, run_id="run-1", trace_id="t1"),
            ExperimentItemRow("i-2", "scored", 1, run_id="run-2", trace_id="t2"),
            ExperimentItemRow("i-3", "ran", 1, run_id="run-3", trace_id="t3"),
        ],
    )
    for run_id in ("run-1", "run-2", "run-3"):
        orchestrator.runs[run_id] = StartedRun(run_id, "t", None, made.experiment_id)

    cancelled = await experiments.cancel(
        rpc.CancelExperimentRequest(project=P, experiment_id=made.experiment_id)
    )
    assert cancelled.status == enums_pb2.EXPERIMENT_STATUS_CANCELLED
    assert orchestrator.cancelled == ["run-1"]
    states = {item.item_id: item.status for item in traces.experiment_items(P, made.experiment_id)}
    assert states == {"i-1": "failed", "i-2": "scored", "i-3": "failed"}
    with pytest.raises(FailedPrecondition):
        await experiments.cancel(
            rpc.CancelExperimentRequest(project=P, experiment_id=made.experiment_id)
        )


async def test_experiments_page_newest_first_and_by_dataset(
    experiments: Experiments, traces: SqlTraceStore, clock: ManualClock
) -> None:
    traces.create_dataset(P, DatasetRow("ds-2", "other", 0))
    for name, dataset_id in (("a", "ds-1"), ("b", "ds-2"), ("c", "ds-1")):
        await create(experiments, name=name, dataset_id=dataset_id)
        clock.advance(1)
    first = await experiments.page(rpc.ListExperimentsRequest(project=P, limit=2))
    assert [shown.name for shown in first.experiments] == ["c", "b"]
    rest = await experiments.page(
        rpc.ListExperimentsRequest(project=P, limit=2, cursor=first.page.next_cursor)
    )
    assert [shown.name for shown in rest.experiments] == ["a"]
    over = await experiments.page(rpc.ListExperimentsRequest(project=P, dataset_id="ds-1"))
    assert [shown.name for shown in over.experiments] == ["c", "a"]


async def test_a_comparison_pairs_the_items_both_sides_ran(
    experiments: Experiments, traces: SqlTraceStore
) -> None:
    baseline = await create(experiments, name="baseline")
    candidate = await create(experiments, name="candidate", baseline_id=baseline.experiment_id)
    joined(traces, baseline.experiment_id, {"exact_match": [1, 0, 1]})
    joined(traces, candidate.experiment_id, {"exact_match": [1, 1, 1], "contains": [1, 0, 1]})
    for made in (baseline, candidate):
        traces.put_experiment_items(
            P,
            made.experiment_id,
            [
                ExperimentItemRow(
                    f"i-{index}", "scored", 1, trace_id=f"{made.experiment_id[-6:]}{index:026x}"
                )
                for index in range(3)
            ],
        )
    compared = await experiments.compare(
        rpc.CompareExperimentsRequest(
            project=P, baseline=baseline.experiment_id, candidate=candidate.experiment_id
        )
    )
    rows = {row.scorer_id: row for row in compared.scorers}
    exact = rows["exact_match"]
    assert (exact.baseline_n, exact.candidate_n, exact.paired) == (3, 3, True)
    assert math.isclose(exact.delta, 1 - 2 / 3)
    # Per-item differences 0, 1, 0: stdev over sqrt(3).
    assert math.isclose(exact.delta_se, statistics.stdev([0, 1, 0]) / math.sqrt(3))
    assert (rows["contains"].baseline_n, rows["contains"].candidate_n) == (0, 3)
    assert not rows["contains"].HasField("delta")
    assert not compared.regressed, "nothing is decidable on three runs"
    with pytest.raises(NotFound) as raised:
        await experiments.compare(
            rpc.CompareExperimentsRequest(
                project=P, baseline="nope", candidate=candidate.experiment_id
            )
        )
    assert raised.value.field == "baseline"


async def test_a_caller_records_which_item_each_run_was_for(
    experiments: Experiments, traces: SqlTraceStore
) -> None:
    made = await create(experiments)
    request = rpc.RecordExperimentRunsRequest(
        project=P,
        experiment_id=made.experiment_id,
        runs=[
            rpc.ExperimentRun(item_id="i-1", trace_id="t-old"),
            rpc.ExperimentRun(item_id="i-2", trace_id="t-2"),
            rpc.ExperimentRun(item_id="i-1", trace_id="t-1"),
        ],
    )
    assert (await experiments.record_runs(request)).recorded == 2
    rows = traces.experiment_items(P, made.experiment_id)
    assert [(row.item_id, row.trace_id, row.status) for row in rows] == [
        ("i-1", "t-1", "recorded"),
        ("i-2", "t-2", "recorded"),
    ]


@pytest.mark.parametrize(
    ("runs", "field"),
    [
        ([], "runs"),
        ([rpc.ExperimentRun(item_id="i-1")], "runs[0].trace_id"),
        ([rpc.ExperimentRun(trace_id="t"), rpc.ExperimentRun(trace_id="t")], "runs[0].item_id"),
    ],
)
async def test_bad_recorded_runs_are_refused(
    experiments: Experiments, traces: SqlTraceStore, runs: list[rpc.ExperimentRun], field: str
) -> None:
    made = await create(experiments)
    request = rpc.RecordExperimentRunsRequest(
        project=P, experiment_id=made.experiment_id, runs=runs
    )
    with pytest.raises(InvalidArgument) as raised:
        await experiments.record_runs(request)
    assert raised.value.field == field
    assert traces.experiment_items(P, made.experiment_id) == []


async def test_runs_are_recorded_only_for_a_running_callers_experiment(
    experiments: Experiments,
) -> None:
    driven = await create(experiments, metadata=PLAN)
    finished = await create(experiments)
    await experiments.finish(
        rpc.FinishExperimentRequest(project=P, experiment_id=finished.experiment_id)
    )
    for made in (driven, finished):
        request = rpc.RecordExperimentRunsRequest(
            project=P,
            experiment_id=made.experiment_id,
            runs=[rpc.ExperimentRun(item_id="i-1", trace_id="t-1")],
        )
        with pytest.raises(FailedPrecondition) as raised:
            await experiments.record_runs(request)
        assert raised.value.field == "experiment_id"
