"""The ingest service: native ingest of spans, logs, metrics, scores, feedback and aspect notes,
and the OTLP collector services, over one pipeline (`pipeline.IngestPipeline`)."""

from __future__ import annotations

from mcpd.ingest.v1.ingest_service_pb2_grpc import add_IngestServiceServicer_to_server
from mcpd.runtime.clock import Clock
from mcpd.runtime.server import ServiceRegistration
from mcpd.runtime.servicers import registration
from services.ingest.pipeline import IngestPipeline
from services.ingest.servicer import IngestServicer

__all__ = ["registrations"]


def registrations(pipeline: IngestPipeline, clock: Clock) -> list[ServiceRegistration]:
    """The native IngestService over `pipeline`."""
    return [registration(IngestServicer(pipeline, clock), add_IngestServiceServicer_to_server)]
