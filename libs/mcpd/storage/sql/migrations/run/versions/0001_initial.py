"""Run store: definitions, runs, attempts, events, timers, waits, parked events, idempotency.

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
        "definitions",
        sa.Column("project", sa.Text(), nullable=False),
        sa.Column("id", sa.Text(), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("kind", sa.Text(), nullable=False),
        sa.Column("body", JSON_DOC, nullable=False),
        sa.Column("created_at", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("project", "id", "version", name=op.f("pk_definitions")),
    )
    op.create_table(
        "idempotency_keys",
        sa.Column("project", sa.Text(), nullable=False),
        sa.Column("scope", sa.Text(), nullable=False),
        sa.Column("key", sa.Text(), nullable=False),
        sa.Column("target", sa.Text(), nullable=False),
        sa.Column("created_at", sa.BigInteger(), nullable=False),
        sa.Column("expires_at", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("project", "scope", "key", name=op.f("pk_idempotency_keys")),
    )
    op.create_index(
        "ix_idempotency_keys_expires_at", "idempotency_keys", ["expires_at"], unique=False
    )
    op.create_table(
        "parked_events",
        sa.Column("project", sa.Text(), nullable=False),
        sa.Column("event_id", sa.Text(), nullable=False),
        sa.Column("event", sa.Text(), nullable=False),
        sa.Column("key", sa.Text(), nullable=False),
        sa.Column("payload", JSON_DOC, nullable=True),
        sa.Column("parked_at", sa.BigInteger(), nullable=False),
        sa.Column("expires_at", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("project", "event_id", name=op.f("pk_parked_events")),
    )
    op.create_index("ix_parked_events_expires_at", "parked_events", ["expires_at"], unique=False)
    op.create_index(
        "ix_parked_events_project_event_key_parked_at",
        "parked_events",
        ["project", "event", "key", "parked_at"],
        unique=False,
    )
    op.create_table(
        "runs",
        sa.Column("run_id", sa.Text(), nullable=False),
        sa.Column("project", sa.Text(), nullable=False),
        sa.Column("definition_id", sa.Text(), nullable=False),
        sa.Column("definition_version", sa.Integer(), nullable=False),
        sa.Column("status", sa.Text(), nullable=False),
        sa.Column("cursor_index", sa.Integer(), nullable=False),
        sa.Column("cursor_construct", sa.Text(), nullable=False),
        sa.Column("cursor_step_key", sa.Text(), nullable=True),
        sa.Column("input", JSON_DOC, nullable=True),
        sa.Column("output", JSON_DOC, nullable=True),
        sa.Column("state", JSON_DOC, nullable=True),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("environment", sa.Text(), nullable=True),
        sa.Column("service_name", sa.Text(), nullable=True),
        sa.Column("service_version", sa.Text(), nullable=True),
        sa.Column("session_id", sa.Text(), nullable=True),
        sa.Column("thread_id", sa.Text(), nullable=True),
        sa.Column("user_id", sa.Text(), nullable=True),
        sa.Column("resource_id", sa.Text(), nullable=True),
        sa.Column("request_id", sa.Text(), nullable=True),
        sa.Column("experiment_id", sa.Text(), nullable=True),
        sa.Column("release", sa.Text(), nullable=True),
        sa.Column("trace_id", sa.Text(), nullable=False),
        sa.Column("steps_used", sa.Integer(), nullable=False),
        sa.Column("max_steps", sa.Integer(), nullable=True),
        sa.Column("cost_usd", sa.Double(), nullable=False),
        sa.Column("max_cost_usd", sa.Double(), nullable=True),
        sa.Column("deadline_at", sa.BigInteger(), nullable=True),
        sa.Column("idempotency_key", sa.Text(), nullable=True),
        sa.Column("root_run_id", sa.Text(), nullable=False),
        sa.Column("parent_run_id", sa.Text(), nullable=True),
        sa.Column("parent_step_key", sa.Text(), nullable=True),
        sa.Column("depth", sa.Integer(), nullable=False),
        sa.Column("next_event_seq", sa.BigInteger(), nullable=False),
        sa.Column("created_at", sa.BigInteger(), nullable=False),
        sa.Column("updated_at", sa.BigInteger(), nullable=False),
        sa.Column("ended_at", sa.BigInteger(), nullable=True),
        sa.ForeignKeyConstraint(
            ["project", "definition_id", "definition_version"],
            ["definitions.project", "definitions.id", "definitions.version"],
            name=op.f("fk_runs_project_definitions"),
        ),
        sa.PrimaryKeyConstraint("run_id", name=op.f("pk_runs")),
    )
    op.create_index("ix_runs_parent_run_id", "runs", ["parent_run_id"], unique=False)
    op.create_index("ix_runs_project_created_at", "runs", ["project", "created_at"], unique=False)
    op.create_index(
        "ix_runs_project_definition_id_definition_version_created_at",
        "runs",
        ["project", "definition_id", "definition_version", "created_at"],
        unique=False,
    )
    op.create_index(
        "ix_runs_project_status_created_at",
        "runs",
        ["project", "status", "created_at"],
        unique=False,
    )
    op.create_index("ix_runs_project_user_id", "runs", ["project", "user_id"], unique=False)
    op.create_index("ix_runs_root_run_id", "runs", ["root_run_id"], unique=False)
    op.create_table(
        "run_events",
        sa.Column("project", sa.Text(), nullable=False),
        sa.Column("run_id", sa.Text(), nullable=False),
        sa.Column("seq", sa.BigInteger(), nullable=False),
        sa.Column("kind", sa.Text(), nullable=False),
        sa.Column("payload", JSON_DOC, nullable=True),
        sa.Column("at", sa.BigInteger(), nullable=False),
        sa.ForeignKeyConstraint(
            ["run_id"], ["runs.run_id"], name=op.f("fk_run_events_run_id_runs"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("run_id", "seq", name=op.f("pk_run_events")),
    )
    op.create_table(
        "step_attempts",
        sa.Column("project", sa.Text(), nullable=False),
        sa.Column("run_id", sa.Text(), nullable=False),
        sa.Column("step_key", sa.Text(), nullable=False),
        sa.Column("attempt", sa.Integer(), nullable=False),
        sa.Column("kind", sa.Text(), nullable=False),
        sa.Column("effect", sa.Text(), nullable=False),
        sa.Column("status", sa.Text(), nullable=False),
        sa.Column("input", JSON_DOC, nullable=True),
        sa.Column("output", JSON_DOC, nullable=True),
        sa.Column("error", JSON_DOC, nullable=True),
        sa.Column("usage", JSON_DOC, nullable=True),
        sa.Column("cost_usd", sa.Double(), nullable=True),
        sa.Column("span_id", sa.Text(), nullable=False),
        sa.Column("lease_owner", sa.Text(), nullable=True),
        sa.Column("lease_until", sa.BigInteger(), nullable=True),
        sa.Column("started_at", sa.BigInteger(), nullable=True),
        sa.Column("orphaned_at", sa.BigInteger(), nullable=True),
        sa.Column("reclaim_until", sa.BigInteger(), nullable=True),
        sa.Column("attempts_left", sa.Integer(), nullable=True),
        sa.Column("ended_at", sa.BigInteger(), nullable=True),
        sa.Column("created_at", sa.BigInteger(), nullable=False),
        sa.ForeignKeyConstraint(
            ["run_id"],
            ["runs.run_id"],
            name=op.f("fk_step_attempts_run_id_runs"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("run_id", "step_key", "attempt", name=op.f("pk_step_attempts")),
    )
    op.create_index(
        "ix_step_attempts_project_status_created_at",
        "step_attempts",
        ["project", "status", "created_at"],
        unique=False,
    )
    op.create_table(
        "timers",
        sa.Column("project", sa.Text(), nullable=False),
        sa.Column("run_id", sa.Text(), nullable=False),
        sa.Column("kind", sa.Text(), nullable=False),
        sa.Column("step_key", sa.Text(), nullable=False),
        sa.Column("attempt", sa.Integer(), nullable=True),
        sa.Column("due_at", sa.BigInteger(), nullable=False),
        sa.ForeignKeyConstraint(
            ["run_id"], ["runs.run_id"], name=op.f("fk_timers_run_id_runs"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("run_id", "kind", "step_key", name=op.f("pk_timers")),
    )
    op.create_index("ix_timers_due_at", "timers", ["due_at"], unique=False)
    op.create_table(
        "waits",
        sa.Column("project", sa.Text(), nullable=False),
        sa.Column("run_id", sa.Text(), nullable=False),
        sa.Column("step_key", sa.Text(), nullable=False),
        sa.Column("event", sa.Text(), nullable=False),
        sa.Column("key", sa.Text(), nullable=False),
        sa.Column("expires_at", sa.BigInteger(), nullable=False),
        sa.ForeignKeyConstraint(
            ["run_id"], ["runs.run_id"], name=op.f("fk_waits_run_id_runs"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("run_id", "step_key", name=op.f("pk_waits")),
    )
    op.create_index(
        "ix_waits_project_event_key_expires_at",
        "waits",
        ["project", "event", "key", "expires_at"],
        unique=False,
    )


def downgrade() -> None:
    op.drop_table("waits")
    op.drop_table("timers")
    op.drop_table("step_attempts")
    op.drop_table("run_events")
    op.drop_table("runs")
    op.drop_table("parked_events")
    op.drop_table("idempotency_keys")
    op.drop_table("definitions")
