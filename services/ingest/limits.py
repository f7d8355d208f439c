"""Per-record limits: how large one record may be, and what becomes of one that is larger.

Records past a limit are kept, never refused: a span keeps its timing, cost, status and place in
its trace, and the sender (often an OpenTelemetry SDK, which ignores partial success) loses only
the excess. OpenTelemetry's own span limits truncate and drop the same way. The limits
(`RecordLimits`, from the `ingest.*` settings; docs/security.md lists them):

* **payload bytes**: the JSON text of a record's payload fields (`_SPAN`, `_LOG`, ...), sized
  as stored (`mcpd.storage.stored_json`). Past it the largest payload values are cut, largest
  first, until the record fits, and the values cut share the room left equally. A value of a
  JSON field becomes the marker `{"truncated": true, "original_bytes": N, "head": "<prefix>"}`,
  whose head is the string's own prefix, or a prefix of the value's compact JSON text; a field
  that must stay a string (a log's message, a note's text, a SpanError's message) keeps a prefix
  followed by ` … [truncated: N bytes]`. N is the size of the value's JSON text (a string's
  counts its quotes); heads end on a character boundary. A key/value document (a span's
  attributes, a log's fields, a score's or feedback's metadata) is cut value by value, and when
  that is not enough (its keys alone are too large) its entries are dropped, largest first.
* **attributes**: the top-level keys of a span's attributes or a log's fields; the first ones
  in the order sent are kept. What mcpd writes there itself (the OTLP mapping's `otel.*` keys,
  the marker below) is not counted.
* **span events** (`otel.events` in a span's attributes) and **span links**: the first ones are
  kept.

What was cut is written on the record, under `mcpd.truncated` in its key/value document (span
attributes, log fields, score or feedback metadata), with only its non-zero parts:
`{"fields": {<payload field>: <its size before>}, "dropped_attributes": n, "dropped_events": n,
"dropped_links": n}`. An aspect note has no such document: its text's suffix says it all.

The pipeline applies these after redaction, because a cut could leave part of a secret that the
redactor would no longer recognise. Every record passes here, so a record within its limits
costs one orjson call and a few length checks, and is left exactly as it was.
"""

from __future__ import annotations

import enum
from collections.abc import MutableMapping
from dataclasses import dataclass, field
from typing import Any, cast

import orjson

from mcpd.runtime.config import IngestSettings
from mcpd.signals.rows import AspectNoteRow, FeedbackRow, LogRow, ScoreRow, SpanRow
from mcpd.storage.stored_json import json_size, json_text
from services.ingest.otlp import ADDED_ATTRIBUTES, EVENTS_KEY

MARKER_KEY = "mcpd.truncated"
_UNCOUNTED_KEYS = ADDED_ATTRIBUTES | {MARKER_KEY}

Row = MutableMapping[str, Any]


class _Shape(enum.Enum):
    """How a payload field is cut."""

    JSON = enum.auto()  # any JSON value: replaced by the marker
    TEXT = enum.auto()  # a string column: cut, with a visible suffix
    ENTRIES = enum.auto()  # a key/value document: each value is a JSON field of its own
    ERROR = enum.auto()  # a SpanError: its strings are TEXT, its details JSON
    LINKS = enum.auto()  # SpanLinks: each link's kind is TEXT, its attributes JSON


@dataclass(frozen=True, slots=True)
class _Layout:
    """A signal's payload fields, and the document that carries `MARKER_KEY` (if any)."""

    fields: tuple[tuple[str, _Shape], ...]
    marker: str | None
    names: tuple[str, ...] = field(init=False)

    def __post_init__(self) -> None:
        # Frozen dataclass: assigning in __post_init__ needs object.__setattr__.
        object.__setattr__(self, "names", tuple(name for name, _ in self.fields))


_SPAN = _Layout(
    (
        ("input", _Shape.JSON),
        ("output", _Shape.JSON),
        ("attributes", _Shape.ENTRIES),
        ("metadata", _Shape.JSON),
        ("error", _Shape.ERROR),
        ("links", _Shape.LINKS),
    ),
    marker="attributes",
)
_LOG = _Layout((("message", _Shape.TEXT), ("fields", _Shape.ENTRIES)), marker="fields")
_SCORE = _Layout(
    (("label", _Shape.TEXT), ("reason", _Shape.TEXT), ("metadata", _Shape.ENTRIES)),
    marker="metadata",
)
_FEEDBACK = _Layout(
    (("value", _Shape.TEXT), ("comment", _Shape.TEXT), ("metadata", _Shape.ENTRIES)),
    marker="metadata",
)
_NOTE = _Layout((("text", _Shape.TEXT),), marker=None)
# The members of the nested messages stored as JSON: the reader decodes them into a SpanError or
# a SpanLink, so their own fields keep their types and only their `Value` fields take markers.
_ERROR_MEMBERS = (("message", "kind", "stack", "domain"), ("details",))
_LINK_MEMBERS = (("kind",), ("attributes",))


