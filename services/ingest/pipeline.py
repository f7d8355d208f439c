"""The ingest pipeline: from what a receiver was sent to what the store holds.

One path for every receiver (native Ingest, CreateScore/CreateFeedback, OTLP over gRPC and
HTTP), in this order for each record:

1. resolve `correlation.project` against the caller's access (a record for a project the key
   does not reach is refused, never written elsewhere);
2. validate and normalise (`validation`); a note must name an enabled aspect of its
   project, at a stored version (`mcpd.aspects`);
3. redact every payload field and hash identities with the project's rules (`policies`); a
   note's wording is sketched after (`mcpd.themes`), under the deployment's sketch key;
4. hold the record to the per-record limits (`limits`): past them payloads are truncated and
   excess attributes, events and links dropped, after redaction so no cut splits a secret;
5. price spans and scores that carry usage but no producer cost;
6. sample spans by the project's policy: kept, dropped (still counted as accepted: the
   sender did nothing wrong) or held durably for tail sampling.

What survives is one SignalBatch, written through the group-commit writer; the result is
returned only once it is durable. Per-record work runs in a worker thread: it may read
policies and facet counts from storage, and keeps the event loop free for other requests.
Receivers hold `admit` around all of it, from before they map a request (`admission`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from functools import partial
from typing import Any, TypeAlias

from mcpd.auth.policy import resolve_project
from mcpd.auth.principal import Principal, PrincipalKind, current_principal
from mcpd.model.v1 import enums_pb2, telemetry_pb2
from mcpd.runtime.clock import Clock, epoch_nanos
from mcpd.runtime.errors import McpdError
from mcpd.signals.batch import SignalBatch
from mcpd.storage.aspect_records import AspectRecord
from mcpd.themes import encode, sketch_of
from services.ingest import validation
from services.ingest.admission import Admission
from services.ingest.incoming import IncomingBatch, refusal
from services.ingest.limits import RecordLimits
from services.ingest.policies import ProjectPolicies, ProjectPolicy
from services.ingest.tail import TailSampler
from services.ingest.writer import BatchWriter

Signal: TypeAlias = enums_pb2.SignalType.ValueType
Handler = Callable[[SignalBatch, ProjectPolicy, Any], None]


@dataclass(slots=True)
class Prepared:
    """What `IngestPipeline.prepare` made of a batch: the rows to write, the refusals, how many
    records were valid and the projects they go to."""

    batch: SignalBatch
    errors: list[telemetry_pb2.IngestError]
    valid: int = 0
    projects: set[str] = field(default_factory=set)
    # Why the pipeline refused records, in `errors`' order after the receiver's refusals: each
    # names the field at fault.
    reasons: list[McpdError] = field(default_factory=list)


class IngestPipeline:
    """Accepts IncomingBatches for the current principal (see the module docstring)."""

    def __init__(
        self,
        *,
        policies: ProjectPolicies,
        writer: BatchWriter,
        clock: Clock,
        tail: TailSampler,
        label_values_seen: Callable[[str, str], int],
        aspects: Callable[[str], Mapping[str, AspectRecord]],
        sketch_key: bytes,
        limits: RecordLimits,
        admission: Admission,
    ) -> None:
        self._admission = admission
        self._aspects = aspects
        self._sketch_key = sketch_key
        self._policies = policies
        self._writer = writer
        self._clock = clock
        self._tail = tail
        self._limits = limits
        self._label_values_seen = label_values_seen

    def admit(self, size: int) -> AbstractContextManager[None]:
        """Take on a request of `size` bytes (as received) for the block, or refuse it at once
        with ResourceExhausted when this process holds as much as it may."""
        return self._admission.admit(size)

    async def ingest(self, incoming: IncomingBatch) -> telemetry_pb2.IngestResult:
        """Validate, prepare and durably store `incoming`; say what became of every record."""
        principal = current_principal()
        prepared = await asyncio.to_thread(self.prepare, incoming, principal)
        return await self._store(prepared)

    async def ingest_one(self, incoming: IncomingBatch) -> None:
        """Store `incoming`, a batch of one record, durably; its refusal, naming the field at
        fault, is raised as the call's error (a write of one score or one piece of feedback)."""
        prepared = await asyncio.to_thread(self.prepare, incoming, current_principal())
        if prepared.reasons:
            raise prepared.reasons[0]
        await self._store(prepared)

    async def _store(self, prepared: Prepared) -> telemetry_pb2.IngestResult:
        result = telemetry_pb2.IngestResult(
            rejected=len(prepared.errors), errors=sorted(prepared.errors, key=_error_order)
        )
        if prepared.batch.record_count() == 0:
            result.accepted = prepared.valid
            return result
        stored = await self._writer.write(prepared.batch)
        if stored:
            result.accepted = prepared.valid
        else:
            result.duplicate = prepared.valid
        return result

    def prepare(self, incoming: IncomingBatch, principal: Principal) -> Prepared:
        """The blocking half of `ingest`: validate, redact, limit, price and sample `incoming` for
        `principal`; the batch to write and the refusals. Run it in a worker thread."""
        now = _nanos(self._clock)
        batch = SignalBatch(key_project="", ingest_key=incoming.ingest_key, received_at=now)
        prepared = Prepared(batch, list(incoming.refused))
        score = partial(self._score, from_service=principal.kind is PrincipalKind.SERVICE)
        steps: list[tuple[Signal, list[tuple[int, Any]], Handler]] = [
            (enums_pb2.SIGNAL_TYPE_SPAN, incoming.spans, self._span),
            (enums_pb2.SIGNAL_TYPE_LOG, list(incoming.logs), self._log),
            (enums_pb2.SIGNAL_TYPE_METRIC, list(incoming.metrics), self._metric),
            (enums_pb2.SIGNAL_TYPE_SCORE, list(incoming.scores), score),
            (enums_pb2.SIGNAL_TYPE_FEEDBACK, list(incoming.feedback), self._feedback),
            (enums_pb2.SIGNAL_TYPE_ASPECT_NOTE, list(incoming.aspect_notes), self._note),
        ]
        for signal, rows, handle in steps:
            self._each(prepared, principal, signal, rows, handle)
        # The key is scoped to a project the batch writes to, chosen so a replay of the same
        # batch by the same caller picks the same one.
        batch.key_project = min(prepared.projects) if prepared.projects else ""
        return prepared

    def _each(
        self,
        prepared: Prepared,
        principal: Principal,
        signal: Signal,
        rows: list[tuple[int, Any]],
        handle: Handler,
    ) -> None:
        for index, row in rows:
            try:
                project = resolve_project(principal, row.get("project") or "")
                row["project"] = project
                policy = self._policies.get(project)
                handle(prepared.batch, policy, row)
            except McpdError as reason:
                prepared.errors.append(refusal(signal, index, reason))
                prepared.reasons.append(reason)
                continue
            prepared.valid += 1
            prepared.projects.add(project)

    def _span(self, batch: SignalBatch, policy: ProjectPolicy, row: Any) -> None:
        validation.check_span(row)
        policy.redact("span", row)
        self._limits.fit_span(row)
        policy.price(row)
        row["received_at"] = batch.received_at
        row["ingest_key"] = batch.ingest_key
        sampling = policy.sampling
        if sampling.is_tail:
            decided = self._tail.decided(row["project"], row["trace_id"])
            if decided is None:
                batch.held_spans.append(row)
            elif decided:
                batch.spans.append(row)
        elif sampling.decide(row["trace_id"]):
            batch.spans.append(row)

    def _log(self, batch: SignalBatch, policy: ProjectPolicy, row: Any) -> None:
        validation.check_log(row)
        policy.redact("log", row)
        self._limits.fit_log(row)
        row["received_at"] = batch.received_at
        batch.logs.append(row)

    def _metric(self, batch: SignalBatch, policy: ProjectPolicy, row: Any) -> None:
        project = row["project"]
        validation.check_metric(row, lambda key: self._label_values_seen(project, key))
        policy.redact("metric", row)
        row["received_at"] = batch.received_at
        batch.metrics.append(row)

    def _score(
        self, batch: SignalBatch, policy: ProjectPolicy, row: Any, *, from_service: bool = False
    ) -> None:
        validation.check_score(row, from_service=from_service)
        policy.redact("score", row)
        self._limits.fit_score(row)
        policy.price(row)
        row["received_at"] = batch.received_at
        batch.scores.append(row)

    def _feedback(self, batch: SignalBatch, policy: ProjectPolicy, row: Any) -> None:
        validation.check_feedback(row)
        policy.redact("feedback", row)
        self._limits.fit_feedback(row)
        row["received_at"] = batch.received_at
        batch.feedback.append(row)

    def _note(self, batch: SignalBatch, policy: ProjectPolicy, row: Any) -> None:
        validation.check_aspect_note(row, self._aspects(row["project"]))
        policy.redact("aspect_note", row)
        self._limits.fit_note(row)
        # The sketch of the text as stored: what the clustering pass compares.
        row["sketch"] = encode(sketch_of(row["text"], self._sketch_key))
        row["received_at"] = batch.received_at
        batch.aspect_notes.append(row)


def _nanos(clock: Clock) -> int:
    return epoch_nanos(clock.now())


def _error_order(error: telemetry_pb2.IngestError) -> tuple[int, int]:
    return (error.signal, error.index)
