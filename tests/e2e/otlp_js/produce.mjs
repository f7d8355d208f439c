// Sends one scenario to an OTLP/HTTP endpoint with the OpenTelemetry JS SDK's own HTTP/JSON
// exporters: its spans (one request), one log record, one counter and one histogram point.
//
//   node produce.mjs <base_url> <api_key> <scenario.json>
//
// <base_url> is the gateway (http://127.0.0.1:8080); the exporters post to /v1/traces, /v1/logs
// and /v1/metrics with `Authorization: Bearer <api_key>` (no header when the key is ""). Prints
// {"trace_ids": [...], "spans": {key: {trace_id, span_id, parent_span_id}}, "log": {...}} on
// stdout; exits 1 if an export failed (the exporter's error goes to stderr).
//
// The scenario (scenario.example.json is one):
//   service_name   resource attribute service.name
//   resource       more resource attributes
//   compression    "none" (default) or "gzip"
//   spans          [{key, name, parent (a key, absent for a root: a new trace), kind
//                  (internal|server|client|producer|consumer), start_ms and duration_ms
//                  (from the scenario's start), attributes, status {code: ok|error, message},
//                  events [{name, attributes}]}], parents before their children
//   log            {span (key of the span it is correlated with), body, severity_number,
//                  severity_text, attributes}
//   counter        {name, value, unit, attributes}; a whole number is an integer point
//   histogram      {name, value, unit, attributes}
//   start_unix_ms  when the scenario starts (default: a minute ago)

import { readFileSync } from "node:fs";

import { ROOT_CONTEXT, SpanKind, SpanStatusCode, ValueType, trace } from "@opentelemetry/api";
import { OTLPLogExporter } from "@opentelemetry/exporter-logs-otlp-http";
import { OTLPMetricExporter } from "@opentelemetry/exporter-metrics-otlp-http";
import { OTLPTraceExporter } from "@opentelemetry/exporter-trace-otlp-http";
import { resourceFromAttributes } from "@opentelemetry/resources";
import {
  InMemoryLogRecordExporter,
  LoggerProvider,
  SimpleLogRecordProcessor,
} from "@opentelemetry/sdk-logs";
import { MeterProvider, MetricReader } from "@opentelemetry/sdk-metrics";
import {
  BasicTracerProvider,
  InMemorySpanExporter,
  SimpleSpanProcessor,
} from "@opentelemetry/sdk-trace-base";

const EXPORT_SUCCESS = 0; // ExportResultCode.SUCCESS (@opentelemetry/core)

const KINDS = {
  internal: SpanKind.INTERNAL,
  server: SpanKind.SERVER,
  client: SpanKind.CLIENT,
  producer: SpanKind.PRODUCER,
  consumer: SpanKind.CONSUMER,
};
const STATUS = { ok: SpanStatusCode.OK, error: SpanStatusCode.ERROR };

/** A reader that collects only when asked: the metrics are exported by hand below. */
class CollectOnDemand extends MetricReader {
  async onForceFlush() {}
  async onShutdown() {}
}

/** Whole numbers are recorded as integers (`asInt`), as token counts are. */
function valueType(value) {
  return Number.isInteger(value) ? ValueType.INT : ValueType.DOUBLE;
}

function exportWith(exporter, items, what) {
  return new Promise((resolve, reject) => {
    exporter.export(items, (result) => {
      if (result.code === EXPORT_SUCCESS) resolve();
      else reject(new Error(`${what} export failed: ${result.error?.message ?? "unknown error"}`));
    });
  });
}

function emitSpans(scenario, provider, startMs) {
  const tracer = provider.getTracer("mcpd-e2e-producer", "1.0.0");
  const started = new Map();
  for (const spec of scenario.spans ?? []) {
    let parentContext = ROOT_CONTEXT;
    if (spec.parent !== undefined) {
      const parent = started.get(spec.parent);
      if (parent === undefined) throw new Error(`span ${spec.key}: no earlier span ${spec.parent}`);
      parentContext = trace.setSpan(ROOT_CONTEXT, parent);
    }
    const begin = startMs + (spec.start_ms ?? 0);
    const span = tracer.startSpan(
      spec.name,
      { kind: KINDS[spec.kind ?? "internal"], attributes: spec.attributes ?? {}, startTime: begin },
      parentContext,
    );
    for (const event of spec.events ?? []) span.addEvent(event.name, event.attributes ?? {}, begin);
    if (spec.status !== undefined) {
      span.setStatus({ code: STATUS[spec.status.code], message: spec.status.message });
    }
    span.end(begin + (spec.duration_ms ?? 1));
    started.set(spec.key, span);
  }
  return started;
}