@dataclass(frozen=True, slots=True)
class RecordLimits:
    """The per-record limits (see the module docstring); `fit_*` apply them to one row."""

    payload_bytes: int
    attributes: int
    span_events: int
    span_links: int

    @classmethod
    def from_settings(cls, ingest: IngestSettings) -> RecordLimits:
        return cls(
            payload_bytes=ingest.max_record_payload_bytes,
            attributes=ingest.max_record_attributes,
            span_events=ingest.max_span_events,
            span_links=ingest.max_span_links,
        )

    def fit_span(self, row: SpanRow) -> None:
        record = cast(Row, row)
        cuts = _Cuts()
        attributes = record.get("attributes")
        if isinstance(attributes, dict):
            if len(attributes) > self.attributes:
                record["attributes"] = attributes = self._first_keys(attributes, cuts)
            events = attributes.get(EVENTS_KEY)
            if isinstance(events, list) and len(events) > self.span_events:
                attributes[EVENTS_KEY] = events[: self.span_events]
                cuts.dropped_events = len(events) - self.span_events
        links = record.get("links")
        if isinstance(links, list) and len(links) > self.span_links:
            record["links"] = links[: self.span_links]
            cuts.dropped_links = len(links) - self.span_links
        self._fit(record, _SPAN, cuts)

    def fit_log(self, row: LogRow) -> None:
        record = cast(Row, row)
        cuts = _Cuts()
        fields = record.get("fields")
        if isinstance(fields, dict) and len(fields) > self.attributes:
            record["fields"] = self._first_keys(fields, cuts)
        self._fit(record, _LOG, cuts)

    def fit_score(self, row: ScoreRow) -> None:
        self._fit(cast(Row, row), _SCORE, _Cuts())

    def fit_feedback(self, row: FeedbackRow) -> None:
        self._fit(cast(Row, row), _FEEDBACK, _Cuts())

    def fit_note(self, row: AspectNoteRow) -> None:
        self._fit(cast(Row, row), _NOTE, _Cuts())

    def _first_keys(self, document: dict[str, Any], cuts: _Cuts) -> dict[str, Any]:
        kept: dict[str, Any] = {}
        counted = 0
        for key, value in document.items():
            if key in _UNCOUNTED_KEYS:
                kept[key] = value
            elif counted < self.attributes:
                kept[key] = value
                counted += 1
        cuts.dropped_attributes = len(document) - len(kept)
        return kept

    def _fit(self, row: Row, layout: _Layout, cuts: _Cuts) -> None:
        # One call sizes every payload field (as a JSON array of them: a few bytes more).
        total = json_size(tuple(map(row.get, layout.names)))
        if total + cuts.cost() > self.payload_bytes:
            total = self._cut_values(row, layout, cuts, total)
            if total + cuts.cost() > self.payload_bytes:
                self._drop_entries(row, layout, cuts, total)
        if cuts:
            _write_marker(row, layout, cuts)

    def _cut_values(self, row: Row, layout: _Layout, cuts: _Cuts, total: int) -> int:
        """Choose the largest values, largest first, until the record would fit with each cut
        to an empty head (or no cut would make it smaller); then cut them, sharing the room
        left between their heads. The size of the payload after."""
        chosen: list[tuple[_Part, int]] = []
        for part in sorted(_parts(row, layout), key=_size_of, reverse=True):
            if total + cuts.cost() <= self.payload_bytes:
                break
            floor = part.floor()
            if part.size <= floor:
                continue
            if part.field not in cuts.fields:
                before = cuts.cost()
                cuts.fields[part.field] = json_size(row.get(part.field))
                if part.size - floor <= cuts.cost() - before:
                    # Naming the field in the marker would cost what the cut saves.
                    del cuts.fields[part.field]
                    continue
            chosen.append((part, floor))
            total += floor - part.size
        if chosen:
            share = max(self.payload_bytes - total - cuts.cost(), 0) // len(chosen)
            for part, floor in chosen:
                total += part.cut(floor + share) - floor
        return total

    def _drop_entries(self, row: Row, layout: _Layout, cuts: _Cuts, total: int) -> None:
        """Drop the largest entries of the key/value document until the record fits."""
        document = row.get(layout.marker) if layout.marker is not None else None
        if not isinstance(document, dict):
            return
        # An entry takes its key, its value, a colon and a comma.
        sizes = {key: json_size(key) + json_size(value) + 2 for key, value in document.items()}
        for key in sorted(sizes, key=sizes.__getitem__, reverse=True):
            if total + cuts.cost() <= self.payload_bytes:
                return
            if key != MARKER_KEY:
                del document[key]
                total -= sizes[key]
                cuts.dropped_attributes += 1


