"""decode(encode(m)) == m, for every mcpd message and for hand-written spec documents."""

from __future__ import annotations

import json
from typing import Any

import pytest
from google.protobuf.descriptor import Descriptor
from google.protobuf.message_factory import GetMessageClass

from mcpd import codec
from mcpd.model.v1 import enums_pb2, query_pb2, runs_pb2, telemetry_pb2
from tests.libs.codec.samples import all_message_types, sample

MESSAGES = all_message_types()


def test_the_walk_finds_the_model() -> None:
    names = {m.full_name for m in MESSAGES}
    for expected in ("Span", "Trace", "StoreCapabilities", "HealthStatus", "IngestBatch", "Run"):
        assert f"mcpd.model.v1.{expected}" in names
    assert len(MESSAGES) > 150


@pytest.mark.parametrize("variant", [0, 1, 2])
@pytest.mark.parametrize("descriptor", MESSAGES, ids=lambda d: d.full_name)
def test_every_message_round_trips(descriptor: Descriptor, variant: int) -> None:
    message = sample(descriptor, variant)
    encoded = codec.encode(message)
    # What goes on the wire survives an actual JSON text round trip unchanged.
    text = json.dumps(encoded, allow_nan=False)
    assert json.loads(text) == encoded
    assert codec.decode(json.loads(text), type(message)) == message


@pytest.mark.parametrize("descriptor", MESSAGES, ids=lambda d: d.full_name)
def test_empty_messages_round_trip(descriptor: Descriptor) -> None:
    message = GetMessageClass(descriptor)()
    encoded = codec.encode(message)
    assert codec.decode(encoded, type(message)) == message
    # Nothing optional is invented: only always-written fields appear.
    assert set(encoded) == set(codec.required_fields(descriptor))


SPEC_DOCUMENTS: list[tuple[type[Any], dict[str, Any]]] = [
    (
        telemetry_pb2.Span,
        {
            "trace_id": "4bf92f3577b34da6a3ce929d0e0e4736",
            "span_id": "00f067aa0ba902b7",
            "name": "search_docs",
            "kind": "tool_call",
            "status": "ok",
            "start_time": "2026-04-29T18:42:31.125Z",
            "end_time": "2026-04-29T18:42:32.000Z",
            "duration_ns": 875000000,
            "is_root": False,
            "is_event": False,
            "input": {"query": "refund policy", "k": 5},
            "output": ["doc-1", "doc-2"],
            "links": [],
            "tags": ["prod"],
            "usage": {"input_tokens": 1200, "output_tokens": 80},
        },
    ),
    (
        telemetry_pb2.Trace,
        {
            "trace_id": "4bf92f3577b34da6a3ce929d0e0e4736",
            "name": "agent",
            "kind": "agent_run",
            "status": "error",
            "start_time": "2026-04-29T18:42:31.125Z",
            "span_count": 12,
            "error_count": 1,
            "model_count": 3,
            "tool_count": 4,
            "tags": [],
            "score_summary": {"answer_relevance": 0.5},
            "is_complete": True,
        },
    ),
    (
        query_pb2.StoreCapabilities,
        {
            "backend": "clickhouse",
            "text_search": "substring",
            "unicode_case_folding": True,
            "immediate_deletes": False,
            "discovery": True,
            "discovery_label_values": True,
            "delta_polling": True,
            "per_signal_retention": True,
            "declarative_retention": True,
            "partitioning": "day",
            "partition_drop_retention": True,
            "idempotent_schema_init": True,
            "theme_analysis": False,
        },
    ),
    (
        query_pb2.HealthStatus,
        {
            "status": "degraded",
            "version": "0.1.0",
            "spec_version": "v1",
            "uptime_seconds": 18446744073709551615,
            "detail": "storage slow",
            "signup": False,
        },
    ),
    (
        telemetry_pb2.IngestBatch,
        {
            "spans": [],
            "logs": [],
            "metrics": [],
            "scores": [],
            "feedback": [],
            "aspect_notes": [],
            "ingest_key": "batch-1",
        },
    ),
    (
        runs_pb2.Run,
        {
            "run_id": "run_1",
            "project": "default",
            "definition_id": "triage",
            "definition_version": 3,
            "status": "running",
            "input": {"ticket": 42},
            "state": {},
            "trace_id": "4bf92f3577b34da6a3ce929d0e0e4736",
            "steps_used": 2,
            "max_steps": 50,
            "cost_usd": 0.0125,
            "root_run_id": "run_1",
            "depth": 0,
            "created_at": "2026-04-29T18:42:31.000Z",
        },
    ),
]


@pytest.mark.parametrize(
    ("message_type", "document"), SPEC_DOCUMENTS, ids=lambda x: getattr(x, "__name__", "")
)
def test_spec_documents_decode_and_encode_back_identically(
    message_type: type[Any], document: dict[str, Any]
) -> None:
    message = codec.decode(document, message_type)
    assert codec.encode(message) == document


def test_decoded_values_land_in_the_right_fields() -> None:
    span = codec.decode(SPEC_DOCUMENTS[0][1], telemetry_pb2.Span)
    assert span.kind == enums_pb2.SPAN_KIND_TOOL_CALL
    assert span.status == enums_pb2.SPAN_STATUS_OK
    assert span.start_time.seconds == 1_777_488_151
    assert span.start_time.nanos == 125_000_000
    assert span.duration_ns == 875_000_000
    assert span.input.struct_value["k"] == 5
    assert span.usage.input_tokens == 1200
    assert not span.HasField("parent_span_id")
    assert not span.HasField("cost")
