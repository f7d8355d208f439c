"""The ingest role's parts, built once per process: policies, the aspects notes are checked
against, writer, tail sampler, pipeline, and the sessions of ingested traces (`TraceSessions`,
written with every write of spans).

Every server process of `mcpd serve` builds the same role; only the primary sweeps held traces
(`sweep_tail`), so each trace is decided once.

Order matters on the way out: the writer and the tail sampler are registered on the exit stack
BEFORE the gRPC servers that feed them, so shutdown drains the servers first (no new batch
arrives), then the sampler stops, then the writer commits what is queued.
"""

from __future__ import annotations

import asyncio
from contextlib import AsyncExitStack
from dataclasses import dataclass

from cli.projects import apply_projects, load_projects_file
from mcpd.aspects import open_catalogues
from mcpd.pricing import load_price_book
from mcpd.redaction import load_or_create_key
from mcpd.runtime.clock import Clock
from mcpd.runtime.config import Settings
from mcpd.runtime.server import ServiceRegistration
from mcpd.signals.batch import IngestLag
from mcpd.storage import Stores
from mcpd.themes import deployment_key
from services.ingest import (
    Admission,
    BatchWriter,
    IngestPipeline,
    LabelCardinality,
    ProjectPolicies,
    RecordLimits,
    TailSampler,
    TraceSessions,
    TranscriptImports,
    registrations,
)
from services.ingest.otlp import otlp_registrations

REDACTION_KEY_FILE = "redaction.key"


@dataclass(frozen=True, slots=True)
class IngestRole:
    """The running ingest role: its gRPC services and its lag."""

    pipeline: IngestPipeline
    writer: BatchWriter
    policies: ProjectPolicies
    # The sessions of the traces this process writes.
    sessions: TraceSessions
    tail: TailSampler
    transcripts: TranscriptImports

    def registrations(self, clock: Clock) -> list[ServiceRegistration]:
        """Native IngestService plus the OTLP collector services."""
        return [
            *registrations(self.pipeline, clock, self.transcripts),
            *self.otlp_registrations(),
        ]

    def otlp_registrations(self) -> list[ServiceRegistration]:
        """The OTLP collector services alone (the OTLP/gRPC port serves only these)."""
        return otlp_registrations(self.pipeline)

    def lag(self) -> IngestLag:
        """Records waiting for storage in this process, and the oldest one's age."""
        return self.writer.lag()


def redaction_key(settings: Settings) -> bytes:
    """The server's redaction key (created on first use): ingest hashes identities with it,
    and the query role hashes a `user_id` filter or erasure subject the same way."""
    return load_or_create_key(
        settings.ingest.redaction_key_file or settings.data_dir / REDACTION_KEY_FILE
    )


def sketch_key(settings: Settings) -> bytes:
    """The key notes' wording is sketched under, derived from the redaction key: every process
    of a deployment shares that key, so every one sketches alike."""
    return deployment_key(redaction_key(settings))


def project_policies(settings: Settings, stores: Stores, clock: Clock) -> ProjectPolicies:
    """Every project's ingest policy: `ingest.projects_file` (when set) written to the control
    store, which policies are then read from, with the server's redaction key (created on first
    use). Blocking."""
    if settings.ingest.projects_file is not None:
        apply_projects(stores.control, load_projects_file(settings.ingest.projects_file))
    return ProjectPolicies(
        stores.control,
        key=redaction_key(settings),
        book=load_price_book(),
        monotonic=clock.monotonic,
        ttl_s=settings.ingest.policy_ttl_s,
    )


async def start_ingest(
    stack: AsyncExitStack,
    settings: Settings,
    stores: Stores,
    clock: Clock,
    *,
    sweep_tail: bool = True,
) -> IngestRole:
    """Build the ingest role and register its shutdown on `stack`; `sweep_tail` False leaves
    held traces to another process (see the module docstring)."""
    ingest = settings.ingest
    policies = await asyncio.to_thread(project_policies, settings, stores, clock)
    # Notes are checked against their project's aspects, which are read as policies are.
    aspects = await asyncio.to_thread(
        open_catalogues, settings, stores.control, clock, ttl_s=ingest.policy_ttl_s
    )
    # Every process that writes spans writes their sessions, in the same transactions.
    trace_sessions = TraceSessions(stores.trace, stores.sessions)
    writer = BatchWriter(
        stores.trace,
        monotonic=clock.monotonic,
        max_records=ingest.group_max_records,
        max_pending_records=ingest.max_pending_records,
    )
    writer.start()
    stack.push_async_callback(writer.close)
    tail = TailSampler(stores.trace, policies, clock)
    if sweep_tail:
        tail.start()
        stack.push_async_callback(tail.close)
    cardinality = LabelCardinality(stores.trace, monotonic=clock.monotonic)
    pipeline = IngestPipeline(
        policies=policies,
        writer=writer,
        clock=clock,
        tail=tail,
        label_values_seen=cardinality.values_seen,
        aspects=aspects.get,
        sketch_key=await asyncio.to_thread(sketch_key, settings),
        limits=RecordLimits.from_settings(ingest),
        admission=Admission(ingest.max_pending_bytes),
    )
    transcripts = TranscriptImports(stores.sessions, lambda project: policies.get(project).redactor)
    return IngestRole(pipeline, writer, policies, trace_sessions, tail, transcripts)
