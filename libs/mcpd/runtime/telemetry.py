"""OpenTelemetry tracing of mcpd itself.

`configure_telemetry` installs the global `TracerProvider` that the gRPC interceptors (and any
`trace.get_tracer(...)` in mcpd) use. Spans are exported over OTLP/gRPC only when the caller
passes an endpoint; the caller reads `OTEL_EXPORTER_OTLP_ENDPOINT` at the edge, never this module.
"""

from __future__ import annotations

from collections.abc import Callable

from opentelemetry import trace
from opentelemetry.sdk.resources import SERVICE_NAME, Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor


def build_tracer_provider(service_name: str, *, otlp_endpoint: str | None) -> TracerProvider:
    """A provider whose resource names `service_name`, exporting to `otlp_endpoint` if given.

    Without an endpoint nothing is exported (spans still carry ids, so logs get trace_id and
    span_id and context still propagates to peers), and nothing touches the network.
    """
    provider = TracerProvider(resource=Resource.create({SERVICE_NAME: service_name}))
    if otlp_endpoint:
        # Imported here: the exporter pulls in its own grpc channel machinery, which processes
        # that export nothing should not pay for.
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter

        provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(endpoint=otlp_endpoint)))
    return provider


def configure_telemetry(service_name: str, *, otlp_endpoint: str | None) -> Callable[[], None]:
    """Install the global tracer provider; returns the shutdown that flushes pending spans.

    `otlp_endpoint` is an OTLP/gRPC endpoint (`http://collector:4317`; `https://` for TLS).
    The global provider can be set once per process: a second call raises RuntimeError rather
    than silently tracing into a provider nobody exports.
    """
    provider = build_tracer_provider(service_name, otlp_endpoint=otlp_endpoint)
    trace.set_tracer_provider(provider)
    if trace.get_tracer_provider() is not provider:
        provider.shutdown()
        raise RuntimeError("telemetry is already configured in this process")
    return provider.shutdown
