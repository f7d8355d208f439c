"""Experiments: one evaluation of a system over a dataset, filled in one of two ways.

- **Driven by the caller**: an experiment whose metadata names no definition is `running` from
  its creation. The caller runs its system over the dataset's items, with the experiment's id in
  the correlation of every run (`correlation.experiment_id`); the scores on those runs inherit it
  and so join the experiment. `FinishExperiment` ends it: `succeeded`, or `failed` with the error
  given.
- **Driven by mcpd**: an experiment whose metadata names a definition (`ExperimentPlan`) starts
  `pending`; the evaluation role's driver (`experiment_driver`) starts one orchestrator run per
  item, scores each run when it ends, and ends the experiment itself.

Either can be cancelled (`CancelExperiment`) until it ends; a cancel of one mcpd drives also
cancels the runs it started that have not ended. An ended experiment never changes again: every
change is a compare-and-set on its status, so a cancel and a finish cannot both win.

What an experiment reports is read from what its runs left in the trace store, when asked:
`summary` holds per scorer `{"mean", "stdev", "count"}` over the scores carrying the experiment's
id (`stdev` the sample standard deviation, null below two scores); `cost` sums its traces' costs;
`item_count` is the items mcpd started runs for, or for a caller's experiment the traces carrying
its id. Two experiments compare scorer by scorer (`comparison.compare`); scores pair by the item
their run was for: mcpd records it for the runs it drives, a caller with
`RecordExperimentRuns`.
"""

from __future__ import annotations

import asyncio
import dataclasses
import math
import statistics
from collections import defaultdict
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from google.protobuf import json_format

from mcpd.codec import enum_names
from mcpd.evaluation.v1 import evaluation_service_pb2 as rpc
from mcpd.model.v1 import enums_pb2, evaluation_pb2
from mcpd.runtime import cursors
from mcpd.runtime.clock import Clock, epoch_nanos
from mcpd.runtime.errors import FailedPrecondition, InvalidArgument, NotFound, quoted
from mcpd.runtime.ids import new_id
from mcpd.signals.messages import python_of, timestamp_of, value_of
from mcpd.storage.evaluation_records import (
    DatasetItemRow,
    ExperimentItemRow,
    ExperimentRow,
    ExperimentScore,
)
from mcpd.storage.interfaces import DatasetRecords, ExperimentRecords
from services.evaluation.comparison import Observation, compare

__all__ = [
    "ENDED",
    "LIVE",
    "ExperimentPlan",
    "ExperimentRubrics",
    "Experiments",
    "RunControl",
    "experiment_message",
    "plan_of",
    "stopped_with_experiment",
]

_STATUS = enum_names(enums_pb2.ExperimentStatus.DESCRIPTOR)
LIVE = ("pending", "running")
ENDED = ("succeeded", "failed", "cancelled")
DEFAULT_CONCURRENCY = 10
MAX_CONCURRENCY = 100
MAX_NAME = 200
MAX_RECORDED = 1000
_LIST = "experiments"
_POSITION = (int, str)


class RunControl(Protocol):
    """The orchestrator's runs, as the experiments mcpd drives use them."""

    async def start(
        self, project: str, plan: ExperimentPlan, item: DatasetItemRow, experiment_id: str
    ) -> tuple[str, str]:
        """Start the plan's definition on the item's input, with the experiment's id in the
        run's correlation, idempotently per experiment and item: (run id, trace id)."""
        ...

    async def outcomes(self, project: str, run_ids: Sequence[str]) -> dict[str, str]:
        """Where runs are: the RunStatus value name of each one the project holds."""
        ...

    async def cancel(self, project: str, run_id: str) -> None:
        """Cancel a run (one that has ended stays as it ended)."""
        ...


@dataclass(frozen=True, slots=True)
class ExperimentPlan:
    """What mcpd runs for an experiment it drives, read from the experiment's metadata:
    `definition_id` (and optionally `definition_version`: without it each run pins the highest
    version stored when it starts), `scorers` (ids; none: every scorer needing no
    configuration), `scorer_config` (a ScorerConfig; each item's expected answer fills
    `expected`), `rubric` (the judge's rubric when scorer_config has none) and `concurrency`
    (runs in flight at once, 1 to 100, default 10)."""

    definition_id: str
    definition_version: int | None
    scorers: tuple[str, ...]
    config: evaluation_pb2.ScorerConfig
    concurrency: int


