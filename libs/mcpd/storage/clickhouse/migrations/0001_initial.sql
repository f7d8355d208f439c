-- The trace store on ClickHouse: the same tables and columns as the SQL backends
-- (mcpd/storage/sql/schema/trace.py), shaped for ClickHouse.
--
-- Conventions:
-- * Times are DateTime64(9, 'UTC'): nanosecond precision, as the spec asks, and a type that
--   PARTITION BY, ORDER BY and TTL expressions understand.
-- * Wide rows: every signal row carries its correlation (project, environment, service, session,
--   user, ...) denormalised, so no read joins.
-- * An absent string or JSON document is '' (Nullable costs a column of its own); an absent
--   number or time is NULL, since zero would be a real value.
-- * JSON documents (input, output, attributes, ...) are String columns holding JSON text,
--   compressed with ZSTD: they are read back whole, never filtered on inside the database.
-- * Signal tables are partitioned by month of their anchor time, which is what lets retention
--   drop a whole month. received_at (arrival) is on every signal row, so a TTL can be declared
--   on it per table when retention is configured (ALTER TABLE ... MODIFY TTL).
-- * Spans and traces can be rewritten (a span that ends, a trace projection that grows), so they
--   are ReplacingMergeTree: the row with the highest version wins, and reads use FINAL.
-- Every statement is safe to run again (IF NOT EXISTS): see clickhouse/migrate.py.

CREATE TABLE IF NOT EXISTS spans
(
    project LowCardinality(String),
    trace_id String,
    span_id String,
    parent_span_id String DEFAULT '',
    external_parent_span_id String DEFAULT '',
    name LowCardinality(String),
    kind LowCardinality(String),
    status LowCardinality(String),
    start_time DateTime64(9, 'UTC'),
    end_time Nullable(DateTime64(9, 'UTC')),
    duration_ns Nullable(UInt64),
    is_root Bool,
    is_event Bool,
    entity_kind LowCardinality(String) DEFAULT '',
    entity_id String DEFAULT '',
    entity_name LowCardinality(String) DEFAULT '',
    input String DEFAULT '' CODEC(ZSTD(3)),
    output String DEFAULT '' CODEC(ZSTD(3)),
    attributes String DEFAULT '' CODEC(ZSTD(3)),
    metadata String DEFAULT '' CODEC(ZSTD(3)),
    input_tokens Nullable(UInt64),
    output_tokens Nullable(UInt64),
    total_tokens Nullable(UInt64),
    usage_details String DEFAULT '',
    cost_currency LowCardinality(String) DEFAULT '',
    input_cost Nullable(Float64),
    output_cost Nullable(Float64),
    total_cost Nullable(Float64),
    cost_price_book LowCardinality(String) DEFAULT '',
    cost_is_estimated Nullable(Bool),
    model_parameters String DEFAULT '',
    error String DEFAULT '' CODEC(ZSTD(3)),
    links String DEFAULT '',
    tags Array(String),
    environment LowCardinality(String) DEFAULT '',
    service_name LowCardinality(String) DEFAULT '',
    service_version LowCardinality(String) DEFAULT '',
    session_id String DEFAULT '',
    thread_id String DEFAULT '',
    user_id String DEFAULT '',
    resource_id String DEFAULT '',
    run_id String DEFAULT '',
    request_id String DEFAULT '',
    experiment_id String DEFAULT '',
    release LowCardinality(String) DEFAULT '',
    model LowCardinality(String) DEFAULT '',
    provider LowCardinality(String) DEFAULT '',
    received_at DateTime64(9, 'UTC'),
    ingest_key String DEFAULT '',
    INDEX idx_trace_id trace_id TYPE bloom_filter(0.001) GRANULARITY 1,
    INDEX idx_session_id session_id TYPE bloom_filter(0.01) GRANULARITY 1,
    INDEX idx_status status TYPE set(8) GRANULARITY 4,
    INDEX idx_model model TYPE set(256) GRANULARITY 4
)
ENGINE = ReplacingMergeTree(received_at)
PARTITION BY toYYYYMM(start_time)
ORDER BY (project, start_time, trace_id, span_id);

