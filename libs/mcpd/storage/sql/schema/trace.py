"""The trace store's tables on SQLite and PostgreSQL.

Columns follow the spec entities stored in each table (Span -> spans, Trace -> traces, LogRecord
-> logs, MetricPoint -> metrics, Score -> scores, Feedback -> feedback, AspectNote ->
aspect_notes, ThemeSnapshot -> theme_snapshots, Theme -> themes; `theme_members` and
`theme_endings` hold the rest of a pass's output: which notes each theme holds, and the themes
that ended), with Correlation, TokenUsage
totals and Cost flattened (see `_common`). Two deliberate differences from the spec's keys:

* Every primary key and index starts with `project`. Ids in these tables are chosen by
  producers (span ids, log ids, score ids), so a key without the project would let one tenant's
  write collide with another's row; and every read is scoped to one project, so an index led by
  the project serves it.
* Every signal table carries `received_at` (server-set arrival time, the clock retention is
  measured against), including scores, feedback and notes whose entities do not publish it.

`facet_values` is not a spec entity: it is the distinct-value list discovery answers from,
maintained as signals arrive (see the Facet enumeration). Nor are the two tables ingest writes
beside the signals: `ingest_keys` (the idempotency keys of written batches, scoped to the
sending caller's project) and `held_spans` (spans a tail-sampling project keeps out of `spans`
until their trace is decided, each as its whole row in one JSON document).

The query service's read paths add what the store maintains itself (`STORE_COLUMNS`, never part
of a row):

* `arrival_seq` on spans, traces and logs: the delta-polling position of the transaction that
  last wrote the row. SQLite takes it from the one-row `arrival_clock`, bumped once per write
  transaction (writers are serialised, so sequences commit in order); PostgreSQL stamps the
  writing transaction id, and `arrival_clock` is left unused there.
* `search_vector` on spans and logs: PostgreSQL's `tsvector` of the row's search text (GIN
  indexed). SQLite keeps the column NULL (its partial index stays empty) and searches FTS5
  tables instead, `spans_fts` and `logs_fts`, which are not in this MetaData: the migration
  creates them with the triggers that drop a row's entry when the row is deleted
  (`mcpd.storage.sql.signals.statements` documents the index).
* `head_json` on spans: the span's spec JSON without its payloads (`mcpd.signals.documents`),
  rendered when the row is written, so a trace's detail is put together from stored text (NULL
  on rows written before revision 0005; their trace is rendered from the rows).
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import (
    Boolean,
    Column,
    Double,
    Index,
    Integer,
    LargeBinary,
    PrimaryKeyConstraint,
    Table,
    Text,
    text,
)
from sqlalchemy.dialects.postgresql import TSVECTOR
from sqlalchemy.schema import SchemaItem

from mcpd.storage.sql.schema._common import (
    correlation_columns,
    cost_columns,
    index,
    new_metadata,
    usage_columns,
)
from mcpd.storage.sql.types import Count, JsonDocument, TimestampNs

metadata = new_metadata()

ARRIVAL_SEQ = "arrival_seq"
SEARCH_VECTOR = "search_vector"
HEAD_JSON = "head_json"
STORE_COLUMNS = frozenset({ARRIVAL_SEQ, SEARCH_VECTOR, HEAD_JSON})
"""Columns the store maintains itself: not part of a row (`mcpd.signals.rows`)."""


def arrival(table: str) -> list[SchemaItem]:
    """The arrival sequence column and the (project, arrival_seq) index delta polls read."""
    return [
        Column(ARRIVAL_SEQ, Count, nullable=False, server_default=text("0")),
        index(table, "project", ARRIVAL_SEQ),
    ]


def search(table: str) -> list[SchemaItem]:
    """PostgreSQL's search vector and its GIN index. SQLite leaves the column NULL, so the
    index is partial there and holds nothing (ingest pays nothing for it)."""
    return [
        Column(SEARCH_VECTOR, Text().with_variant(TSVECTOR(), "postgresql")),
        Index(
            f"ix_{table}_{SEARCH_VECTOR}",
            SEARCH_VECTOR,
            postgresql_using="gin",
            sqlite_where=text(f"{SEARCH_VECTOR} IS NOT NULL"),
        ),
    ]


def row_columns(table: Table) -> list[Column[Any]]:
    """The table's columns that make up its rows (all but `STORE_COLUMNS`)."""
    return [column for column in table.columns if column.name not in STORE_COLUMNS]


