"""The driver of the experiments mcpd runs itself (`experiments.ExperimentPlan`).

Every round (`evaluation.experiment_interval_s` apart, on the primary evaluation process), for
each pending or running experiment mcpd drives:

1. a pending one becomes running (compare-and-set: one of several replicas wins);
2. each item whose run was started is looked at: a run that succeeded is scored once its trace
   has reached the trace store (its root `workflow_run` span is written when the run ends), the
   item becoming `ran` and then `scored`; a run that ended otherwise makes the item `failed`
   with the run's error; a succeeded run whose trace has not arrived `TRACE_GRACE_S` after the
   run was seen to end fails the item, so a lost trace cannot hold the experiment open for
   ever;
3. items not yet started are started, in dataset order, while fewer than the plan's concurrency
   are in flight. A run is started with the idempotency key `experiment:<id>:<item>`, so a
   driver that dies between starting a run and recording it starts nothing twice. A start the
   orchestrator refuses for what it asks (no such definition, an input its schema refuses)
   fails the item; any other failure ends the round, and the next one tries again. An item
   emptied by an erasure has no input and fails without a run;
4. when every item has ended, the experiment ends `succeeded` if every item was scored, else
   `failed` with how many items failed and the first reason.

The item rows (`ExperimentRecords.put_experiment_items`) are the driver's whole memory, so a
restart picks up where the last round left off.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
from collections.abc import Mapping, Sequence
from contextlib import suppress

from mcpd.model.v1 import enums_pb2, evaluation_pb2
from mcpd.runtime.clock import Clock, epoch_nanos
from mcpd.runtime.errors import FailedPrecondition, McpdError
from mcpd.storage.evaluation_records import DatasetItemRow, ExperimentItemRow, ExperimentRow
from mcpd.storage.interfaces import ExperimentRecords
from services.evaluation.datasets import Datasets
from services.evaluation.experiments import (
    LIVE,
    ExperimentPlan,
    Experiments,
    RunControl,
    plan_of,
    stopped_with_experiment,
)
from services.evaluation.scorers import root_span
from services.evaluation.scoring import Scoring, TraceReads

__all__ = ["TRACE_GRACE_S", "ExperimentDriver"]

log = logging.getLogger("mcpd.evaluation")
TRACE_GRACE_S = 300
# The item states of a run not yet done with: running, or succeeded and waiting to be scored.
_UNDER_WAY = ("started", "ran")


class ExperimentDriver:
    """Advances the experiments mcpd drives (see the module docstring)."""

    def __init__(
        self,
        store: ExperimentRecords,
        experiments: Experiments,
        datasets: Datasets,
        runs: RunControl,
        traces: TraceReads,
        scoring: Scoring,
        clock: Clock,
    ) -> None:
        self._store = store
        self._experiments = experiments
        self._datasets = datasets
        self._runs = runs
        self._traces = traces
        self._scoring = scoring
        self._clock = clock

    async def run(self, stop: asyncio.Event, *, interval_s: float) -> None:
        """Advance every `interval_s` until `stop` is set; a failed round is logged and the next
        one tries again."""
        while not stop.is_set():
            try:
                await self.advance_all()
            except Exception:  # the loop must outlive any one round
                log.exception("experiments could not be advanced")
            with suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), timeout=interval_s)

    async def advance_all(self) -> None:
        """One round over every live experiment mcpd drives."""
        for project, row in await asyncio.to_thread(self._store.driven_experiments, LIVE):
            try:
                await self.advance(project, row)
            except McpdError as error:
                log.warning("experiment %s did not advance: %s", row.experiment_id, error)

    async def advance(self, project: str, row: ExperimentRow) -> None:
        """One round of one experiment."""
        plan = plan_of(row.metadata)
        assert plan is not None, "a driven experiment's plan was checked when it was created"
        if row.status == "pending":
            started = dataclasses.replace(row, status="running", started_at=self._now())
            if not await asyncio.to_thread(
                self._store.change_experiment, project, started, expected=("pending",)
            ):
                return
            row = started
        items = await self._datasets.every_item(project, row.dataset_id)
        known = {
            item.item_id: item
            for item in await asyncio.to_thread(
                self._store.experiment_items, project, row.experiment_id
            )
        }
        running = [
            item.run_id
            for item in known.values()
            if item.status == "started" and item.run_id is not None
        ]
        statuses = await self._runs.outcomes(project, running) if running else {}
        cases = {case.item_id: case for case in items}
        looked = [await self._look(project, plan, item, cases, statuses) for item in known.values()]
        changed = [
            item for item, before in zip(looked, known.values(), strict=True) if item != before
        ]
        known.update((item.item_id, item) for item in looked)
        in_flight = sum(item.status in _UNDER_WAY for item in known.values())
        fresh: list[ExperimentItemRow] = []
        for item in items:
            if item.item_id in known or in_flight >= plan.concurrency:
                continue
            begun = await self._start(project, plan, row.experiment_id, item)
            in_flight += begun.status in _UNDER_WAY
            fresh.append(begun)
        known.update((item.item_id, item) for item in fresh)
        written = [*changed, *fresh]
        await asyncio.to_thread(
            self._store.put_experiment_items, project, row.experiment_id, written
        )
        if written and await self._ended_meanwhile(project, row, written):
            return
        if len(known) == len(items) and not any(i.status in _UNDER_WAY for i in known.values()):
            await self._end(project, row, list(known.values()))

    async def _look(
        self,
        project: str,
        plan: ExperimentPlan,
        item: ExperimentItemRow,
        cases: Mapping[str, DatasetItemRow],
        statuses: Mapping[str, str],
    ) -> ExperimentItemRow:
        """Where a started item's run has got to (`statuses`, by run id): `ran` once it
        succeeded (until its trace arrives and is scored), `failed` when it ended otherwise."""
        if item.status == "started" and item.run_id is not None:
            status = statuses.get(item.run_id, "gone")
            if status == "running":
                return item
            if status != "succeeded":
                return self._moved(item, "failed", f"its run {item.run_id} ended {status}")
            item = self._moved(item, "ran", None)
        if item.status != "ran" or item.trace_id is None:
            return item
        detail = await self._traces.detail(project, item.trace_id)
        if detail is None or root_span(detail) is None:
            if (self._now() - item.updated_at) / 1e9 < TRACE_GRACE_S:
                return item
            return self._moved(
                item, "failed", f"its run's trace did not arrive within {TRACE_GRACE_S} s"
            )
        case = cases.get(item.item_id)
        await self._scoring.run(_scoring_request(project, plan, item.trace_id, case))
        return self._moved(item, "scored", None)

    async def _start(
        self, project: str, plan: ExperimentPlan, experiment_id: str, item: DatasetItemRow
    ) -> ExperimentItemRow:
        if item.input is None:
            return ExperimentItemRow(
                item.item_id, "failed", self._now(), error="the item was emptied by an erasure"
            )
        try:
            run_id, trace_id = await self._runs.start(project, plan, item, experiment_id)
        except FailedPrecondition as refused:
            return ExperimentItemRow(item.item_id, "failed", self._now(), error=str(refused))
        return ExperimentItemRow(
            item.item_id, "started", self._now(), run_id=run_id, trace_id=trace_id
        )

    async def _ended_meanwhile(
        self, project: str, row: ExperimentRow, written: Sequence[ExperimentItemRow]
    ) -> bool:
        """Whether the experiment ended during this round: the runs the round started are
        cancelled. When a cancel ended it, the cancel did not see those runs, and the round's
        write may have put back items it had failed: those items are failed, as the cancel
        does."""
        now = await asyncio.to_thread(self._store.experiment, project, row.experiment_id)
        if now is None or now.status in LIVE:
            return False
        for item in written:
            if item.status == "started" and item.run_id is not None:
                await self._runs.cancel(project, item.run_id)
        if now.status == "cancelled":
            under_way = [item for item in written if item.status in _UNDER_WAY]
            stopped = stopped_with_experiment(under_way, self._now())
            await asyncio.to_thread(
                self._store.put_experiment_items, project, row.experiment_id, stopped
            )
        return True

    async def _end(
        self, project: str, row: ExperimentRow, items: Sequence[ExperimentItemRow]
    ) -> None:
        failed = sorted((item for item in items if item.status == "failed"), key=_by_id)
        if not failed:
            await self._experiments.end(project, row, "succeeded", None, expected=("running",))
            return
        first = failed[0]
        reason = (
            f"{len(failed)} of {len(items)} items failed; the first, {first.item_id}: {first.error}"
        )
        await self._experiments.end(project, row, "failed", reason, expected=("running",))

    def _moved(self, item: ExperimentItemRow, status: str, error: str | None) -> ExperimentItemRow:
        return dataclasses.replace(item, status=status, error=error, updated_at=self._now())

    def _now(self) -> int:
        return epoch_nanos(self._clock.now())


def _scoring_request(
    project: str, plan: ExperimentPlan, trace_id: str, item: DatasetItemRow | None
) -> evaluation_pb2.ScoreRunRequest:
    """The pass that scores one run of an experiment: the plan's scorers and configuration,
    with the item's expected answer (as JSON text unless it is text already)."""
    request = evaluation_pb2.ScoreRunRequest(
        project=project,
        trace_ids=[trace_id],
        scorers=plan.scorers,
        config=plan.config,
        source=enums_pb2.SCORE_SOURCE_EXPERIMENT,
    )
    if item is not None and item.expected is not None:
        expected = item.expected
        request.config.expected = (
            expected if isinstance(expected, str) else json.dumps(expected, sort_keys=True)
        )
    return request


def _by_id(item: ExperimentItemRow) -> str:
    return item.item_id
