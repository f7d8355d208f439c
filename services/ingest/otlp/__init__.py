"""OTLP ingest: the OpenTelemetry protocol mapped onto mcpd's spans, logs and metrics.

`map_traces`, `map_logs` and `map_metrics` turn OTLP export requests into an `IncomingBatch`
(rows with their index in the request, plus refusals); they are pure and fast. The receivers
(`otlp_registrations`) serve the three OTLP collector services against anything that can
`ingest` a batch; the gateway's OTLP/HTTP routes relay to them, so both transports share one
mapping. docs/otlp.md is the mapping reference.
"""

from __future__ import annotations

from services.ingest.otlp._logs import map_logs
from services.ingest.otlp._metrics import map_metrics
from services.ingest.otlp._receivers import (
    CanIngest,
    LogsReceiver,
    MetricsReceiver,
    TraceReceiver,
    otlp_registrations,
)
from services.ingest.otlp._spans import ADDED_ATTRIBUTES, EVENTS_KEY, map_traces

__all__ = [
    "ADDED_ATTRIBUTES",
    "EVENTS_KEY",
    "CanIngest",
    "LogsReceiver",
    "MetricsReceiver",
    "TraceReceiver",
    "map_logs",
    "map_metrics",
    "map_traces",
    "otlp_registrations",
]
