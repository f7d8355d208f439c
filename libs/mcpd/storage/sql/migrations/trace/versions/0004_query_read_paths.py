"""Trace store: what the query service's reads need (arrival sequences, text search, indexes).

* `arrival_seq` (default 0) on spans, traces and logs, indexed by (project, arrival_seq), and the
  one-row `arrival_clock` SQLite's writers stamp from. Rows stored before this revision keep 0:
  a delta poll starts at the current end, so it never asks for them.
* `search_vector` on spans and logs (a GIN-indexed tsvector on PostgreSQL; NULL on SQLite, under
  an index that is partial so it stays empty), and on SQLite the FTS5 tables `spans_fts` and
  `logs_fts` with the triggers that drop a row's entry when the row is deleted. Rows already
  stored are indexed here, by the code ingest indexes with (`rebuild_search_index`), so a search
  finds them too.
* The sort keys of the lists as indexes ending in the row's id: traces' (project, start_time),
  (project, total_cost) and (project, duration_ns) indexes are rebuilt with trace_id, and logs,
  scores and feedback get (project, timestamp, <id>).

Revision ID: 0004_query_read_paths
Revises: 0003_ingest_keys_held_spans
Create Date: 2026-12-02
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

from mcpd.storage.sql.dialect import SqlDialect
from mcpd.storage.sql.signals.statements import rebuild_search_index

revision = "0004_query_read_paths"
down_revision = "0003_ingest_keys_held_spans"
branch_labels = None
depends_on = None

STAMPED = ("spans", "traces", "logs")
SEARCHED = ("spans", "logs")
# Each list's sort key and the row id that ends it.
LISTED_BY_TIME = {"logs": "log_id", "scores": "score_id", "feedback": "feedback_id"}
TRACE_SORTS = ("start_time", "total_cost", "duration_ns")
SEARCH_VECTOR = sa.Text().with_variant(postgresql.TSVECTOR(), "postgresql")


def upgrade() -> None:
    bind = op.get_bind()
    dialect = SqlDialect.of(bind.dialect)
    for table in STAMPED:
        op.add_column(
            table,
            sa.Column("arrival_seq", sa.BigInteger(), server_default=sa.text("0"), nullable=False),
        )
        op.create_index(f"ix_{table}_project_arrival_seq", table, ["project", "arrival_seq"])
    op.create_table(
        "arrival_clock",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("seq", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_arrival_clock")),
    )
    op.execute("INSERT INTO arrival_clock (id, seq) VALUES (1, 0)")
    for table in SEARCHED:
        op.add_column(table, sa.Column("search_vector", SEARCH_VECTOR, nullable=True))
        op.create_index(
            f"ix_{table}_search_vector",
            table,
            ["search_vector"],
            postgresql_using="gin",
            sqlite_where=sa.text("search_vector IS NOT NULL"),
        )
        if dialect is SqlDialect.SQLITE:
            _create_fts(table)
        rebuild_search_index(bind, dialect, table)
    for table, row_id in LISTED_BY_TIME.items():
        op.create_index(
            f"ix_{table}_project_timestamp_{row_id}", table, ["project", "timestamp", row_id]
        )
    for column in TRACE_SORTS:
        op.drop_index(f"ix_traces_project_{column}", table_name="traces")
        op.create_index(
            f"ix_traces_project_{column}_trace_id", "traces", ["project", column, "trace_id"]
        )


def _create_fts(table: str) -> None:
    # columnsize=0: nothing ranks by document length, so the per-row size table is not kept.
    op.execute(
        f"CREATE VIRTUAL TABLE {table}_fts USING fts5"
        "(search_text, tokenize='unicode61', columnsize=0)"
    )
    op.execute(
        f"CREATE TRIGGER {table}_fts_delete AFTER DELETE ON {table} "
        f"BEGIN DELETE FROM {table}_fts WHERE rowid = old.rowid; END"
    )


def downgrade() -> None:
    bind = op.get_bind()
    for column in TRACE_SORTS:
        op.drop_index(f"ix_traces_project_{column}_trace_id", table_name="traces")
        op.create_index(f"ix_traces_project_{column}", "traces", ["project", column])
    for table, row_id in LISTED_BY_TIME.items():
        op.drop_index(f"ix_{table}_project_timestamp_{row_id}", table_name=table)
    for table in SEARCHED:
        if SqlDialect.of(bind.dialect) is SqlDialect.SQLITE:
            op.execute(f"DROP TRIGGER {table}_fts_delete")
            op.execute(f"DROP TABLE {table}_fts")
        op.drop_index(f"ix_{table}_search_vector", table_name=table)
        op.drop_column(table, "search_vector")
    op.drop_table("arrival_clock")
    for table in STAMPED:
        op.drop_index(f"ix_{table}_project_arrival_seq", table_name=table)
        op.drop_column(table, "arrival_seq")
