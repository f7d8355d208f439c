"""The evaluation service: scorers (deterministic and judged) and scoring passes over stored
runs; datasets, experiments, monitors and SLOs land next."""

from __future__ import annotations

from mcpd.evaluation.v1.evaluation_service_pb2_grpc import add_EvaluationServiceServicer_to_server
from mcpd.runtime.clock import Clock
from mcpd.runtime.config import EvaluationSettings
from mcpd.runtime.server import ServiceRegistration
from mcpd.runtime.servicers import registration
from mcpd.storage.interfaces import PriceOverrides
from services.evaluation.judge import JudgePrices, LlmJudge, judge_endpoint
from services.evaluation.peers import IngestScores, QueryTraces
from services.evaluation.scoring import ScoreWrites, Scoring, TraceReads
from services.evaluation.servicer import EvaluationServicer

__all__ = ["IngestScores", "QueryTraces", "ScoreWrites", "TraceReads", "registrations"]


def registrations(
    traces: TraceReads,
    writes: ScoreWrites,
    *,
    clock: Clock,
    judge: EvaluationSettings | None = None,
    prices: PriceOverrides | None = None,
) -> list[ServiceRegistration]:
    """The gRPC services this role serves: scoring passes read `traces` and store through
    `writes` (the query and ingest services, with the service credential). `judge` configures
    the judged scorer (its key file is read now; none configured without it) and `prices` holds
    the projects' price overrides its calls are priced with (the shipped book alone without)."""
    endpoint = judge_endpoint(judge) if judge is not None else None
    llm_judge = LlmJudge(endpoint, JudgePrices(prices))
    servicer = EvaluationServicer(Scoring(traces, writes, clock, llm_judge))
    return [registration(servicer, add_EvaluationServiceServicer_to_server)]
