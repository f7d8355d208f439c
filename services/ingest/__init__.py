"""The ingest service: native ingest of spans, logs, metrics, scores, feedback and aspect notes."""

from __future__ import annotations

from mcpd.ingest.v1.ingest_service_pb2_grpc import add_IngestServiceServicer_to_server
from mcpd.runtime.server import ServiceRegistration
from mcpd.runtime.servicers import registration
from services.ingest.servicer import IngestServicer

__all__ = ["registrations"]


def registrations() -> list[ServiceRegistration]:
    """The gRPC services this role serves."""
    return [registration(IngestServicer(), add_IngestServiceServicer_to_server)]