spans = Table(
    "spans",
    metadata,
    Column("project", Text, nullable=False),
    Column("trace_id", Text, nullable=False),
    Column("span_id", Text, nullable=False),
    Column("parent_span_id", Text),
    Column("external_parent_span_id", Text),
    Column("name", Text, nullable=False),
    Column("kind", Text, nullable=False),
    Column("status", Text, nullable=False),
    Column("start_time", TimestampNs, nullable=False),
    Column("end_time", TimestampNs),
    Column("duration_ns", Count),
    Column("is_root", Boolean, nullable=False),
    Column("is_event", Boolean, nullable=False),
    Column("entity_kind", Text),
    Column("entity_id", Text),
    Column("entity_name", Text),
    Column("input", JsonDocument),
    Column("output", JsonDocument),
    Column("attributes", JsonDocument),
    Column("metadata", JsonDocument),
    *usage_columns(),
    *cost_columns(),
    Column("model_parameters", JsonDocument),
    Column("error", JsonDocument),
    Column("links", JsonDocument),
    Column("tags", JsonDocument),
    *correlation_columns(),
    Column("model", Text),
    Column("provider", Text),
    Column("received_at", TimestampNs, nullable=False),
    Column("ingest_key", Text),
    Column(HEAD_JSON, Text),
    PrimaryKeyConstraint("project", "trace_id", "span_id"),
    index("spans", "project", "start_time"),
    index("spans", "project", "is_root", "start_time"),
    index("spans", "project", "session_id"),
    index("spans", "project", "model", "start_time"),
    index("spans", "project", "status", "start_time"),
    index("spans", "project", "received_at"),
    *arrival("spans"),
    *search("spans"),
)

traces = Table(
    "traces",
    metadata,
    Column("project", Text, nullable=False),
    Column("trace_id", Text, nullable=False),
    Column("root_span_id", Text),
    Column("name", Text, nullable=False),
    Column("kind", Text, nullable=False),
    Column("status", Text, nullable=False),
    Column("start_time", TimestampNs, nullable=False),
    Column("end_time", TimestampNs),
    Column("duration_ns", Count),
    Column("span_count", Integer, nullable=False),
    Column("error_count", Integer, nullable=False),
    *usage_columns(),
    *cost_columns(),
    Column("model_count", Integer, nullable=False),
    Column("tool_count", Integer, nullable=False),
    Column("tags", JsonDocument),
    *correlation_columns(),
    Column("score_summary", JsonDocument),
    Column("feedback_summary", JsonDocument),
    Column("is_complete", Boolean, nullable=False),
    Column("received_at", TimestampNs, nullable=False),
    PrimaryKeyConstraint("project", "trace_id"),
    # The sort keys of the trace list, each ending in the trace id: a page walks the index in
    # order, and a filter on the trace id (a span-side filter) is checked in the index.
    index("traces", "project", "start_time", "trace_id"),
    index("traces", "project", "status", "start_time"),
    # Traces by when they ended: what derived outcome notes are written from.
    index("traces", "project", "end_time"),
    index("traces", "project", "total_cost", "trace_id"),
    index("traces", "project", "duration_ns", "trace_id"),
    index("traces", "project", "received_at"),
    # An experiment's cost and item count read its traces.
    index("traces", "project", "experiment_id"),
    *arrival("traces"),
)

