"""Checks shared by the trace detail tests: the store's rendered TraceDetail against the codec's
encoding of the same records."""

from __future__ import annotations

from typing import Any

import orjson

from mcpd import codec
from mcpd.model.v1 import query_pb2
from mcpd.signals import messages
from mcpd.signals.batch import TraceRecords


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


def rendered_and_encoded(
    store: Any, project: str, trace_id: str, include: bool = True
) -> tuple[Any, Any]:
    """The store's rendered detail and the codec's encoding of its records, both parsed."""
    wanted = {"logs": include, "scores": include, "feedback": include}
    body = store.trace_detail_json(project, trace_id, **wanted)
    records = store.trace_records(project, trace_id, **wanted)
    assert body is not None
    assert records is not None
    return as_doubles(orjson.loads(body)), as_doubles(codec_json(records))
