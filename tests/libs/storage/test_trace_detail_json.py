"""`TraceStore.trace_detail_json` is exactly the codec's JSON of the TraceDetail message of
`trace_records`: on every backend for spans ingested through `messages.span_row` with every
field and payload shape, and on the SQL stores for spans stored before they rendered each span's
head (`mcpd.signals.documents`). test_query_store_detail.py checks the behaviour suite's data."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import orjson
import pytest
from google.protobuf import struct_pb2
from sqlalchemy import text

from mcpd import codec
from mcpd.model.v1 import enums_pb2, telemetry_pb2
from mcpd.signals import documents, messages
from mcpd.signals.batch import SignalBatch
from tests.libs.storage.detail_checks import rendered_and_encoded
from tests.libs.storage.helpers import Migrated, OpenedStore

T0 = 1_793_491_200_123_456_789
TRACE = "0af7651916cd43dd8448eb211c80319c"


def value(document: Any) -> struct_pb2.Value:
    return messages.value_of(document)


def ingested_spans() -> list[telemetry_pb2.Span]:
    """Spans as a producer sends them: every optional field set on the root, none on the last,
    payloads of every JSON shape (the numbers a Value can hold included)."""
    correlation = telemetry_pb2.Correlation(
        project="p", environment="prod", service_name="api", session_id="s-1", user_id="u-hash"
    )
    root = telemetry_pb2.Span(
        trace_id=TRACE,
        span_id="a" * 16,
        external_parent_span_id="e" * 16,
        name="agent turn",
        kind=enums_pb2.SPAN_KIND_AGENT_RUN,
        status=enums_pb2.SPAN_STATUS_OK,
        is_root=True,
        entity_id="agent-1",
        entity_name="support",
        input=value({"messages": [{"role": "user", "content": "Où est ma commande ? 📦"}]}),
        output=value("It ships tomorrow."),
        attributes=value({"int": 42, "big": 2.0**60, "neg": -1.5e-7, "flags": [True, None]}),
        metadata=value([]),
        usage=telemetry_pb2.TokenUsage(
            input_tokens=120,
            output_tokens=30,
            total_tokens=150,
            input_details=telemetry_pb2.InputTokenDetails(cache_read=20, cache_write_5m=3),
            output_details=telemetry_pb2.OutputTokenDetails(reasoning=5),
        ),
        cost=telemetry_pb2.Cost(
            currency="USD", input_cost=0.0012, total_cost=0.5, price_book="pb-1", is_estimated=True
        ),
        model_parameters=telemetry_pb2.ModelParameters(temperature=0.2, stop_sequences=["END"]),
        error=telemetry_pb2.SpanError(message="retried once"),
        links=[telemetry_pb2.SpanLink(trace_id="1" * 32, span_id="2" * 16)],
        tags=["vip", "eu"],
        correlation=correlation,
        model="gpt-4o",
        provider="openai",
        ingest_key="k-1",
    )
    root.start_time.FromNanoseconds(T0)
    root.end_time.FromNanoseconds(T0 + 1_500_000)
    root.duration_ns = 1_500_000
    root.received_at.FromNanoseconds(T0 + 9_000_000)
    child = telemetry_pb2.Span(
        trace_id=TRACE,
        span_id="b" * 16,
        parent_span_id="a" * 16,
        kind=enums_pb2.SPAN_KIND_MODEL_GENERATION,
        status=enums_pb2.SPAN_STATUS_ERROR,
        input=value({}),
        output=value(0),
        cost=telemetry_pb2.Cost(currency="USD"),
        correlation=telemetry_pb2.Correlation(project="p"),
    )
    child.start_time.FromNanoseconds(T0 + 10)
    child.received_at.FromNanoseconds(T0 + 9_000_000)
    return [root, child]


def test_ingested_spans_render_as_the_codec_encodes_them(
    migrated_trace_store: OpenedStore,
) -> None:
    store = migrated_trace_store.store
    rows = [messages.span_row(span) for span in ingested_spans()]
    batch = SignalBatch(key_project="p", ingest_key=None, received_at=T0 + 9_000_000, spans=rows)
    assert store.write_batches([batch]) == [True]

    rendered, encoded = rendered_and_encoded(store, "p", TRACE)

    assert rendered == encoded
    root = rendered["spans"][0]
    assert root["start_time"] == "2026-11-01T00:00:00.123Z"
    assert root["attributes"] == {"int": 42, "big": 2.0**60, "neg": -1.5e-7, "flags": [True, None]}
    assert isinstance(root["attributes"]["int"], int)
    assert root["usage"]["input_details"] == {"cache_read": 20, "cache_write_5m": 3}
    assert root["metadata"] == []
    assert rendered["spans"][1]["input"] == {}
    assert rendered["spans"][1]["cost"] == {"currency": "USD", "is_estimated": False}
    assert rendered["logs"] == rendered["scores"] == rendered["feedback"] == []


def write_nan_span(store: Any) -> None:
    row = messages.span_row(ingested_spans()[1])
    row["attributes"] = {"ratio": float("nan"), "ok": 1}
    batch = SignalBatch(key_project="p", ingest_key=None, received_at=T0 + 9_000_000, spans=[row])
    assert store.write_batches([batch]) == [True]


@pytest.fixture
def sql_store(backend: str, migrated: Migrated) -> Iterator[OpenedStore]:
    """A migrated trace store on each SQL backend (only they keep a rendered head per span)."""
    opened = migrated.open("trace", backend)
    try:
        yield opened
    finally:
        opened.store.close()


def test_spans_stored_before_the_rendered_head_render_alike(sql_store: OpenedStore) -> None:
    store = sql_store.store
    rows = [messages.span_row(span) for span in ingested_spans()]
    batch = SignalBatch(key_project="p", ingest_key=None, received_at=T0 + 9_000_000, spans=rows)
    assert store.write_batches([batch]) == [True]
    fresh = orjson.loads(
        store.trace_detail_json("p", TRACE, logs=False, scores=False, feedback=False)
    )
    assert sql_store.engine is not None
    with sql_store.engine.begin() as conn:
        conn.execute(
            text("UPDATE spans SET head_json = NULL WHERE span_id = :id"), {"id": "b" * 16}
        )

    old = orjson.loads(
        store.trace_detail_json("p", TRACE, logs=False, scores=False, feedback=False)
    )

    assert old == fresh
    rendered, encoded = rendered_and_encoded(store, "p", TRACE, include=False)
    assert rendered == encoded


def test_a_payload_with_a_non_finite_number_still_renders_as_json(migrated: Migrated) -> None:
    # SQLite stores a NaN inside a payload as the serializer writes it (the token NaN). JSON has
    # no spelling for it: the detail carries null there and still parses.
    opened = migrated.open("trace", "sqlite")
    store = opened.store
    write_nan_span(store)

    body = store.trace_detail_json("p", TRACE, logs=False, scores=False, feedback=False)

    assert body is not None
    assert orjson.loads(body)["spans"][0]["attributes"] == {"ratio": None, "ok": 1}
    store.close()


def test_a_row_missing_fields_the_codec_always_writes_still_renders_them() -> None:
    # A row loaded outside ingest (an older release, a bulk load) may store a nested message
    # without its always-written fields; the rendering completes them as the codec would.
    row: Any = {
        "project": "p",
        "trace_id": TRACE,
        "span_id": "c" * 16,
        "kind": "model_generation",
        "status": "ok",
        "start_time": T0,
        "model_parameters": {"temperature": 0.5},
        "error": {"message": "boom"},
        "links": [{"trace_id": "1" * 32, "span_id": "2" * 16}],
    }

    document = documents.span_document(row)

    assert document == codec.encode(messages.span_message(row))
    assert document["model_parameters"]["stop_sequences"] == []
    assert document["links"][0] == codec.encode(
        telemetry_pb2.SpanLink(trace_id="1" * 32, span_id="2" * 16)
    )


def test_nul_characters_render_as_the_stored_text_holds_them(
    migrated_trace_store: OpenedStore,
) -> None:
    # Text columns replace NUL with U+FFFD (PostgreSQL's text cannot hold it): the rendered head
    # must say what the row reads back, not what was sent.
    store = migrated_trace_store.store
    span = ingested_spans()[1]
    span.name = "tool\x00call"
    span.model = "m\x00"
    span.attributes.CopyFrom(value({"k\x00": "v\x00"}))
    batch = SignalBatch(
        key_project="p", ingest_key=None, received_at=T0, spans=[messages.span_row(span)]
    )
    assert store.write_batches([batch]) == [True]

    rendered, encoded = rendered_and_encoded(store, "p", TRACE)

    assert rendered == encoded
    assert rendered["spans"][0]["name"] == "tool\ufffdcall"
    assert rendered["spans"][0]["model"] == "m\ufffd"