logs = Table(
    "logs",
    metadata,
    Column("project", Text, nullable=False),
    Column("log_id", Text, nullable=False),
    Column("trace_id", Text),
    Column("span_id", Text),
    Column("timestamp", TimestampNs, nullable=False),
    Column("level", Text, nullable=False),
    Column("message", Text, nullable=False),
    Column("fields", JsonDocument),
    Column("logger", Text),
    *correlation_columns(),
    Column("received_at", TimestampNs, nullable=False),
    PrimaryKeyConstraint("project", "log_id"),
    index("logs", "project", "trace_id", "timestamp"),
    index("logs", "project", "level", "timestamp"),
    index("logs", "project", "received_at"),
    index("logs", "project", "timestamp", "log_id"),
    *arrival("logs"),
    *search("logs"),
)

metrics = Table(
    "metrics",
    metadata,
    Column("project", Text, nullable=False),
    Column("metric_id", Text, nullable=False),
    Column("name", Text, nullable=False),
    Column("kind", Text, nullable=False),
    Column("value", Double, nullable=False),
    Column("unit", Text),
    Column("timestamp", TimestampNs, nullable=False),
    Column("labels", JsonDocument),
    Column("buckets", JsonDocument),
    Column("trace_id", Text),
    Column("span_id", Text),
    *correlation_columns(),
    Column("received_at", TimestampNs, nullable=False),
    PrimaryKeyConstraint("project", "metric_id"),
    index("metrics", "project", "name", "timestamp"),
    index("metrics", "project", "received_at"),
)

scores = Table(
    "scores",
    metadata,
    Column("project", Text, nullable=False),
    Column("score_id", Text, nullable=False),
    Column("trace_id", Text),
    Column("span_id", Text),
    Column("scorer_id", Text, nullable=False),
    Column("scorer_version", Text),
    Column("source", Text, nullable=False),
    Column("value", Double, nullable=False),
    Column("min", Double),
    Column("max", Double),
    Column("label", Text),
    Column("reason", Text),
    Column("score_trace_id", Text),
    *cost_columns(),
    Column("metadata", JsonDocument),
    Column("timestamp", TimestampNs, nullable=False),
    *correlation_columns(),
    Column("received_at", TimestampNs, nullable=False),
    PrimaryKeyConstraint("project", "score_id"),
    index("scores", "project", "trace_id"),
    index("scores", "project", "scorer_id", "timestamp"),
    index("scores", "project", "received_at"),
    index("scores", "project", "timestamp", "score_id"),
    # An experiment's summary reads its scores.
    index("scores", "project", "experiment_id"),
)

feedback = Table(
    "feedback",
    metadata,
    Column("project", Text, nullable=False),
    Column("feedback_id", Text, nullable=False),
    Column("trace_id", Text),
    Column("span_id", Text),
    Column("kind", Text, nullable=False),
    Column("value", JsonDocument, nullable=False),
    Column("comment", Text),
    Column("author_id", Text),
    Column("author_kind", Text),
    Column("timestamp", TimestampNs, nullable=False),
    Column("metadata", JsonDocument),
    *correlation_columns(),
    Column("received_at", TimestampNs, nullable=False),
    PrimaryKeyConstraint("project", "feedback_id"),
    index("feedback", "project", "trace_id"),
    index("feedback", "project", "received_at"),
    index("feedback", "project", "timestamp", "feedback_id"),
)

aspect_notes = Table(
    "aspect_notes",
    metadata,
    Column("project", Text, nullable=False),
    Column("note_id", Text, nullable=False),
    Column("trace_id", Text, nullable=False),
    Column("aspect", Text, nullable=False),
    Column("text", Text, nullable=False),
    Column("definition_version", Integer, nullable=False),
    Column("model", Text),
    Column("created_at", TimestampNs, nullable=False),
    *correlation_columns(),
    Column("received_at", TimestampNs, nullable=False),
    # Filed when written (`mcpd.signals.notes`): the entity of the trace's root span.
    Column("entity_kind", Text),
    Column("entity_name", Text),
    # The wording sketch the clustering pass compares (`mcpd.themes.encode`).
    Column("sketch", LargeBinary),
    PrimaryKeyConstraint("project", "note_id"),
    index("aspect_notes", "project", "trace_id"),
    index("aspect_notes", "project", "aspect", "created_at"),
    index("aspect_notes", "project", "received_at"),
    # One entity's notes along one aspect, newest first: what a pass and the progress read
    # (named apart from the convention, which would pass PostgreSQL's 63-character limit).
    Index(
        "ix_aspect_notes_entity_aspect_created_at",
        "project",
        "entity_kind",
        "entity_name",
        "aspect",
        "created_at",
    ),
)

