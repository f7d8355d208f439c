"""Facet values carried by a batch (see `mcpd.signals.facets`)."""

from __future__ import annotations

from mcpd.signals.batch import SignalBatch
from mcpd.signals.facets import batch_facets, span_facets
from tests.libs.signals.samples import T0, aspect_note, feedback, log, metric, score, span


def test_span_facets() -> None:
    spans = [
        span(
            "a",
            entity_kind="tool",
            entity_name="search",
            service_name="api",
            environment="prod",
            tags=["vip", "", "beta"],
        ),
        span("b", project="q", entity_kind="agent", entity_name="", service_name=None),
    ]
    assert span_facets(spans) == {
        ("p", "entity_kind", "", "tool"),
        ("p", "entity_name", "", "search"),
        ("p", "service_name", "", "api"),
        ("p", "environment", "", "prod"),
        ("p", "tag", "", "vip"),
        ("p", "tag", "", "beta"),
        ("q", "entity_kind", "", "agent"),
    }


def test_batch_facets_cover_every_signal_but_held_spans() -> None:
    batch = SignalBatch(
        key_project="p",
        ingest_key=None,
        received_at=T0,
        spans=[span("a", service_name="api")],
        logs=[log("l", service_name="worker", environment="staging")],
        metrics=[
            metric(
                "m",
                name="latency",
                labels={"route": "/pay", "code": 200, "empty": "", "": "x"},
                service_name="gateway",
            )
        ],
        scores=[score("s", environment="prod")],
        feedback=[feedback("f", service_name="ui")],
        aspect_notes=[aspect_note("n", service_name="notes")],
        held_spans=[span("h", service_name="held", entity_kind="tool", tags=["held"])],
    )
    assert batch_facets(batch) == {
        ("p", "service_name", "", "api"),
        ("p", "service_name", "", "worker"),
        ("p", "environment", "", "staging"),
        ("p", "service_name", "", "gateway"),
        ("p", "metric_name", "", "latency"),
        ("p", "metric_label_key", "", "route"),
        ("p", "metric_label_key", "", "code"),
        ("p", "metric_label_key", "", "empty"),
        ("p", "metric_label_value", "route", "/pay"),
        ("p", "metric_label_value", "code", "200"),
        ("p", "environment", "", "prod"),
        ("p", "service_name", "", "ui"),
        ("p", "service_name", "", "notes"),
    }
