"""Run store: runs by project and end, the window the evaluation service's run watches read
(the runs that ended in it, and those still running, whose end is NULL).

Revision ID: 0005_run_endings
Revises: 0004_span_outbox
Create Date: 2026-12-08
"""

from __future__ import annotations

from alembic import op

revision = "0005_run_endings"
down_revision = "0004_span_outbox"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_index("ix_runs_project_ended_at", "runs", ["project", "ended_at"], unique=False)


def downgrade() -> None:
    op.drop_index("ix_runs_project_ended_at", table_name="runs")
