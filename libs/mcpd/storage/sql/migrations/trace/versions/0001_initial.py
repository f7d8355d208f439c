"""Trace store: spans, traces, logs, metrics, scores, feedback, aspect notes, themes, facets.

Revision ID: 0001_initial
Revises:
Create Date: 2026-11-29
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0001_initial"
down_revision = None
branch_labels = None
depends_on = None

# A JSON document: JSONB on PostgreSQL, JSON text on SQLite; Python None is SQL NULL. Spelled out
# here rather than imported, so this migration keeps creating what it created when it was written.
JSON_DOC = sa.JSON(none_as_null=True).with_variant(
    postgresql.JSONB(none_as_null=True), "postgresql"
)


def upgrade() -> None:
    op.create_table(
        "aspect_notes",
        sa.Column("project", sa.Text(), nullable=False),
        sa.Column("note_id", sa.Text(), nullable=False),
        sa.Column("trace_id", sa.Text(), nullable=False),
        sa.Column("aspect", sa.Text(), nullable=False),
        sa.Column("text", sa.Text(), nullable=False),
        sa.Column("definition_version", sa.Integer(), nullable=False),
        sa.Column("model", sa.Text(), nullable=True),
        sa.Column("created_at", sa.BigInteger(), nullable=False),
        sa.Column("environment", sa.Text(), nullable=True),
        sa.Column("service_name", sa.Text(), nullable=True),
        sa.Column("service_version", sa.Text(), nullable=True),
        sa.Column("session_id", sa.Text(), nullable=True),
        sa.Column("thread_id", sa.Text(), nullable=True),
        sa.Column("user_id", sa.Text(), nullable=True),
        sa.Column("resource_id", sa.Text(), nullable=True),
        sa.Column("run_id", sa.Text(), nullable=True),
        sa.Column("request_id", sa.Text(), nullable=True),
        sa.Column("experiment_id", sa.Text(), nullable=True),
        sa.Column("release", sa.Text(), nullable=True),
        sa.Column("received_at", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("project", "note_id", name=op.f("pk_aspect_notes")),
    )
    op.create_index(
        "ix_aspect_notes_project_aspect_created_at",
        "aspect_notes",
        ["project", "aspect", "created_at"],
        unique=False,
    )
    op.create_index(
        "ix_aspect_notes_project_received_at",
        "aspect_notes",
        ["project", "received_at"],
        unique=False,
    )
    op.create_index(
        "ix_aspect_notes_project_trace_id", "aspect_notes", ["project", "trace_id"], unique=False
    )
    op.create_table(
        "facet_values",
        sa.Column("project", sa.Text(), nullable=False),
        sa.Column("facet", sa.Text(), nullable=False),
        sa.Column("key", sa.Text(), nullable=False),
        sa.Column("value", sa.Text(), nullable=False),
        sa.Column("last_seen", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("project", "facet", "key", "value", name=op.f("pk_facet_values")),
    )
    op.create_table(
        "feedback",
        sa.Column("project", sa.Text(), nullable=False),
        sa.Column("feedback_id", sa.Text(), nullable=False),
        sa.Column("trace_id", sa.Text(), nullable=True),
        sa.Column("span_id", sa.Text(), nullable=True),
        sa.Column("kind", sa.Text(), nullable=False),
        sa.Column("value", JSON_DOC, nullable=False),
        sa.Column("comment", sa.Text(), nullable=True),
        sa.Column("author_id", sa.Text(), nullable=True),
        sa.Column("author_kind", sa.Text(), nullable=True),
        sa.Column("timestamp", sa.BigInteger(), nullable=False),
        sa.Column("metadata", JSON_DOC, nullable=True),
        sa.Column("environment", sa.Text(), nullable=True),
        sa.Column("service_name", sa.Text(), nullable=True),
        sa.Column("service_version", sa.Text(), nullable=True),
        sa.Column("session_id", sa.Text(), nullable=True),
        sa.Column("thread_id", sa.Text(), nullable=True),
        sa.Column("user_id", sa.Text(), nullable=True),
        sa.Column("resource_id", sa.Text(), nullable=True),
        sa.Column("run_id", sa.Text(), nullable=True),
        sa.Column("request_id", sa.Text(), nullable=True),
        sa.Column("experiment_id", sa.Text(), nullable=True),
        sa.Column("release", sa.Text(), nullable=True),
        sa.Column("received_at", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("project", "feedback_id", name=op.f("pk_feedback")),
    )
    op.create_index(
        "ix_feedback_project_received_at", "feedback", ["project", "received_at"], unique=False
    )
    op.create_index(
        "ix_feedback_project_trace_id", "feedback", ["project", "trace_id"], unique=False
    )
    op.create_table(
        "logs",
        sa.Column("project", sa.Text(), nullable=False),
        sa.Column("log_id", sa.Text(), nullable=False),
        sa.Column("trace_id", sa.Text(), nullable=True),
        sa.Column("span_id", sa.Text(), nullable=True),
        sa.Column("timestamp", sa.BigInteger(), nullable=False),
        sa.Column("level", sa.Text(), nullable=False),
        sa.Column("message", sa.Text(), nullable=False),
        sa.Column("fields", JSON_DOC, nullable=True),
        sa.Column("logger", sa.Text(), nullable=True),
        sa.Column("environment", sa.Text(), nullable=True),
        sa.Column("service_name", sa.Text(), nullable=True),
        sa.Column("service_version", sa.Text(), nullable=True),
        sa.Column("session_id", sa.Text(), nullable=True),
        sa.Column("thread_id", sa.Text(), nullable=True),
        sa.Column("user_id", sa.Text(), nullable=True),
        sa.Column("resource_id", sa.Text(), nullable=True),
        sa.Column("run_id", sa.Text(), nullable=True),
        sa.Column("request_id", sa.Text(), nullable=True),
        sa.Column("experiment_id", sa.Text(), nullable=True),
        sa.Column("release", sa.Text(), nullable=True),
        sa.Column("received_at", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("project", "log_id", name=op.f("pk_logs")),
    )
    op.create_index(
        "ix_logs_project_level_timestamp", "logs", ["project", "level", "timestamp"], unique=False
    )
    op.create_index("ix_logs_project_received_at", "logs", ["project", "received_at"], unique=False)
    op.create_index(
        "ix_logs_project_trace_id_timestamp",
        "logs",
        ["project", "trace_id", "timestamp"],
        unique=False,
    )
    op.create_table(
        "metrics",
        sa.Column("project", sa.Text(), nullable=False),
        sa.Column("metric_id", sa.Text(), nullable=False),
        sa.Column("name", sa.Text(), nullable=False),
        sa.Column("kind", sa.Text(), nullable=False),
        sa.Column("value", sa.Double(), nullable=False),
        sa.Column("unit", sa.Text(), nullable=True),
        sa.Column("timestamp", sa.BigInteger(), nullable=False),
        sa.Column("labels", JSON_DOC, nullable=True),
        sa.Column("buckets", JSON_DOC, nullable=True),
        sa.Column("trace_id", sa.Text(), nullable=True),
        sa.Column("span_id", sa.Text(), nullable=True),
        sa.Column("environment", sa.Text(), nullable=True),
        sa.Column("service_name", sa.Text(), nullable=True),
        sa.Column("service_version", sa.Text(), nullable=True),
        sa.Column("session_id", sa.Text(), nullable=True),
        sa.Column("thread_id", sa.Text(), nullable=True),
        sa.Column("user_id", sa.Text(), nullable=True),
        sa.Column("resource_id", sa.Text(), nullable=True),
        sa.Column("run_id", sa.Text(), nullable=True),
        sa.Column("request_id", sa.Text(), nullable=True),
        sa.Column("experiment_id", sa.Text(), nullable=True),
        sa.Column("release", sa.Text(), nullable=True),
        sa.Column("received_at", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("project", "metric_id", name=op.f("pk_metrics")),
    )
    op.create_index(
        "ix_metrics_project_name_timestamp",
        "metrics",
        ["project", "name", "timestamp"],
        unique=False,
    )
    op.create_index(
        "ix_metrics_project_received_at", "metrics", ["project", "received_at"], unique=False
    )
    op.create_table(
        "scores",
        sa.Column("project", sa.Text(), nullable=False),
        sa.Column("score_id", sa.Text(), nullable=False),
        sa.Column("trace_id", sa.Text(), nullable=True),
        sa.Column("span_id", sa.Text(), nullable=True),
        sa.Column("scorer_id", sa.Text(), nullable=False),
        sa.Column("scorer_version", sa.Text(), nullable=True),
        sa.Column("source", sa.Text(), nullable=False),
        sa.Column("value", sa.Double(), nullable=False),
        sa.Column("min", sa.Double(), nullable=True),
        sa.Column("max", sa.Double(), nullable=True),
        sa.Column("label", sa.Text(), nullable=True),
        sa.Column("reason", sa.Text(), nullable=True),
        sa.Column("score_trace_id", sa.Text(), nullable=True),
        sa.Column("cost_currency", sa.Text(), nullable=True),
        sa.Column("input_cost", sa.Double(), nullable=True),
        sa.Column("output_cost", sa.Double(), nullable=True),
        sa.Column("total_cost", sa.Double(), nullable=True),
        sa.Column("cost_price_book", sa.Text(), nullable=True),
        sa.Column("cost_is_estimated", sa.Boolean(), nullable=True),
        sa.Column("metadata", JSON_DOC, nullable=True),
        sa.Column("timestamp", sa.BigInteger(), nullable=False),
        sa.Column("environment", sa.Text(), nullable=True),
        sa.Column("service_name", sa.Text(), nullable=True),
        sa.Column("service_version", sa.Text(), nullable=True),
        sa.Column("session_id", sa.Text(), nullable=True),
        sa.Column("thread_id", sa.Text(), nullable=True),
        sa.Column("user_id", sa.Text(), nullable=True),
        sa.Column("resource_id", sa.Text(), nullable=True),
        sa.Column("run_id", sa.Text(), nullable=True),
        sa.Column("request_id", sa.Text(), nullable=True),
        sa.Column("experiment_id", sa.Text(), nullable=True),
        sa.Column("release", sa.Text(), nullable=True),
        sa.Column("received_at", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("project", "score_id", name=op.f("pk_scores")),
    )
    op.create_index(
        "ix_scores_project_received_at", "scores", ["project", "received_at"], unique=False
    )
    op.create_index(
        "ix_scores_project_scorer_id_timestamp",
        "scores",
        ["project", "scorer_id", "timestamp"],
        unique=False,
    )
    op.create_index("ix_scores_project_trace_id", "scores", ["project", "trace_id"], unique=False)
    op.create_table(
        "spans",
        sa.Column("project", sa.Text(), nullable=False),
        sa.Column("trace_id", sa.Text(), nullable=False),
        sa.Column("span_id", sa.Text(), nullable=False),
        sa.Column("parent_span_id", sa.Text(), nullable=True),
        sa.Column("external_parent_span_id", sa.Text(), nullable=True),
        sa.Column("name", sa.Text(), nullable=False),
        sa.Column("kind", sa.Text(), nullable=False),
        sa.Column("status", sa.Text(), nullable=False),
        sa.Column("start_time", sa.BigInteger(), nullable=False),
        sa.Column("end_time", sa.BigInteger(), nullable=True),
        sa.Column("duration_ns", sa.BigInteger(), nullable=True),
        sa.Column("is_root", sa.Boolean(), nullable=False),
        sa.Column("is_event", sa.Boolean(), nullable=False),
        sa.Column("entity_kind", sa.Text(), nullable=True),
        sa.Column("entity_id", sa.Text(), nullable=True),
        sa.Column("entity_name", sa.Text(), nullable=True),
        sa.Column("input", JSON_DOC, nullable=True),
        sa.Column("output", JSON_DOC, nullable=True),
        sa.Column("attributes", JSON_DOC, nullable=True),
        sa.Column("metadata", JSON_DOC, nullable=True),
        sa.Column("input_tokens", sa.BigInteger(), nullable=True),
        sa.Column("output_tokens", sa.BigInteger(), nullable=True),
        sa.Column("total_tokens", sa.BigInteger(), nullable=True),
        sa.Column("usage_details", JSON_DOC, nullable=True),
        sa.Column("cost_currency", sa.Text(), nullable=True),
        sa.Column("input_cost", sa.Double(), nullable=True),
        sa.Column("output_cost", sa.Double(), nullable=True),
        sa.Column("total_cost", sa.Double(), nullable=True),
        sa.Column("cost_price_book", sa.Text(), nullable=True),
        sa.Column("cost_is_estimated", sa.Boolean(), nullable=True),
        sa.Column("model_parameters", JSON_DOC, nullable=True),
        sa.Column("error", JSON_DOC, nullable=True),
        sa.Column("links", JSON_DOC, nullable=True),
        sa.Column("tags", JSON_DOC, nullable=True),
        sa.Column("environment", sa.Text(), nullable=True),
        sa.Column("service_name", sa.Text(), nullable=True),
        sa.Column("service_version", sa.Text(), nullable=True),
        sa.Column("session_id", sa.Text(), nullable=True),
        sa.Column("thread_id", sa.Text(), nullable=True),
        sa.Column("user_id", sa.Text(), nullable=True),
        sa.Column("resource_id", sa.Text(), nullable=True),
        sa.Column("run_id", sa.Text(), nullable=True),
        sa.Column("request_id", sa.Text(), nullable=True),
        sa.Column("experiment_id", sa.Text(), nullable=True),
        sa.Column("release", sa.Text(), nullable=True),
        sa.Column("model", sa.Text(), nullable=True),
        sa.Column("provider", sa.Text(), nullable=True),
        sa.Column("received_at", sa.BigInteger(), nullable=False),
        sa.Column("ingest_key", sa.Text(), nullable=True),
        sa.PrimaryKeyConstraint("project", "trace_id", "span_id", name=op.f("pk_spans")),
    )
    op.create_index(
        "ix_spans_project_is_root_start_time",
        "spans",
        ["project", "is_root", "start_time"],
        unique=False,
    )
    op.create_index(
        "ix_spans_project_model_start_time",
        "spans",
        ["project", "model", "start_time"],
        unique=False,
    )
    op.create_index(
        "ix_spans_project_received_at", "spans", ["project", "received_at"], unique=False
    )
    op.create_index("ix_spans_project_session_id", "spans", ["project", "session_id"], unique=False)
    op.create_index("ix_spans_project_start_time", "spans", ["project", "start_time"], unique=False)
    op.create_index(
        "ix_spans_project_status_start_time",
        "spans",
        ["project", "status", "start_time"],
        unique=False,
    )
    op.create_table(
        "theme_snapshots",
        sa.Column("project", sa.Text(), nullable=False),
        sa.Column("snapshot_id", sa.Text(), nullable=False),
        sa.Column("entity_kind", sa.Text(), nullable=False),
        sa.Column("entity_name", sa.Text(), nullable=False),
        sa.Column("aspects", JSON_DOC, nullable=False),
        sa.Column("ordinal", sa.BigInteger(), nullable=False),
        sa.Column("cutoff_at", sa.BigInteger(), nullable=False),
        sa.Column("window_from", sa.BigInteger(), nullable=False),
        sa.Column("window_to", sa.BigInteger(), nullable=False),
        sa.Column("trace_count", sa.BigInteger(), nullable=False),
        sa.Column("note_count", sa.BigInteger(), nullable=False),
        sa.Column("capped", sa.Boolean(), nullable=False),
        sa.PrimaryKeyConstraint("project", "snapshot_id", name=op.f("pk_theme_snapshots")),
    )
    op.create_index(
        "ix_theme_snapshots_project_entity_kind_entity_name_cutoff_at",
        "theme_snapshots",
        ["project", "entity_kind", "entity_name", "cutoff_at"],
        unique=False,
    )
    op.create_table(
        "themes",
        sa.Column("project", sa.Text(), nullable=False),
        sa.Column("snapshot_id", sa.Text(), nullable=False),
        sa.Column("aspect", sa.Text(), nullable=False),
        sa.Column("theme_id", sa.Text(), nullable=False),
        sa.Column("entity_kind", sa.Text(), nullable=False),
        sa.Column("entity_name", sa.Text(), nullable=False),
        sa.Column("label", sa.Text(), nullable=False),
        sa.Column("label_note_id", sa.Text(), nullable=False),
        sa.Column("label_trace_id", sa.Text(), nullable=False),
        sa.Column("state", sa.Text(), nullable=False),
        sa.Column("note_count", sa.BigInteger(), nullable=False),
        sa.Column("trace_count", sa.BigInteger(), nullable=False),
        sa.Column("coverage", sa.Double(), nullable=False),
        sa.PrimaryKeyConstraint(
            "project", "snapshot_id", "aspect", "theme_id", name=op.f("pk_themes")
        ),
    )
    op.create_index("ix_themes_project_theme_id", "themes", ["project", "theme_id"], unique=False)
    op.create_table(
        "traces",
        sa.Column("project", sa.Text(), nullable=False),
        sa.Column("trace_id", sa.Text(), nullable=False),
        sa.Column("root_span_id", sa.Text(), nullable=True),
        sa.Column("name", sa.Text(), nullable=False),
        sa.Column("kind", sa.Text(), nullable=False),
        sa.Column("status", sa.Text(), nullable=False),
        sa.Column("start_time", sa.BigInteger(), nullable=False),
        sa.Column("end_time", sa.BigInteger(), nullable=True),
        sa.Column("duration_ns", sa.BigInteger(), nullable=True),
        sa.Column("span_count", sa.Integer(), nullable=False),
        sa.Column("error_count", sa.Integer(), nullable=False),
        sa.Column("input_tokens", sa.BigInteger(), nullable=True),
        sa.Column("output_tokens", sa.BigInteger(), nullable=True),
        sa.Column("total_tokens", sa.BigInteger(), nullable=True),
        sa.Column("usage_details", JSON_DOC, nullable=True),
        sa.Column("cost_currency", sa.Text(), nullable=True),
        sa.Column("input_cost", sa.Double(), nullable=True),
        sa.Column("output_cost", sa.Double(), nullable=True),
        sa.Column("total_cost", sa.Double(), nullable=True),
        sa.Column("cost_price_book", sa.Text(), nullable=True),
        sa.Column("cost_is_estimated", sa.Boolean(), nullable=True),
        sa.Column("model_count", sa.Integer(), nullable=False),
        sa.Column("tool_count", sa.Integer(), nullable=False),
        sa.Column("tags", JSON_DOC, nullable=True),
        sa.Column("environment", sa.Text(), nullable=True),
        sa.Column("service_name", sa.Text(), nullable=True),
        sa.Column("service_version", sa.Text(), nullable=True),
        sa.Column("session_id", sa.Text(), nullable=True),
        sa.Column("thread_id", sa.Text(), nullable=True),
        sa.Column("user_id", sa.Text(), nullable=True),
        sa.Column("resource_id", sa.Text(), nullable=True),
        sa.Column("run_id", sa.Text(), nullable=True),
        sa.Column("request_id", sa.Text(), nullable=True),
        sa.Column("experiment_id", sa.Text(), nullable=True),
        sa.Column("release", sa.Text(), nullable=True),
        sa.Column("score_summary", JSON_DOC, nullable=True),
        sa.Column("feedback_summary", JSON_DOC, nullable=True),
        sa.Column("is_complete", sa.Boolean(), nullable=False),
        sa.Column("received_at", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("project", "trace_id", name=op.f("pk_traces")),
    )
    op.create_index(
        "ix_traces_project_duration_ns", "traces", ["project", "duration_ns"], unique=False
    )
    op.create_index(
        "ix_traces_project_received_at", "traces", ["project", "received_at"], unique=False
    )
    op.create_index(
        "ix_traces_project_start_time", "traces", ["project", "start_time"], unique=False
    )
    op.create_index(
        "ix_traces_project_status_start_time",
        "traces",
        ["project", "status", "start_time"],
        unique=False,
    )
    op.create_index(
        "ix_traces_project_total_cost", "traces", ["project", "total_cost"], unique=False
    )


def downgrade() -> None:
    op.drop_table("traces")
    op.drop_table("themes")
    op.drop_table("theme_snapshots")
    op.drop_table("spans")
    op.drop_table("scores")
    op.drop_table("metrics")
    op.drop_table("logs")
    op.drop_table("feedback")
    op.drop_table("facet_values")
    op.drop_table("aspect_notes")
