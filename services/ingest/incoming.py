"""What reaches the ingest pipeline from a receiver (native Ingest or OTLP), before any check.

Receivers turn what they were sent into rows (`mcpd.signals.rows`) and pair each row with its
position in the sender's array, so an IngestError can name the record the sender knows. A
record a receiver could not even turn into a row (an OTLP span with a 3-byte trace id, say) is
refused there, with its error, and never becomes a row.

`project` on a row is what the sender asked for: '' means "the caller's own project". The
pipeline resolves it against the caller's access (`mcpd.auth.policy.resolve_project`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from mcpd.model.v1 import enums_pb2, telemetry_pb2
from mcpd.runtime.errors import MAX_MESSAGE_LENGTH, shortened
from mcpd.signals.rows import AspectNoteRow, FeedbackRow, LogRow, MetricRow, ScoreRow, SpanRow


@dataclass(slots=True)
class IncomingBatch:
    """Rows by signal, each with its index in the sender's array; refusals made on the way."""

    spans: list[tuple[int, SpanRow]] = field(default_factory=list)
    logs: list[tuple[int, LogRow]] = field(default_factory=list)
    metrics: list[tuple[int, MetricRow]] = field(default_factory=list)
    scores: list[tuple[int, ScoreRow]] = field(default_factory=list)
    feedback: list[tuple[int, FeedbackRow]] = field(default_factory=list)
    aspect_notes: list[tuple[int, AspectNoteRow]] = field(default_factory=list)
    refused: list[telemetry_pb2.IngestError] = field(default_factory=list)
    ingest_key: str | None = None


def refusal(
    signal: enums_pb2.SignalType.ValueType, index: int, reason: Exception
) -> telemetry_pb2.IngestError:
    """The IngestError saying record `index` of `signal` was refused for `reason`, its message
    no longer than any error's (`mcpd.runtime.errors`)."""
    return telemetry_pb2.IngestError(
        signal=signal, index=index, message=shortened(str(reason), MAX_MESSAGE_LENGTH)
    )
