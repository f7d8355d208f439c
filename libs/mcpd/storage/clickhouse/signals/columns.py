"""The signal tables' columns on ClickHouse, and converting rows to and from them.

This module is the one place that knows how a row value (`mcpd.signals.rows`: int nanoseconds,
Python JSON documents, None for absent) becomes a ClickHouse column value and back, following
the conventions of migration 0001:

* an absent string or JSON document is '' (so '' reads back as None), and a JSON document is
  stored as its JSON text;
* an absent number or time is NULL; times are DateTime64(9, 'UTC'), written as their exact
  text (`params.datetime64_text`: a bare number in a DateTime64 column would be read as
  seconds) and read as Int64 nanoseconds (`toUnixTimestamp64Nano`), so no driver ever turns
  them into a datetime and drops the nanoseconds;
* `tags` (and the trace row's `models` and `providers`) are Array(String): an absent list is
  stored as [] and [] reads back as None;
* bytes (a note's `sketch`, migration 0009) are their hex text in a String, '' when absent:
  the JSON the rows travel in carries text, not bytes;
* a JSON document's text, a NUL character in it (or in a string) as U+FFFD and a non-finite
  number as null, is the SQL backends' (`mcpd.storage.stored_json`), so every backend reads
  back the same row.

Inserts are column-oriented: one INSERT per table carries every row as JSONCompactColumns data
(one JSON array per column) in the request body (`ClickHouseExecutor.insert`), so no value
becomes SQL text or a URL parameter and the block is built with one `json.dumps`; ClickHouse
writes it as one block per partition of the target table.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Any

from mcpd.storage.clickhouse.params import datetime64_text
from mcpd.storage.stored_json import json_text, scrub_nul


class Kind(Enum):
    """How one column's value moves between a row and ClickHouse."""

    KEY = "key"  # a required string: never absent
    TEXT = "text"  # an optional string: None <-> ''
    JSON = "json"  # a JSON document: None <-> '', else its JSON text
    TIME = "time"  # a required time, int ns
    OPT_TIME = "opt_time"  # an optional time, int ns or NULL
    COUNT = "count"  # a required non-negative integer
    OPT_COUNT = "opt_count"
    FLOAT = "float"
    OPT_FLOAT = "opt_float"
    BOOL = "bool"
    OPT_BOOL = "opt_bool"
    STRINGS = "strings"  # a list of strings: None <-> []
    BYTES = "bytes"  # optional bytes: None <-> '', else their hex text


# Kinds with no absent value: a None is refused before anything is written.
_REQUIRED = frozenset((Kind.KEY, Kind.TIME, Kind.COUNT, Kind.FLOAT, Kind.BOOL))


@dataclass(frozen=True, slots=True)
class Table:
    """One table: its name and its columns, in the order the migrations declare them."""

    name: str
    columns: tuple[tuple[str, Kind], ...]

    @property
    def names(self) -> tuple[str, ...]:
        """Every column name."""
        return tuple(name for name, _ in self.columns)

    def select_list(self, names: Sequence[str] | None = None) -> str:
        """The SELECT list that reads `names` (every column by default) as row values."""
        kinds = dict(self.columns)
        return ", ".join(_read_expression(name, kinds[name]) for name in names or self.names)


_S, _T, _J = Kind.KEY, Kind.TEXT, Kind.JSON
_CORRELATION: tuple[tuple[str, Kind], ...] = (
    ("environment", _T),
    ("service_name", _T),
    ("service_version", _T),
    ("session_id", _T),
    ("thread_id", _T),
    ("user_id", _T),
    ("resource_id", _T),
    ("run_id", _T),
    ("request_id", _T),
    ("experiment_id", _T),
    ("release", _T),
)
_USAGE: tuple[tuple[str, Kind], ...] = (
    ("input_tokens", Kind.OPT_COUNT),
    ("output_tokens", Kind.OPT_COUNT),
    ("total_tokens", Kind.OPT_COUNT),
    ("usage_details", _J),
)
_COST: tuple[tuple[str, Kind], ...] = (
    ("cost_currency", _T),
    ("input_cost", Kind.OPT_FLOAT),
    ("output_cost", Kind.OPT_FLOAT),
    ("total_cost", Kind.OPT_FLOAT),
    ("cost_price_book", _T),
    ("cost_is_estimated", Kind.OPT_BOOL),
)