theme_snapshots = Table(
    "theme_snapshots",
    metadata,
    Column("project", Text, nullable=False),
    Column("snapshot_id", Text, nullable=False),
    Column("entity_kind", Text, nullable=False),
    Column("entity_name", Text, nullable=False),
    Column("aspects", JsonDocument, nullable=False),
    Column("ordinal", Count, nullable=False),
    Column("cutoff_at", TimestampNs, nullable=False),
    Column("window_from", TimestampNs, nullable=False),
    Column("window_to", TimestampNs, nullable=False),
    Column("trace_count", Count, nullable=False),
    Column("note_count", Count, nullable=False),
    Column("capped", Boolean, nullable=False),
    PrimaryKeyConstraint("project", "snapshot_id"),
    index("theme_snapshots", "project", "entity_kind", "entity_name", "cutoff_at"),
)

themes = Table(
    "themes",
    metadata,
    Column("project", Text, nullable=False),
    Column("snapshot_id", Text, nullable=False),
    Column("aspect", Text, nullable=False),
    Column("theme_id", Text, nullable=False),
    Column("entity_kind", Text, nullable=False),
    Column("entity_name", Text, nullable=False),
    Column("label", Text, nullable=False),
    Column("label_note_id", Text, nullable=False),
    Column("label_trace_id", Text, nullable=False),
    Column("state", Text, nullable=False),
    Column("note_count", Count, nullable=False),
    Column("trace_count", Count, nullable=False),
    Column("coverage", Double, nullable=False),
    # The history point's links (`mcpd.themes.evolution`): lists of theme ids.
    Column("split_from", JsonDocument),
    Column("split_into", JsonDocument),
    Column("merged_from", JsonDocument),
    # The sketches standing for the theme's wording, matched against the next pass's themes.
    Column("wording", LargeBinary),
    PrimaryKeyConstraint("project", "snapshot_id", "aspect", "theme_id"),
    # A theme's history: the same theme id across snapshots.
    index("themes", "project", "theme_id"),
)

theme_members = Table(
    "theme_members",
    metadata,
    Column("project", Text, nullable=False),
    Column("snapshot_id", Text, nullable=False),
    Column("aspect", Text, nullable=False),
    # A theme's id, or `noise` for the notes that joined none.
    Column("theme_id", Text, nullable=False),
    Column("note_id", Text, nullable=False),
    Column("trace_id", Text, nullable=False),
    # Shared sketch positions with the theme's label, out of 64.
    Column("similarity", Integer, nullable=False),
    PrimaryKeyConstraint("project", "snapshot_id", "aspect", "theme_id", "note_id"),
    # Erasure finds the rows of one note.
    index("theme_members", "project", "note_id"),
)

theme_endings = Table(
    "theme_endings",
    metadata,
    Column("project", Text, nullable=False),
    Column("snapshot_id", Text, nullable=False),
    Column("aspect", Text, nullable=False),
    Column("theme_id", Text, nullable=False),
    # `death`, or `merge` with the theme it became.
    Column("state", Text, nullable=False),
    Column("merged_into", JsonDocument),
    PrimaryKeyConstraint("project", "snapshot_id", "aspect", "theme_id"),
    index("theme_endings", "project", "theme_id"),
)

facet_values = Table(
    "facet_values",
    metadata,
    Column("project", Text, nullable=False),
    Column("facet", Text, nullable=False),
    # The label key for metric_label_value; '' for every other facet (a key column cannot be NULL).
    Column("key", Text, nullable=False),
    Column("value", Text, nullable=False),
    Column("last_seen", TimestampNs, nullable=False),
    PrimaryKeyConstraint("project", "facet", "key", "value"),
)

