-- The analytics rollups (mcpd/signals/rollups.py): per project, dimension (an analytics group_by,
-- '' for the ungrouped figures), level (an hour or a day, in ns), bucket and group key, the
-- summable parts of the figures and the duration sketch (bin -> count). An AggregatingMergeTree
-- of simple sums: merges add the rows of one key, reads sum them (sum, sumMap). The writer inserts
-- each call's change (mcpd/storage/clickhouse/signals/rollups.py); no materialized view, since
-- spans and traces are replacing tables whose every version a view would count.
CREATE TABLE IF NOT EXISTS rollups
(
    project String,
    dimension LowCardinality(String),
    level Int64,
    bucket_start Int64,
    key String,
    count SimpleAggregateFunction(sum, Int64),
    error_count SimpleAggregateFunction(sum, Int64),
    span_count SimpleAggregateFunction(sum, Int64),
    input_tokens SimpleAggregateFunction(sum, Int64),
    output_tokens SimpleAggregateFunction(sum, Int64),
    cost_count SimpleAggregateFunction(sum, Int64),
    total_cost SimpleAggregateFunction(sum, Float64),
    duration_count SimpleAggregateFunction(sum, Int64),
    duration_sum SimpleAggregateFunction(sum, Int64),
    sketch SimpleAggregateFunction(sumMap, Map(Int32, Int64))
)
ENGINE = AggregatingMergeTree
ORDER BY (project, dimension, level, bucket_start, key);

-- What is already stored, rolled up: the hours from the trace rows, the hours from the spans
-- that carry a model or provider, then the days from the hours. Each step runs only while its
-- rows are missing, so a migration interrupted half-way can be run again.
INSERT INTO rollups (project, dimension, level, bucket_start, key, count, error_count, span_count, input_tokens, output_tokens, cost_count, total_cost, duration_count, duration_sum, sketch) SELECT project, dim.1, 3600000000000, intDiv(toUnixTimestamp64Nano(start_time), 3600000000000) * 3600000000000 AS bucket, dim.2, count(), countIf(status = 'error'), sum(span_count), sum(ifNull(input_tokens, 0)), sum(ifNull(output_tokens, 0)), count(total_cost), sum(ifNull(total_cost, 0)), count(duration_ns), sum(ifNull(duration_ns, 0)), sumMapIf(map(toInt32(if(assumeNotNull(duration_ns) = 0, 0, ceil(log(assumeNotNull(duration_ns)) / log(1.02020202020202)) + 1)), toInt64(1)), duration_ns IS NOT NULL) FROM traces FINAL ARRAY JOIN [('', ''), ('environment', ifNull(environment, '')), ('kind', ifNull(kind, '')), ('name', ifNull(name, '')), ('release', ifNull(release, '')), ('service_name', ifNull(service_name, '')), ('service_version', ifNull(service_version, '')), ('status', ifNull(status, ''))] AS dim WHERE is_deleted = 0 AND (SELECT count() FROM rollups WHERE dimension = '') = 0 GROUP BY project, dim, bucket SETTINGS optimize_move_to_prewhere_if_final = 0;

INSERT INTO rollups (project, dimension, level, bucket_start, key, count, error_count, span_count, input_tokens, output_tokens, cost_count, total_cost, duration_count, duration_sum, sketch) SELECT project, dim.1, 3600000000000, intDiv(toUnixTimestamp64Nano(start_time), 3600000000000) * 3600000000000 AS bucket, dim.2, count(), countIf(status = 'error'), count(), sum(ifNull(input_tokens, 0)), sum(ifNull(output_tokens, 0)), count(total_cost), sum(ifNull(total_cost, 0)), count(duration_ns), sum(ifNull(duration_ns, 0)), sumMapIf(map(toInt32(if(assumeNotNull(duration_ns) = 0, 0, ceil(log(assumeNotNull(duration_ns)) / log(1.02020202020202)) + 1)), toInt64(1)), duration_ns IS NOT NULL) FROM spans FINAL ARRAY JOIN arrayFilter(d -> d.2 != '', [('model', model), ('provider', provider)]) AS dim WHERE (SELECT count() FROM rollups WHERE dimension IN ('model', 'provider')) = 0 GROUP BY project, dim, bucket SETTINGS optimize_move_to_prewhere_if_final = 0;

INSERT INTO rollups (project, dimension, level, bucket_start, key, count, error_count, span_count, input_tokens, output_tokens, cost_count, total_cost, duration_count, duration_sum, sketch) SELECT project, dimension, 86400000000000, intDiv(bucket_start, 86400000000000) * 86400000000000 AS day, key, sum(count), sum(error_count), sum(span_count), sum(input_tokens), sum(output_tokens), sum(cost_count), sum(total_cost), sum(duration_count), sum(duration_sum), sumMap(sketch) FROM rollups WHERE level = 3600000000000 AND (SELECT count() FROM rollups WHERE level = 86400000000000) = 0 GROUP BY project, dimension, day, key;
