"""Native ingest of spans, logs, metrics, scores, feedback and aspect notes."""

from __future__ import annotations

from mcpd.ingest.v1 import ingest_service_pb2_grpc
from mcpd.runtime.servicers import pending_rpcs


@pending_rpcs("the ingest issue (native batches and OTLP)")
class IngestServicer(ingest_service_pb2_grpc.IngestServiceServicer):
    """Every RPC answers UNIMPLEMENTED until the ingest issue (native batches and OTLP) lands."""
