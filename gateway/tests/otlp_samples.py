"""OTLP export requests for the receiver's tests: protobuf messages, and OTLP/JSON documents as
SDK exporters write them."""

from __future__ import annotations

import base64
import json
from typing import Any

from google.protobuf import json_format
from google.protobuf.message import Message
from opentelemetry.proto.collector.logs.v1 import logs_service_pb2
from opentelemetry.proto.collector.metrics.v1 import metrics_service_pb2
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2
from opentelemetry.proto.common.v1 import common_pb2
from opentelemetry.proto.logs.v1 import logs_pb2
from opentelemetry.proto.metrics.v1 import metrics_pb2
from opentelemetry.proto.resource.v1 import resource_pb2
from opentelemetry.proto.trace.v1 import trace_pb2

TRACE_ID = bytes.fromhex("5b8efff798038103d269b633813fc60c")
ROOT_ID = bytes.fromhex("eee19b7ec3c1b174")
CHILD_ID = bytes.fromhex("00f067aa0ba902b7")


def attribute(key: str, value: str | int) -> common_pb2.KeyValue:
    """A string or integer attribute."""
    if isinstance(value, str):
        return common_pb2.KeyValue(key=key, value=common_pb2.AnyValue(string_value=value))
    return common_pb2.KeyValue(key=key, value=common_pb2.AnyValue(int_value=value))


def traces(*names: str) -> trace_service_pb2.ExportTraceServiceRequest:
    """One root span `agent` and a child span per name."""
    spans = [
        trace_pb2.Span(
            trace_id=TRACE_ID, span_id=ROOT_ID, name="agent", kind=trace_pb2.Span.SPAN_KIND_INTERNAL
        )
    ]
    for index, name in enumerate(names):
        spans.append(
            trace_pb2.Span(
                trace_id=TRACE_ID,
                span_id=(index + 1).to_bytes(8, "big"),
                parent_span_id=ROOT_ID,
                name=name,
                kind=trace_pb2.Span.SPAN_KIND_CLIENT,
                start_time_unix_nano=1_777_000_000_000_000_000,
                end_time_unix_nano=1_777_000_001_000_000_000,
                attributes=[
                    attribute("gen_ai.request.model", "gpt-4o"),
                    attribute("gen_ai.usage.input_tokens", 1200),
                ],
            )
        )
    resource = resource_pb2.Resource(attributes=[attribute("service.name", "agent-svc")])
    return trace_service_pb2.ExportTraceServiceRequest(
        resource_spans=[
            trace_pb2.ResourceSpans(
                resource=resource, scope_spans=[trace_pb2.ScopeSpans(spans=spans)]
            )
        ]
    )


def otlp_json(message: Message) -> bytes:
    """`message` in OTLP/JSON: protobuf's JSON mapping with the ids in hex, not base64."""

    def hex_ids(node: Any) -> None:
        if isinstance(node, list):
            for item in node:
                hex_ids(item)
        elif isinstance(node, dict):
            for key, value in node.items():
                if key in ("traceId", "spanId", "parentSpanId"):
                    node[key] = base64.b64decode(value).hex()
                else:
                    hex_ids(value)

    document = json_format.MessageToDict(message, use_integers_for_enums=True)
    hex_ids(document)
    return json.dumps(document, separators=(",", ":")).encode()


