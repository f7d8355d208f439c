-- The session read model on ClickHouse (mcpd/storage/clickhouse/sessions): the same tables and
-- columns as the SQL backends (mcpd/storage/sql/schema/sessions.py), shaped for ClickHouse.
--
-- * Every table is a ReplacingMergeTree keyed by the row's identity: a rewrite inserts the row
--   again with a higher `version` (the project's read-model version at the write), and a row
--   that vanished from a session gets a tombstone (`is_deleted = 1`) at that version. Reads use
--   FINAL, which keeps the newest row of each key and drops tombstoned keys, so they are exact
--   before any merge happens; merges eventually drop the replaced rows and the tombstones.
-- * Times are Int64 nanoseconds since the epoch, as in the SQL schema (the row code is shared).
-- * Search: each searchable event carries its analyzed tokens (the shared analyzer,
--   mcpd/sessions/search/analysis.py, so folding matches the other backends) and their count;
--   a text index (tokenizer 'array': one index term per array element) prunes the granules a
--   query's terms cannot be in, and BM25 is computed in SQL. The text index needs ClickHouse
--   26.x (on by default there; chdb 4.4 ships 26.9).
-- Every statement is safe to run again (IF NOT EXISTS): see clickhouse/migrate.py.

-- One row per project after merges; the highest version is the project's snapshot.
CREATE TABLE IF NOT EXISTS session_versions
(
    project String,
    version UInt64
)
ENGINE = ReplacingMergeTree(version)
ORDER BY project;

-- search_docs and search_length: the count of the session's searchable events and the sum of
-- their token counts, which give BM25 its corpus size and average document length.
CREATE TABLE IF NOT EXISTS sessions
(
    project String,
    id String,
    source String,
    harness LowCardinality(String),
    session_key String,
    path String,
    title Nullable(String),
    display_label String,
    started_at Int64,
    updated_at Int64,
    completed Bool,
    turn_count Int64,
    event_count Int64,
    mode Nullable(String),
    slug Nullable(String),
    summary Nullable(String) CODEC(ZSTD(3)),
    cwd Nullable(String),
    content_hash String,
    search_docs UInt64,
    search_length UInt64,
    version UInt64
)
ENGINE = ReplacingMergeTree(version)
ORDER BY (project, id);

CREATE TABLE IF NOT EXISTS turns
(
    project String,
    id String,
    session_id String DEFAULT '',
    ordinal Int64 DEFAULT 0,
    started_at Int64 DEFAULT 0,
    updated_at Int64 DEFAULT 0,
    completed Bool DEFAULT false,
    event_count Int64 DEFAULT 0,
    terminal_event_id Nullable(String),
    user_input_event_id Nullable(String),
    final_response_event_id Nullable(String),
    tools_called Array(String),
    event_types Array(String),
    row_hash String DEFAULT '',
    version UInt64,
    is_deleted UInt8 DEFAULT 0,
    INDEX idx_session_id session_id TYPE bloom_filter(0.01) GRANULARITY 1
)
ENGINE = ReplacingMergeTree(version, is_deleted)
ORDER BY (project, id);

CREATE TABLE IF NOT EXISTS events
(
    project String,
    id String,
    session_id String DEFAULT '',
    turn_id String DEFAULT '',
    ordinal Int64 DEFAULT 0,
    seq Int64 DEFAULT 0,
    type LowCardinality(String) DEFAULT '',
    timestamp_ns Int64 DEFAULT 0,
    terminal Bool DEFAULT false,
    text String DEFAULT '' CODEC(ZSTD(3)),
    tool_name Nullable(String),
    model Nullable(String),
    originating_model Nullable(String),
    call_id Nullable(String),
    payload Nullable(String) CODEC(ZSTD(3)),
    line Int64 DEFAULT 0,
    harness LowCardinality(String) DEFAULT '',
    source String DEFAULT '',
    row_hash String DEFAULT '',
    searchable Bool DEFAULT false,
    tokens Array(String) CODEC(ZSTD(3)),
    doc_length UInt64 DEFAULT 0,
    version UInt64,
    is_deleted UInt8 DEFAULT 0,
    INDEX idx_session_id session_id TYPE bloom_filter(0.01) GRANULARITY 1,
    INDEX idx_turn_id turn_id TYPE bloom_filter(0.01) GRANULARITY 1,
    INDEX idx_tokens tokens TYPE text(tokenizer = 'array')
)
ENGINE = ReplacingMergeTree(version, is_deleted)
ORDER BY (project, id);

-- A touch is identified by its position in its session: a rewrite replaces every position and
-- tombstones the positions past the new end.
CREATE TABLE IF NOT EXISTS file_touches
(
    project String,
    session_id String,
    position Int64,
    event_id String DEFAULT '',
    turn_id Nullable(String),
    timestamp_ns Nullable(Int64),
    tool_name String DEFAULT '',
    raw_path String DEFAULT '',
    tail String DEFAULT '',
    basename String DEFAULT '',
    tail_is_absolute Bool DEFAULT false,
    worktree_root Nullable(String),
    git_common_dir Nullable(String),
    mutation Bool DEFAULT false,
    phase LowCardinality(String) DEFAULT '',
    harness LowCardinality(String) DEFAULT '',
    source String DEFAULT '',
    version UInt64,
    is_deleted UInt8 DEFAULT 0,
    INDEX idx_basename basename TYPE bloom_filter(0.01) GRANULARITY 1
)
ENGINE = ReplacingMergeTree(version, is_deleted)
ORDER BY (project, session_id, position);
