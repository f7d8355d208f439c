"""Control store: index API keys by account, and page the audit log by (timestamp, audit_id).

`list_keys` reads an account's keys, and deleting an account cascades to them, so
`api_keys.account_email` gets an index. `list_audit` pages a project's log newest first with
`audit_id` as the tie-breaker; the (project, timestamp) index is replaced by one that ends with
`audit_id` too, so a page is one index range scan on both backends.

Revision ID: 0002_key_owner_audit_order
Revises: 0001_initial
Create Date: 2026-11-30
"""

from __future__ import annotations

from alembic import op

revision = "0002_key_owner_audit_order"
down_revision = "0001_initial"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_index("ix_api_keys_account_email", "api_keys", ["account_email"], unique=False)
    op.create_index(
        "ix_audit_log_project_timestamp_audit_id",
        "audit_log",
        ["project", "timestamp", "audit_id"],
        unique=False,
    )
    op.drop_index("ix_audit_log_project_timestamp", table_name="audit_log")


def downgrade() -> None:
    op.create_index(
        "ix_audit_log_project_timestamp", "audit_log", ["project", "timestamp"], unique=False
    )
    op.drop_index("ix_audit_log_project_timestamp_audit_id", table_name="audit_log")
    op.drop_index("ix_api_keys_account_email", table_name="api_keys")
