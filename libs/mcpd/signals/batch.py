"""What ingest hands the trace store: one accepted batch, ready to be written atomically."""

from __future__ import annotations

from dataclasses import dataclass, field

from mcpd.signals.rows import (
    AspectNoteRow,
    FeedbackRow,
    LogRow,
    MetricRow,
    ScoreRow,
    SpanRow,
    TraceRow,
)


@dataclass(slots=True)
class SignalBatch:
    """The records of one ingest request that passed validation, redaction, pricing and sampling.

    `ingest_key`, when set, is scoped to `key_project` (the project of the caller that sent the
    batch): a store that already holds the key writes nothing of the batch and reports it as a
    replay. `held_spans` are spans a tail-sampling project keeps out of `spans` until their trace
    completes; they are written durably (to the store's holding table) in the same transaction,
    so nothing acknowledged lives only in memory.
    """

    key_project: str
    ingest_key: str | None
    received_at: int
    spans: list[SpanRow] = field(default_factory=list)
    logs: list[LogRow] = field(default_factory=list)
    metrics: list[MetricRow] = field(default_factory=list)
    scores: list[ScoreRow] = field(default_factory=list)
    feedback: list[FeedbackRow] = field(default_factory=list)
    aspect_notes: list[AspectNoteRow] = field(default_factory=list)
    held_spans: list[SpanRow] = field(default_factory=list)

    def record_count(self) -> int:
        """Every record of the batch, held spans included."""
        return (
            len(self.spans)
            + len(self.logs)
            + len(self.metrics)
            + len(self.scores)
            + len(self.feedback)
            + len(self.aspect_notes)
            + len(self.held_spans)
        )


@dataclass(frozen=True, slots=True)
class HeldTrace:
    """What tail sampling needs to decide one held trace, summarised from its held spans."""

    project: str
    trace_id: str
    first_received_at: int
    span_count: int
    error_count: int
    # The root span's times, when the root has arrived; end is None while it runs.
    root_start_time: int | None
    root_end_time: int | None
    # Held non-event spans without an end time.
    open_count: int


@dataclass(frozen=True, slots=True)
class TraceRecords:
    """One trace as stored: its projection row and what hangs off it, in read order.

    `spans` are ordered by start time, then by depth in the tree (a parent before a child that
    starts at the same instant), then span id; logs by timestamp; scores and feedback by
    timestamp.
    """

    trace: TraceRow
    spans: list[SpanRow]
    logs: list[LogRow]
    scores: list[ScoreRow]
    feedback: list[FeedbackRow]


@dataclass(frozen=True, slots=True)
class IngestLag:
    """Records accepted by ingest but not yet written, and how long the oldest has waited."""

    pending_records: int
    oldest_age_s: float
