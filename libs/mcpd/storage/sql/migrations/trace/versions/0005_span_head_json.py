"""Trace store: `head_json` on spans, each span's spec JSON without its payloads.

Rendered by the writer from then on (`mcpd.signals.documents.span_head`); rows stored before
this revision keep NULL, and a trace holding one is rendered from its rows instead, so nothing is
rewritten here.

Revision ID: 0005_span_head_json
Revises: 0004_query_read_paths
Create Date: 2026-11-30
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005_span_head_json"
down_revision = "0004_query_read_paths"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("spans", sa.Column("head_json", sa.Text(), nullable=True))


def downgrade() -> None:
    op.drop_column("spans", "head_json")
