-- The signal write path on ClickHouse (mcpd/storage/clickhouse/signals): ingest keys, the tail
-- sampling holding table, and signal tables in which a re-sent row replaces the stored one.
--
-- * ClickHouse has no transactions, so a write that fails part-way is completed by the client's
--   retry of the same batch, which writes its rows again; and, as on the SQL backends, a row
--   re-sent with the id of a stored one replaces it. Spans and traces are ReplacingMergeTree
--   since 0001, but 0001 made logs, metrics, scores, feedback and aspect_notes plain MergeTree,
--   where both would leave duplicates. ClickHouse cannot change a table's engine in place, so
--   this migration replaces those five tables (CREATE OR REPLACE: an atomic swap) with
--   ReplacingMergeTree(received_at) tables of the same columns, partitions and sort key, the
--   row's id appended to the sort key (a replacing engine replaces rows of equal sort key).
-- * That is safe because nothing wrote these tables before this migration (they were created
--   for the write path that arrives with it), and the first statement makes sure of it: it
--   fails, stopping the migration before anything is replaced, when any of the five holds a
--   row. Running the migration again after an interruption replaces empty tables again.
-- Every statement is safe to run again: see clickhouse/migrate.py.

SELECT throwIf(sum(rows) > 0, 'migration 0003 replaces logs, metrics, scores, feedback and aspect_notes with ReplacingMergeTree tables and will not replace a table that holds rows')
FROM system.parts
WHERE database = currentDatabase() AND active
    AND table IN ('logs', 'metrics', 'scores', 'feedback', 'aspect_notes');

CREATE OR REPLACE TABLE logs
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
ENGINE = ReplacingMergeTree(received_at)
PARTITION BY toYYYYMM(timestamp)
ORDER BY (project, timestamp, trace_id, log_id);

CREATE OR REPLACE TABLE metrics
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
ENGINE = ReplacingMergeTree(received_at)
PARTITION BY toYYYYMM(timestamp)
ORDER BY (project, name, timestamp, metric_id);

CREATE OR REPLACE TABLE scores
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
ENGINE = ReplacingMergeTree(received_at)
PARTITION BY toYYYYMM(timestamp)
ORDER BY (project, scorer_id, timestamp, score_id);

CREATE OR REPLACE TABLE feedback
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
ENGINE = ReplacingMergeTree(received_at)
PARTITION BY toYYYYMM(timestamp)
ORDER BY (project, timestamp, trace_id, feedback_id);

CREATE OR REPLACE TABLE aspect_notes
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
ENGINE = ReplacingMergeTree(received_at)
PARTITION BY toYYYYMM(created_at)
ORDER BY (project, aspect, created_at, note_id);

-- The ingest keys of written batches, scoped to the sending caller's project. A key row is
-- inserted after the rest of its batch, as the batch's commit marker; two replicas recording
-- the same key fold into one row.
CREATE TABLE IF NOT EXISTS ingest_keys
(
    project LowCardinality(String),
    ingest_key String,
    received_at DateTime64(9, 'UTC'),
    record_count UInt64
)
ENGINE = ReplacingMergeTree(received_at)
ORDER BY (project, ingest_key);

-- Spans a tail-sampling project holds until their trace is decided: the whole span row as JSON
-- in `row`, and beside it the columns the decision summarises (see held_traces). A span re-sent
-- while held replaces its earlier copy (the latest arrival wins). Released rows are removed
-- with a lightweight DELETE.
CREATE TABLE IF NOT EXISTS held_spans
(
    project LowCardinality(String),
    trace_id String,
    span_id String,
    received_at DateTime64(9, 'UTC'),
    status LowCardinality(String),
    is_root Bool,
    is_event Bool,
    start_time DateTime64(9, 'UTC'),
    end_time Nullable(DateTime64(9, 'UTC')),
    row String CODEC(ZSTD(3))
)
ENGINE = ReplacingMergeTree(received_at)
ORDER BY (project, trace_id, span_id);
