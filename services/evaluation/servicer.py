"""Scorers, datasets, experiments, monitors and SLOs."""

from __future__ import annotations

from mcpd.evaluation.v1 import evaluation_service_pb2_grpc
from mcpd.runtime.servicers import pending_rpcs


@pending_rpcs("the evaluation issue")
class EvaluationServicer(evaluation_service_pb2_grpc.EvaluationServiceServicer):
    """Every RPC answers UNIMPLEMENTED until the evaluation issue lands."""
