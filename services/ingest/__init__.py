"""The ingest service: native ingest of spans, logs, metrics, scores, feedback and aspect notes,
and the OTLP collector services, over one pipeline (`pipeline.IngestPipeline`); and transcripts
handed over by `mcpd import` (`transcripts.imports.TranscriptImports`)."""

from __future__ import annotations

from mcpd.ingest.v1.ingest_service_pb2_grpc import add_IngestServiceServicer_to_server
from mcpd.runtime.clock import Clock
from mcpd.runtime.server import ServiceRegistration
from mcpd.runtime.servicers import registration
from services.ingest.pipeline import IngestPipeline
from services.ingest.servicer import IngestServicer
from services.ingest.transcripts.imports import TranscriptImports

__all__ = ["TranscriptImports", "registrations"]


def registrations(
    pipeline: IngestPipeline, clock: Clock, transcripts: TranscriptImports
) -> list[ServiceRegistration]:
    """The native IngestService over `pipeline` and `transcripts`."""
    servicer = IngestServicer(pipeline, clock, transcripts)
    return [registration(servicer, add_IngestServiceServicer_to_server)]
