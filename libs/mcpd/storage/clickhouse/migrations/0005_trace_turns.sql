-- The per-trace state of the sessions built from traces (mcpd/sessions/traces.py), as the SQL
-- backends' `trace_turns`: one row per trace, versioned like the other session tables (a new
-- version replaces the row; FINAL reads the newest). `facts` is the mapping's JSON document.
-- Sessions written from traces before this migration have no states: the first write of spans
-- that touches one rebuilds it whole.
CREATE TABLE IF NOT EXISTS trace_turns
(
    project String,
    trace_id String,
    session_id String DEFAULT '',
    session_key String DEFAULT '',
    source String DEFAULT '',
    turn_id String DEFAULT '',
    start_ns Int64 DEFAULT 0,
    prompt Nullable(String),
    touches Int64 DEFAULT 0,
    facts String DEFAULT '' CODEC(ZSTD(3)),
    version UInt64,
    is_deleted UInt8 DEFAULT 0,
    INDEX idx_session_id session_id TYPE bloom_filter(0.01) GRANULARITY 1,
    INDEX idx_session_key session_key TYPE bloom_filter(0.01) GRANULARITY 1
)
ENGINE = ReplacingMergeTree(version, is_deleted)
ORDER BY (project, trace_id);