@dataclass(slots=True)
class _Cuts:
    """What was cut from one record: its `MARKER_KEY` entry."""

    fields: dict[str, int] = field(default_factory=dict)
    dropped_attributes: int = 0
    dropped_events: int = 0
    dropped_links: int = 0

    def __bool__(self) -> bool:
        return bool(
            self.fields or self.dropped_attributes or self.dropped_events or self.dropped_links
        )

    def record(self) -> dict[str, Any]:
        counts = {
            "dropped_attributes": self.dropped_attributes,
            "dropped_events": self.dropped_events,
            "dropped_links": self.dropped_links,
        }
        record: dict[str, Any] = {"fields": dict(self.fields)} if self.fields else {}
        record.update((name, count) for name, count in counts.items() if count)
        return record

    def cost(self) -> int:
        """At least what writing the record into its document adds to the payload: the entry,
        and a comma or the braces of a document that was absent."""
        return json_size({MARKER_KEY: self.record()}) + 1 if self else 0


def _write_marker(row: Row, layout: _Layout, cuts: _Cuts) -> None:
    if layout.marker is None:
        return
    document = row.get(layout.marker)
    if document is None:
        row[layout.marker] = {MARKER_KEY: cuts.record()}
    elif isinstance(document, dict):
        document[MARKER_KEY] = cuts.record()


@dataclass(slots=True)
class _Part:
    """One value that can be cut: `holder[key]`, inside payload field `field`."""

    field: str
    holder: MutableMapping[str, Any]
    key: str
    size: int
    text: bool

    def floor(self) -> int:
        """The size of the shortest cut: an empty head."""
        if self.text:
            return 2 + len(_suffix(self.size).encode())
        return json_size(_marker(self.size, ""))

    def cut(self, room: int) -> int:
        """Replace the value by a cut of at most `room` bytes (`floor` or more); the size of
        what replaced it."""
        value = self.holder[self.key]
        if self.text:
            suffix = _suffix(self.size)
            replacement: Any = _head(value, room - len(suffix.encode())) + suffix
        else:
            text = value if isinstance(value, str) else json_text(value)
            replacement = _marker(self.size, _head(text, room - (self.floor() - 2)))
        self.holder[self.key] = replacement
        return json_size(replacement)


def _size_of(part: _Part) -> int:
    return part.size


def _parts(row: Row, layout: _Layout) -> list[_Part]:
    """Every value of the row's payload that can be cut, sized."""
    parts: list[_Part] = []
    for name, shape in layout.fields:
        value = row.get(name)
        if value is None:
            continue
        if shape is _Shape.ENTRIES and isinstance(value, dict):
            parts += (_part(name, value, key, text=False) for key in value)
        elif shape is _Shape.ERROR and isinstance(value, dict):
            parts += _members(name, value, _ERROR_MEMBERS)
        elif shape is _Shape.LINKS and isinstance(value, list):
            for link in value:
                if isinstance(link, dict):
                    parts += _members(name, link, _LINK_MEMBERS)
        elif shape is not _Shape.TEXT or isinstance(value, str):
            parts.append(_part(name, row, name, text=shape is _Shape.TEXT))
    return parts


def _members(
    name: str, message: dict[str, Any], members: tuple[tuple[str, ...], tuple[str, ...]]
) -> list[_Part]:
    texts, documents = members
    parts = [
        _part(name, message, key, text=True) for key in texts if isinstance(message.get(key), str)
    ]
    parts += (_part(name, message, key, text=False) for key in documents if key in message)
    return parts


def _part(name: str, holder: MutableMapping[str, Any], key: str, *, text: bool) -> _Part:
    return _Part(name, holder, key, json_size(holder[key]), text)


def _marker(original: int, head: str) -> dict[str, Any]:
    return {"truncated": True, "original_bytes": original, "head": head}


def _suffix(original: int) -> str:
    return f" … [truncated: {original} bytes]"


def _head(text: str, budget: int) -> str:
    """The longest prefix of `text` whose JSON string takes at most `budget` bytes."""
    # Every character is at least one byte of JSON, so the first `budget` are enough.
    encoded = _json_string(text[: max(budget, 0)])
    if len(encoded) <= budget:
        return text[:budget]
    cut = encoded[: max(budget - 1, 1)]  # room for the closing quote
    # A cut inside a multi-byte character or an escape does not parse: step back to one that
    # does (an escape is at most six bytes, a character four).
    for end in range(len(cut), 1, -1):
        try:
            head: str = orjson.loads(cut[:end] + b'"')
        except orjson.JSONDecodeError:
            continue
        return head
    return ""


def _json_string(text: str) -> bytes:
    try:
        return orjson.dumps(text)
    except TypeError:
        # A lone surrogate, which no receiver lets through, and which has no UTF-8 form.
        return orjson.dumps(text.encode("utf-8", "replace").decode("utf-8"))
