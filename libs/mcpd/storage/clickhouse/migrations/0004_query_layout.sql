-- The trace list's layout (mcpd/storage/clickhouse/signals/lists.py): `traces` re-laid as wide
-- rows ordered by (project, start_time, trace_id), the layout of Langfuse's ClickHouse schema,
-- but exact.
--
-- Decision. The list reads newest first (or by duration or cost), filtered, a page at a time.
-- Ordered by (project, trace_id), every page read and sorted the project's every trace row.
-- Ordered by (project, start_time, trace_id), a window or a cursor on start_time is a range of
-- the primary key, and the newest page is read in key order, stopping when it is full. What
-- stood in the way: a ReplacingMergeTree replaces rows of equal sort key, and a trace's
-- start_time moves earlier when an earlier span arrives (a root span ends, and is sent, after
-- its children). The options weighed:
-- * a PROJECTION ordered by start_time inside the identity-ordered table: no query with FINAL
--   reads a projection, and without FINAL the replaced versions are read too;
-- * a second, list-only table: two copies of every trace row, written by two INSERTs that a
--   failure can leave apart, so a list could show a row the trace does not have;
-- * Langfuse's (project_id, toDate(timestamp), id), which leaves a second row whenever a start
--   moves across midnight, and accepts it;
-- * this table with TOMBSTONES (chosen): when a re-projection moves a trace's start_time, the
--   writer also inserts, at the new version, a row at the OLD key with is_deleted = 1; FINAL
--   keeps it as that key's newest version, and every read drops it (`is_deleted = 0` after
--   FINAL). The writer reads the stored keys of the traces it re-projects (those with spans
--   stored before the call), so a retry after a failure finds every stale key. One copy, one
--   INSERT, exact. is_deleted is a plain column, not the engine's is_deleted parameter: with
--   that parameter a FINAL read in key order no longer stops at the LIMIT (measured with
--   ClickHouse 26.9 on 100k traces: every row read instead of a fifth of them).
--
-- Layout:
-- * ORDER BY (project, start_time, trace_id); PARTITION BY month of start_time, as spans. Every
--   version of a key (and its tombstone) is in the partition of its start_time, so versions
--   merge away, and FINAL needs no merge across partitions (the partition column is in the
--   key). A move to another month leaves the tombstone in the old month.
-- * `models` and `providers`: the distinct non-empty model and provider of the trace's spans,
--   for "some span of the trace carries it"; the writer computes them beside the shared
--   projection (columns and writes.py), and this migration from the stored spans.
-- * Skip indexes: bloom filters on trace_id (one trace's row; the writer's key read), on
--   session_id and user_id (equality filters on high-cardinality values), minmax on
--   duration_ns and total_cost (range filters, and top-K by cost or duration), a set on
--   status. Reads pin use_skip_indexes_if_final_exact_mode, under which a skip index never
--   hides the newer version (or tombstone) of a row.
-- * Tombstones stay until retention or erasure removes the trace (a merge folds each with the
--   row it replaces, and keeps it). Readers of `traces` filter is_deleted = 0, after FINAL;
--   without FINAL (erasure's matching, counts) a tombstone is a row with is_deleted = 1,
--   span_count 0 (no trace row has none) and empty attributes, carrying the trace id, the old
--   start_time and the old received_at. Deleting a trace by its id removes its tombstones.
--
-- The statement rebuilds the table from itself and swaps it in atomically (CREATE OR REPLACE):
-- FINAL keeps one row per key, and a key whose newest version is a tombstone (span_count 0,
-- tested after FINAL) is left out. Running it again, or two migrators at once, rebuilds the
-- same rows. It must run with no writer using the table (as `mcpd migrate` does before the
-- roles serve): a trace row written during the rebuild would be lost until the trace is
-- written again.

CREATE OR REPLACE TABLE traces
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
    models Array(LowCardinality(String)),
    providers Array(LowCardinality(String)),
    is_deleted UInt8 DEFAULT 0,
    INDEX idx_trace_id trace_id TYPE bloom_filter(0.001) GRANULARITY 1,
    INDEX idx_session_id session_id TYPE bloom_filter(0.01) GRANULARITY 1,
    INDEX idx_user_id user_id TYPE bloom_filter(0.01) GRANULARITY 1,
    INDEX idx_duration duration_ns TYPE minmax GRANULARITY 1,
    INDEX idx_cost total_cost TYPE minmax GRANULARITY 1,
    INDEX idx_status status TYPE set(8) GRANULARITY 4
)
ENGINE = ReplacingMergeTree(version)
PARTITION BY toYYYYMM(start_time)
ORDER BY (project, start_time, trace_id)
AS SELECT
    t.project, t.trace_id, t.version, t.root_span_id, t.name, t.kind, t.status, t.start_time,
    t.end_time, t.duration_ns, t.span_count, t.error_count, t.input_tokens, t.output_tokens,
    t.total_tokens, t.usage_details, t.cost_currency, t.input_cost, t.output_cost, t.total_cost,
    t.cost_price_book, t.cost_is_estimated, t.model_count, t.tool_count, t.tags, t.environment,
    t.service_name, t.service_version, t.session_id, t.thread_id, t.user_id, t.resource_id,
    t.run_id, t.request_id, t.experiment_id, t.release, t.score_summary, t.feedback_summary,
    t.is_complete, t.received_at, m.models, m.providers, 0
FROM traces AS t FINAL
LEFT JOIN
(
    SELECT
        project,
        trace_id,
        arraySort(groupUniqArrayIf(model, model != '')) AS models,
        arraySort(groupUniqArrayIf(provider, provider != '')) AS providers
    FROM spans FINAL
    WHERE model != '' OR provider != ''
    GROUP BY project, trace_id
) AS m ON m.project = t.project AND m.trace_id = t.trace_id
WHERE t.span_count > 0
SETTINGS optimize_move_to_prewhere_if_final = 0;
