"""An IngestPipeline over real stores, as the ingest role builds one, for tests that drive
`IngestPipeline.prepare` directly."""

from __future__ import annotations

import secrets

from mcpd.aspects import AspectCatalogues, AspectConfig
from mcpd.pricing import load_price_book
from mcpd.runtime.clock import ManualClock
from mcpd.storage import Stores
from services.ingest.admission import Admission
from services.ingest.cardinality import LabelCardinality
from services.ingest.limits import RecordLimits
from services.ingest.pipeline import IngestPipeline
from services.ingest.policies import ProjectPolicies
from services.ingest.tail import TailSampler
from services.ingest.writer import BatchWriter


def build_pipeline(
    stores: Stores, *, payload_bytes: int = 1 << 20, aspects: AspectConfig | None = None
) -> IngestPipeline:
    """A pipeline writing to `stores`, holding records to `payload_bytes`, checking notes
    against the aspects `aspects` configures (the built-ins alone by default)."""
    clock = ManualClock()
    policies = ProjectPolicies(
        stores.control,
        key=secrets.token_bytes(32),
        book=load_price_book(),
        monotonic=clock.monotonic,
    )
    catalogues = AspectCatalogues(stores.control, aspects or AspectConfig(), clock, ttl_s=5.0)
    return IngestPipeline(
        policies=policies,
        writer=BatchWriter(stores.trace, monotonic=clock.monotonic),
        clock=clock,
        tail=TailSampler(stores.trace, policies, clock),
        label_values_seen=LabelCardinality(stores.trace, monotonic=clock.monotonic).values_seen,
        aspects=catalogues.get,
        sketch_key=secrets.token_bytes(32),
        limits=RecordLimits(
            payload_bytes=payload_bytes, attributes=128, span_events=128, span_links=128
        ),
        admission=Admission(1 << 30),
    )
