"""Aspects, notes and themes."""

from __future__ import annotations

from mcpd.intelligence.v1 import intelligence_service_pb2_grpc
from mcpd.runtime.servicers import pending_rpcs


@pending_rpcs("the intelligence issue")
class IntelligenceServicer(intelligence_service_pb2_grpc.IntelligenceServiceServicer):
    """Every RPC answers UNIMPLEMENTED until the intelligence issue lands."""
