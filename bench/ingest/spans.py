"""GenAI-shaped spans for the ingest benchmark, pre-encoded as request bodies.

A request holds :data:`SPANS_PER_REQUEST` spans: traces of about ten spans each (an
``invoke_agent`` root, then ``chat`` model inferences and ``execute_tool`` tool calls in turn,
the last one a ``chat``), under one resource. Model spans carry the OpenTelemetry GenAI usage
attributes (input and output totals, cache reads, reasoning tokens), the model, provider and
sampling settings; every span carries input and output messages (tool spans: call arguments and
result) whose filler text makes the span's OTLP protobuf encoding :data:`SIZES` bytes long,
give or take a byte or two.

The same logical spans are encoded two ways:

- ``otlp``: ``ExportTraceServiceRequest`` protobuf bytes (OTLP/HTTP body, OTLP/gRPC message),
  GenAI semantic conventions as span attributes;
- ``native``: an ``IngestBatch`` in the spec's JSON, for ``POST /v1/api/ingest``: the same
  messages as ``input``/``output`` documents, ``usage``, ``model_parameters``, ``model``,
  ``provider``, ``entity_*`` and ``correlation``, the remaining GenAI attributes in
  ``attributes``. Its bytes per span are larger (JSON, hex ids); the stored data is the same.

Encoding happens once, before any timing. A :class:`Template` is one encoded request plus the
position of every trace and span id in it; :meth:`Template.stamp` copies the bytes and XORs
the first 32 bits of every id with a sequence number, so each copy sent carries ids no other
copy has (parents keep pointing at their parents) at the cost of a memcpy and a few thousand
small writes, not of encoding.
"""

from __future__ import annotations

import dataclasses
import json
import random
import re
import time
from collections import Counter
from collections.abc import Sequence
from typing import Any, Literal

from opentelemetry.proto.collector.trace.v1 import trace_service_pb2
from opentelemetry.proto.common.v1 import common_pb2
from opentelemetry.proto.resource.v1 import resource_pb2
from opentelemetry.proto.trace.v1 import trace_pb2

Encoding = Literal["otlp", "native"]
Role = Literal["agent", "chat", "tool"]

SIZES: dict[str, int] = {"1kb": 1024, "10kb": 10 * 1024}
"""Payload name -> target bytes of one span's OTLP protobuf encoding."""

SPANS_PER_REQUEST = 512
MEASURED_SERVICE = "ingest-bench"
WARMUP_SERVICE = "ingest-bench-warmup"
TRACE_SIZES = (10, 9, 11, 10, 12, 8, 10, 11, 9)
"""Spans per trace, in turn; the last trace of a request takes what remains."""

_ID_PREFIX_MASK = 0xFFFFFFFF
_MODELS = (
    ("anthropic", "claude-sonnet-4-5"),
    ("openai", "gpt-5-mini"),
    ("anthropic", "claude-haiku-4-5"),
    ("openai", "gpt-5"),
)
_TOOLS = ("search_orders", "read_file", "run_sql", "fetch_url", "lookup_customer", "send_email")
_VOCABULARY = (
    "order shipment refund invoice customer ticket warehouse tracking carrier delay address "
    "payment card charge dispute policy return label package parcel delivery status update "
    "query index table column schema migration latency timeout retry backoff error stack "
    "function argument result response request token cache context window model prompt "
    "reasoning tool agent step plan answer summary because therefore however meanwhile the a "
    "of to in for with on by from and or not is was be has have will would should could"
)
_WORDS = tuple(_VOCABULARY.split())
_UNICODE = "Grüße, café crème — naïve résumé ✓ 東京 Ωμέγα"


# ---------------------------------------------------------------------------------------------
# Logical spans


@dataclasses.dataclass(slots=True)
class LogicalSpan:
    """One span, independent of its encoding."""

    trace_id: bytes
    span_id: bytes
    parent_span_id: bytes | None
    role: Role
    name: str
    start_ns: int
    end_ns: int
    session_id: str | None
    attributes: dict[str, Any]
    """GenAI attributes other than the payload, usage, model and sampling settings."""
    input: Any
    output: Any
    model: str | None = None
    provider: str | None = None
    usage: dict[str, int] | None = None
    temperature: float | None = None
    max_tokens: int | None = None
    entity_name: str | None = None
    entity_id: str | None = None


