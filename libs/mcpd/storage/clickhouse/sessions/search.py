"""Ranked search inside ClickHouse: a text index to find candidates, BM25 computed in SQL.

Each searchable event row holds `tokens`, its text analyzed by the shared analyzer
(`mcpd.sessions.search.analysis`, so case, diacritics and CJK fold as on SQLite and
PostgreSQL), and `doc_length`, their count. A query's units (a token, or a run of CJK
characters matched as a phrase) are passed as one `Array(Array(String))` parameter and:

* `hasAny(tokens, <every token of every unit>)` selects candidates; the `text` index on
  `tokens` (tokenizer 'array', one term per element) answers it, pruning every granule that
  holds none of the terms. FINAL with `use_skip_indexes_if_final_exact_mode` (on by default)
  keeps that exact when a newer version of a row lives in another part.
* per unit, the term frequency is `arrayCount` of the token (or, for a phrase, of the
  positions where `arraySlice` equals the run); a candidate matches when any unit occurs.
* document frequency per unit is counted over the project's matching events (all of them, not
  only those passing the type/session/turn/harness/source filters, as a corpus statistic), and
  the corpus size and average length come from the per-session totals in `sessions`.
* score = sum over units of idf * tf * (k1 + 1) / (tf + k1 * (1 - b + b * dl / avgdl)), with
  idf = ln(1 + (N - df + 0.5) / (df + 0.5)), k1 = 1.2, b = 0.75 (tantivy's BM25).

Rows come back `ORDER BY score DESC, timestamp_ns DESC, id ASC LIMIT k + 1` (the extra row
says whether more matched). Every match is scored (no block-max pruning), after the index
pruned the granules.
"""

from __future__ import annotations

from collections.abc import Sequence

from mcpd.sessions.search.analysis import Unit
from mcpd.sessions.store import SearchQuery
from mcpd.storage.clickhouse.executor import ClickHouseExecutor
from mcpd.storage.sql.sessions.backend import Ranked

K1 = 1.2
B = 0.75

_TFS = (
    "arrayMap(u -> if(length(u) = 1, arrayCount(x -> x = u[1], tokens), "
    "arrayCount(i -> arraySlice(tokens, i, length(u)) = u, arrayEnumerate(tokens))), "
    "{units:Array(Array(String))})"
)
_IDF = "log(1 + (n - d + 0.5) / (d + 0.5))"
_SQL = f"""
WITH
    matched AS (
        SELECT id, session_id, turn_id, type, harness, source, timestamp_ns, doc_length,
            {_TFS} AS tfs
        FROM events FINAL
        WHERE project = {{project:String}} AND searchable
            AND hasAny(tokens, {{terms:Array(String)}})
            AND arrayExists(tf -> tf > 0, tfs)
    ),
    stats AS (
        SELECT sumForEach(arrayMap(tf -> toUInt64(tf > 0), tfs)) AS df FROM matched
    ),
    totals AS (
        SELECT toFloat64(greatest(sum(search_docs), 1)) AS n,
            greatest(sum(search_length) / greatest(sum(search_docs), 1), 1) AS avgdl
        FROM sessions FINAL WHERE project = {{project:String}}
    )
SELECT m.id,
    arraySum(arrayMap((tf, d) -> if(tf = 0, 0, {_IDF} * tf * ({K1} + 1)
        / (tf + {K1} * (1 - {B} + {B} * m.doc_length / avgdl))), m.tfs, df)) AS score,
    arrayMap(d -> {_IDF}, df) AS idfs
FROM matched AS m CROSS JOIN stats CROSS JOIN totals
WHERE {{filters}}
ORDER BY score DESC, m.timestamp_ns DESC, m.id ASC
LIMIT {{limit:UInt64}}
"""
_FILTERS = ("session_id", "turn_id", "harness", "source")


def rank(executor: ClickHouseExecutor, units: Sequence[Unit], query: SearchQuery) -> Ranked:
    """The best `query.limit` matches of any unit, within the query's filters."""
    if not units or not query.event_types:
        return Ranked([], False, None)
    filters = ["m.type IN {types:Array(String)}"]
    params: dict[str, object] = {
        "project": query.project,
        "units": [list(unit) for unit in units],
        "terms": sorted({token for unit in units for token in unit}),
        "types": list(query.event_types),
        "limit": query.limit + 1,
    }
    for name in _FILTERS:
        value = getattr(query, name)
        if value is not None:
            filters.append(f"m.{name} = {{{name}:String}}")
            params[name] = value
    sql = _SQL.replace("{filters}", " AND ".join(filters))
    rows = executor.query(sql, params)
    hits = [(str(row[0]), float(row[1])) for row in rows[: query.limit]]
    weights = [float(weight) for weight in rows[0][2]] if rows else None
    if weights is not None and len(weights) != len(units):
        weights = None
    return Ranked(hits, len(rows) > query.limit, weights)
