-- What the intelligence pass needs beside the notes and theme tables of 0001: a note's entity
-- and wording sketch (filed when written: mcpd/signals/notes.py), a theme's history links and
-- wording, the notes each theme holds and the themes that ended.
-- * Bytes (a note's sketch, a theme's wording) are stored as hex text, '' when absent: rows
--   travel as JSON, which carries text, not bytes. ZSTD takes the hex back to about the
--   size of the bytes.
-- * A pass's rows are written once per snapshot id, but several replicas may race to write the
--   same snapshot. Every row a write makes carries its `write_id`, and the snapshot row is
--   written last; reads take, of each snapshot, the copy of the least write_id among its
--   snapshot rows, and only that writer's themes, members and endings (see
--   mcpd/storage/clickhouse/themes.py). So the tables are plain MergeTree: a replacing engine
--   would fold two writers' rows of one key into either.
ALTER TABLE aspect_notes ADD COLUMN IF NOT EXISTS entity_kind LowCardinality(String) DEFAULT '';

ALTER TABLE aspect_notes ADD COLUMN IF NOT EXISTS entity_name String DEFAULT '';

ALTER TABLE aspect_notes ADD COLUMN IF NOT EXISTS sketch String DEFAULT '' CODEC(ZSTD(3));

-- A pass reads its label notes' texts, and erasure the notes it matched, by note id.
ALTER TABLE aspect_notes ADD INDEX IF NOT EXISTS idx_note_id note_id TYPE bloom_filter(0.001) GRANULARITY 1;

ALTER TABLE theme_snapshots ADD COLUMN IF NOT EXISTS write_id String DEFAULT '';

ALTER TABLE themes ADD COLUMN IF NOT EXISTS split_from Array(String) DEFAULT [];

ALTER TABLE themes ADD COLUMN IF NOT EXISTS split_into Array(String) DEFAULT [];

ALTER TABLE themes ADD COLUMN IF NOT EXISTS merged_from Array(String) DEFAULT [];

ALTER TABLE themes ADD COLUMN IF NOT EXISTS wording String DEFAULT '' CODEC(ZSTD(3));

ALTER TABLE themes ADD COLUMN IF NOT EXISTS write_id String DEFAULT '';

CREATE TABLE IF NOT EXISTS theme_members
(
    project LowCardinality(String),
    snapshot_id String,
    aspect LowCardinality(String),
    theme_id String,
    note_id String,
    trace_id String,
    similarity UInt32,
    write_id String,
    INDEX idx_note_id note_id TYPE bloom_filter(0.001) GRANULARITY 1
)
ENGINE = MergeTree
ORDER BY (project, snapshot_id, aspect, theme_id, note_id);

CREATE TABLE IF NOT EXISTS theme_endings
(
    project LowCardinality(String),
    snapshot_id String,
    aspect LowCardinality(String),
    theme_id String,
    state LowCardinality(String),
    merged_into Array(String),
    write_id String,
    INDEX idx_theme_id theme_id TYPE bloom_filter(0.01) GRANULARITY 1
)
ENGINE = MergeTree
ORDER BY (project, snapshot_id, aspect, theme_id);