_POOL_CHARS = 64 * 1024


def _pool(seed: int) -> str:
    """ASCII prose to cut filler from (words drawn from a small vocabulary)."""
    rng = random.Random(seed)
    text = " ".join(rng.choice(_WORDS) for _ in range(_POOL_CHARS // 4))
    return text[:_POOL_CHARS]


_PROSE = _pool(0)


def _filler(rng: random.Random, length: int) -> str:
    """ASCII prose of exactly ``length`` characters (and bytes), from a random place."""
    if length <= 0:
        return ""
    out: list[str] = []
    while length > 0:
        start = rng.randrange(0, _POOL_CHARS // 2)
        piece = _PROSE[start : start + min(length, _POOL_CHARS - start)]
        out.append(piece)
        length -= len(piece)
    return "".join(out)


def _messages_in(question: str) -> list[dict[str, Any]]:
    return [{"role": "user", "parts": [{"type": "text", "content": question}]}]


def _messages_out(text: str, tool: str | None, call_id: str | None) -> list[dict[str, Any]]:
    parts: list[dict[str, Any]] = [{"type": "text", "content": text}]
    if tool is not None:
        parts.append({"type": "tool_call", "id": call_id, "name": tool, "arguments": {}})
    return [{"role": "assistant", "parts": parts, "finish_reason": "tool_call" if tool else "stop"}]


def _set_payload(span: LogicalSpan, filler_in: str, filler_out: str) -> None:
    """Fill ``span.input``/``span.output`` for its role with the given filler text."""
    tool = span.attributes.get("gen_ai.tool.name")
    call_id = span.attributes.get("gen_ai.tool.call.id")
    if span.role == "tool":
        span.input = {"query": f"{_UNICODE} {filler_in}", "limit": 20}
        span.output = f"{len(filler_out)} bytes of results: {filler_out}"
    elif span.role == "agent":
        span.input = _messages_in(f"{_UNICODE} {filler_in}")
        span.output = _messages_out(filler_out, None, None)
    else:
        span.input = _messages_in(filler_in)
        span.output = _messages_out(
            filler_out, str(tool) if tool else None, str(call_id) if call_id else None
        )


def _unique(rng: random.Random, size: int, seen: set[bytes]) -> bytes:
    """Random id bytes whose tail (all but the first 4 bytes) no earlier id has."""
    while True:
        value = rng.randbytes(size)
        if value[4:] not in seen and any(value):
            seen.add(value[4:])
            return value


@dataclasses.dataclass(slots=True)
class _Ids:
    rng: random.Random
    trace_tails: set[bytes] = dataclasses.field(default_factory=set)
    span_tails: set[bytes] = dataclasses.field(default_factory=set)

    def trace(self) -> bytes:
        return _unique(self.rng, 16, self.trace_tails)

    def span(self) -> bytes:
        return _unique(self.rng, 8, self.span_tails)


def _trace(
    rng: random.Random, ids: _Ids, spans: int, start_ns: int, number: int, sessions: bool
) -> list[LogicalSpan]:
    """One agent run of ``spans`` spans (root, then chat/tool in turn, ending on chat), each
    span carrying the run's session id when ``sessions``."""
    trace_id = ids.trace()
    root_id = ids.span()
    # Drawn either way, so that a corpus without sessions differs from one with them in that alone.
    drawn = rng.randrange(1_000_000)
    session = f"session-{drawn:06d}" if sessions else None
    agent = rng.choice(("support-agent", "billing-agent", "triage-agent"))
    children: list[LogicalSpan] = []
    clock = start_ns + 1_000_000
    pending_tool: Any = None
    pending_call: Any = None
    kinds: list[Role] = ["chat" if index % 2 == 0 else "tool" for index in range(spans - 1)]
    if kinds and kinds[-1] == "tool":
        kinds[-1] = "chat"
    for index, role in enumerate(kinds):
        duration = rng.randrange(200_000_000, 2_500_000_000 if role == "chat" else 600_000_000)
        span_id = ids.span()
        if role == "chat":
            provider, model = rng.choice(_MODELS)
            input_tokens = rng.randrange(800, 30_000)
            cache_read = rng.randrange(0, input_tokens // 2)
            output_tokens = rng.randrange(50, 2_000)
            reasoning = rng.randrange(0, output_tokens // 2)
            calls_tool = index + 1 < len(kinds)
            attributes: dict[str, Any] = {
                "gen_ai.operation.name": "chat",
                "gen_ai.response.id": f"resp_{rng.randbytes(12).hex()}",
                "gen_ai.response.finish_reasons": ["tool_call" if calls_tool else "stop"],
                "server.address": f"api.{provider}.com",
            }
            if calls_tool:
                attributes["gen_ai.tool.name"] = rng.choice(_TOOLS)
                attributes["gen_ai.tool.call.id"] = f"call_{rng.randbytes(6).hex()}"
            span = LogicalSpan(
                trace_id=trace_id,
                span_id=span_id,
                parent_span_id=root_id,
                role="chat",
                name=f"chat {model}",
                start_ns=clock,
                end_ns=clock + duration,
                session_id=session,
                attributes=attributes,
                input=None,
                output=None,
                model=model,
                provider=provider,
                usage={
                    "input_tokens": input_tokens,
                    "output_tokens": output_tokens,
                    "cache_read": cache_read,
                    "reasoning": reasoning,
                },
                temperature=rng.choice((0.0, 0.2, 0.7, 1.0)),
                max_tokens=rng.choice((1024, 4096, 8192)),
                entity_name=model,
            )
            # A chat span's answer names the tool the next span runs.
            pending_tool = attributes.get("gen_ai.tool.name")
            pending_call = attributes.get("gen_ai.tool.call.id")
        else:
            tool = str(pending_tool or rng.choice(_TOOLS))
            span = LogicalSpan(
                trace_id=trace_id,
                span_id=span_id,
                parent_span_id=root_id,
                role="tool",
                name=f"execute_tool {tool}",
                start_ns=clock,
                end_ns=clock + duration,
                session_id=session,
                attributes={
                    "gen_ai.operation.name": "execute_tool",
                    "gen_ai.tool.name": tool,
                    "gen_ai.tool.call.id": str(pending_call or f"call_{rng.randbytes(6).hex()}"),
                    "gen_ai.tool.type": "function",
                },
                input=None,
                output=None,
                entity_name=tool,
            )
        children.append(span)
        clock += duration + rng.randrange(1_000_000, 50_000_000)
    root = LogicalSpan(
        trace_id=trace_id,
        span_id=root_id,
        parent_span_id=None,
        role="agent",
        name=f"invoke_agent {agent}",
        start_ns=start_ns,
        end_ns=clock + 1_000_000,
        session_id=session,
        attributes={"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": agent},
        input=None,
        output=None,
        entity_name=agent,
        entity_id=f"{agent}-{number % 7}",
    )
    root.attributes["gen_ai.agent.id"] = root.entity_id
    return [root, *children]


# ---------------------------------------------------------------------------------------------
# OTLP encoding


def _any_value(value: Any) -> common_pb2.AnyValue:
    if isinstance(value, bool):
        return common_pb2.AnyValue(bool_value=value)
    if isinstance(value, int):
        return common_pb2.AnyValue(int_value=value)
    if isinstance(value, float):
        return common_pb2.AnyValue(double_value=value)
    if isinstance(value, list | tuple):
        return common_pb2.AnyValue(
            array_value=common_pb2.ArrayValue(values=[_any_value(item) for item in value])
        )
    return common_pb2.AnyValue(string_value=str(value))


def _key_values(attributes: dict[str, Any]) -> list[common_pb2.KeyValue]:
    return [common_pb2.KeyValue(key=key, value=_any_value(v)) for key, v in attributes.items()]


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def otlp_attributes(span: LogicalSpan) -> dict[str, Any]:
    """Every attribute of ``span`` as the GenAI conventions spell it (payload included)."""
    attributes = dict(span.attributes)
    if span.role == "chat":
        assert span.usage is not None
        attributes.update(
            {
                "gen_ai.provider.name": span.provider,
                "gen_ai.request.model": span.model,
                "gen_ai.response.model": span.model,
                "gen_ai.request.temperature": span.temperature,
                "gen_ai.request.max_tokens": span.max_tokens,
                "gen_ai.usage.input_tokens": span.usage["input_tokens"],
                "gen_ai.usage.output_tokens": span.usage["output_tokens"],
                "gen_ai.usage.cache_read.input_tokens": span.usage["cache_read"],
                "gen_ai.usage.reasoning.output_tokens": span.usage["reasoning"],
            }
        )
    if span.session_id is not None:
        attributes["gen_ai.conversation.id"] = span.session_id
    if span.role == "tool":
        attributes["gen_ai.tool.call.arguments"] = _dumps(span.input)
        attributes["gen_ai.tool.call.result"] = span.output
    else:
        attributes["gen_ai.input.messages"] = _dumps(span.input)
        attributes["gen_ai.output.messages"] = _dumps(span.output)
    return attributes


def otlp_span(span: LogicalSpan) -> trace_pb2.Span:
    """``span`` as an OTLP Span message."""
    return trace_pb2.Span(
        trace_id=span.trace_id,
        span_id=span.span_id,
        parent_span_id=span.parent_span_id or b"",
        name=span.name,
        kind=trace_pb2.Span.SPAN_KIND_CLIENT
        if span.role == "chat"
        else trace_pb2.Span.SPAN_KIND_INTERNAL,
        start_time_unix_nano=span.start_ns,
        end_time_unix_nano=span.end_ns,
        attributes=_key_values(otlp_attributes(span)),
        status=trace_pb2.Status(code=trace_pb2.Status.STATUS_CODE_OK),
    )


def resource_attributes(service: str) -> dict[str, Any]:
    """The resource of every request: ``service`` names both mcpd's service and Phoenix's
    project, so warm-up spans can be told from measured ones in either store."""
    return {
        "service.name": service,
        "service.version": "1.4.2",
        "deployment.environment.name": "bench",
        "openinference.project.name": service,
        "telemetry.sdk.language": "python",
    }


def otlp_request(spans: Sequence[LogicalSpan], service: str) -> bytes:
    request = trace_service_pb2.ExportTraceServiceRequest(
        resource_spans=[
            trace_pb2.ResourceSpans(
                resource=resource_pb2.Resource(
                    attributes=_key_values(resource_attributes(service))
                ),
                scope_spans=[
                    trace_pb2.ScopeSpans(
                        scope=common_pb2.InstrumentationScope(name="bench.ingest", version="1"),
                        spans=[otlp_span(span) for span in spans],
                    )
                ],
            )
        ]
    )
    return request.SerializeToString()


# ---------------------------------------------------------------------------------------------
# Native (spec JSON) encoding


def _rfc3339(nanos: int) -> str:
    seconds, fraction = divmod(nanos, 1_000_000_000)
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(seconds)) + f".{fraction:09d}Z"


def native_span(span: LogicalSpan, service: str) -> dict[str, Any]:
    """``span`` as a spec Span in JSON, as mcpd would store the OTLP twin."""
    kind = {"agent": "agent_run", "chat": "model_inference", "tool": "tool_call"}[span.role]
    entity = {"agent": "agent", "chat": "model", "tool": "tool"}[span.role]
    body: dict[str, Any] = {
        "trace_id": span.trace_id.hex(),
        "span_id": span.span_id.hex(),
        "name": span.name,
        "kind": kind,
        "status": "ok",
        "start_time": _rfc3339(span.start_ns),
        "end_time": _rfc3339(span.end_ns),
        "is_root": span.parent_span_id is None,
        "is_event": False,
        "entity_kind": entity,
        "entity_name": span.entity_name,
        "input": span.input,
        "output": span.output,
        "attributes": {
            key: value
            for key, value in span.attributes.items()
            if key not in ("gen_ai.agent.name", "gen_ai.agent.id")
        },
        "correlation": {
            "project": "",
            "environment": "bench",
            "service_name": service,
            "service_version": "1.4.2",
        },
    }
    if span.session_id is not None:
        body["correlation"]["session_id"] = span.session_id
    if span.parent_span_id is not None:
        body["parent_span_id"] = span.parent_span_id.hex()
    if span.entity_id is not None:
        body["entity_id"] = span.entity_id
    if span.role == "chat":
        assert span.usage is not None
        usage = span.usage
        body["model"] = span.model
        body["provider"] = span.provider
        body["usage"] = {
            "input_tokens": usage["input_tokens"],
            "output_tokens": usage["output_tokens"],
            "input_details": {
                "cache_read": usage["cache_read"],
                "text": usage["input_tokens"] - usage["cache_read"],
            },
            "output_details": {
                "reasoning": usage["reasoning"],
                "text": usage["output_tokens"] - usage["reasoning"],
            },
        }
        body["model_parameters"] = {
            "temperature": span.temperature,
            "max_tokens": span.max_tokens,
            "has_response_format": False,
        }
    return body


def native_request(spans: Sequence[LogicalSpan], service: str) -> bytes:
    document = {"spans": [native_span(span, service) for span in spans]}
    return _dumps(document).encode("utf-8")


# ---------------------------------------------------------------------------------------------
# Sizing


def _fit(span: LogicalSpan, target: int, rng: random.Random) -> None:
    """Choose filler so that the span's OTLP encoding is ``target`` bytes (within a few)."""
    seed = rng.random()
    budget = 0
    for _ in range(6):
        local = random.Random(seed)
        filler = _filler(local, budget)
        split = len(filler) * 3 // 5
        _set_payload(span, filler[:split], filler[split:])
        size = otlp_span(span).ByteSize()
        if abs(size - target) <= 1:
            return
        budget = max(0, budget + target - size)
        if budget == 0 and size > target:
            return


def request_spans(
    rng: random.Random,
    ids: _Ids,
    target: int,
    start_ns: int,
    count: int = SPANS_PER_REQUEST,
    *,
    sessions: bool = True,
) -> list[LogicalSpan]:
    """``count`` spans in traces of about ten, each fitted to ``target`` OTLP bytes; every trace
    is a turn of a session when ``sessions``."""
    spans: list[LogicalSpan] = []
    number = 0
    while len(spans) < count:
        size = TRACE_SIZES[number % len(TRACE_SIZES)]
        remaining = count - len(spans)
        if remaining - size < 2:
            size = remaining
        trace = _trace(rng, ids, size, start_ns + number * 20_000_000, number, sessions)
        for span in trace:
            _fit(span, target, rng)
        spans.extend(trace)
        number += 1
    return spans


# ---------------------------------------------------------------------------------------------
# Templates: encoded requests whose ids can be renumbered cheaply


@dataclasses.dataclass(frozen=True, slots=True)
class Template:
    """One encoded request; :meth:`stamp` renumbers its ids.

    ``patches`` are ``(offset, prefix)`` pairs: where the first 32 bits of an id sit in
    ``body`` (4 raw bytes in protobuf, 8 hex digits in JSON) and their value in the template.
    """

    encoding: Encoding
    body: bytes
    spans: int
    traces: int
    patches: tuple[tuple[int, int], ...]
    trace_ids: tuple[bytes, ...]
    spans_per_trace: tuple[int, ...]

    def stamp(self, seq: int) -> bytes:
        """A copy of the body whose every id has its first 32 bits XORed with ``seq``."""
        if seq == 0:
            return self.body
        seq &= _ID_PREFIX_MASK
        buffer = bytearray(self.body)
        if self.encoding == "otlp":
            for offset, prefix in self.patches:
                buffer[offset : offset + 4] = (prefix ^ seq).to_bytes(4, "big")
        else:
            for offset, prefix in self.patches:
                buffer[offset : offset + 8] = b"%08x" % (prefix ^ seq)
        return bytes(buffer)

    def trace_id(self, index: int, seq: int) -> str:
        """Hex id of trace ``index`` of this template in the copy stamped with ``seq``."""
        original = self.trace_ids[index]
        prefix = int.from_bytes(original[:4], "big") ^ (seq & _ID_PREFIX_MASK)
        return prefix.to_bytes(4, "big").hex() + original[4:].hex()


_JSON_ID = re.compile(rb'"(?:trace_id|span_id|parent_span_id)":"([0-9a-f]{16}|[0-9a-f]{32})"')


def _otlp_patches(body: bytes, spans: Sequence[LogicalSpan]) -> list[tuple[int, int]]:
    # Spans are serialized in order, each with trace_id, span_id then parent_span_id (field
    # number order), so every id is found by a short forward search from the one before.
    patches: list[tuple[int, int]] = []
    cursor = 0
    for span in spans:
        for value in (span.trace_id, span.span_id, span.parent_span_id):
            if value is None:
                continue
            offset = body.find(value, cursor)
            if offset < 0:
                raise AssertionError(f"id {value.hex()} not found in the encoded request")
            patches.append((offset, int.from_bytes(value[:4], "big")))
            cursor = offset + len(value)
    return patches


def _json_patches(body: bytes, spans: Sequence[LogicalSpan]) -> list[tuple[int, int]]:
    patches = [(match.start(1), int(match.group(1)[:8], 16)) for match in _JSON_ID.finditer(body)]
    expected = sum(3 if span.parent_span_id else 2 for span in spans)
    if len(patches) != expected:
        raise AssertionError(f"found {len(patches)} ids in the JSON request, expected {expected}")
    return patches


def template(spans: Sequence[LogicalSpan], encoding: Encoding, service: str) -> Template:
    """Encode ``spans`` as one request of ``encoding`` and find every id in it."""
    if encoding == "otlp":
        body = otlp_request(spans, service)
        patches = _otlp_patches(body, spans)
    else:
        body = native_request(spans, service)
        patches = _json_patches(body, spans)
    trace_spans = Counter(span.trace_id for span in spans)
    return Template(
        encoding=encoding,
        body=body,
        spans=len(spans),
        traces=len(trace_spans),
        patches=tuple(patches),
        trace_ids=tuple(trace_spans),
        spans_per_trace=tuple(trace_spans.values()),
    )


@dataclasses.dataclass(frozen=True, slots=True)
class Corpus:
    """Templates of one payload size: the same logical spans in both encodings.

    ``measured[encoding]`` are the timed requests; ``warmup[encoding]`` (full size) and
    ``probe[encoding]`` (:data:`PROBE_SPANS` spans each) carry :data:`WARMUP_SERVICE`, so
    their spans are left out of every count.
    """

    payload: str
    target_bytes: int
    measured: dict[Encoding, list[Template]]
    warmup: dict[Encoding, list[Template]]
    probe: dict[Encoding, list[Template]]
    otlp_span_bytes: list[int]

    def bytes_per_span(self, encoding: Encoding) -> float:
        """Mean request bytes per span of the measured requests (envelope included)."""
        templates = self.measured[encoding]
        return sum(len(t.body) for t in templates) / sum(t.spans for t in templates)

    def describe(self) -> dict[str, object]:
        otlp = self.measured["otlp"]
        return {
            "target_otlp_span_bytes": self.target_bytes,
            "otlp_span_bytes_min": min(self.otlp_span_bytes),
            "otlp_span_bytes_max": max(self.otlp_span_bytes),
            "otlp_span_bytes_mean": sum(self.otlp_span_bytes) / len(self.otlp_span_bytes),
            "otlp_request_bytes_per_span": self.bytes_per_span("otlp"),
            "native_request_bytes_per_span": self.bytes_per_span("native"),
            "spans_per_request": otlp[0].spans,
            "traces_per_request": sum(t.traces for t in otlp) / len(otlp),
            "distinct_templates": len(otlp),
        }


PROBE_SPANS = 16


def build_corpus(
    payload: str,
    *,
    templates: int = 8,
    warmup_templates: int = 2,
    seed: int = 0,
    spans_per_request: int = SPANS_PER_REQUEST,
    start_ns: int | None = None,
    sessions: bool = True,
) -> Corpus:
    """Generate and encode ``templates`` distinct requests (and warm-up ones) of ``payload``;
    with ``sessions`` false no span carries a session id (ingest without the session read
    model's work)."""
    target = SIZES[payload]
    rng = random.Random(f"{seed}:{payload}")
    ids = _Ids(random.Random(f"{seed}:{payload}:ids"))
    base = start_ns if start_ns is not None else time.time_ns() - 3_600_000_000_000
    measured: dict[Encoding, list[Template]] = {"otlp": [], "native": []}
    warmup: dict[Encoding, list[Template]] = {"otlp": [], "native": []}
    probe: dict[Encoding, list[Template]] = {"otlp": [], "native": []}
    sizes: list[int] = []
    plan = (
        [(measured, spans_per_request, MEASURED_SERVICE)] * templates
        + [(warmup, spans_per_request, WARMUP_SERVICE)] * warmup_templates
        + [(probe, PROBE_SPANS, WARMUP_SERVICE)] * 2
    )
    for number, (into, count, service) in enumerate(plan):
        spans = request_spans(
            rng, ids, target, base + number * 60_000_000_000, count, sessions=sessions
        )
        if into is measured:
            sizes.extend(otlp_span(span).ByteSize() for span in spans)
        for encoding in ("otlp", "native"):
            into[encoding].append(template(spans, encoding, service))
    return Corpus(payload, target, measured, warmup, probe, sizes)