-- One row per (project, trace_id) after merges. `version` grows with every rewrite of the
-- projection. Partitioned by the first arrival, which never changes for a trace, so every
-- version of a trace lands in the same partition and merges away.
CREATE TABLE IF NOT EXISTS traces
(
    project LowCardinality(String),
    trace_id String,
    version UInt64,
    root_span_id String DEFAULT '',
    name LowCardinality(String),
    kind LowCardinality(String),
    status LowCardinality(String),
    start_time DateTime64(9, 'UTC'),
    end_time Nullable(DateTime64(9, 'UTC')),
    duration_ns Nullable(UInt64),
    span_count UInt32,
    error_count UInt32,
    input_tokens Nullable(UInt64),
    output_tokens Nullable(UInt64),
    total_tokens Nullable(UInt64),
    usage_details String DEFAULT '',
    cost_currency LowCardinality(String) DEFAULT '',
    input_cost Nullable(Float64),
    output_cost Nullable(Float64),
    total_cost Nullable(Float64),
    cost_price_book LowCardinality(String) DEFAULT '',
    cost_is_estimated Nullable(Bool),
    model_count UInt32,
    tool_count UInt32,
    tags Array(String),
    environment LowCardinality(String) DEFAULT '',
    service_name LowCardinality(String) DEFAULT '',
    service_version LowCardinality(String) DEFAULT '',
    session_id String DEFAULT '',
    thread_id String DEFAULT '',
    user_id String DEFAULT '',
    resource_id String DEFAULT '',
    run_id String DEFAULT '',
    request_id String DEFAULT '',
    experiment_id String DEFAULT '',
    release LowCardinality(String) DEFAULT '',
    score_summary String DEFAULT '',
    feedback_summary String DEFAULT '',
    is_complete Bool,
    received_at DateTime64(9, 'UTC'),
    INDEX idx_start_time start_time TYPE minmax GRANULARITY 1,
    INDEX idx_status status TYPE set(8) GRANULARITY 4,
    INDEX idx_session_id session_id TYPE bloom_filter(0.01) GRANULARITY 1
)
ENGINE = ReplacingMergeTree(version)
PARTITION BY toYYYYMM(received_at)
ORDER BY (project, trace_id);

CREATE TABLE IF NOT EXISTS logs
(
    project LowCardinality(String),
    log_id String,
    trace_id String DEFAULT '',
    span_id String DEFAULT '',
    timestamp DateTime64(9, 'UTC'),
    level LowCardinality(String),
    message String CODEC(ZSTD(3)),
    fields String DEFAULT '' CODEC(ZSTD(3)),
    logger LowCardinality(String) DEFAULT '',
    environment LowCardinality(String) DEFAULT '',
    service_name LowCardinality(String) DEFAULT '',
    service_version LowCardinality(String) DEFAULT '',
    session_id String DEFAULT '',
    thread_id String DEFAULT '',
    user_id String DEFAULT '',
    resource_id String DEFAULT '',
    run_id String DEFAULT '',
    request_id String DEFAULT '',
    experiment_id String DEFAULT '',
    release LowCardinality(String) DEFAULT '',
    received_at DateTime64(9, 'UTC'),
    INDEX idx_trace_id trace_id TYPE bloom_filter(0.001) GRANULARITY 1,
    INDEX idx_level level TYPE set(8) GRANULARITY 4
)
ENGINE = MergeTree
PARTITION BY toYYYYMM(timestamp)
ORDER BY (project, timestamp, trace_id);

CREATE TABLE IF NOT EXISTS metrics
(
    project LowCardinality(String),
    metric_id String,
    name LowCardinality(String),
    kind LowCardinality(String),
    value Float64,
    unit LowCardinality(String) DEFAULT '',
    timestamp DateTime64(9, 'UTC'),
    labels String DEFAULT '',
    buckets String DEFAULT '',
    trace_id String DEFAULT '',
    span_id String DEFAULT '',
    environment LowCardinality(String) DEFAULT '',
    service_name LowCardinality(String) DEFAULT '',
    service_version LowCardinality(String) DEFAULT '',
    session_id String DEFAULT '',
    thread_id String DEFAULT '',
    user_id String DEFAULT '',
    resource_id String DEFAULT '',
    run_id String DEFAULT '',
    request_id String DEFAULT '',
    experiment_id String DEFAULT '',
    release LowCardinality(String) DEFAULT '',
    received_at DateTime64(9, 'UTC')
)
ENGINE = MergeTree
PARTITION BY toYYYYMM(timestamp)
ORDER BY (project, name, timestamp);

CREATE TABLE IF NOT EXISTS scores
(
    project LowCardinality(String),
    score_id String,
    trace_id String DEFAULT '',
    span_id String DEFAULT '',
    scorer_id LowCardinality(String),
    scorer_version LowCardinality(String) DEFAULT '',
    source LowCardinality(String),
    value Float64,
    min Nullable(Float64),
    max Nullable(Float64),
    label String DEFAULT '',
    reason String DEFAULT '' CODEC(ZSTD(3)),
    score_trace_id String DEFAULT '',
    cost_currency LowCardinality(String) DEFAULT '',
    input_cost Nullable(Float64),
    output_cost Nullable(Float64),
    total_cost Nullable(Float64),
    cost_price_book LowCardinality(String) DEFAULT '',
    cost_is_estimated Nullable(Bool),
    metadata String DEFAULT '',
    timestamp DateTime64(9, 'UTC'),
    environment LowCardinality(String) DEFAULT '',
    service_name LowCardinality(String) DEFAULT '',
    service_version LowCardinality(String) DEFAULT '',
    session_id String DEFAULT '',
    thread_id String DEFAULT '',
    user_id String DEFAULT '',
    resource_id String DEFAULT '',
    run_id String DEFAULT '',
    request_id String DEFAULT '',
    experiment_id String DEFAULT '',
    release LowCardinality(String) DEFAULT '',
    received_at DateTime64(9, 'UTC'),
    INDEX idx_trace_id trace_id TYPE bloom_filter(0.001) GRANULARITY 1
)
ENGINE = MergeTree
PARTITION BY toYYYYMM(timestamp)
ORDER BY (project, scorer_id, timestamp);

