"""The OTLP/HTTP receiver: `POST /v1/traces`, `/v1/logs`, `/v1/metrics` relayed to ingest's
OTLP collector services over gRPC."""

from gateway.otlp._openapi import OPENAPI_PATHS
from gateway.otlp._receiver import MAX_BODY_BYTES, OtlpReceiver
from gateway.otlp._signals import LOGS, METRICS, SIGNALS, TRACES, Signal

SERVICES = tuple(signal.service for signal in SIGNALS)
"""The full names of the collector services the receiver calls (`channel_for` must know them)."""

__all__ = [
    "LOGS",
    "MAX_BODY_BYTES",
    "METRICS",
    "OPENAPI_PATHS",
    "SERVICES",
    "SIGNALS",
    "TRACES",
    "OtlpReceiver",
    "Signal",
]
