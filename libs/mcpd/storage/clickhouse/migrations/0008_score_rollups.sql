-- The score rollups (mcpd/signals/rollups.py): per project, scorer, level (an hour or a day, in
-- ns) and bucket of the score's timestamp, how many scores and the sum of their values. An
-- AggregatingMergeTree of simple sums, as rollups (0007): the writer inserts each call's signed
-- change, deletes rebuild the hours they touch (mcpd/storage/clickhouse/signals/score_rollups.py).
-- A score counts once by its id: the live copy of each id is its newest arrival (then the later
-- timestamp, then the greater scorer), since a score re-sent with another time is a second row
-- of the scores table.
CREATE TABLE IF NOT EXISTS score_rollups
(
    project String,
    scorer_id LowCardinality(String),
    level Int64,
    bucket_start Int64,
    count SimpleAggregateFunction(sum, Int64),
    value_sum SimpleAggregateFunction(sum, Float64)
)
ENGINE = AggregatingMergeTree
ORDER BY (project, scorer_id, level, bucket_start);

-- The writer reads the stored copies of the score ids it writes: a bloom filter on the id prunes
-- that read (exact under FINAL, the id being part of the sort key).
ALTER TABLE scores ADD INDEX IF NOT EXISTS idx_score_id score_id TYPE bloom_filter(0.001) GRANULARITY 1;

ALTER TABLE scores MATERIALIZE INDEX idx_score_id;

-- What is already stored, rolled up: the hours from the live copy of every score id, then the
-- days from the hours. Each step runs only while its rows are missing, so a migration
-- interrupted half-way can be run again.
INSERT INTO score_rollups (project, scorer_id, level, bucket_start, count, value_sum) SELECT project, live.1 AS scorer, 3600000000000, intDiv(live.2, 3600000000000) * 3600000000000 AS bucket, count(), sum(live.3) FROM (SELECT project, score_id, argMax(tuple(scorer_id, toUnixTimestamp64Nano(timestamp), value), tuple(received_at, timestamp, scorer_id)) AS live FROM scores FINAL WHERE (SELECT count() FROM score_rollups) = 0 GROUP BY project, score_id) GROUP BY project, scorer, bucket SETTINGS optimize_move_to_prewhere_if_final = 0;

INSERT INTO score_rollups (project, scorer_id, level, bucket_start, count, value_sum) SELECT project, scorer_id, 86400000000000, intDiv(bucket_start, 86400000000000) * 86400000000000 AS day, sum(count), sum(value_sum) FROM score_rollups WHERE level = 3600000000000 AND (SELECT count() FROM score_rollups WHERE level = 86400000000000) = 0 GROUP BY project, scorer_id, day;