CREATE TABLE IF NOT EXISTS feedback
(
    project LowCardinality(String),
    feedback_id String,
    trace_id String DEFAULT '',
    span_id String DEFAULT '',
    kind LowCardinality(String),
    value String,
    comment String DEFAULT '' CODEC(ZSTD(3)),
    author_id String DEFAULT '',
    author_kind LowCardinality(String) DEFAULT '',
    timestamp DateTime64(9, 'UTC'),
    metadata String DEFAULT '',
    environment LowCardinality(String) DEFAULT '',
    service_name LowCardinality(String) DEFAULT '',
    service_version LowCardinality(String) DEFAULT '',
    session_id String DEFAULT '',
    thread_id String DEFAULT '',
    user_id String DEFAULT '',
    resource_id String DEFAULT '',
    run_id String DEFAULT '',
    request_id String DEFAULT '',
    experiment_id String DEFAULT '',
    release LowCardinality(String) DEFAULT '',
    received_at DateTime64(9, 'UTC'),
    INDEX idx_trace_id trace_id TYPE bloom_filter(0.001) GRANULARITY 1
)
ENGINE = MergeTree
PARTITION BY toYYYYMM(timestamp)
ORDER BY (project, timestamp, trace_id);

CREATE TABLE IF NOT EXISTS aspect_notes
(
    project LowCardinality(String),
    note_id String,
    trace_id String,
    aspect LowCardinality(String),
    text String CODEC(ZSTD(3)),
    definition_version UInt32,
    model LowCardinality(String) DEFAULT '',
    created_at DateTime64(9, 'UTC'),
    environment LowCardinality(String) DEFAULT '',
    service_name LowCardinality(String) DEFAULT '',
    service_version LowCardinality(String) DEFAULT '',
    session_id String DEFAULT '',
    thread_id String DEFAULT '',
    user_id String DEFAULT '',
    resource_id String DEFAULT '',
    run_id String DEFAULT '',
    request_id String DEFAULT '',
    experiment_id String DEFAULT '',
    release LowCardinality(String) DEFAULT '',
    received_at DateTime64(9, 'UTC'),
    INDEX idx_trace_id trace_id TYPE bloom_filter(0.001) GRANULARITY 1
)
ENGINE = MergeTree
PARTITION BY toYYYYMM(created_at)
ORDER BY (project, aspect, created_at);

-- Theme tables are small (one row per pass, a few hundred per snapshot): no partitions.
CREATE TABLE IF NOT EXISTS theme_snapshots
(
    project LowCardinality(String),
    snapshot_id String,
    entity_kind LowCardinality(String),
    entity_name String,
    aspects Array(String),
    ordinal UInt64,
    cutoff_at DateTime64(9, 'UTC'),
    window_from DateTime64(9, 'UTC'),
    window_to DateTime64(9, 'UTC'),
    trace_count UInt64,
    note_count UInt64,
    capped Bool
)
ENGINE = MergeTree
ORDER BY (project, entity_kind, entity_name, cutoff_at);

CREATE TABLE IF NOT EXISTS themes
(
    project LowCardinality(String),
    snapshot_id String,
    aspect LowCardinality(String),
    theme_id String,
    entity_kind LowCardinality(String),
    entity_name String,
    label String,
    label_note_id String,
    label_trace_id String,
    state LowCardinality(String),
    note_count UInt64,
    trace_count UInt64,
    coverage Float64,
    INDEX idx_theme_id theme_id TYPE bloom_filter(0.01) GRANULARITY 1
)
ENGINE = MergeTree
ORDER BY (project, snapshot_id, aspect, theme_id);

-- Discovery's distinct-value lists: one row per value after merges, the latest sighting wins.
CREATE TABLE IF NOT EXISTS facet_values
(
    project LowCardinality(String),
    facet LowCardinality(String),
    key String,
    value String,
    last_seen DateTime64(9, 'UTC')
)
ENGINE = ReplacingMergeTree(last_seen)
ORDER BY (project, facet, key, value);