SPANS = Table(
    "spans",
    (
        ("project", _S),
        ("trace_id", _S),
        ("span_id", _S),
        ("parent_span_id", _T),
        ("external_parent_span_id", _T),
        ("name", _S),
        ("kind", _S),
        ("status", _S),
        ("start_time", Kind.TIME),
        ("end_time", Kind.OPT_TIME),
        ("duration_ns", Kind.OPT_COUNT),
        ("is_root", Kind.BOOL),
        ("is_event", Kind.BOOL),
        ("entity_kind", _T),
        ("entity_id", _T),
        ("entity_name", _T),
        ("input", _J),
        ("output", _J),
        ("attributes", _J),
        ("metadata", _J),
        *_USAGE,
        *_COST,
        ("model_parameters", _J),
        ("error", _J),
        ("links", _J),
        ("tags", Kind.STRINGS),
        *_CORRELATION,
        ("model", _T),
        ("provider", _T),
        ("received_at", Kind.TIME),
        ("ingest_key", _T),
    ),
)

TRACES = Table(
    "traces",
    (
        ("project", _S),
        ("trace_id", _S),
        ("version", Kind.COUNT),
        ("root_span_id", _T),
        ("name", _S),
        ("kind", _S),
        ("status", _S),
        ("start_time", Kind.TIME),
        ("end_time", Kind.OPT_TIME),
        ("duration_ns", Kind.OPT_COUNT),
        ("span_count", Kind.COUNT),
        ("error_count", Kind.COUNT),
        *_USAGE,
        *_COST,
        ("model_count", Kind.COUNT),
        ("tool_count", Kind.COUNT),
        ("tags", Kind.STRINGS),
        *_CORRELATION,
        ("score_summary", _J),
        ("feedback_summary", _J),
        ("is_complete", Kind.BOOL),
        ("received_at", Kind.TIME),
        ("models", Kind.STRINGS),
        ("providers", Kind.STRINGS),
        ("is_deleted", Kind.COUNT),
    ),
)

TRACE_ROW = tuple(
    name for name in TRACES.names if name not in ("version", "models", "providers", "is_deleted")
)
"""The columns of a `TraceRow`, as every read returns a trace row: all but what only the store
keeps (migration 0004): the replacing engine's version and tombstone flag, and the models and
providers of the trace's spans, which the trace list filters on."""

LOGS = Table(
    "logs",
    (
        ("project", _S),
        ("log_id", _S),
        ("trace_id", _T),
        ("span_id", _T),
        ("timestamp", Kind.TIME),
        ("level", _S),
        ("message", _S),
        ("fields", _J),
        ("logger", _T),
        *_CORRELATION,
        ("received_at", Kind.TIME),
    ),
)

METRICS = Table(
    "metrics",
    (
        ("project", _S),
        ("metric_id", _S),
        ("name", _S),
        ("kind", _S),
        ("value", Kind.FLOAT),
        ("unit", _T),
        ("timestamp", Kind.TIME),
        ("labels", _J),
        ("buckets", _J),
        ("trace_id", _T),
        ("span_id", _T),
        *_CORRELATION,
        ("received_at", Kind.TIME),
    ),
)

SCORES = Table(
    "scores",
    (
        ("project", _S),
        ("score_id", _S),
        ("trace_id", _T),
        ("span_id", _T),
        ("scorer_id", _S),
        ("scorer_version", _T),
        ("source", _S),
        ("value", Kind.FLOAT),
        ("min", Kind.OPT_FLOAT),
        ("max", Kind.OPT_FLOAT),
        ("label", _T),
        ("reason", _T),
        ("score_trace_id", _T),
        *_COST,
        ("metadata", _J),
        ("timestamp", Kind.TIME),
        *_CORRELATION,
        ("received_at", Kind.TIME),
    ),
)

FEEDBACK = Table(
    "feedback",
    (
        ("project", _S),
        ("feedback_id", _S),
        ("trace_id", _T),
        ("span_id", _T),
        ("kind", _S),
        ("value", _J),
        ("comment", _T),
        ("author_id", _T),
        ("author_kind", _T),
        ("timestamp", Kind.TIME),
        ("metadata", _J),
        *_CORRELATION,
        ("received_at", Kind.TIME),
    ),
)

ASPECT_NOTES = Table(
    "aspect_notes",
    (
        ("project", _S),
        ("note_id", _S),
        ("trace_id", _S),
        ("aspect", _S),
        ("text", _S),
        ("definition_version", Kind.COUNT),
        ("model", _T),
        ("created_at", Kind.TIME),
        *_CORRELATION,
        ("received_at", Kind.TIME),
        # Migration 0009: filed when written (`mcpd.signals.notes`), and the wording sketch.
        ("entity_kind", _T),
        ("entity_name", _T),
        ("sketch", Kind.BYTES),
    ),
)

