"""The rollups tables, in the trace store's MetaData (`mcpd.signals.rollups` says what a row
holds and how it is kept).

`rollups`: one row per (project, dimension, level, bucket_start, key); `sketch` is the duration
histogram as a JSON object of bin -> count (JSONB on PostgreSQL, JSON text on SQLite), merged by
the upsert itself so concurrent writers only ever add. `score_rollups`: one row per (project,
scorer_id, level, bucket_start), the count and value sum of the scores of that bucket.
"""

from __future__ import annotations

from sqlalchemy import Column, Double, PrimaryKeyConstraint, Table, Text
from sqlalchemy.dialects.postgresql import JSONB

from mcpd.storage.sql.schema.trace import metadata
from mcpd.storage.sql.types import Count, TimestampNs

rollups = Table(
    "rollups",
    metadata,
    Column("project", Text, nullable=False),
    Column("dimension", Text, nullable=False),
    Column("level", Count, nullable=False),
    Column("bucket_start", TimestampNs, nullable=False),
    Column("key", Text, nullable=False),
    Column("count", Count, nullable=False),
    Column("error_count", Count, nullable=False),
    Column("span_count", Count, nullable=False),
    Column("input_tokens", Count, nullable=False),
    Column("output_tokens", Count, nullable=False),
    Column("cost_count", Count, nullable=False),
    Column("total_cost", Double, nullable=False),
    Column("duration_count", Count, nullable=False),
    Column("duration_sum", Count, nullable=False),
    Column("sketch", Text().with_variant(JSONB(), "postgresql"), nullable=False),
    PrimaryKeyConstraint("project", "dimension", "level", "bucket_start", "key"),
)

score_rollups = Table(
    "score_rollups",
    metadata,
    Column("project", Text, nullable=False),
    Column("scorer_id", Text, nullable=False),
    Column("level", Count, nullable=False),
    Column("bucket_start", TimestampNs, nullable=False),
    Column("count", Count, nullable=False),
    Column("value_sum", Double, nullable=False),
    PrimaryKeyConstraint("project", "scorer_id", "level", "bucket_start"),
)
