-- Datasets, their items, experiments and the items of experiments' runs, beside the traces they
-- are captured from (mcpd/storage/clickhouse/evaluation.py). A change to a row (an item emptied
-- by erasure, an experiment's status) writes a new version of it; FINAL reads the newest.
-- Every statement is safe to run again: see clickhouse/migrate.py.

CREATE TABLE IF NOT EXISTS datasets
(
    project LowCardinality(String),
    dataset_id String,
    name String,
    description Nullable(String),
    created_at Int64,
    version UInt64
)
ENGINE = ReplacingMergeTree(version)
ORDER BY (project, dataset_id);

CREATE TABLE IF NOT EXISTS dataset_items
(
    project LowCardinality(String),
    item_id String,
    dataset_id String,
    input Nullable(String) CODEC(ZSTD(3)),
    expected Nullable(String) CODEC(ZSTD(3)),
    metadata Nullable(String) CODEC(ZSTD(3)),
    source_trace_id Nullable(String),
    created_at Int64,
    version UInt64,
    INDEX idx_source_trace_id source_trace_id TYPE bloom_filter(0.01) GRANULARITY 1
)
ENGINE = ReplacingMergeTree(version)
ORDER BY (project, dataset_id, item_id);

CREATE TABLE IF NOT EXISTS experiments
(
    project LowCardinality(String),
    experiment_id String,
    name String,
    dataset_id String,
    status LowCardinality(String),
    created_at Int64,
    started_at Nullable(Int64),
    finished_at Nullable(Int64),
    baseline_id Nullable(String),
    error Nullable(String),
    metadata Nullable(String) CODEC(ZSTD(3)),
    driven UInt8,
    version UInt64
)
ENGINE = ReplacingMergeTree(version)
ORDER BY (project, experiment_id);

CREATE TABLE IF NOT EXISTS experiment_items
(
    project LowCardinality(String),
    experiment_id String,
    item_id String,
    run_id Nullable(String),
    trace_id Nullable(String),
    status LowCardinality(String),
    error Nullable(String),
    updated_at Int64,
    version UInt64
)
ENGINE = ReplacingMergeTree(version)
ORDER BY (project, experiment_id, item_id);