def stopped_with_experiment(
    items: Sequence[ExperimentItemRow], now: int
) -> list[ExperimentItemRow]:
    """`items`, under way when their experiment was cancelled, as failed for that reason."""
    return [
        dataclasses.replace(
            item, status="failed", error="cancelled with its experiment", updated_at=now
        )
        for item in items
    ]


def plan_of(metadata: Any, scorer_ids: Collection[str] = ()) -> ExperimentPlan | None:
    """The plan an experiment's metadata names; None when it names no definition (the caller
    drives it). Checks every key, naming the one at fault; `scorer_ids` are the scorers there
    are (not checked when empty)."""
    if not isinstance(metadata, Mapping) or "definition_id" not in metadata:
        return None
    definition_id = metadata["definition_id"]
    if not isinstance(definition_id, str) or not definition_id:
        raise _bad("definition_id", "must be a definition's id")
    version = metadata.get("definition_version")
    if version is not None and (not _whole(version) or version < 1):
        raise _bad("definition_version", "must be a version number, 1 or more")
    scorers = metadata.get("scorers", [])
    if not isinstance(scorers, list) or not all(isinstance(s, str) for s in scorers):
        raise _bad("scorers", "must be a list of scorer ids")
    unknown = [scorer for scorer in scorers if scorer_ids and scorer not in scorer_ids]
    if unknown:
        raise _bad("scorers", f"names no scorer {quoted(unknown[0])}")
    config = evaluation_pb2.ScorerConfig()
    given = metadata.get("scorer_config", {})
    try:
        json_format.ParseDict(given, config)
    except (json_format.ParseError, AttributeError, TypeError) as error:
        raise _bad("scorer_config", f"is not a ScorerConfig ({error})") from None
    rubric = metadata.get("rubric")
    if rubric is not None:
        if not isinstance(rubric, str):
            raise _bad("rubric", "must be text")
        if not config.HasField("rubric"):
            config.rubric = rubric
    concurrency = metadata.get("concurrency", DEFAULT_CONCURRENCY)
    if not _whole(concurrency) or not 1 <= concurrency <= MAX_CONCURRENCY:
        raise _bad("concurrency", f"must be 1 to {MAX_CONCURRENCY}")
    return ExperimentPlan(
        definition_id=definition_id,
        definition_version=int(version) if version is not None else None,
        scorers=tuple(dict.fromkeys(scorers)),
        config=config,
        concurrency=int(concurrency),
    )


