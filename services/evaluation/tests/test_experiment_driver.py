"""The driver of the experiments mcpd runs, round by round, over a real SQLite trace store, with
the orchestrator and the stored runs played by the test (the e2e test runs real workers)."""

from __future__ import annotations

from typing import Any

import pytest

from mcpd.evaluation.v1 import evaluation_service_pb2 as rpc
from mcpd.model.v1 import enums_pb2, evaluation_pb2
from mcpd.runtime.clock import ManualClock
from mcpd.signals.messages import value_of
from mcpd.storage.evaluation_records import DatasetItemRow, DatasetRow
from mcpd.storage.sql.stores import SqlTraceStore
from services.evaluation.datasets import Datasets
from services.evaluation.experiment_driver import TRACE_GRACE_S, ExperimentDriver
from services.evaluation.experiments import Experiments
from services.evaluation.scorers import SCORERS
from services.evaluation.scoring import Scoring
from services.evaluation.tests.doubles import Orchestrator, StoredRuns, WrittenScores, stored_run

P = "proj"
ANSWERS = {"i-1": 2, "i-2": 4, "i-3": 6, "i-4": 8, "i-5": 10}


class World:
    """A dataset of five sums, and the driver over it."""

    def __init__(self, traces: SqlTraceStore, clock: ManualClock) -> None:
        self.traces = traces
        self.clock = clock
        self.orchestrator = Orchestrator()
        self.runs = StoredRuns()
        self.scores = WrittenScores()
        traces.create_dataset(P, DatasetRow("ds-1", "sums", 0))
        traces.add_dataset_items(
            P,
            [
                DatasetItemRow(item_id, "ds-1", index, input={"n": answer // 2}, expected=answer)
                for index, (item_id, answer) in enumerate(ANSWERS.items())
            ],
        )
        self.experiments = Experiments(traces, traces, self.orchestrator, SCORERS, clock)
        self.driver = self.new_driver()

    def new_driver(self) -> ExperimentDriver:
        scoring = Scoring(self.runs, self.scores, self.clock)
        datasets = Datasets(self.traces, self.runs, self.clock)
        return ExperimentDriver(
            self.traces,
            self.experiments,
            datasets,
            self.orchestrator,
            self.runs,
            scoring,
            self.clock,
        )

    async def experiment(self, **plan: Any) -> str:
        metadata = {"definition_id": "double", "scorers": ["exact_match"], **plan}
        made = await self.experiments.create(
            evaluation_pb2.Experiment(
                project=P, name="doubling", dataset_id="ds-1", metadata=value_of(metadata)
            )
        )
        return made.experiment_id

    def end(self, item_id: str, status: str = "succeeded", *, answer: Any = None) -> None:
        """The item's run ends `status`; a succeeded one's trace arrives answering `answer`
        (the right one unless given)."""
        run = next(run for key, run in self.orchestrator.runs.items() if key.endswith(item_id))
        run.status = status
        if status == "succeeded":
            given = ANSWERS[item_id] if answer is None else answer
            self.runs.runs[run.trace_id] = stored_run(run.trace_id, input=run.input, output=given)

    def items(self, experiment_id: str) -> dict[str, str]:
        return {row.item_id: row.status for row in self.traces.experiment_items(P, experiment_id)}

    async def shown(self, experiment_id: str) -> evaluation_pb2.Experiment:
        return await self.experiments.get(P, experiment_id)


@pytest.fixture
def world(traces: SqlTraceStore, clock: ManualClock) -> World:
    return World(traces, clock)


async def test_runs_start_up_to_the_concurrency_and_ended_ones_are_scored(world: World) -> None:
    experiment_id = await world.experiment(concurrency=2)
    await world.driver.advance_all()
    assert (await world.shown(experiment_id)).status == enums_pb2.EXPERIMENT_STATUS_RUNNING
    assert world.items(experiment_id) == {"i-1": "started", "i-2": "started"}
    started = world.orchestrator.runs[f"{experiment_id}:i-1"]
    assert (started.input, started.experiment_id) == ({"n": 1}, experiment_id)

    world.end("i-1")
    await world.driver.advance_all()
    assert world.items(experiment_id) == {"i-1": "scored", "i-2": "started", "i-3": "started"}
    (written,) = world.scores.scores
    assert (written.scorer_id, written.value, written.trace_id) == (
        "exact_match",
        1.0,
        started.trace_id,
    )
    assert written.source == enums_pb2.SCORE_SOURCE_EXPERIMENT

    for item_id in ("i-2", "i-3"):
        world.end(item_id)
    await world.driver.advance_all()
    for item_id in ("i-4", "i-5"):
        world.end(item_id, answer=0 if item_id == "i-5" else None)
    await world.driver.advance_all()
    assert set(world.items(experiment_id).values()) == {"scored"}
    assert [score.value for score in world.scores.scores] == [1, 1, 1, 1, 0]
    shown = await world.shown(experiment_id)
    assert shown.status == enums_pb2.EXPERIMENT_STATUS_SUCCEEDED
    assert (shown.item_count, shown.HasField("finished_at")) == (5, True)
    assert len(world.orchestrator.runs) == 5


async def test_a_failed_run_fails_its_item_and_the_experiment_says_why(world: World) -> None:
    experiment_id = await world.experiment(concurrency=5)
    await world.driver.advance_all()
    for item_id in ANSWERS:
        world.end(item_id, "failed" if item_id in ("i-2", "i-4") else "succeeded")
    await world.driver.advance_all()
    shown = await world.shown(experiment_id)
    assert shown.status == enums_pb2.EXPERIMENT_STATUS_FAILED
    assert shown.error == "2 of 5 items failed; the first, i-2: its run run-2 ended failed"
    assert world.items(experiment_id)["i-2"] == "failed"


async def test_a_run_whose_trace_never_arrives_fails_after_the_grace(world: World) -> None:
    experiment_id = await world.experiment(concurrency=5)
    await world.driver.advance_all()
    for item_id in ANSWERS:
        world.end(item_id)
    lost = world.orchestrator.runs[f"{experiment_id}:i-3"].trace_id
    del world.runs.runs[lost]
    await world.driver.advance_all()
    assert world.items(experiment_id)["i-3"] == "ran"
    assert (await world.shown(experiment_id)).status == enums_pb2.EXPERIMENT_STATUS_RUNNING
    world.clock.advance(TRACE_GRACE_S - 1)
    await world.driver.advance_all()
    assert world.items(experiment_id)["i-3"] == "ran"
    world.clock.advance(2)
    await world.driver.advance_all()
    shown = await world.shown(experiment_id)
    assert shown.status == enums_pb2.EXPERIMENT_STATUS_FAILED
    assert f"did not arrive within {TRACE_GRACE_S} s" in shown.error


async def test_refused_starts_and_erased_items_fail_without_a_run(
    world: World, traces: SqlTraceStore
) -> None:
    traces.add_dataset_items(P, [DatasetItemRow("i-0", "ds-1", -1, input=None)])
    world.orchestrator.refuse = "no definition 'double' in this project"
    experiment_id = await world.experiment()
    await world.driver.advance_all()
    shown = await world.shown(experiment_id)
    assert shown.status == enums_pb2.EXPERIMENT_STATUS_FAILED
    assert shown.error == (
        "6 of 6 items failed; the first, i-0: the item was emptied by an erasure"
    )
    assert world.orchestrator.runs == {}


async def test_a_new_driver_picks_up_where_the_last_left_off(world: World) -> None:
    experiment_id = await world.experiment(concurrency=3)
    await world.driver.advance_all()
    world.end("i-1")
    restarted = world.new_driver()
    await restarted.advance_all()
    assert world.items(experiment_id) == {
        "i-1": "scored",
        "i-2": "started",
        "i-3": "started",
        "i-4": "started",
    }
    assert len(world.orchestrator.runs) == 4, "no item was started twice"


def _cancel(world: World, experiment_id: str) -> Any:
    return lambda: world.experiments.cancel(
        rpc.CancelExperimentRequest(project=P, experiment_id=experiment_id)
    )


async def test_a_cancel_while_a_round_starts_runs_cancels_them_and_fails_their_items(
    world: World,
) -> None:
    experiment_id = await world.experiment(concurrency=2)
    world.orchestrator.interruption = _cancel(world, experiment_id)
    await world.driver.advance_all()
    assert sorted(world.orchestrator.cancelled) == ["run-1", "run-2"]
    assert world.items(experiment_id) == {"i-1": "failed", "i-2": "failed"}
    errors = {row.error for row in world.traces.experiment_items(P, experiment_id)}
    assert errors == {"cancelled with its experiment"}
    await world.driver.advance_all()
    assert len(world.orchestrator.runs) == 2
    assert (await world.shown(experiment_id)).status == enums_pb2.EXPERIMENT_STATUS_CANCELLED


async def test_a_cancel_while_a_round_moves_items_on_leaves_none_under_way(world: World) -> None:
    experiment_id = await world.experiment(concurrency=2)
    await world.driver.advance_all()
    # i-1's run succeeds, its trace not yet stored: the next round moves it to `ran`, over the
    # failure the cancel wrote meanwhile.
    world.orchestrator.runs[f"{experiment_id}:i-1"].status = "succeeded"
    world.orchestrator.interruption = _cancel(world, experiment_id)
    await world.driver.advance_all()
    # The round had freed a slot and started i-3 before it saw the cancel.
    assert world.items(experiment_id) == {"i-1": "failed", "i-2": "failed", "i-3": "failed"}
    assert world.orchestrator.cancelled[-1] == "run-3"
    assert (await world.shown(experiment_id)).status == enums_pb2.EXPERIMENT_STATUS_CANCELLED


async def test_a_cancelled_experiment_is_left_alone(world: World) -> None:
    experiment_id = await world.experiment(concurrency=2)
    await world.driver.advance_all()
    await world.experiments.cancel(
        rpc.CancelExperimentRequest(project=P, experiment_id=experiment_id)
    )
    assert sorted(world.orchestrator.cancelled) == ["run-1", "run-2"]
    await world.driver.advance_all()
    assert len(world.orchestrator.runs) == 2
    assert (await world.shown(experiment_id)).status == enums_pb2.EXPERIMENT_STATUS_CANCELLED
