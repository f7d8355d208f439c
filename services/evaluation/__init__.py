"""The evaluation service: scorers (deterministic and judged), scoring passes over stored runs,
monitors and objectives (SLOs); datasets and experiments land next."""

from __future__ import annotations

from collections.abc import Sequence

from mcpd.evaluation.v1.evaluation_service_pb2_grpc import add_EvaluationServiceServicer_to_server
from mcpd.model.v1 import enums_pb2, evaluation_pb2
from mcpd.runtime.clock import Clock
from mcpd.runtime.config import EvaluationSettings
from mcpd.runtime.server import ServiceRegistration
from mcpd.runtime.servicers import registration
from mcpd.runtime.watch_config import MonitorSettings, SloSettings
from mcpd.storage.interfaces import PriceOverrides
from services.evaluation.judge import JudgePrices, LlmJudge, judge_endpoint
from services.evaluation.monitors import Monitors
from services.evaluation.objectives import Objectives
from services.evaluation.peers import IngestScores, QueryTraces, QueryWindows
from services.evaluation.scoring import ScoreWrites, Scoring, TraceReads
from services.evaluation.servicer import EvaluationServicer
from services.evaluation.watching import WindowReads
from services.evaluation.webhooks import Webhooks

__all__ = [
    "IngestScores",
    "Monitors",
    "Objectives",
    "QueryTraces",
    "QueryWindows",
    "ScoreWrites",
    "TraceReads",
    "Webhooks",
    "WindowReads",
    "monitors_of",
    "objectives_of",
    "registrations",
]


def registrations(
    traces: TraceReads,
    writes: ScoreWrites,
    monitors: Monitors,
    objectives: Objectives,
    *,
    clock: Clock,
    judge: EvaluationSettings | None = None,
    prices: PriceOverrides | None = None,
) -> list[ServiceRegistration]:
    """The gRPC services this role serves: scoring passes read `traces` and store through
    `writes` (the query and ingest services, with the service credential); `monitors` and
    `objectives` are the configured ones. `judge` configures the judged scorer (its key file is
    read now; none configured without it) and `prices` holds the projects' price overrides its
    calls are priced with (the shipped book alone without)."""
    endpoint = judge_endpoint(judge) if judge is not None else None
    llm_judge = LlmJudge(endpoint, JudgePrices(prices))
    scoring = Scoring(traces, writes, clock, llm_judge)
    servicer = EvaluationServicer(scoring, monitors, objectives)
    return [registration(servicer, add_EvaluationServiceServicer_to_server)]


def monitors_of(configured: Sequence[MonitorSettings]) -> list[evaluation_pb2.Monitor]:
    """The configured monitors as the spec's Monitor."""
    made = []
    for settings in configured:
        monitor = evaluation_pb2.Monitor(
            id=settings.id,
            name=settings.name,
            project=settings.project,
            watch=enums_pb2.MonitorWatch.Value(f"MONITOR_WATCH_{settings.watch.upper()}"),
            compare=enums_pb2.MonitorCompare.Value(f"MONITOR_COMPARE_{settings.compare.upper()}"),
            threshold=settings.threshold,
            window_seconds=settings.window_seconds,
            min_samples=settings.min_samples,
            enabled=settings.enabled,
        )
        if settings.scorer_id is not None:
            monitor.scorer_id = settings.scorer_id
        if settings.webhook is not None:
            monitor.webhook = settings.webhook
        made.append(monitor)
    return made


def objectives_of(configured: Sequence[SloSettings]) -> list[evaluation_pb2.Slo]:
    """The configured objectives as the spec's Slo."""
    made = []
    for settings in configured:
        slo = evaluation_pb2.Slo(
            id=settings.id,
            name=settings.name,
            project=settings.project,
            objective=settings.objective,
            window_days=settings.window_days,
            min_samples=settings.min_samples,
            enabled=settings.enabled,
        )
        if settings.webhook is not None:
            slo.webhook = settings.webhook
        made.append(slo)
    return made
