"""Run store: leases with an identity of their own, and the lease holding each attempt.

Revision ID: 0003_leases
Revises: 0002_definition_digest
Create Date: 2026-12-04
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003_leases"
down_revision = "0002_definition_digest"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "leases",
        sa.Column("lease_id", sa.Text(), nullable=False),
        sa.Column("project", sa.Text(), nullable=False),
        sa.Column("run_id", sa.Text(), nullable=False),
        sa.Column("step_key", sa.Text(), nullable=False),
        sa.Column("attempt", sa.Integer(), nullable=False),
        sa.Column("worker_id", sa.Text(), nullable=False),
        sa.Column("issued_at", sa.BigInteger(), nullable=False),
        sa.Column("outcome", sa.Text(), nullable=True),
        sa.ForeignKeyConstraint(
            ["run_id"], ["runs.run_id"], name=op.f("fk_leases_run_id_runs"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("lease_id", name=op.f("pk_leases")),
    )
    op.create_index(
        "ix_leases_run_id_step_key_attempt",
        "leases",
        ["run_id", "step_key", "attempt"],
        unique=False,
    )
    op.add_column("step_attempts", sa.Column("lease_id", sa.Text(), nullable=True))


def downgrade() -> None:
    op.drop_column("step_attempts", "lease_id")
    op.drop_index("ix_leases_run_id_step_key_attempt", table_name="leases")
    op.drop_table("leases")