class Experiments:
    """The experiment RPCs over `store`; `datasets` checks the dataset an experiment names,
    `scorer_ids` the scorers a plan names, and `runs` cancels the live runs of an experiment
    mcpd drives when it is cancelled."""

    def __init__(
        self,
        store: ExperimentRecords,
        datasets: DatasetRecords,
        runs: RunControl,
        scorer_ids: Collection[str],
        clock: Clock,
    ) -> None:
        self._store = store
        self._datasets = datasets
        self._runs = runs
        self._scorer_ids = frozenset(scorer_ids)
        self._clock = clock

    async def create(self, request: evaluation_pb2.Experiment) -> evaluation_pb2.Experiment:
        project = request.project
        assigned = {
            "experiment_id": bool(request.experiment_id),
            "status": request.status != enums_pb2.EXPERIMENT_STATUS_UNSPECIFIED,
            "error": request.HasField("error"),
        }
        for name, given in assigned.items():
            if given:
                raise InvalidArgument(f"{name} is set by mcpd: leave it out", field=name)
        name = request.name.strip()
        if not name or len(name) > MAX_NAME:
            raise InvalidArgument(f"name must be 1 to {MAX_NAME} characters", field="name")
        if await asyncio.to_thread(self._datasets.dataset, project, request.dataset_id) is None:
            raise NotFound(
                f"no dataset {quoted(request.dataset_id)} in this project", field="dataset_id"
            )
        if request.HasField("baseline_id"):
            await self._stored(project, request.baseline_id, "baseline_id")
        metadata = python_of(request.metadata) if request.HasField("metadata") else None
        driven = plan_of(metadata, self._scorer_ids) is not None
        now = epoch_nanos(self._clock.now())
        row = ExperimentRow(
            experiment_id=new_id(),
            name=name,
            dataset_id=request.dataset_id,
            status="pending" if driven else "running",
            created_at=now,
            driven=driven,
            started_at=None if driven else now,
            baseline_id=request.baseline_id if request.HasField("baseline_id") else None,
            metadata=metadata,
        )
        await asyncio.to_thread(self._store.create_experiment, project, row)
        return await self._message(project, row)

    async def page(self, request: rpc.ListExperimentsRequest) -> rpc.ListExperimentsResponse:
        page = cursors.paging(request, _LIST, _POSITION)
        after = (page.after[0], page.after[1]) if page.after is not None else None
        dataset_id = request.dataset_id if request.HasField("dataset_id") else None
        rows = await asyncio.to_thread(
            self._store.experiments,
            request.project,
            dataset_id=dataset_id,
            after=after,
            limit=page.limit + 1,
        )
        answer = rpc.ListExperimentsResponse()
        shown = cursors.page_of(request, _LIST, rows, page.limit, _experiment_key, answer.page)
        answer.experiments.extend([await self._message(request.project, row) for row in shown])
        return answer

    async def get(self, project: str, experiment_id: str) -> evaluation_pb2.Experiment:
        return await self._message(project, await self._stored(project, experiment_id))

    async def finish(self, request: rpc.FinishExperimentRequest) -> evaluation_pb2.Experiment:
        project = request.project
        row = await self._stored(project, request.experiment_id)
        if row.driven:
            raise FailedPrecondition(
                "mcpd drives this experiment and ends it itself; cancel it to stop it",
                field="experiment_id",
            )
        error = request.error if request.HasField("error") else None
        status = "failed" if error is not None else "succeeded"
        return await self.end(project, row, status, error, expected=("running",))

    async def record_runs(
        self, request: rpc.RecordExperimentRunsRequest
    ) -> rpc.RecordExperimentRunsResponse:
        """Record which item each of a caller's runs was for (the pairing of a comparison)."""
        project = request.project
        row = await self._stored(project, request.experiment_id)
        if row.driven or row.status != "running":
            raise FailedPrecondition(
                f"experiment {quoted(row.experiment_id)} is "
                + ("driven by mcpd, which records its own runs" if row.driven else row.status)
                + "; runs are recorded for a running experiment its caller drives",
                field="experiment_id",
            )
        if not 1 <= len(request.runs) <= MAX_RECORDED:
            raise InvalidArgument(f"runs must hold 1 to {MAX_RECORDED} runs", field="runs")
        now = epoch_nanos(self._clock.now())
        recorded: dict[str, ExperimentItemRow] = {}
        for index, run in enumerate(request.runs):
            for name in ("item_id", "trace_id"):
                if not getattr(run, name):
                    raise InvalidArgument(f"a run needs its {name}", field=f"runs[{index}].{name}")
            recorded[run.item_id] = ExperimentItemRow(
                run.item_id, "recorded", now, trace_id=run.trace_id
            )
        await asyncio.to_thread(
            self._store.put_experiment_items, project, row.experiment_id, list(recorded.values())
        )
        return rpc.RecordExperimentRunsResponse(recorded=len(recorded))

    async def cancel(self, request: rpc.CancelExperimentRequest) -> evaluation_pb2.Experiment:
        """Cancel a live experiment, then the runs mcpd started for it that have not ended."""
        project = request.project
        row = await self._stored(project, request.experiment_id)
        cancelled = await self.end(project, row, "cancelled", None, expected=LIVE)
        items = await asyncio.to_thread(self._store.experiment_items, project, row.experiment_id)
        live = [item for item in items if item.status in ("started", "ran")]
        for item in live:
            if item.status == "started" and item.run_id is not None:
                await self._runs.cancel(project, item.run_id)
        stopped = stopped_with_experiment(live, epoch_nanos(self._clock.now()))
        await asyncio.to_thread(
            self._store.put_experiment_items, project, row.experiment_id, stopped
        )
        return cancelled

    async def end(
        self,
        project: str,
        row: ExperimentRow,
        status: str,
        error: str | None,
        *,
        expected: Sequence[str],
    ) -> evaluation_pb2.Experiment:
        """Move `row` to the ended `status` when it is in one of `expected`; FailedPrecondition
        when it has moved on."""
        ended = dataclasses.replace(
            row, status=status, error=error, finished_at=epoch_nanos(self._clock.now())
        )
        if not await asyncio.to_thread(
            self._store.change_experiment, project, ended, expected=expected
        ):
            now = await self._stored(project, row.experiment_id)
            raise FailedPrecondition(
                f"experiment {quoted(row.experiment_id)} is {now.status}; only a "
                f"{' or '.join(expected)} experiment can become {status}",
                field="experiment_id",
                reason="EXPERIMENT_ENDED" if now.status in ENDED else None,
            )
        return await self._message(project, ended)

    async def compare(
        self, request: rpc.CompareExperimentsRequest
    ) -> evaluation_pb2.ExperimentComparison:
        project = request.project
        for field in ("baseline", "candidate"):
            await self._stored(project, getattr(request, field), field)
        baseline, candidate = await asyncio.gather(
            asyncio.to_thread(self._store.experiment_scores, project, request.baseline),
            asyncio.to_thread(self._store.experiment_scores, project, request.candidate),
        )
        return compare(
            request.baseline, request.candidate, _observed(baseline), _observed(candidate)
        )

    async def _stored(
        self, project: str, experiment_id: str, field: str = "experiment_id"
    ) -> ExperimentRow:
        row = await asyncio.to_thread(self._store.experiment, project, experiment_id)
        if row is None:
            raise NotFound(f"no experiment {quoted(experiment_id)} in this project", field=field)
        return row

    async def _message(self, project: str, row: ExperimentRow) -> evaluation_pb2.Experiment:
        scores, cost = await asyncio.gather(
            asyncio.to_thread(self._store.experiment_scores, project, row.experiment_id),
            asyncio.to_thread(self._store.experiment_cost, project, row.experiment_id),
        )
        message = experiment_message(project, row, scores)
        if row.driven:
            items = await asyncio.to_thread(
                self._store.experiment_items, project, row.experiment_id
            )
            message.item_count = len(items)
        else:
            message.item_count = cost.traces
        if cost.total_cost is not None:
            message.cost.total_cost = cost.total_cost
            message.cost.currency = cost.currency or ""
            message.cost.is_estimated = cost.is_estimated
            for name in ("input_cost", "output_cost"):
                if getattr(cost, name) is not None:
                    setattr(message.cost, name, getattr(cost, name))
        return message


