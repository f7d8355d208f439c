"""Datasets, dataset items and experiments on ClickHouse (`DatasetRecords` and `ExperimentRecords`
in `mcpd.storage.interfaces`), on the tables of migration 0006.

**Rows and versions.** Every table is a ReplacingMergeTree(version) keyed by the row's identity
((project, dataset_id), (project, dataset_id, item_id), (project, experiment_id), (project,
experiment_id, item_id)): a change writes the whole row again at a higher version, and every
read is FINAL (the newest version of each identity), with its conditions evaluated after FINAL
(`optimize_move_to_prewhere_if_final = 0`), so a condition on a column a change moves (an
experiment's status, an item's payloads) never picks an older version. A version is
`_Versions.next`: above every version this process allocated before and never below the wall
clock in ns, so within a process a later write wins, and between replicas the wall clock orders
them (as the trace rows of `signals.writes`). Writes go as JSONEachRow data of one INSERT
(`ClickHouseExecutor.insert`: the request body, never SQL text). A JSON document (an item's
input, expected and metadata, an experiment's metadata) is stored as its `stored_json` text in a
Nullable(String), NULL when absent; a NUL character in a string is stored as U+FFFD, as on the
SQL backends.

**What is not atomic**, ClickHouse having no transactions nor unique indexes. Each write below
reads, then inserts; the reads and inserts of this module's writes are serialised within the
process (`_LOCK`, shared by every store, taken inside the signal write lock by an erasure), not
between replicas:

* `create_dataset` reads whether the project has a dataset of that name (or that id) and refuses
  it with AlreadyExists; two creates of one name on two replicas at the same instant may both
  pass the check, leaving two datasets of one name (the SQL backends' unique index refuses the
  second).
* `add_dataset_items` reads the stored `created_at` of each item it re-sends, so a re-sent item
  keeps its place; a replica re-sending the same item at the same instant may write it with its
  own `created_at` (the newest version wins, whole).
* `change_experiment` is a compare-and-set: it reads the stored status and writes the new
  version when it is one of those expected. Within a process that is exact (a cancel and the
  driver's finish cannot both win); two replicas changing one experiment at once may both see
  the old status, and the higher version (the later wall clock) wins.
* `create_experiment` writes the row: an experiment id stored before is replaced (ids are
  generated, never reused; the SQL backends refuse it).

**Reads.** An experiment's scores are the newest copy of each score (a re-sent score with
another timestamp is a second row under FINAL, ordered by (scorer_id, timestamp, score_id)) whose
correlation carries the experiment id, joined to the experiment's item rows on the trace id; its
cost sums the live trace rows (`is_deleted = 0` after FINAL, migration 0004) whose correlation
carries it. An absent currency or trace id is '' in those tables and reads back as None.

**Erasure** (`empty_captured_items`, called by `signals.erasure.erase_subject`): the items
captured from the erased traces that still hold a payload get a new version with input, expected
and metadata NULL, their place and `source_trace_id` kept.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from mcpd.runtime.errors import AlreadyExists
from mcpd.storage.clickhouse.executor import ClickHouseExecutor
from mcpd.storage.evaluation_records import (
    DatasetItemRow,
    DatasetRow,
    ExperimentCost,
    ExperimentItemRow,
    ExperimentRow,
    ExperimentScore,
    ItemErasure,
)
from mcpd.storage.stored_json import json_text, scrub_nul

__all__ = [
    "add_dataset_items",
    "change_experiment",
    "create_dataset",
    "create_experiment",
    "dataset",
    "dataset_items_page",
    "datasets_page",
    "driven_experiments",
    "empty_captured_items",
    "experiment",
    "experiment_cost",
    "experiment_items_of",
    "experiment_scores",
    "experiments_page",
    "put_experiment_items",
]

# Conditions stay after FINAL (a condition on a column a change moves must not filter versions
# before FINAL picks the newest); a skip index, where one is used, never hides a newer version.
_SETTINGS = (
    " SETTINGS optimize_move_to_prewhere_if_final = 0, use_skip_indexes_if_final = 1,"
    " use_skip_indexes_if_final_exact_mode = 1"
)
_PROJECT = "project = {project:String}"
# Items per statement of `add_dataset_items`: bounds the ids a lookup carries as a parameter
# (in the URL, which a server caps) and the data of one INSERT.
_SLICE = 500
_FORMAT = "JSONEachRow"

DATASETS: dict[str, str] = {
    "project": "String",
    "dataset_id": "String",
    "name": "String",
    "description": "Nullable(String)",
    "created_at": "Int64",
    "version": "UInt64",
}
DATASET_ITEMS: dict[str, str] = {
    "project": "String",
    "item_id": "String",
    "dataset_id": "String",
    "input": "Nullable(String)",
    "expected": "Nullable(String)",
    "metadata": "Nullable(String)",
    "source_trace_id": "Nullable(String)",
    "created_at": "Int64",
    "version": "UInt64",
}
EXPERIMENTS: dict[str, str] = {
    "project": "String",
    "experiment_id": "String",
    "name": "String",
    "dataset_id": "String",
    "status": "String",
    "created_at": "Int64",
    "started_at": "Nullable(Int64)",
    "finished_at": "Nullable(Int64)",
    "baseline_id": "Nullable(String)",
    "error": "Nullable(String)",
    "metadata": "Nullable(String)",
    "driven": "UInt8",
    "version": "UInt64",
}
EXPERIMENT_ITEMS: dict[str, str] = {
    "project": "String",
    "experiment_id": "String",
    "item_id": "String",
    "run_id": "Nullable(String)",
    "trace_id": "Nullable(String)",
    "status": "String",
    "error": "Nullable(String)",
    "updated_at": "Int64",
    "version": "UInt64",
}
_ITEM_COLUMNS = "item_id, dataset_id, input, expected, metadata, source_trace_id, created_at"
_EXPERIMENT_COLUMNS = (
    "experiment_id, name, dataset_id, status, created_at, driven, started_at, finished_at, "
    "baseline_id, error, metadata"
)
# What `change_experiment` replaces; the rest of the row is kept as stored.
_EXPERIMENT_CHANGES = ("name", "status", "started_at", "finished_at", "error", "metadata")


class _Versions:
    """Row versions: strictly increasing within the process and never below the wall clock in
    ns (allocated under `_LOCK`)."""

    def __init__(self) -> None:
        self._last = 0

    def next(self) -> int:
        self._last = max(self._last + 1, time.time_ns())
        return self._last


_VERSIONS = _Versions()
# Every write of this module, whichever store it comes through: a read and the insert it
# decides, with the version allocated in between, are one step within the process.
_LOCK = threading.Lock()


# --- datasets -----------------------------------------------------------------------------------


def create_dataset(executor: ClickHouseExecutor, project: str, dataset: DatasetRow) -> None:
    """`DatasetRecords.create_dataset`: AlreadyExists (field `name`) when the project has a
    dataset of that name, or of that id, as the SQL backends' unique indexes refuse either (not
    atomic between replicas: see the module docstring)."""
    with _LOCK:
        taken = executor.query(
            f"SELECT 1 FROM datasets FINAL WHERE {_PROJECT} "
            "AND (name = {name:String} OR dataset_id = {dataset_id:String}) LIMIT 1" + _SETTINGS,
            {"project": project, "name": dataset.name, "dataset_id": dataset.dataset_id},
        )
        if taken:
            raise AlreadyExists(
                f"a dataset named {dataset.name!r} already exists in this project", field="name"
            )
        row = {
            "project": project,
            "dataset_id": dataset.dataset_id,
            "name": dataset.name,
            "description": dataset.description,
            "created_at": dataset.created_at,
            "version": _VERSIONS.next(),
        }
        _insert(executor, "datasets", DATASETS, [row])


def datasets_page(
    executor: ClickHouseExecutor, project: str, after: tuple[int, str] | None, limit: int
) -> list[DatasetRow]:
    """`DatasetRecords.datasets`: newest first by (created_at, dataset_id)."""
    params: dict[str, object] = {"project": project, "limit": limit}
    where = _PROJECT
    if after is not None:
        where += " AND (created_at, dataset_id) < ({after_at:Int64}, {after_id:String})"
        params.update(after_at=after[0], after_id=after[1])
    found = executor.query(
        "SELECT dataset_id, name, description, created_at FROM datasets FINAL "
        f"WHERE {where} ORDER BY created_at DESC, dataset_id DESC LIMIT {{limit:UInt64}}"
        + _SETTINGS,
        params,
    )
    return _counted(executor, project, found)


def dataset(executor: ClickHouseExecutor, project: str, dataset_id: str) -> DatasetRow | None:
    """`DatasetRecords.dataset`."""
    found = executor.query(
        "SELECT dataset_id, name, description, created_at FROM datasets FINAL "
        f"WHERE {_PROJECT} AND dataset_id = {{dataset_id:String}}" + _SETTINGS,
        {"project": project, "dataset_id": dataset_id},
    )
    rows = _counted(executor, project, found[:1])
    return rows[0] if rows else None


def _counted(
    executor: ClickHouseExecutor, project: str, found: Sequence[tuple[Any, ...]]
) -> list[DatasetRow]:
    """Datasets read as (dataset_id, name, description, created_at), with their item counts."""
    if not found:
        return []
    counts = dict(
        executor.query(
            f"SELECT dataset_id, count() FROM dataset_items FINAL WHERE {_PROJECT} "
            "AND dataset_id IN {ids:Array(String)} GROUP BY dataset_id" + _SETTINGS,
            {"project": project, "ids": [str(row[0]) for row in found]},
        )
    )
    return [
        DatasetRow(
            dataset_id=str(dataset_id),
            name=str(name),
            description=description,
            created_at=int(created_at),
            item_count=int(counts.get(dataset_id, 0)),
        )
        for dataset_id, name, description, created_at in found
    ]


def add_dataset_items(
    executor: ClickHouseExecutor, project: str, items: Sequence[DatasetItemRow]
) -> int:
    """`DatasetRecords.add_dataset_items`: an item of a stored id in its dataset keeps its stored
    `created_at` (as does an item repeated within the call: its first occurrence's), the last
    occurrence's payloads winning. Returns how many items were given."""
    for start in range(0, len(items), _SLICE):
        _add_slice(executor, project, items[start : start + _SLICE])
    return len(items)


def _add_slice(executor: ClickHouseExecutor, project: str, items: Sequence[DatasetItemRow]) -> None:
    latest: dict[tuple[str, str], DatasetItemRow] = {}
    first: dict[tuple[str, str], int] = {}
    for item in items:
        key = (item.dataset_id, item.item_id)
        latest[key] = item
        first.setdefault(key, item.created_at)
    with _LOCK:
        found = executor.query(
            f"SELECT dataset_id, item_id, created_at FROM dataset_items FINAL WHERE {_PROJECT} "
            "AND dataset_id IN {datasets:Array(String)} AND item_id IN {items:Array(String)}"
            + _SETTINGS,
            {
                "project": project,
                "datasets": sorted({dataset_id for dataset_id, _ in latest}),
                "items": sorted({item_id for _, item_id in latest}),
            },
        )
        stored = {(str(dataset_id), str(item_id)): int(at) for dataset_id, item_id, at in found}
        version = _VERSIONS.next()
        rows = [
            {
                "project": project,
                "item_id": item.item_id,
                "dataset_id": item.dataset_id,
                "input": _document(item.input),
                "expected": _document(item.expected),
                "metadata": _document(item.metadata),
                "source_trace_id": item.source_trace_id,
                "created_at": stored.get(key, first[key]),
                "version": version,
            }
            for key, item in latest.items()
        ]
        _insert(executor, "dataset_items", DATASET_ITEMS, rows)


def dataset_items_page(
    executor: ClickHouseExecutor,
    project: str,
    dataset_id: str,
    after: tuple[int, str] | None,
    limit: int,
) -> list[DatasetItemRow]:
    """`DatasetRecords.dataset_items`: in the order they were added, by (created_at, item_id)."""
    params: dict[str, object] = {"project": project, "dataset_id": dataset_id, "limit": limit}
    where = f"{_PROJECT} AND dataset_id = {{dataset_id:String}}"
    if after is not None:
        where += " AND (created_at, item_id) > ({after_at:Int64}, {after_id:String})"
        params.update(after_at=after[0], after_id=after[1])
    found = executor.query(
        f"SELECT {_ITEM_COLUMNS} FROM dataset_items FINAL WHERE {where} "
        "ORDER BY created_at, item_id LIMIT {limit:UInt64}" + _SETTINGS,
        params,
    )
    return [_item(row) for row in found]


def _item(row: Sequence[Any]) -> DatasetItemRow:
    item_id, dataset_id, input_, expected, metadata, source_trace_id, created_at = row
    return DatasetItemRow(
        item_id=str(item_id),
        dataset_id=str(dataset_id),
        created_at=int(created_at),
        input=_loaded(input_),
        expected=_loaded(expected),
        metadata=_loaded(metadata),
        source_trace_id=source_trace_id,
    )


def empty_captured_items(
    executor: ClickHouseExecutor, project: str, trace_chunks: Iterable[Sequence[str]]
) -> ItemErasure:
    """Empty in place the project's items captured from the traces, given in chunks that fit a
    statement's parameters (`signals.erasure.chunks`), that still hold a payload: a new version
    of each with input, expected and metadata NULL (part of an erasure, under its lock)."""
    params: dict[str, object] = {"project": project}
    holding = "(input IS NOT NULL OR expected IS NOT NULL OR metadata IS NOT NULL)"
    with _LOCK:
        found = [
            row
            for chunk in trace_chunks
            for row in executor.query(
                "SELECT dataset_id, item_id, source_trace_id, created_at FROM dataset_items FINAL "
                f"WHERE {_PROJECT} AND source_trace_id IN {{ids:Array(String)}} AND {holding}"
                + _SETTINGS,
                {**params, "ids": list(chunk)},
            )
        ]
        if not found:
            return ItemErasure()
        version = _VERSIONS.next()
        rows = [
            {
                "project": project,
                "item_id": item_id,
                "dataset_id": dataset_id,
                "input": None,
                "expected": None,
                "metadata": None,
                "source_trace_id": source_trace_id,
                "created_at": int(created_at),
                "version": version,
            }
            for dataset_id, item_id, source_trace_id, created_at in found
        ]
        _insert(executor, "dataset_items", DATASET_ITEMS, rows)
    return ItemErasure(
        items=len(rows), datasets=tuple(sorted({str(row["dataset_id"]) for row in rows}))
    )


# --- experiments --------------------------------------------------------------------------------


def create_experiment(
    executor: ClickHouseExecutor, project: str, experiment: ExperimentRow
) -> None:
    """`ExperimentRecords.create_experiment`."""
    with _LOCK:
        row = _experiment_values(project, experiment, _VERSIONS.next())
        _insert(executor, "experiments", EXPERIMENTS, [row])


def experiment(
    executor: ClickHouseExecutor, project: str, experiment_id: str
) -> ExperimentRow | None:
    """`ExperimentRecords.experiment`."""
    found = executor.query(
        f"SELECT {_EXPERIMENT_COLUMNS} FROM experiments FINAL "
        f"WHERE {_PROJECT} AND experiment_id = {{experiment_id:String}}" + _SETTINGS,
        {"project": project, "experiment_id": experiment_id},
    )
    return _experiment(found[0]) if found else None


def experiments_page(
    executor: ClickHouseExecutor,
    project: str,
    dataset_id: str | None,
    after: tuple[int, str] | None,
    limit: int,
) -> list[ExperimentRow]:
    """`ExperimentRecords.experiments`: newest first by (created_at, experiment_id)."""
    params: dict[str, object] = {"project": project, "limit": limit}
    where = _PROJECT
    if dataset_id is not None:
        where += " AND dataset_id = {dataset_id:String}"
        params["dataset_id"] = dataset_id
    if after is not None:
        where += " AND (created_at, experiment_id) < ({after_at:Int64}, {after_id:String})"
        params.update(after_at=after[0], after_id=after[1])
    found = executor.query(
        f"SELECT {_EXPERIMENT_COLUMNS} FROM experiments FINAL WHERE {where} "
        "ORDER BY created_at DESC, experiment_id DESC LIMIT {limit:UInt64}" + _SETTINGS,
        params,
    )
    return [_experiment(row) for row in found]


def change_experiment(
    executor: ClickHouseExecutor, project: str, experiment: ExperimentRow, expected: Sequence[str]
) -> bool:
    """`ExperimentRecords.change_experiment`: the stored row is read under `_LOCK` and, when its
    status is one of `expected`, written again at a new version with `experiment`'s name,
    status, times, error and metadata (the rest kept as stored). A compare-and-set within the
    process, not between replicas (module docstring)."""
    with _LOCK:
        stored = executor.query(
            f"SELECT {_EXPERIMENT_COLUMNS} FROM experiments FINAL "
            f"WHERE {_PROJECT} AND experiment_id = {{experiment_id:String}}" + _SETTINGS,
            {"project": project, "experiment_id": experiment.experiment_id},
        )
        if not stored:
            return False
        current = _experiment(stored[0])
        if current.status not in expected:
            return False
        row = _experiment_values(project, current, _VERSIONS.next())
        changes = _experiment_values(project, experiment, 0)
        row.update({name: changes[name] for name in _EXPERIMENT_CHANGES})
        _insert(executor, "experiments", EXPERIMENTS, [row])
    return True


def driven_experiments(
    executor: ClickHouseExecutor, statuses: Sequence[str]
) -> list[tuple[str, ExperimentRow]]:
    """`ExperimentRecords.driven_experiments`: across projects, oldest first."""
    found = executor.query(
        f"SELECT project, {_EXPERIMENT_COLUMNS} FROM experiments FINAL "
        "WHERE status IN {statuses:Array(String)} AND driven = 1 "
        "ORDER BY created_at, experiment_id" + _SETTINGS,
        {"statuses": list(statuses)},
    )
    return [(str(row[0]), _experiment(row[1:])) for row in found]


def _experiment_values(project: str, experiment: ExperimentRow, version: int) -> dict[str, Any]:
    return {
        "project": project,
        "experiment_id": experiment.experiment_id,
        "name": experiment.name,
        "dataset_id": experiment.dataset_id,
        "status": experiment.status,
        "created_at": experiment.created_at,
        "started_at": experiment.started_at,
        "finished_at": experiment.finished_at,
        "baseline_id": experiment.baseline_id,
        "error": experiment.error,
        "metadata": _document(experiment.metadata),
        "driven": int(experiment.driven),
        "version": version,
    }


def _experiment(row: Sequence[Any]) -> ExperimentRow:
    (
        experiment_id,
        name,
        dataset_id,
        status,
        created_at,
        driven,
        started_at,
        finished_at,
        baseline_id,
        error,
        metadata,
    ) = row
    return ExperimentRow(
        experiment_id=str(experiment_id),
        name=str(name),
        dataset_id=str(dataset_id),
        status=str(status),
        created_at=int(created_at),
        driven=bool(driven),
        started_at=None if started_at is None else int(started_at),
        finished_at=None if finished_at is None else int(finished_at),
        baseline_id=baseline_id,
        error=error,
        metadata=_loaded(metadata),
    )


def put_experiment_items(
    executor: ClickHouseExecutor,
    project: str,
    experiment_id: str,
    items: Sequence[ExperimentItemRow],
) -> None:
    """`ExperimentRecords.put_experiment_items`: each item's row written at a new version (an
    item repeated within the call: its last occurrence)."""
    if not items:
        return
    latest = {item.item_id: item for item in items}
    with _LOCK:
        version = _VERSIONS.next()
        rows = [
            {
                "project": project,
                "experiment_id": experiment_id,
                "item_id": item.item_id,
                "run_id": item.run_id,
                "trace_id": item.trace_id,
                "status": item.status,
                "error": item.error,
                "updated_at": item.updated_at,
                "version": version,
            }
            for item in latest.values()
        ]
        _insert(executor, "experiment_items", EXPERIMENT_ITEMS, rows)


def experiment_items_of(
    executor: ClickHouseExecutor, project: str, experiment_id: str
) -> list[ExperimentItemRow]:
    """`ExperimentRecords.experiment_items`, by item id."""
    found = executor.query(
        "SELECT item_id, status, updated_at, run_id, trace_id, error FROM experiment_items FINAL "
        f"WHERE {_PROJECT} AND experiment_id = {{experiment_id:String}} ORDER BY item_id"
        + _SETTINGS,
        {"project": project, "experiment_id": experiment_id},
    )
    return [
        ExperimentItemRow(
            item_id=str(item_id),
            status=str(status),
            updated_at=int(updated_at),
            run_id=run_id,
            trace_id=trace_id,
            error=error,
        )
        for item_id, status, updated_at, run_id, trace_id, error in found
    ]


def experiment_scores(
    executor: ClickHouseExecutor, project: str, experiment_id: str
) -> list[ExperimentScore]:
    """`ExperimentRecords.experiment_scores`, in score id order: the newest copy of each score
    that ever carried the experiment id, kept when that copy still carries it, joined to the
    experiment's item rows on its trace id (no item: NULL, `join_use_nulls`)."""
    found = executor.query(
        "SELECT s.scorer_id, s.value, s.trace_id, i.item_id FROM ("
        "SELECT score_id, scorer_id, value, trace_id, experiment_id FROM scores FINAL "
        f"WHERE {_PROJECT} AND score_id IN (SELECT score_id FROM scores WHERE {_PROJECT} "
        "AND experiment_id = {experiment_id:String}) "
        "ORDER BY received_at DESC LIMIT 1 BY score_id"
        ") AS s LEFT JOIN ("
        "SELECT trace_id, item_id FROM experiment_items FINAL "
        f"WHERE {_PROJECT} AND experiment_id = {{experiment_id:String}} "
        "AND trace_id IS NOT NULL"
        ") AS i ON i.trace_id = s.trace_id "
        "WHERE s.experiment_id = {experiment_id:String} ORDER BY s.score_id, i.item_id"
        + _SETTINGS
        + ", join_use_nulls = 1",
        {"project": project, "experiment_id": experiment_id},
    )
    return [
        ExperimentScore(
            scorer_id=str(scorer_id),
            value=float(value),
            trace_id=str(trace_id) if trace_id else None,
            item_id=None if item_id is None else str(item_id),
        )
        for scorer_id, value, trace_id, item_id in found
    ]


def experiment_cost(
    executor: ClickHouseExecutor, project: str, experiment_id: str
) -> ExperimentCost:
    """`ExperimentRecords.experiment_cost`: over the live trace rows carrying the experiment id
    (one per trace, the newest version should a trace have two: `signals.reads`)."""
    found = executor.query(
        "SELECT count(), sum(total_cost), sum(input_cost), sum(output_cost), "
        "minIf(cost_currency, cost_currency != ''), maxIf(cost_currency, cost_currency != ''), "
        "countIf(cost_currency != ''), max(toUInt8(cost_is_estimated)) FROM ("
        "SELECT trace_id, total_cost, input_cost, output_cost, cost_currency, cost_is_estimated "
        f"FROM traces FINAL WHERE {_PROJECT} AND experiment_id = {{experiment_id:String}} "
        "AND is_deleted = 0 ORDER BY version DESC LIMIT 1 BY trace_id)" + _SETTINGS,
        {"project": project, "experiment_id": experiment_id},
    )
    count, total, input_cost, output_cost, low, high, priced, estimated = found[0]
    return ExperimentCost(
        traces=int(count),
        total_cost=_optional_float(total),
        input_cost=_optional_float(input_cost),
        output_cost=_optional_float(output_cost),
        currency=str(low) if int(priced) and low == high else None,
        is_estimated=bool(estimated),
    )


# --- rows in and out ------------------------------------------------------------------------------


def _document(value: Any) -> str | None:
    """A JSON document's stored text, None (NULL) when absent."""
    return None if value is None else json_text(value)


def _loaded(text: str | None) -> Any:
    return None if text is None else json.loads(text)


def _optional_float(value: Any) -> float | None:
    return None if value is None else float(value)


def _insert(
    executor: ClickHouseExecutor,
    table: str,
    columns: Mapping[str, str],
    rows: Sequence[Mapping[str, Any]],
) -> None:
    """ONE INSERT of `rows` (each holding every column) as JSONEachRow data."""
    lines = []
    for row in rows:
        line = json.dumps(
            {name: row[name] for name in columns}, ensure_ascii=False, separators=(",", ":")
        )
        if "\\u0000" in line:  # a NUL in a string (or text that looks like one): as U+FFFD
            line = json.dumps(
                {name: scrub_nul(row[name]) for name in columns},
                ensure_ascii=False,
                separators=(",", ":"),
            )
        lines.append(line)
    executor.insert(table, list(columns), "\n".join(lines).encode(), _FORMAT)
