"""The evaluation service: scorers, datasets, experiments, monitors and SLOs."""

from __future__ import annotations

from mcpd.evaluation.v1.evaluation_service_pb2_grpc import add_EvaluationServiceServicer_to_server
from mcpd.runtime.server import ServiceRegistration
from mcpd.runtime.servicers import registration
from services.evaluation.servicer import EvaluationServicer

__all__ = ["registrations"]


def registrations() -> list[ServiceRegistration]:
    """The gRPC services this role serves."""
    return [registration(EvaluationServicer(), add_EvaluationServiceServicer_to_server)]
