"""Score rollups on ClickHouse: the `score_rollups` table of migration 0008, an
AggregatingMergeTree of `SimpleAggregateFunction(sum)` parts (`mcpd.signals.rollups` says what a
row holds), kept as `rollups` keeps the span and trace rollups.

**A score counts once, by its id**, as on SQL, where a score is upserted by (project, score_id).
Here `scores` is a ReplacingMergeTree ordered by (project, scorer_id, timestamp, score_id), so a
score sent again with another time or scorer (a scoring pass run again stamps the time it ran) is
a second row under FINAL. Score statistics count each id's *live* copy: the newest arrival, ties
broken by the later timestamp, then the greater scorer id (`LIVE`, `_live`), which is also the
copy `evaluation.experiment_scores` reads.

* **Keeping.** Before its INSERTs the writer reads the stored copies of the score ids it writes
  (FINAL; migration 0008's bloom filter on `score_id` prunes the granules, which is exact under
  FINAL because the id is in the sort key), lays the call's rows over them as the replacing table
  will resolve them, and adds to the delta the change of each id's live copy (`replace_scores`);
  `rollups.insert` inserts it right after the trace rollups.
* **Deletes** note the hours of every copy of the ids they are about to touch (a delete of one
  copy can make another copy, in another hour, the live one), and once the rows are gone those
  hours, and their days, are computed again from the live copies (`ScoreRebuild`, run by
  `rollups.Rebuild` under the write lock).
* **Reading** (`score_stats`): whole buckets from rollup rows, the ragged edges (under an hour
  each) from the live copies of the scores found in them.

No transactions: as for `rollups`, a call that fails between its score rows and its rollup rows
leaves the rollups without its change until a rebuild of those hours.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

import orjson

from mcpd.signals.queries import ScoreStats, Window
from mcpd.signals.rollups import DAY_NS, HOUR_NS, SCORE_ROLLUP_KEY, SCORE_ROLLUP_PARTS, Delta, plan
from mcpd.storage.clickhouse.executor import ClickHouseExecutor
from mcpd.storage.clickhouse.signals.buckets import clear_hours, in_ranges

_KEY = SCORE_ROLLUP_KEY
_COLUMNS = (*_KEY, *SCORE_ROLLUP_PARTS)
_PROJECT = "project = {project:String}"
_FINAL = (
    " SETTINGS optimize_move_to_prewhere_if_final = 0, use_skip_indexes_if_final = 1,"
    " use_skip_indexes_if_final_exact_mode = 1"
)
LIVE = (
    "argMax(tuple(scorer_id, toUnixTimestamp64Nano(timestamp), value), "
    "tuple(received_at, timestamp, scorer_id))"
)
"""The live copy of a score id among its rows under FINAL: (scorer_id, timestamp ns, value)."""
_HOUR_OF = f"intDiv(toUnixTimestamp64Nano(timestamp), {HOUR_NS}) * {HOUR_NS}"
# Bytes of ids per statement: a parameter travels in the URL, which a server caps at 1 MiB.
_CHUNK_BYTES = 256 * 1024


def _chunks(values: Iterable[str]) -> Iterator[list[str]]:
    chunk: list[str] = []
    size = 0
    for value in values:
        cost = len(value.encode()) + 4
        if chunk and size + cost > _CHUNK_BYTES:
            yield chunk
            chunk, size = [], 0
        chunk.append(value)
        size += cost
    if chunk:
        yield chunk


# --- keeping -------------------------------------------------------------------------------------


def _live(copies: Iterable[Mapping[str, Any]]) -> Mapping[str, Any] | None:
    """The live copy among one id's copies (one per sort key), as `LIVE` picks it."""
    return max(
        copies,
        key=lambda copy: (copy["received_at"], copy["timestamp"], copy["scorer_id"]),
        default=None,
    )


