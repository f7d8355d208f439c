"""The TraceDetail JSON rendered from rows (`mcpd.signals.documents`) is exactly the codec's JSON
of the TraceDetail message, for what each backend reads back: spans ingested through
`messages.span_row` with every field and payload shape, and the behaviour suite's dataset."""

from __future__ import annotations

from typing import Any

import orjson
import pytest
from google.protobuf import struct_pb2

from mcpd import codec
from mcpd.model.v1 import enums_pb2, query_pb2, telemetry_pb2
from mcpd.signals import documents, messages
from mcpd.signals.batch import SignalBatch, TraceRecords
from mcpd.signals.queries import TraceQuery
from tests.libs.storage import query_data
from tests.libs.storage.helpers import OpenedStore

T0 = 1_793_491_200_123_456_789
TRACE = "0af7651916cd43dd8448eb211c80319c"

# The behaviour suite's dataset in a migrated store per backend (read only here).
store = query_data.loaded


def codec_json(records: TraceRecords) -> Any:
    """What `GET /v1/api/traces/{id}` answered before: the codec's JSON of the message."""
    return codec.encode(
        query_pb2.TraceDetail(
            trace=messages.trace_message(records.trace),
            spans=[messages.span_message(row) for row in records.spans],
            logs=[messages.log_message(row) for row in records.logs],
            scores=[messages.score_message(row) for row in records.scores],
            feedback=[messages.feedback_message(row) for row in records.feedback],
        )
    )


def as_doubles(document: Any) -> Any:
    """`document` with every integer too large for a double to hold exactly made a double.

    A payload number is a double (google.protobuf.Value): 2**60 sent by a producer comes back
    from PostgreSQL's jsonb as the integer 1152921504606847000, which the codec's path writes as
    1.152921504606847e+18 and the rendered path as it was read. Both are the same double to any
    JSON reader; only Python's exact int/float comparison tells them apart."""
    if isinstance(document, dict):
        return {key: as_doubles(item) for key, item in document.items()}
    if isinstance(document, list):
        return [as_doubles(item) for item in document]
    if isinstance(document, int) and not isinstance(document, bool) and abs(document) >= 2**53:
        return float(document)
    return document


def rendered_and_encoded(records: TraceRecords) -> tuple[Any, Any]:
    return as_doubles(orjson.loads(documents.trace_detail_json(records))), as_doubles(
        codec_json(records)
    )


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


def test_ingested_spans_render_as_the_codec_encodes_them(trace_store: OpenedStore) -> None:
    store = trace_store.store
    store.migrate()
    rows = [messages.span_row(span) for span in ingested_spans()]
    batch = SignalBatch(key_project="p", ingest_key=None, received_at=T0 + 9_000_000, spans=rows)
    assert store.write_batches([batch]) == [True]

    records = store.trace_records("p", TRACE, logs=True, scores=True, feedback=True)

    assert records is not None
    rendered, encoded = rendered_and_encoded(records)
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


@pytest.mark.parametrize("include", [False, True])
def test_every_trace_of_the_dataset_renders_as_the_codec_encodes_it(
    store: Any, include: bool
) -> None:
    traces = store.list_traces(query_data.P, TraceQuery()).rows
    assert len(traces) == 6
    for trace in traces:
        records = store.trace_records(
            query_data.P, trace["trace_id"], logs=include, scores=include, feedback=include
        )
        assert records is not None
        rendered, encoded = rendered_and_encoded(records)
        assert rendered == encoded


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