function ids(span) {
  const context = span.spanContext();
  return {
    trace_id: context.traceId,
    span_id: context.spanId,
    parent_span_id: span.parentSpanContext?.spanId ?? null,
  };
}

async function main([baseUrl, apiKey, scenarioPath]) {
  if (scenarioPath === undefined) {
    throw new Error("usage: node produce.mjs <base_url> <api_key> <scenario.json>");
  }
  const scenario = JSON.parse(readFileSync(scenarioPath, "utf8"));
  const base = baseUrl.replace(/\/+$/, "");
  const options = (path) => ({
    url: `${base}${path}`,
    headers: apiKey ? { Authorization: `Bearer ${apiKey}` } : {},
    compression: scenario.compression ?? "none",
  });
  const resource = resourceFromAttributes({
    "service.name": scenario.service_name ?? "mcpd-e2e-producer",
    ...(scenario.resource ?? {}),
  });
  const startMs = scenario.start_unix_ms ?? Date.now() - 60_000;

  const finishedSpans = new InMemorySpanExporter();
  const tracerProvider = new BasicTracerProvider({
    resource,
    spanProcessors: [new SimpleSpanProcessor(finishedSpans)],
  });
  const spans = emitSpans(scenario, tracerProvider, startMs);

  const emittedLogs = new InMemoryLogRecordExporter();
  const loggerProvider = new LoggerProvider({
    resource,
    processors: [new SimpleLogRecordProcessor({ exporter: emittedLogs })],
  });
  let log = null;
  if (scenario.log !== undefined) {
    const spec = scenario.log;
    const span = spec.span === undefined ? undefined : spans.get(spec.span);
    loggerProvider.getLogger("mcpd-e2e-producer").emit({
      body: spec.body,
      severityNumber: spec.severity_number ?? 9,
      severityText: spec.severity_text ?? "INFO",
      attributes: spec.attributes ?? {},
      timestamp: startMs + (spec.at_ms ?? 0),
      context: span === undefined ? ROOT_CONTEXT : trace.setSpan(ROOT_CONTEXT, span),
    });
    log = span === undefined ? {} : { trace_id: ids(span).trace_id, span_id: ids(span).span_id };
  }

  const reader = new CollectOnDemand();
  const meterProvider = new MeterProvider({ resource, readers: [reader] });
  const meter = meterProvider.getMeter("mcpd-e2e-producer");
  if (scenario.counter !== undefined) {
    const { name, value, unit, attributes } = scenario.counter;
    meter.createCounter(name, { unit, valueType: valueType(value) }).add(value, attributes ?? {});
  }
  if (scenario.histogram !== undefined) {
    const { name, value, unit, attributes } = scenario.histogram;
    meter
      .createHistogram(name, { unit, valueType: valueType(value) })
      .record(value, attributes ?? {});
  }

  const traceExporter = new OTLPTraceExporter(options("/v1/traces"));
  const logExporter = new OTLPLogExporter(options("/v1/logs"));
  const metricExporter = new OTLPMetricExporter(options("/v1/metrics"));
  try {
    await exportWith(traceExporter, finishedSpans.getFinishedSpans(), "trace");
    await exportWith(logExporter, emittedLogs.getFinishedLogRecords(), "log");
    const { resourceMetrics, errors } = await reader.collect();
    if (errors.length > 0) throw errors[0];
    await exportWith(metricExporter, resourceMetrics, "metric");
  } finally {
    await Promise.all([traceExporter.shutdown(), logExporter.shutdown(), metricExporter.shutdown()]);
  }

  const described = Object.fromEntries([...spans].map(([key, span]) => [key, ids(span)]));
  const traceIds = [...new Set(Object.values(described).map((span) => span.trace_id))];
  process.stdout.write(`${JSON.stringify({ trace_ids: traceIds, spans: described, log })}\n`);
}

main(process.argv.slice(2)).catch((error) => {
  process.stderr.write(`${error?.stack ?? error}\n`);
  process.exitCode = 1;
});