def json_traces() -> dict[str, Any]:
    """An OTLP/JSON trace export as SDKs write it: hex ids (either case), integer enums,
    64-bit integers as strings and as numbers, and a field this receiver does not know."""
    return {
        "resourceSpans": [
            {
                "resource": {
                    "attributes": [{"key": "service.name", "value": {"stringValue": "agent-svc"}}]
                },
                "scopeSpans": [
                    {
                        "scope": {"name": "genai", "version": "1.0"},
                        "spans": [
                            {
                                "traceId": TRACE_ID.hex().upper(),
                                "spanId": ROOT_ID.hex(),
                                "name": "invoke_agent support",
                                "kind": 1,
                                "startTimeUnixNano": "1777000000000000000",
                                "endTimeUnixNano": 1777000002000000000,
                                "status": {"code": 1},
                                "someFutureField": {"x": 1},
                            },
                            {
                                "traceId": TRACE_ID.hex(),
                                "spanId": CHILD_ID.hex(),
                                "parentSpanId": ROOT_ID.hex(),
                                "name": "chat gpt-4o",
                                "kind": 3,
                                "attributes": [
                                    {
                                        "key": "gen_ai.request.model",
                                        "value": {"stringValue": "gpt-4o"},
                                    },
                                    {
                                        "key": "gen_ai.usage.input_tokens",
                                        "value": {"intValue": "1200"},
                                    },
                                    {
                                        "key": "gen_ai.usage.output_tokens",
                                        "value": {"intValue": 85},
                                    },
                                    {"key": "temperature", "value": {"doubleValue": 0.2}},
                                ],
                                "links": [{"traceId": "0" * 31 + "1", "spanId": "0" * 15 + "2"}],
                                "events": [{"name": "gen_ai.choice", "timeUnixNano": "5"}],
                            },
                        ],
                    }
                ],
            }
        ]
    }


def every_value() -> list[common_pb2.KeyValue]:
    """An attribute of every AnyValue kind, nested arrays and lists included."""
    any_value = common_pb2.AnyValue
    return [
        common_pb2.KeyValue(key="s", value=any_value(string_value="é ✓ \u0000")),
        common_pb2.KeyValue(key="b", value=any_value(bool_value=False)),
        common_pb2.KeyValue(key="i", value=any_value(int_value=-(2**63))),
        common_pb2.KeyValue(key="d", value=any_value(double_value=-1.5e-300)),
        common_pb2.KeyValue(key="raw", value=any_value(bytes_value=b"\x00\xff binary")),
        common_pb2.KeyValue(
            key="array",
            value=any_value(
                array_value=common_pb2.ArrayValue(
                    values=[any_value(string_value="x"), any_value(int_value=2)]
                )
            ),
        ),
        common_pb2.KeyValue(
            key="kv",
            value=any_value(
                kvlist_value=common_pb2.KeyValueList(
                    values=[common_pb2.KeyValue(key="inner", value=any_value(bool_value=True))]
                )
            ),
        ),
        common_pb2.KeyValue(key="empty", value=any_value()),
    ]


def rich_traces() -> trace_service_pb2.ExportTraceServiceRequest:
    """Spans with every field OTLP defines set, links, events, and every attribute kind."""
    span = trace_pb2.Span(
        trace_id=TRACE_ID,
        span_id=CHILD_ID,
        parent_span_id=ROOT_ID,
        trace_state="vendor=x",
        flags=257,
        name="chat gpt-4o",
        kind=trace_pb2.Span.SPAN_KIND_CLIENT,
        start_time_unix_nano=2**63 + 5,  # fixed64: above int64's range
        end_time_unix_nano=2**64 - 1,
        attributes=every_value(),
        dropped_attributes_count=3,
        events=[trace_pb2.Span.Event(time_unix_nano=7, name="e", attributes=every_value())],
        links=[trace_pb2.Span.Link(trace_id=TRACE_ID, span_id=ROOT_ID, flags=1)],
        status=trace_pb2.Status(code=trace_pb2.Status.STATUS_CODE_ERROR, message="boom"),
    )
    resource = resource_pb2.Resource(attributes=every_value(), dropped_attributes_count=1)
    scope = common_pb2.InstrumentationScope(name="genai", version="1", attributes=every_value())
    return trace_service_pb2.ExportTraceServiceRequest(
        resource_spans=[
            trace_pb2.ResourceSpans(
                resource=resource,
                schema_url="https://opentelemetry.io/schemas/1.30.0",
                scope_spans=[trace_pb2.ScopeSpans(scope=scope, spans=[span, span])],
            )
        ]
    )


