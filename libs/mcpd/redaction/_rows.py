"""Redaction of signal rows (`mcpd.signals.rows`): which columns are payload, and identities.

Payload is what a producer's code or its users wrote, and what a secret can hide in. Every
payload column of a row passes through the redactor; the other columns (ids, names, kinds,
times, correlation, usage, model, tags) are left alone, because they are chosen by the
instrumentation, keyed on by queries and metric labels, and a rule that rewrote them would
break grouping and joins. The payload columns, by signal (`PAYLOAD_FIELDS`):

* span: `input`, `output`, `attributes`, `metadata`, `error` (every field of it; `message` is
  masked rather than dropped because a SpanError must carry one), `links[].attributes` (not
  the linked ids), `model_parameters.stop_sequences` (caller-written strings; the numbers are
  settings).
* log: `message`, `fields`.
* metric: `labels` (key rules apply to label names; a dropped label is removed).
* score: `label`, `reason`, `metadata`.
* feedback: `value`, `comment`, `metadata`.
* aspect_note: `text`.

Identities: `user_id` (every signal, from Correlation) and feedback's `author_id` are replaced
by `Redactor.hash_identifier`, always; an already hashed value is kept, so a row redacted twice
is unchanged.

A required column (`message`, `text`, feedback `value`) that a `drop` rule matches becomes the
mask token; an optional one becomes None.
"""

from __future__ import annotations

from collections.abc import Mapping, MutableMapping
from types import MappingProxyType
from typing import Any, Final

from mcpd.redaction._builtin import mask
from mcpd.redaction._redactor import Dropped, Redactor

__all__ = ["IDENTITY_FIELDS", "PAYLOAD_FIELDS", "redact_row"]

PAYLOAD_FIELDS: Final[Mapping[str, tuple[str, ...]]] = MappingProxyType(
    {
        "span": (
            "input",
            "output",
            "attributes",
            "metadata",
            "error",
            "links[].attributes",
            "model_parameters.stop_sequences",
        ),
        "log": ("message", "fields"),
        "metric": ("labels",),
        "score": ("label", "reason", "metadata"),
        "feedback": ("value", "comment", "metadata"),
        "aspect_note": ("text",),
    }
)
IDENTITY_FIELDS: Final[Mapping[str, tuple[str, ...]]] = MappingProxyType(
    {
        "span": ("user_id",),
        "log": ("user_id",),
        "metric": ("user_id",),
        "score": ("user_id",),
        "feedback": ("user_id", "author_id"),
        "aspect_note": ("user_id",),
    }
)

_ERROR_REQUIRED = frozenset({"message"})
_SPAN_DOCUMENTS = ("input", "output", "attributes", "metadata")


def redact_row(redactor: Redactor, signal: str, row: MutableMapping[str, Any]) -> None:
    """Redact `row`, a row of `signal` (a SignalType value: span, log, metric, score, feedback,
    aspect_note), in place: its payload columns and its identities. Columns that do not
    change are not reassigned."""
    identities = IDENTITY_FIELDS.get(signal)
    if identities is None:
        raise ValueError(f"unknown signal {signal!r}; expected one of {', '.join(IDENTITY_FIELDS)}")
    for column in identities:
        value = row.get(column)
        if isinstance(value, str):
            hashed = redactor.hash_identifier(value)
            if hashed != value:
                row[column] = hashed
    if signal == "span":
        # Every span passes here: `_optional_json` inline, and the helpers of columns that are
        # usually absent only called when present (each does nothing with None).
        get = row.get
        for column in _SPAN_DOCUMENTS:
            value = get(column)
            if value is not None:
                result = redactor.redact_json(value)
                if result is not value:
                    row[column] = result
        if get("error") is not None:
            _error(redactor, row)
        if get("links") is not None:
            _links(redactor, row)
        if get("model_parameters") is not None:
            _stop_sequences(redactor, row)
    elif signal == "log":
        _required_text(redactor, row, "message")
        _optional_json(redactor, row, "fields")
    elif signal == "metric":
        _optional_json(redactor, row, "labels")
    elif signal == "score":
        _optional_text(redactor, row, "label")
        _optional_text(redactor, row, "reason")
        _optional_json(redactor, row, "metadata")
    elif signal == "feedback":
        _required_json(redactor, row, "value")
        _optional_text(redactor, row, "comment")
        _optional_json(redactor, row, "metadata")
    else:
        _required_text(redactor, row, "text")


def _optional_json(redactor: Redactor, row: MutableMapping[str, Any], column: str) -> None:
    value = row.get(column)
    if value is None:
        return
    result = redactor.redact_json(value)
    if result is not value:
        row[column] = result


def _required_json(redactor: Redactor, row: MutableMapping[str, Any], column: str) -> None:
    value = row.get(column)
    if value is None:
        return
    result = redactor._redact_value(value)
    if result is not value:
        row[column] = mask(result.rule) if isinstance(result, Dropped) else result


def _optional_text(redactor: Redactor, row: MutableMapping[str, Any], column: str) -> None:
    value = row.get(column)
    if not isinstance(value, str):
        return
    result = redactor._redact_value(value)
    if result is not value:
        row[column] = None if isinstance(result, Dropped) else result


def _required_text(redactor: Redactor, row: MutableMapping[str, Any], column: str) -> None:
    value = row.get(column)
    if not isinstance(value, str):
        return
    result = redactor.redact_text(value)
    if result is not value:
        row[column] = result


def _error(redactor: Redactor, row: MutableMapping[str, Any]) -> None:
    error = row.get("error")
    if not isinstance(error, Mapping):
        _optional_json(redactor, row, "error")
        return
    result = redactor._redact_value(error, required_keys=_ERROR_REQUIRED)
    if result is not error:
        row["error"] = result


def _links(redactor: Redactor, row: MutableMapping[str, Any]) -> None:
    links = row.get("links")
    if not isinstance(links, list):
        return
    new: list[Any] | None = None
    for index, link in enumerate(links):
        item = link
        if isinstance(link, Mapping) and link.get("attributes") is not None:
            attributes = redactor.redact_json(link["attributes"])
            if attributes is not link["attributes"]:
                item = {**link, "attributes": attributes}
        if item is not link and new is None:
            new = list(links[:index])
        if new is not None:
            new.append(item)
    if new is not None:
        row["links"] = new


def _stop_sequences(redactor: Redactor, row: MutableMapping[str, Any]) -> None:
    parameters = row.get("model_parameters")
    if not isinstance(parameters, Mapping):
        return
    sequences = parameters.get("stop_sequences")
    if not isinstance(sequences, list):
        return
    result = redactor.redact_json(sequences)
    if result is not sequences:
        row["model_parameters"] = {**parameters, "stop_sequences": result}
