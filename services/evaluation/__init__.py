"""The evaluation service: scorers (deterministic and judged), scoring passes over stored runs,
datasets, experiments (driven by their caller or by mcpd) and their comparison, monitors and
objectives (SLOs)."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

from mcpd.evaluation.v1.evaluation_service_pb2_grpc import add_EvaluationServiceServicer_to_server
from mcpd.model.v1 import enums_pb2, evaluation_pb2
from mcpd.runtime.clock import Clock
from mcpd.runtime.config import EvaluationSettings
from mcpd.runtime.server import ServiceRegistration
from mcpd.runtime.servicers import registration
from mcpd.runtime.watch_config import MonitorSettings, SloSettings
from mcpd.storage.interfaces import DatasetRecords, ExperimentRecords, PriceOverrides
from services.evaluation.datasets import Datasets
from services.evaluation.experiment_driver import ExperimentDriver
from services.evaluation.experiments import ExperimentRubrics, Experiments, RunControl
from services.evaluation.judge import JudgePrices, LlmJudge, judge_endpoint
from services.evaluation.monitors import Monitors
from services.evaluation.objectives import Objectives
from services.evaluation.peers import (
    IngestScores,
    OrchestratorRuns,
    OrchestratorShapes,
    QueryReads,
)
from services.evaluation.scoring import ScoreWrites, Scoring, TraceReads
from services.evaluation.servicer import EvaluationServicer
from services.evaluation.watching import RunShapeReads, WindowReads
from services.evaluation.webhooks import Webhooks

__all__ = [
    "Evaluation",
    "IngestScores",
    "Monitors",
    "Objectives",
    "OrchestratorRuns",
    "OrchestratorShapes",
    "QueryReads",
    "RunShapeReads",
    "ScoreWrites",
    "TraceReads",
    "Webhooks",
    "WindowReads",
    "evaluation",
    "monitors_of",
    "objectives_of",
    "registrations",
]


@dataclasses.dataclass(frozen=True, slots=True)
class Evaluation:
    """The parts of the evaluation role one process builds: scoring passes, datasets,
    experiments and the driver of the experiments mcpd runs."""

    scoring: Scoring
    datasets: Datasets
    experiments: Experiments
    driver: ExperimentDriver


def evaluation(
    traces: TraceReads,
    writes: ScoreWrites,
    runs: RunControl,
    datasets: DatasetRecords,
    experiments: ExperimentRecords,
    *,
    clock: Clock,
    judge: EvaluationSettings | None = None,
    prices: PriceOverrides | None = None,
) -> Evaluation:
    """The role's parts: scoring passes read `traces` and store through `writes` (the query and
    ingest services, with the service credential); experiments start `runs` (the orchestrator);
    `datasets` and `experiments` are their records in the trace store. `judge` configures the
    judged scorer (its key file is read now; none configured without it) and `prices` holds the
    projects' price overrides its calls are priced with (the shipped book alone without)."""
    endpoint = judge_endpoint(judge) if judge is not None else None
    llm_judge = LlmJudge(endpoint, JudgePrices(prices))
    scoring = Scoring(traces, writes, clock, llm_judge, ExperimentRubrics(experiments))
    sets = Datasets(datasets, traces, clock)
    runs_of = Experiments(experiments, datasets, runs, scoring.scorers, clock)
    driver = ExperimentDriver(experiments, runs_of, sets, runs, traces, scoring, clock)
    return Evaluation(scoring, sets, runs_of, driver)


def registrations(
    parts: Evaluation, monitors: Monitors, objectives: Objectives
) -> list[ServiceRegistration]:
    """The gRPC services this role serves, over its `parts` and the configured `monitors` and
    `objectives`."""
    servicer = EvaluationServicer(
        parts.scoring, parts.datasets, parts.experiments, monitors, objectives
    )
    return [registration(servicer, add_EvaluationServiceServicer_to_server)]


def monitors_of(configured: Sequence[MonitorSettings]) -> list[evaluation_pb2.Monitor]:
    """The configured monitors as the spec's Monitor."""
    return [
        evaluation_pb2.Monitor(
            **_set(settings),
            watch=enums_pb2.MonitorWatch.Value(f"MONITOR_WATCH_{settings.watch.upper()}"),
            compare=enums_pb2.MonitorCompare.Value(f"MONITOR_COMPARE_{settings.compare.upper()}"),
        )
        for settings in configured
    ]


def objectives_of(configured: Sequence[SloSettings]) -> list[evaluation_pb2.Slo]:
    """The configured objectives as the spec's Slo."""
    return [evaluation_pb2.Slo(**_set(settings)) for settings in configured]


def _set(settings: MonitorSettings | SloSettings) -> dict[str, Any]:
    """A watch's settings as message fields: those set, the enums (named in words) left out."""
    fields = dataclasses.asdict(settings)
    return {
        name: value
        for name, value in fields.items()
        if value is not None and name not in ("watch", "compare")
    }
