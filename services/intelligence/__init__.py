"""The intelligence service: aspects, notes and themes."""

from __future__ import annotations

from mcpd.intelligence.v1.intelligence_service_pb2_grpc import (
    add_IntelligenceServiceServicer_to_server,
)
from mcpd.runtime.server import ServiceRegistration
from mcpd.runtime.servicers import registration
from services.intelligence.servicer import IntelligenceServicer

__all__ = ["registrations"]


def registrations() -> list[ServiceRegistration]:
    """The gRPC services this role serves."""
    return [registration(IntelligenceServicer(), add_IntelligenceServiceServicer_to_server)]
