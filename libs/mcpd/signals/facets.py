"""The facet values a batch of rows carries: what discovery's distinct-value lists are fed from.

A facet value is `(project, facet, key, value)`. `key` is the label key for
`metric_label_value` and '' for every other facet (see the Facet enumeration). Values are
strings; None and '' are skipped. Where each facet comes from:

* `entity_kind`, `entity_name`: spans;
* `service_name`, `environment`: the correlation of every signal (spans, logs, metrics, scores,
  feedback, aspect notes);
* `tag`: span tags;
* `metric_name`, `metric_label_key`, `metric_label_value`: metric points (a label value that is
  not a string is rendered as JSON: `3`, `true`).

`batch_facets` leaves out a batch's held spans: they may yet be dropped by tail sampling, and a
filter box must not offer a value no stored span has. Their facets are written when they are
released (`span_facets`).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from mcpd.signals.batch import SignalBatch
from mcpd.signals.rows import SpanRow

FacetValue = tuple[str, str, str, str]
"""(project, facet, key, value)."""

ENTITY_KIND = "entity_kind"
ENTITY_NAME = "entity_name"
SERVICE_NAME = "service_name"
ENVIRONMENT = "environment"
TAG = "tag"
METRIC_NAME = "metric_name"
METRIC_LABEL_KEY = "metric_label_key"
METRIC_LABEL_VALUE = "metric_label_value"


def span_facets(spans: Iterable[SpanRow]) -> set[FacetValue]:
    """The facet values of spans: entity kind and name, service, environment, tags."""
    found: set[FacetValue] = set()
    add = found.add
    for span in spans:
        project = span["project"]
        if value := span.get("entity_kind"):
            add((project, ENTITY_KIND, "", value))
        if value := span.get("entity_name"):
            add((project, ENTITY_NAME, "", value))
        if value := span.get("service_name"):
            add((project, SERVICE_NAME, "", value))
        if value := span.get("environment"):
            add((project, ENVIRONMENT, "", value))
        for tag in span.get("tags") or ():
            if tag:
                add((project, TAG, "", tag))
    return found


def batch_facets(batch: SignalBatch) -> set[FacetValue]:
    """The facet values of every row of `batch` except its held spans."""
    found = span_facets(batch.spans)
    add = found.add
    for rows in (batch.logs, batch.scores, batch.feedback, batch.aspect_notes):
        for row in rows:
            _correlation_facets(add, row)
    for metric in batch.metrics:
        project = metric["project"]
        _correlation_facets(add, metric)
        if name := metric.get("name"):
            add((project, METRIC_NAME, "", name))
        labels = metric.get("labels")
        if isinstance(labels, Mapping):
            for key, raw in labels.items():
                if not key:
                    continue
                add((project, METRIC_LABEL_KEY, "", key))
                if (text := _label_text(raw)) is not None:
                    add((project, METRIC_LABEL_VALUE, key, text))
    return found


def _correlation_facets(add: Callable[[FacetValue], None], row: Mapping[str, Any]) -> None:
    project = row["project"]
    if value := row.get("service_name"):
        add((project, SERVICE_NAME, "", value))
    if value := row.get("environment"):
        add((project, ENVIRONMENT, "", value))


def _label_text(value: Any) -> str | None:
    if isinstance(value, str):
        return value or None
    if value is None:
        return None
    return json.dumps(value, sort_keys=True, separators=(",", ":"))