ingest_keys = Table(
    "ingest_keys",
    metadata,
    # The project of the caller that sent the batch (`SignalBatch.key_project`).
    Column("project", Text, nullable=False),
    Column("ingest_key", Text, nullable=False),
    Column("received_at", TimestampNs, nullable=False),
    Column("record_count", Integer, nullable=False),
    PrimaryKeyConstraint("project", "ingest_key"),
    # Expiring keys older than the replay window.
    index("ingest_keys", "project", "received_at"),
)

held_spans = Table(
    "held_spans",
    metadata,
    Column("project", Text, nullable=False),
    Column("trace_id", Text, nullable=False),
    Column("span_id", Text, nullable=False),
    Column("received_at", TimestampNs, nullable=False),
    # The span's row (`mcpd.signals.rows.SpanRow`), every key present.
    Column("row", JsonDocument, nullable=False),
    PrimaryKeyConstraint("project", "trace_id", "span_id"),
)

arrival_clock = Table(
    "arrival_clock",
    metadata,
    # One row (id 1): the last arrival sequence SQLite handed out.
    Column("id", Integer, nullable=False),
    Column("seq", Count, nullable=False),
    PrimaryKeyConstraint("id"),
)

# Datasets, their items and experiments sit beside the traces they are captured from, so the
# erasure of a subject empties captured items in the same store (Dataset, DatasetItem,
# Experiment in the spec; `mcpd.storage.records` has their rows).
datasets = Table(
    "datasets",
    metadata,
    Column("project", Text, nullable=False),
    Column("dataset_id", Text, nullable=False),
    Column("name", Text, nullable=False),
    Column("description", Text),
    Column("created_at", TimestampNs, nullable=False),
    PrimaryKeyConstraint("project", "dataset_id"),
    # A name says which dataset it is: one per project.
    index("datasets", "project", "name", unique=True),
    index("datasets", "project", "created_at", "dataset_id"),
)

dataset_items = Table(
    "dataset_items",
    metadata,
    Column("project", Text, nullable=False),
    Column("item_id", Text, nullable=False),
    Column("dataset_id", Text, nullable=False),
    Column("input", JsonDocument),
    Column("expected", JsonDocument),
    Column("metadata", JsonDocument),
    Column("source_trace_id", Text),
    Column("created_at", TimestampNs, nullable=False),
    PrimaryKeyConstraint("project", "dataset_id", "item_id"),
    index("dataset_items", "project", "dataset_id", "created_at", "item_id"),
    index("dataset_items", "project", "source_trace_id"),
)

experiments = Table(
    "experiments",
    metadata,
    Column("project", Text, nullable=False),
    Column("experiment_id", Text, nullable=False),
    Column("name", Text, nullable=False),
    Column("dataset_id", Text, nullable=False),
    Column("status", Text, nullable=False),
    Column("created_at", TimestampNs, nullable=False),
    Column("started_at", TimestampNs),
    Column("finished_at", TimestampNs),
    Column("baseline_id", Text),
    Column("error", Text),
    Column("metadata", JsonDocument),
    # Whether mcpd runs the items (the metadata names a definition), or the caller does.
    Column("driven", Boolean, nullable=False),
    PrimaryKeyConstraint("project", "experiment_id"),
    index("experiments", "project", "created_at", "experiment_id"),
    index("experiments", "status"),
)

# The item each run of an experiment was for: written when mcpd starts the run (an experiment it
# drives) and read to pair the items of two experiments.
experiment_items = Table(
    "experiment_items",
    metadata,
    Column("project", Text, nullable=False),
    Column("experiment_id", Text, nullable=False),
    Column("item_id", Text, nullable=False),
    Column("run_id", Text),
    Column("trace_id", Text),
    Column("status", Text, nullable=False),
    Column("error", Text),
    Column("updated_at", TimestampNs, nullable=False),
    PrimaryKeyConstraint("project", "experiment_id", "item_id"),
    index("experiment_items", "project", "trace_id"),
)