def replace_scores(
    executor: ClickHouseExecutor, written: Sequence[Mapping[str, Any]], delta: Delta
) -> None:
    """Into `delta`: per score id of `written` (one row per id), its live copy once the rows
    are inserted less its live copy now. Call before the INSERT of the scores."""
    if not written:
        return
    stored: dict[tuple[str, str], dict[tuple[str, int], dict[str, Any]]] = {}
    by_project: dict[str, set[str]] = {}
    for row in written:
        by_project.setdefault(row["project"], set()).add(row["score_id"])
    for project, score_ids in sorted(by_project.items()):
        for chunk in _chunks(sorted(score_ids)):
            found = executor.query(
                "SELECT score_id, scorer_id, toUnixTimestamp64Nano(timestamp), value, "
                "toUnixTimestamp64Nano(received_at) FROM scores FINAL "
                f"WHERE {_PROJECT} AND score_id IN {{ids:Array(String)}}" + _FINAL,
                {"project": project, "ids": chunk},
            )
            for score_id, scorer_id, timestamp, value, received_at in found:
                copy = _copy(project, str(scorer_id), int(timestamp), float(value), received_at)
                copies = stored.setdefault((project, str(score_id)), {})
                copies[(copy["scorer_id"], copy["timestamp"])] = copy
    for row in written:
        copies = stored.setdefault((row["project"], row["score_id"]), {})
        old = _live(copies.values())
        new = _copy(
            row["project"], row["scorer_id"], row["timestamp"], row["value"], row["received_at"]
        )
        at = (new["scorer_id"], new["timestamp"])
        kept = copies.get(at)
        if kept is None or new["received_at"] >= kept["received_at"]:
            copies[at] = new
        live = _live(copies.values())
        if live is not old:
            if old is not None:
                delta.add_score(old, -1)
            if live is not None:
                delta.add_score(live)


def _copy(
    project: str, scorer_id: str, timestamp: int, value: float, received_at: Any
) -> dict[str, Any]:
    return {
        "project": project,
        "scorer_id": scorer_id,
        "timestamp": int(timestamp),
        "value": float(value),
        "received_at": int(received_at),
    }


def insert(executor: ClickHouseExecutor, delta: Delta) -> None:
    """ONE INSERT of the delta's score rollup rows (JSONEachRow), when there are any."""
    lines = []
    for key, sums in delta.score_changes():
        row: dict[str, Any] = dict(zip(_KEY, key, strict=True))
        row.update(count=sums.count, value_sum=sums.value_sum)
        lines.append(orjson.dumps(row))
    if lines:
        executor.insert("score_rollups", _COLUMNS, b"\n".join(lines), "JSONEachRow")


def hour_rows_sql(scores_condition: str, hours_condition: str) -> str:
    """The INSERT of the hour rows of the live copies of the score ids whose rows match
    `scores_condition`, in the hours (`bucket`) `hours_condition` keeps."""
    return (
        f"INSERT INTO score_rollups ({', '.join(_COLUMNS)}) "
        f"SELECT project, live.1 AS scorer, {HOUR_NS}, "
        f"intDiv(live.2, {HOUR_NS}) * {HOUR_NS} AS bucket, count(), sum(live.3) "
        f"FROM (SELECT project, score_id, {LIVE} AS live FROM scores FINAL "
        f"WHERE {scores_condition} GROUP BY project, score_id) WHERE {hours_condition} "
        "GROUP BY project, scorer, bucket SETTINGS optimize_move_to_prewhere_if_final = 0"
    )


def day_rows_sql(condition: str) -> str:
    """The INSERT of the day rows summed from the hour rows matching `condition`."""
    return (
        f"INSERT INTO score_rollups ({', '.join(_COLUMNS)}) SELECT project, scorer_id, "
        f"{DAY_NS}, intDiv(bucket_start, {DAY_NS}) * {DAY_NS} AS day, sum(count), "
        f"sum(value_sum) FROM score_rollups WHERE level = {HOUR_NS} AND {condition} "
        "GROUP BY project, scorer_id, day"
    )