def rich_logs() -> logs_service_pb2.ExportLogsServiceRequest:
    """A log record with every field set, its body a structured value."""
    record = logs_pb2.LogRecord(
        time_unix_nano=1,
        observed_time_unix_nano=2,
        severity_number=logs_pb2.SEVERITY_NUMBER_WARN,
        severity_text="WARN",
        body=common_pb2.AnyValue(kvlist_value=common_pb2.KeyValueList(values=every_value())),
        attributes=every_value(),
        flags=1,
        trace_id=TRACE_ID,
        span_id=CHILD_ID,
        event_name="gen_ai.client.inference.operation.details",
    )
    return logs_service_pb2.ExportLogsServiceRequest(
        resource_logs=[logs_pb2.ResourceLogs(scope_logs=[logs_pb2.ScopeLogs(log_records=[record])])]
    )


def rich_metrics() -> metrics_service_pb2.ExportMetricsServiceRequest:
    """A metric of every data type, with exemplars."""
    exemplar = metrics_pb2.Exemplar(
        filtered_attributes=every_value(),
        time_unix_nano=3,
        as_double=0.25,
        trace_id=TRACE_ID,
        span_id=CHILD_ID,
    )
    number = metrics_pb2.NumberDataPoint(
        attributes=every_value(),
        start_time_unix_nano=1,
        time_unix_nano=2,
        as_int=-3,
        exemplars=[exemplar],
        flags=1,
    )
    cumulative = metrics_pb2.AGGREGATION_TEMPORALITY_CUMULATIVE
    metrics = [
        metrics_pb2.Metric(
            name="gauge",
            gauge=metrics_pb2.Gauge(data_points=[number]),
            unit="1",
            metadata=every_value(),
        ),
        metrics_pb2.Metric(
            name="sum",
            sum=metrics_pb2.Sum(
                data_points=[metrics_pb2.NumberDataPoint(as_double=2.5)],
                aggregation_temporality=cumulative,
                is_monotonic=True,
            ),
        ),
        metrics_pb2.Metric(
            name="histogram",
            histogram=metrics_pb2.Histogram(
                data_points=[
                    metrics_pb2.HistogramDataPoint(
                        count=3,
                        sum=12.5,
                        bucket_counts=[1, 0, 2],
                        explicit_bounds=[1.0, 10.0],
                        exemplars=[exemplar],
                        min=0.5,
                        max=9.0,
                    )
                ],
                aggregation_temporality=cumulative,
            ),
        ),
        metrics_pb2.Metric(
            name="exponential",
            exponential_histogram=metrics_pb2.ExponentialHistogram(
                data_points=[
                    metrics_pb2.ExponentialHistogramDataPoint(
                        count=4,
                        sum=8.0,
                        scale=-2,
                        zero_count=1,
                        zero_threshold=0.001,
                        positive=metrics_pb2.ExponentialHistogramDataPoint.Buckets(
                            offset=-3, bucket_counts=[1, 2]
                        ),
                        exemplars=[exemplar],
                    )
                ],
                aggregation_temporality=metrics_pb2.AGGREGATION_TEMPORALITY_DELTA,
            ),
        ),
        metrics_pb2.Metric(
            name="summary",
            summary=metrics_pb2.Summary(
                data_points=[
                    metrics_pb2.SummaryDataPoint(
                        count=2,
                        sum=3.0,
                        quantile_values=[
                            metrics_pb2.SummaryDataPoint.ValueAtQuantile(quantile=0.5, value=1.0)
                        ],
                    )
                ]
            ),
        ),
    ]
    return metrics_service_pb2.ExportMetricsServiceRequest(
        resource_metrics=[
            metrics_pb2.ResourceMetrics(scope_metrics=[metrics_pb2.ScopeMetrics(metrics=metrics)])
        ]
    )
