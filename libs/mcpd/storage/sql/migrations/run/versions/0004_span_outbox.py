"""Run store: the outbox of spans the orchestrator writes for runs and attempts, queued in the
transaction of the change they record and sent to ingest afterwards.

Revision ID: 0004_span_outbox
Revises: 0003_leases
Create Date: 2026-12-04
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0004_span_outbox"
down_revision = "0003_leases"
branch_labels = None
depends_on = None

JSON_DOC = sa.JSON(none_as_null=True).with_variant(
    postgresql.JSONB(none_as_null=True), "postgresql"
)


def upgrade() -> None:
    op.create_table(
        "span_outbox",
        sa.Column("outbox_id", sa.Text(), nullable=False),
        sa.Column("project", sa.Text(), nullable=False),
        sa.Column("run_id", sa.Text(), nullable=False),
        sa.Column("span", JSON_DOC, nullable=False),
        sa.Column("created_at", sa.BigInteger(), nullable=False),
        sa.ForeignKeyConstraint(
            ["run_id"], ["runs.run_id"], name=op.f("fk_span_outbox_run_id_runs"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("outbox_id", name=op.f("pk_span_outbox")),
    )
    op.create_index("ix_span_outbox_run_id", "span_outbox", ["run_id"], unique=False)


def downgrade() -> None:
    op.drop_index("ix_span_outbox_run_id", table_name="span_outbox")
    op.drop_table("span_outbox")