class ScoreRebuild:
    """The hours a delete of scores touches, rebuilt once its rows are gone (under the write
    lock)."""

    def __init__(self, executor: ClickHouseExecutor, project: str) -> None:
        self.executor = executor
        self.project = project
        self.pending: set[int] = set()

    def note(self, condition: str, params: Mapping[str, object]) -> None:
        """Remember the hours of every copy of the score ids with a row matching `condition`."""
        found = self.executor.query(
            f"SELECT DISTINCT {_HOUR_OF} FROM scores WHERE {_PROJECT} AND score_id IN "
            f"(SELECT score_id FROM scores WHERE {_PROJECT} AND {condition})",
            {**params, "project": self.project},
        )
        self.pending.update(int(hour) for (hour,) in found)

    def run(self) -> None:
        """Compute the pending hours (and their days) again from the live copies."""
        params = clear_hours(self.executor, "score_rollups", self.project, self.pending)
        if params is None:
            return
        in_pending = f"{_PROJECT} AND {_HOUR_OF} IN {{hours:Array(Int64)}}"
        self.executor.command(
            hour_rows_sql(
                f"{_PROJECT} AND score_id IN (SELECT score_id FROM scores WHERE {in_pending})",
                "bucket IN {hours:Array(Int64)}",
            ),
            params,
        )
        self.executor.command(
            day_rows_sql(
                f"{_PROJECT} AND intDiv(bucket_start, {DAY_NS}) * {DAY_NS} IN {{days:Array(Int64)}}"
            ),
            params,
        )


# --- reading -------------------------------------------------------------------------------------


def score_stats(
    executor: ClickHouseExecutor, project: str, scorer_id: str, window: Window
) -> ScoreStats:
    """`SignalAnalytics.score_stats`: whole buckets from rollup rows, edges from the live
    copies of the scores in them."""
    shape = plan(window)
    count, total = 0, 0.0
    if shape.ranges:
        params: dict[str, object] = {"project": project, "scorer_id": scorer_id}
        ((found_count, found_sum),) = executor.query(
            "SELECT sum(count), sum(value_sum) FROM score_rollups WHERE "
            f"{_PROJECT} AND scorer_id = {{scorer_id:String}} "
            f"AND {in_ranges(shape.ranges, params)}",
            params,
        )
        count += int(found_count)
        total += float(found_sum)
    for edge in shape.raw:
        edge_count, edge_sum = _edge(executor, project, scorer_id, edge)
        count += edge_count
        total += edge_sum
    return ScoreStats(count=count, value_sum=total if count else 0.0)


def _edge(
    executor: ClickHouseExecutor, project: str, scorer_id: str, window: Window
) -> tuple[int, float]:
    """The count and value sum of the live copies of `scorer_id` in `window` (bounded, under
    an hour or two): the ids with a row there (a primary-key range), then their live copies."""
    conditions = [_PROJECT, "scorer_id = {scorer_id:String}"]
    live = ["live.1 = {scorer_id:String}"]
    params: dict[str, object] = {"project": project, "scorer_id": scorer_id}
    if window.start is not None:
        conditions.append("timestamp >= fromUnixTimestamp64Nano({start:Int64}, 'UTC')")
        live.append("live.2 >= {start:Int64}")
        params["start"] = window.start
    if window.end is not None:
        conditions.append("timestamp < fromUnixTimestamp64Nano({end:Int64}, 'UTC')")
        live.append("live.2 < {end:Int64}")
        params["end"] = window.end
    ids = executor.query(
        f"SELECT DISTINCT score_id FROM scores WHERE {' AND '.join(conditions)}", params
    )
    count, total = 0, 0.0
    for chunk in _chunks(sorted(str(score_id) for (score_id,) in ids)):
        ((found_count, found_sum),) = executor.query(
            f"SELECT count(), sum(live.3) FROM (SELECT {LIVE} AS live FROM scores FINAL "
            f"WHERE {_PROJECT} AND score_id IN {{ids:Array(String)}} GROUP BY score_id) "
            f"WHERE {' AND '.join(live)}" + _FINAL,
            {**params, "ids": chunk},
        )
        count += int(found_count)
        total += float(found_sum)
    return count, total
