"""Trace store: `rollups`, the analytics figures of whole hours and days, kept as rows arrive
(`mcpd.signals.rollups`), filled here from the traces and spans already stored.

Revision ID: 0008_rollups
Revises: 0007_datasets
Create Date: 2026-12-06
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

from mcpd.storage.sql.dialect import SqlDialect
from mcpd.storage.sql.signals.rollups import rebuild

revision = "0008_rollups"
down_revision = "0007_datasets"
branch_labels = None
depends_on = None


def upgrade() -> None:
    counted = [
        "count",
        "error_count",
        "span_count",
        "input_tokens",
        "output_tokens",
        "cost_count",
    ]
    op.create_table(
        "rollups",
        sa.Column("project", sa.Text(), nullable=False),
        sa.Column("dimension", sa.Text(), nullable=False),
        sa.Column("level", sa.BigInteger(), nullable=False),
        sa.Column("bucket_start", sa.BigInteger(), nullable=False),
        sa.Column("key", sa.Text(), nullable=False),
        *[sa.Column(name, sa.BigInteger(), nullable=False) for name in counted],
        sa.Column("total_cost", sa.Double(), nullable=False),
        sa.Column("duration_count", sa.BigInteger(), nullable=False),
        sa.Column("duration_sum", sa.BigInteger(), nullable=False),
        sa.Column(
            "sketch", sa.Text().with_variant(postgresql.JSONB(), "postgresql"), nullable=False
        ),
        sa.PrimaryKeyConstraint(
            "project", "dimension", "level", "bucket_start", "key", name=op.f("pk_rollups")
        ),
    )
    # What is already stored, rolled up as the writers would have (one pass over the traces
    # and the spans that carry a model or provider).
    bind = op.get_bind()
    rebuild(bind, SqlDialect.of(bind.dialect))


def downgrade() -> None:
    op.drop_table("rollups")
