"""Rows straight to the spec's JSON, for the one read too large to go through messages.

A trace of 2,000 spans is megabytes of JSON. Built as `Span` messages (`messages.span_message`)
and encoded field by field (`mcpd.codec.encode`), every JSON payload is walked twice in Python
(document -> `google.protobuf.Value` -> document), which dominates the read. Here a
span row becomes the very dict `codec.encode(span_message(row))` gives, its payloads passed
through as the documents the store decoded, and orjson writes the whole TraceDetail in one
call. The trace row, logs, scores and feedback (a handful of records) still go through the
codec; the rules for times and enum spellings are the codec's (`nanos_to_json`, spec names as
the rows store them). Tests hold `span_document(row) == codec.encode(span_message(row))` for
every kind of span the behaviour suite stores, on every backend.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any, cast

import orjson

from mcpd.codec import encode, nanos_to_json
from mcpd.model.v1.telemetry_pb2 import ModelParameters, SpanError, SpanLink
from mcpd.signals import messages
from mcpd.signals.batch import TraceRecords
from mcpd.signals.rows import SpanRow

_USAGE_TOTALS = ("input_tokens", "output_tokens", "total_tokens")
_COST_AMOUNTS = ("input_cost", "output_cost", "total_cost")


PAYLOADS = ("input", "output", "attributes", "metadata")
"""A span's JSON payloads: the bulk of its bytes, passed through as stored where they can be."""


def trace_detail_json(records: TraceRecords) -> bytes:
    """The spec's JSON of the TraceDetail of `records` (what `GET /v1/api/traces/{id}` serves)."""
    return detail_json(records, [span_document(row) for row in records.spans])


def detail_json(records: TraceRecords, spans: list[dict[str, Any]] | orjson.Fragment) -> bytes:
    """The TraceDetail of `records` with `spans` in its place: span documents, or the spans'
    array already rendered (`stored_spans_json`). `records.spans` is not read."""
    return orjson.dumps(
        {
            "trace": encode(messages.trace_message(records.trace)),
            "spans": spans,
            "logs": [encode(messages.log_message(row)) for row in records.logs],
            "scores": [encode(messages.score_message(row)) for row in records.scores],
            "feedback": [encode(messages.feedback_message(row)) for row in records.feedback],
        }
    )


def span_document(row: SpanRow) -> dict[str, Any]:
    """`codec.encode(messages.span_message(row))`, without building the message: optional fields
    only when present, repeated ones always (the payloads come last, not in declaration order:
    JSON objects have none)."""
    document = span_head(row)
    get = cast(Mapping[str, Any], row).get
    for name in PAYLOADS:
        value = get(name)
        if value is not None:
            document[name] = value
    return document


def span_head(row: SpanRow) -> dict[str, Any]:
    """`span_document(row)` without the payloads: what the SQL stores keep rendered beside each
    span (the `head_json` column), so a trace's detail is put together from text."""
    get = cast(Mapping[str, Any], row).get
    document: dict[str, Any] = {"trace_id": row["trace_id"], "span_id": row["span_id"]}
    _put(document, "parent_span_id", get("parent_span_id"))
    _put(document, "external_parent_span_id", get("external_parent_span_id"))
    document["name"] = get("name") or ""
    _put(document, "kind", get("kind"))
    _put(document, "status", get("status"))
    _put_time(document, "start_time", get("start_time"))
    _put_time(document, "end_time", get("end_time"))
    _put(document, "duration_ns", get("duration_ns"))
    document["is_root"] = bool(get("is_root"))
    document["is_event"] = bool(get("is_event"))
    _put(document, "entity_kind", get("entity_kind"))
    _put(document, "entity_id", get("entity_id"))
    _put(document, "entity_name", get("entity_name"))
    _put(document, "usage", _usage(row))
    _put(document, "cost", _cost(row))
    _put(document, "model_parameters", _complete(get("model_parameters"), _MODEL_PARAMETERS))
    _put(document, "error", _complete(get("error"), _ERROR))
    document["links"] = [_complete(link, _LINK) for link in get("links") or ()]
    document["tags"] = get("tags") or []
    document["correlation"] = _correlation(row)
    _put(document, "model", get("model"))
    _put(document, "provider", get("provider"))
    _put_time(document, "received_at", get("received_at"))
    _put(document, "ingest_key", get("ingest_key"))
    return document


def stored_spans_json(stored: Sequence[Sequence[str | None]]) -> orjson.Fragment:
    """The JSON array of spans stored as (head, then the payload texts in `PAYLOADS` order, None
    when absent), spliced without parsing any of them."""
    body = "[" + ",".join([_span_text(span, _as_stored) for span in stored]) + "]"
    if "NaN" in body or "Infinity" in body:  # rare (or just such words in a string): recheck
        body = "[" + ",".join([_span_text(span, _standard_json) for span in stored]) + "]"
    return orjson.Fragment(body)


def _span_text(span: Sequence[str | None], payload: Callable[[str], str]) -> str:
    head = span[0]
    assert head is not None
    parts = [head[:-1]]
    for name, text in zip(PAYLOADS, span[1:], strict=True):
        if text is not None:
            parts.append(f',"{name}":{payload(text)}')
    parts.append("}")
    return "".join(parts)


def _as_stored(text: str) -> str:
    return text


def _standard_json(text: str) -> str:
    # The stores' serializer writes a non-finite number as NaN or Infinity, which JSON has no
    # spelling for; such a document is re-encoded (those numbers become null), the rest passes.
    if "NaN" not in text and "Infinity" not in text:
        return text
    return orjson.dumps(json.loads(text)).decode()


# What the codec always writes for these messages (their non-optional fields, at zero).
_MODEL_PARAMETERS = encode(ModelParameters())
_ERROR = encode(SpanError())
_LINK = encode(SpanLink())


def _complete(stored: dict[str, Any] | None, always: dict[str, Any]) -> dict[str, Any] | None:
    # Ingest stores these as the codec's JSON of the message, but a row written another way
    # (an older release, a bulk load) may leave out a field the codec always writes.
    return None if stored is None else {**always, **stored}


def _put(document: dict[str, Any], name: str, value: Any) -> None:
    if value is not None:
        document[name] = value


def _put_time(document: dict[str, Any], name: str, nanos: int | None) -> None:
    if nanos is not None:
        document[name] = nanos_to_json(nanos, name)


def _correlation(row: SpanRow) -> dict[str, Any]:
    correlation: dict[str, Any] = {"project": row.get("project") or ""}
    for name in messages.CORRELATION_FIELDS:
        value = row.get(name)
        if value is not None:
            correlation[name] = value
    return correlation


def _usage(row: SpanRow) -> dict[str, Any] | None:
    get = cast(Mapping[str, Any], row).get
    usage = {name: get(name) for name in _USAGE_TOTALS if get(name) is not None}
    details = get("usage_details") or {}
    _put(usage, "input_details", details.get("input") or None)
    _put(usage, "output_details", details.get("output") or None)
    return usage or None


def _cost(row: SpanRow) -> dict[str, Any] | None:
    get = cast(Mapping[str, Any], row).get
    amounts = {name: float(amount) for name in _COST_AMOUNTS if (amount := get(name)) is not None}
    currency = get("cost_currency")
    estimated = get("cost_is_estimated")
    price_book = row.get("cost_price_book")
    if not amounts and currency is None and estimated is None and price_book is None:
        return None
    cost: dict[str, Any] = {"currency": currency or "", **amounts}
    _put(cost, "price_book", price_book)
    cost["is_estimated"] = bool(estimated)
    return cost
