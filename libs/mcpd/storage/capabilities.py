"""What each trace-store backend reports as its StoreCapabilities, kept as data in one place.

The values describe each backend as designed: what the query service will answer on it. Where a
value is a claim about the engine (case folding, word matching), a test runs the engine to show
it holds (tests/libs/storage/test_capability_claims.py).

| capability             | sqlite | postgres | clickhouse |
|------------------------|--------|----------|------------|
| text_search            | words  | words    | substring  |
| unicode_case_folding   | true   | true     | true       |
| immediate_deletes      | true   | true     | false      |
| discovery              | true   | true     | true       |
| discovery_label_values | true   | true     | true       |
| delta_polling          | true   | true     | false      |
| per_signal_retention   | true   | true     | true       |
| declarative_retention  | false  | false    | true       |
| partitioning           | none   | none     | month      |
| partition_drop_retention | false | false   | true       |
| idempotent_schema_init | true   | true     | true       |
| theme_analysis         | true   | true     | true       |

Why:

* text_search / unicode_case_folding. SQLite matches words through an FTS5 index with the
  `unicode61` tokenizer, which splits on Unicode word boundaries and folds case (and
  diacritics) for all of Unicode. PostgreSQL matches words through a `tsvector` of the words the
  daemon split and case-folded with Python's `str.casefold()` (and the query's words likewise,
  ANDed in a `tsquery`), so the result does not depend on the database's locale or parser.
  ClickHouse matches substrings with `ILIKE`, whose case-insensitive UTF-8 matching folds
  non-ASCII letters (CAFÉ finds café); a token index would fold ASCII only.
* immediate_deletes. SQLite and PostgreSQL deletes are committed when the call returns;
  ClickHouse deletes are mutations applied asynchronously.
* discovery / discovery_label_values. Every backend keeps the `facet_values` table (project,
  facet, key, value, last_seen) up to date at ingest, bounded by the cardinality filter, so
  keys and values are both a small indexed read.
* delta_polling. SQLite has one writer at a time (BEGIN IMMEDIATE), so an arrival sequence
  assigned inside the write transaction commits in order and a cursor over it never skips a row.
  PostgreSQL commits concurrent writers out of order; the cursor there carries the writing
  transaction id and a poll returns only rows below the oldest transaction still in flight
  (`pg_snapshot_xmin`), which never skips one. ClickHouse has no transaction that orders an
  arrival stamp with visibility across concurrent inserts, so a cursor could skip a late row:
  it declares false rather than answer wrongly.
* per_signal_retention. Each signal has its own table, so each can carry its own window: a
  per-table delete pass on SQLite and PostgreSQL, a per-table TTL on ClickHouse.
* declarative_retention. Only ClickHouse can hand the window to the engine (TTL).
* partitioning / partition_drop_retention. Only ClickHouse partitions signal tables (by month,
  `toYYYYMM`) and can drop a whole month; the SQL backends delete rows.
* idempotent_schema_init. A start with nothing pending only reads the version table
  (Alembic's on SQLite/PostgreSQL, `schema_migrations` on ClickHouse); proven by
  tests/libs/storage/test_migrations.py counting the statements issued.
* theme_analysis. Every backend holds the aspect_notes, theme_snapshots and themes tables;
  clustering runs in the daemon, so there is nothing backend-specific to support.
"""

from __future__ import annotations

from dataclasses import dataclass

from mcpd.model.v1 import enums_pb2, query_pb2


@dataclass(frozen=True)
class BackendCapabilities:
    """One backend's StoreCapabilities, as plain data."""

    backend: str
    text_search: enums_pb2.TextSearch.ValueType
    unicode_case_folding: bool
    immediate_deletes: bool
    discovery: bool
    discovery_label_values: bool
    delta_polling: bool
    per_signal_retention: bool
    declarative_retention: bool
    partitioning: enums_pb2.Partitioning.ValueType
    partition_drop_retention: bool
    idempotent_schema_init: bool
    theme_analysis: bool

    def to_proto(self) -> query_pb2.StoreCapabilities:
        """The StoreCapabilities message the capabilities endpoint returns."""
        return query_pb2.StoreCapabilities(
            backend=self.backend,
            text_search=self.text_search,
            unicode_case_folding=self.unicode_case_folding,
            immediate_deletes=self.immediate_deletes,
            discovery=self.discovery,
            discovery_label_values=self.discovery_label_values,
            delta_polling=self.delta_polling,
            per_signal_retention=self.per_signal_retention,
            declarative_retention=self.declarative_retention,
            partitioning=self.partitioning,
            partition_drop_retention=self.partition_drop_retention,
            idempotent_schema_init=self.idempotent_schema_init,
            theme_analysis=self.theme_analysis,
        )


SQLITE = BackendCapabilities(
    backend="sqlite",
    text_search=enums_pb2.TEXT_SEARCH_WORDS,
    unicode_case_folding=True,
    immediate_deletes=True,
    discovery=True,
    discovery_label_values=True,
    delta_polling=True,
    per_signal_retention=True,
    declarative_retention=False,
    partitioning=enums_pb2.PARTITIONING_NONE,
    partition_drop_retention=False,
    idempotent_schema_init=True,
    theme_analysis=True,
)

POSTGRES = BackendCapabilities(
    backend="postgres",
    text_search=enums_pb2.TEXT_SEARCH_WORDS,
    unicode_case_folding=True,
    immediate_deletes=True,
    discovery=True,
    discovery_label_values=True,
    delta_polling=True,
    per_signal_retention=True,
    declarative_retention=False,
    partitioning=enums_pb2.PARTITIONING_NONE,
    partition_drop_retention=False,
    idempotent_schema_init=True,
    theme_analysis=True,
)

CLICKHOUSE = BackendCapabilities(
    backend="clickhouse",
    text_search=enums_pb2.TEXT_SEARCH_SUBSTRING,
    unicode_case_folding=True,
    immediate_deletes=False,
    discovery=True,
    discovery_label_values=True,
    delta_polling=False,
    per_signal_retention=True,
    declarative_retention=True,
    partitioning=enums_pb2.PARTITIONING_MONTH,
    partition_drop_retention=True,
    idempotent_schema_init=True,
    theme_analysis=True,
)

BY_BACKEND: dict[str, BackendCapabilities] = {
    caps.backend: caps for caps in (SQLITE, POSTGRES, CLICKHOUSE)
}