# Migration 0003: the holding table of tail sampling. The whole span row is kept as JSON in
# `row`; the columns before it are what `held_traces` summarises in SQL.
HELD_SPANS = Table(
    "held_spans",
    (
        ("project", _S),
        ("trace_id", _S),
        ("span_id", _S),
        ("received_at", Kind.TIME),
        ("status", _S),
        ("is_root", Kind.BOOL),
        ("is_event", Kind.BOOL),
        ("start_time", Kind.TIME),
        ("end_time", Kind.OPT_TIME),
        ("row", _S),
    ),
)

INGEST_KEYS = Table(
    "ingest_keys",
    (
        ("project", _S),
        ("ingest_key", _S),
        ("received_at", Kind.TIME),
        ("record_count", Kind.COUNT),
    ),
)

FACET_VALUES = Table(
    "facet_values",
    (("project", _S), ("facet", _S), ("key", _S), ("value", _S), ("last_seen", Kind.TIME)),
)

# Each signal table's identity within a project: what a re-sent row replaces on.
ROW_ID = {
    "spans": ("trace_id", "span_id"),
    "logs": ("log_id",),
    "metrics": ("metric_id",),
    "scores": ("score_id",),
    "feedback": ("feedback_id",),
    "aspect_notes": ("note_id",),
    "held_spans": ("trace_id", "span_id"),
}


# One encoder for every document: `json.dumps` with options builds a new encoder per call.
_ENCODE = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode


def dump_json(value: Any) -> str:
    """A JSON document's stored text ('' for an absent one): `stored_json.json_text`, as every
    store keeps it (see the module docstring)."""
    if value is None:
        return ""
    return json_text(value)


def load_json(text: str) -> Any:
    """A stored JSON document's value (None for '')."""
    return json.loads(text) if text else None


def _from_column(kind: Kind, value: Any) -> Any:
    if kind is Kind.JSON:
        return load_json(value)
    if kind is Kind.TEXT:
        return value or None
    if kind is Kind.STRINGS:
        return list(value) or None
    if kind is Kind.BYTES:
        return bytes.fromhex(value) if value else None
    return value


def _read_expression(name: str, kind: Kind) -> str:
    if kind in (Kind.TIME, Kind.OPT_TIME):
        return f"toUnixTimestamp64Nano({name})"
    return name


def column_data(table: Table, rows: Sequence[Mapping[str, Any]]) -> str:
    """The JSONCompactColumns text of `rows` (each holding every column of `table`).

    Raises ValueError when a row lacks a value that the column requires or holds a time
    ClickHouse cannot store (and KeyError when it lacks the key), so a malformed row is refused
    before anything reaches the database.
    """
    data: list[list[Any]] = []
    for name, kind in table.columns:
        values = [row[name] for row in rows]
        if kind in (Kind.TIME, Kind.OPT_TIME):
            if kind is Kind.TIME and None in values:
                raise ValueError(f"{table.name}.{name} is required, and a row has none")
            values = [None if value is None else datetime64_text(value) for value in values]
        elif kind is Kind.TEXT:
            values = ["" if value is None else value for value in values]
        elif kind is Kind.JSON:
            values = [dump_json(value) for value in values]
        elif kind is Kind.STRINGS:
            values = [[] if value is None else list(value) for value in values]
        elif kind is Kind.BYTES:
            values = ["" if value is None else bytes(value).hex() for value in values]
        elif kind in _REQUIRED and None in values:
            raise ValueError(f"{table.name}.{name} is required, and a row has none")
        data.append(values)
    text = _ENCODE(data)
    if "\\u0000" in text:  # a NUL in a string column (or text that looks like one)
        for (_, kind), values in zip(table.columns, data, strict=True):
            if kind in (Kind.KEY, Kind.TEXT, Kind.STRINGS):
                values[:] = [scrub_nul(value) for value in values]
        text = _ENCODE(data)
    return text


def as_rows(
    table: Table, rows: Sequence[tuple[Any, ...]], names: Sequence[str] | None = None
) -> list[dict[str, Any]]:
    """Rows read with `table.select_list(names)`, as row dicts."""
    kinds = dict(table.columns)
    selected = list(names or table.names)
    plan = [(name, kinds[name]) for name in selected]
    return [
        {name: _from_column(kind, value) for (name, kind), value in zip(plan, row, strict=True)}
        for row in rows
    ]
