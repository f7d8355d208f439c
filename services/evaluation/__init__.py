"""The evaluation service: scorers and scoring passes over stored runs; datasets, experiments,
monitors and SLOs land next."""

from __future__ import annotations

from mcpd.evaluation.v1.evaluation_service_pb2_grpc import add_EvaluationServiceServicer_to_server
from mcpd.runtime.clock import Clock
from mcpd.runtime.server import ServiceRegistration
from mcpd.runtime.servicers import registration
from services.evaluation.peers import IngestScores, QueryTraces
from services.evaluation.scoring import ScoreWrites, Scoring, TraceReads
from services.evaluation.servicer import EvaluationServicer

__all__ = ["IngestScores", "QueryTraces", "ScoreWrites", "TraceReads", "registrations"]


def registrations(
    traces: TraceReads, writes: ScoreWrites, *, clock: Clock
) -> list[ServiceRegistration]:
    """The gRPC services this role serves: scoring passes read `traces` and store through
    `writes` (the query and ingest services, with the service credential)."""
    servicer = EvaluationServicer(Scoring(traces, writes, clock))
    return [registration(servicer, add_EvaluationServiceServicer_to_server)]
