"""Trace store: datasets, dataset items, experiments and the items of experiments' runs, and the
indexes an experiment's summary reads scores and traces by.

Revision ID: 0007_datasets
Revises: 0006_trace_sessions
Create Date: 2026-12-06
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0007_datasets"
down_revision = "0006_trace_sessions"
branch_labels = None
depends_on = None

# Spelled out rather than imported, so this migration keeps creating what it created when it
# was written: a JSON document (JSONB on PostgreSQL; None is SQL NULL).
JSON_DOC = sa.JSON(none_as_null=True).with_variant(
    postgresql.JSONB(none_as_null=True), "postgresql"
)


def _index(table: str, *columns: str, unique: bool = False) -> None:
    prefix = "uq" if unique else "ix"
    op.create_index(f"{prefix}_{table}_{'_'.join(columns)}", table, list(columns), unique=unique)


def upgrade() -> None:
    op.create_table(
        "datasets",
        sa.Column("project", sa.Text(), nullable=False),
        sa.Column("dataset_id", sa.Text(), nullable=False),
        sa.Column("name", sa.Text(), nullable=False),
        sa.Column("description", sa.Text(), nullable=True),
        sa.Column("created_at", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("project", "dataset_id", name=op.f("pk_datasets")),
    )
    _index("datasets", "project", "name", unique=True)
    _index("datasets", "project", "created_at", "dataset_id")
    op.create_table(
        "dataset_items",
        sa.Column("project", sa.Text(), nullable=False),
        sa.Column("item_id", sa.Text(), nullable=False),
        sa.Column("dataset_id", sa.Text(), nullable=False),
        sa.Column("input", JSON_DOC, nullable=True),
        sa.Column("expected", JSON_DOC, nullable=True),
        sa.Column("metadata", JSON_DOC, nullable=True),
        sa.Column("source_trace_id", sa.Text(), nullable=True),
        sa.Column("created_at", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("project", "dataset_id", "item_id", name=op.f("pk_dataset_items")),
    )
    _index("dataset_items", "project", "dataset_id", "created_at", "item_id")
    _index("dataset_items", "project", "source_trace_id")
    op.create_table(
        "experiments",
        sa.Column("project", sa.Text(), nullable=False),
        sa.Column("experiment_id", sa.Text(), nullable=False),
        sa.Column("name", sa.Text(), nullable=False),
        sa.Column("dataset_id", sa.Text(), nullable=False),
        sa.Column("status", sa.Text(), nullable=False),
        sa.Column("created_at", sa.BigInteger(), nullable=False),
        sa.Column("started_at", sa.BigInteger(), nullable=True),
        sa.Column("finished_at", sa.BigInteger(), nullable=True),
        sa.Column("baseline_id", sa.Text(), nullable=True),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("metadata", JSON_DOC, nullable=True),
        sa.Column("driven", sa.Boolean(), nullable=False),
        sa.PrimaryKeyConstraint("project", "experiment_id", name=op.f("pk_experiments")),
    )
    _index("experiments", "project", "created_at", "experiment_id")
    _index("experiments", "status")
    op.create_table(
        "experiment_items",
        sa.Column("project", sa.Text(), nullable=False),
        sa.Column("experiment_id", sa.Text(), nullable=False),
        sa.Column("item_id", sa.Text(), nullable=False),
        sa.Column("run_id", sa.Text(), nullable=True),
        sa.Column("trace_id", sa.Text(), nullable=True),
        sa.Column("status", sa.Text(), nullable=False),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("updated_at", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint(
            "project", "experiment_id", "item_id", name=op.f("pk_experiment_items")
        ),
    )
    _index("experiment_items", "project", "trace_id")
    _index("scores", "project", "experiment_id")
    _index("traces", "project", "experiment_id")


def downgrade() -> None:
    op.drop_index("ix_traces_project_experiment_id", "traces")
    op.drop_index("ix_scores_project_experiment_id", "scores")
    for table in ("experiment_items", "experiments", "dataset_items", "datasets"):
        op.drop_table(table)
