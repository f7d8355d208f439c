"""The ingest service: native ingest of spans, logs, metrics, scores, feedback and aspect notes,
and the OTLP collector services, over one pipeline (`pipeline.IngestPipeline`); and transcripts
handed over by `mcpd import` (`transcripts.TranscriptImports`).

The names below are what the composition root builds the ingest role from (policies, writer,
tail sampler, pipeline, the sessions of ingested traces); `otlp` and `transcripts` are
subpackages with surfaces of their own.
"""

from __future__ import annotations

from mcpd.ingest.v1.ingest_service_pb2_grpc import add_IngestServiceServicer_to_server
from mcpd.runtime.clock import Clock
from mcpd.runtime.server import ServiceRegistration
from mcpd.runtime.servicers import registration
from services.ingest import otlp, transcripts
from services.ingest.admission import Admission
from services.ingest.cardinality import LabelCardinality
from services.ingest.limits import RecordLimits
from services.ingest.pipeline import IngestPipeline
from services.ingest.policies import ProjectPolicies, check_policies
from services.ingest.servicer import IngestServicer
from services.ingest.tail import Decision, TailSampler
from services.ingest.trace_sessions import TraceSessions, sessions_of
from services.ingest.transcripts import TranscriptImports
from services.ingest.writer import BatchWriter

__all__ = [
    "Admission",
    "BatchWriter",
    "Decision",
    "IngestPipeline",
    "LabelCardinality",
    "ProjectPolicies",
    "RecordLimits",
    "TailSampler",
    "TraceSessions",
    "TranscriptImports",
    "check_policies",
    "otlp",
    "registrations",
    "sessions_of",
    "transcripts",
]


def registrations(
    pipeline: IngestPipeline, clock: Clock, imports: TranscriptImports
) -> list[ServiceRegistration]:
    """The native IngestService over `pipeline` and the transcript `imports`."""
    servicer = IngestServicer(pipeline, clock, imports)
    return [registration(servicer, add_IngestServiceServicer_to_server)]