class ExperimentRubrics:
    """The rubric an experiment's metadata gives the judge (`scoring.ExperimentRubrics`)."""

    def __init__(self, store: ExperimentRecords) -> None:
        self._store = store

    async def rubric(self, project: str, experiment_id: str) -> str | None:
        row = await asyncio.to_thread(self._store.experiment, project, experiment_id)
        metadata = row.metadata if row is not None else None
        rubric = metadata.get("rubric") if isinstance(metadata, Mapping) else None
        return rubric if isinstance(rubric, str) and rubric.strip() else None


def experiment_message(
    project: str, row: ExperimentRow, scores: Sequence[ExperimentScore]
) -> evaluation_pb2.Experiment:
    """The spec's Experiment of a stored row and its scores (no cost or item count)."""
    message = evaluation_pb2.Experiment(
        experiment_id=row.experiment_id,
        name=row.name,
        dataset_id=row.dataset_id,
        status=enums_pb2.ExperimentStatus.ValueType(_STATUS.by_name[row.status]),
        project=project,
    )
    message.correlation.project = project
    message.summary.CopyFrom(value_of(summary(scores)))
    for name in ("started_at", "finished_at"):
        if getattr(row, name) is not None:
            getattr(message, name).CopyFrom(timestamp_of(getattr(row, name)))
    for name in ("baseline_id", "error"):
        if getattr(row, name) is not None:
            setattr(message, name, getattr(row, name))
    if row.metadata is not None:
        message.metadata.CopyFrom(value_of(row.metadata))
    return message


def summary(scores: Sequence[ExperimentScore]) -> dict[str, dict[str, float | int | None]]:
    """Per scorer: the mean, the sample standard deviation (None below two) and the count."""
    values: dict[str, list[float]] = defaultdict(list)
    for score in scores:
        values[score.scorer_id].append(score.value)
    return {
        scorer_id: {
            "mean": statistics.fmean(found),
            "stdev": statistics.stdev(found) if len(found) >= 2 else None,
            "count": len(found),
        }
        for scorer_id, found in sorted(values.items())
    }


def _experiment_key(row: ExperimentRow) -> tuple[int, str]:
    return row.created_at, row.experiment_id


def _observed(scores: Sequence[ExperimentScore]) -> dict[str, list[Observation]]:
    observed: dict[str, list[Observation]] = defaultdict(list)
    for score in scores:
        observed[score.scorer_id].append(Observation(score.value, score.item_id))
    return observed


def _whole(value: Any) -> bool:
    return (
        isinstance(value, int | float)
        and not isinstance(value, bool)
        and math.isfinite(value)
        and float(value).is_integer()
    )


def _bad(key: str, problem: str) -> InvalidArgument:
    return InvalidArgument(f"metadata.{key} {problem}", field=f"metadata.{key}")
