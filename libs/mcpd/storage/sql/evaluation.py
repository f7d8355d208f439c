"""Datasets, dataset items and experiments on SQLite and PostgreSQL (`DatasetRecords` and
`ExperimentRecords` in `mcpd.storage.interfaces`), inside the caller's connection.

An item is upserted by (project, dataset_id, item_id): a re-sent item replaces its payloads and
keeps its place (`created_at`). An experiment changes by compare-and-set on its status, so a
cancel and the driver's finish cannot both win. An experiment's scores and cost are read from the
scores and traces tables through the correlation's `experiment_id`; scores reach their item
through the item rows of the runs mcpd drove.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import Connection, Integer, and_, cast, func, insert, or_, select, tuple_, update
from sqlalchemy.exc import IntegrityError

from mcpd.runtime.errors import AlreadyExists
from mcpd.storage.evaluation_records import (
    DatasetItemRow,
    DatasetRow,
    ExperimentCost,
    ExperimentItemRow,
    ExperimentRow,
    ExperimentScore,
    ItemErasure,
)
from mcpd.storage.sql.dialect import SqlDialect, upsert
from mcpd.storage.sql.schema.trace import (
    dataset_items,
    datasets,
    experiment_items,
    experiments,
    scores,
    traces,
)

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

_ITEM_PAYLOADS = ("input", "expected", "metadata", "source_trace_id")
_EXPERIMENT_CHANGES = ("name", "status", "started_at", "finished_at", "error", "metadata")
_ITEM_CHANGES = ("run_id", "trace_id", "status", "error", "updated_at")


# --- datasets -----------------------------------------------------------------------------------


def create_dataset(conn: Connection, project: str, dataset: DatasetRow) -> None:
    """`DatasetRecords.create_dataset`: the unique (project, name) index refuses a taken name."""
    row = {
        "project": project,
        "dataset_id": dataset.dataset_id,
        "name": dataset.name,
        "description": dataset.description,
        "created_at": dataset.created_at,
    }
    try:
        with conn.begin_nested():
            conn.execute(insert(datasets), row)
    except IntegrityError:
        raise AlreadyExists(
            f"a dataset named {dataset.name!r} already exists in this project", field="name"
        ) from None


def datasets_page(
    conn: Connection, project: str, after: tuple[int, str] | None, limit: int
) -> list[DatasetRow]:
    """`DatasetRecords.datasets`."""
    key = tuple_(datasets.c.created_at, datasets.c.dataset_id)
    statement = _counted(datasets.c.project == project)
    if after is not None:
        statement = statement.where(key < tuple_(*after))
    ordered = statement.order_by(datasets.c.created_at.desc(), datasets.c.dataset_id.desc())
    return [_dataset(row) for row in conn.execute(ordered.limit(limit))]


def dataset(conn: Connection, project: str, dataset_id: str) -> DatasetRow | None:
    """`DatasetRecords.dataset`."""
    statement = _counted(datasets.c.project == project, datasets.c.dataset_id == dataset_id)
    row = conn.execute(statement).first()
    return _dataset(row) if row is not None else None


def _counted(*conditions: Any) -> Any:
    """The datasets matching `conditions`, each with the number of its items."""
    count = (
        select(func.count())
        .where(
            dataset_items.c.project == datasets.c.project,
            dataset_items.c.dataset_id == datasets.c.dataset_id,
        )
        .scalar_subquery()
    )
    return select(datasets, count.label("item_count")).where(*conditions)


def _dataset(row: Any) -> DatasetRow:
    return DatasetRow(
        dataset_id=row.dataset_id,
        name=row.name,
        description=row.description,
        created_at=row.created_at,
        item_count=row.item_count,
    )


def add_dataset_items(
    conn: Connection, dialect: SqlDialect, project: str, items: Sequence[DatasetItemRow]
) -> int:
    """`DatasetRecords.add_dataset_items`."""
    if not items:
        return 0
    rows = [
        {
            "project": project,
            "dataset_id": item.dataset_id,
            "item_id": item.item_id,
            "input": item.input,
            "expected": item.expected,
            "metadata": item.metadata,
            "source_trace_id": item.source_trace_id,
            "created_at": item.created_at,
        }
        for item in items
    ]
    conn.execute(upsert(dataset_items, dialect, _ITEM_PAYLOADS), rows)
    return len(rows)


def dataset_items_page(
    conn: Connection, project: str, dataset_id: str, after: tuple[int, str] | None, limit: int
) -> list[DatasetItemRow]:
    """`DatasetRecords.dataset_items`."""
    statement = select(dataset_items).where(
        dataset_items.c.project == project, dataset_items.c.dataset_id == dataset_id
    )
    if after is not None:
        statement = statement.where(
            tuple_(dataset_items.c.created_at, dataset_items.c.item_id) > tuple_(*after)
        )
    ordered = statement.order_by(dataset_items.c.created_at, dataset_items.c.item_id)
    return [
        DatasetItemRow(
            item_id=row.item_id,
            dataset_id=row.dataset_id,
            created_at=row.created_at,
            input=row.input,
            expected=row.expected,
            metadata=row.metadata,
            source_trace_id=row.source_trace_id,
        )
        for row in conn.execute(ordered.limit(limit))
    ]


def empty_captured_items(conn: Connection, project: str, trace_ids: Sequence[str]) -> ItemErasure:
    """Empty in place the items captured from `trace_ids` that still hold a payload (part of an
    erasure, in its transaction)."""
    if not trace_ids:
        return ItemErasure()
    holding = or_(
        dataset_items.c.input.is_not(None),
        dataset_items.c.expected.is_not(None),
        dataset_items.c.metadata.is_not(None),
    )
    emptied = conn.execute(
        update(dataset_items)
        .where(
            dataset_items.c.project == project,
            dataset_items.c.source_trace_id.in_(trace_ids),
            holding,
        )
        .values(input=None, expected=None, metadata=None)
        .returning(dataset_items.c.dataset_id)
    ).scalars()
    named = list(emptied)
    return ItemErasure(items=len(named), datasets=tuple(sorted(set(named))))


# --- experiments --------------------------------------------------------------------------------


def create_experiment(conn: Connection, project: str, experiment: ExperimentRow) -> None:
    """`ExperimentRecords.create_experiment`."""
    conn.execute(insert(experiments), {"project": project, **_experiment_values(experiment)})


def experiment(conn: Connection, project: str, experiment_id: str) -> ExperimentRow | None:
    """`ExperimentRecords.experiment`."""
    row = conn.execute(
        select(experiments).where(
            experiments.c.project == project, experiments.c.experiment_id == experiment_id
        )
    ).first()
    return _experiment(row) if row is not None else None


def experiments_page(
    conn: Connection,
    project: str,
    dataset_id: str | None,
    after: tuple[int, str] | None,
    limit: int,
) -> list[ExperimentRow]:
    """`ExperimentRecords.experiments`."""
    statement = select(experiments).where(experiments.c.project == project)
    if dataset_id is not None:
        statement = statement.where(experiments.c.dataset_id == dataset_id)
    if after is not None:
        statement = statement.where(
            tuple_(experiments.c.created_at, experiments.c.experiment_id) < tuple_(*after)
        )
    ordered = statement.order_by(
        experiments.c.created_at.desc(), experiments.c.experiment_id.desc()
    )
    return [_experiment(row) for row in conn.execute(ordered.limit(limit))]


def change_experiment(
    conn: Connection, project: str, experiment: ExperimentRow, expected: Sequence[str]
) -> bool:
    """`ExperimentRecords.change_experiment`: one UPDATE guarded by the stored status."""
    values = _experiment_values(experiment)
    changed = conn.execute(
        update(experiments)
        .where(
            experiments.c.project == project,
            experiments.c.experiment_id == experiment.experiment_id,
            experiments.c.status.in_(expected),
        )
        .values({name: values[name] for name in _EXPERIMENT_CHANGES})
    )
    return bool(changed.rowcount == 1)


def driven_experiments(
    conn: Connection, statuses: Sequence[str]
) -> list[tuple[str, ExperimentRow]]:
    """`ExperimentRecords.driven_experiments`."""
    rows = conn.execute(
        select(experiments)
        .where(experiments.c.status.in_(statuses), experiments.c.driven.is_(True))
        .order_by(experiments.c.created_at, experiments.c.experiment_id)
    )
    return [(row.project, _experiment(row)) for row in rows]


def _experiment_values(experiment: ExperimentRow) -> dict[str, Any]:
    return {
        "experiment_id": experiment.experiment_id,
        "name": experiment.name,
        "dataset_id": experiment.dataset_id,
        "status": experiment.status,
        "created_at": experiment.created_at,
        "started_at": experiment.started_at,
        "finished_at": experiment.finished_at,
        "baseline_id": experiment.baseline_id,
        "error": experiment.error,
        "metadata": experiment.metadata,
        "driven": experiment.driven,
    }


def _experiment(row: Any) -> ExperimentRow:
    return ExperimentRow(
        experiment_id=row.experiment_id,
        name=row.name,
        dataset_id=row.dataset_id,
        status=row.status,
        created_at=row.created_at,
        driven=bool(row.driven),
        started_at=row.started_at,
        finished_at=row.finished_at,
        baseline_id=row.baseline_id,
        error=row.error,
        metadata=row.metadata,
    )


def put_experiment_items(
    conn: Connection,
    dialect: SqlDialect,
    project: str,
    experiment_id: str,
    items: Sequence[ExperimentItemRow],
) -> None:
    """`ExperimentRecords.put_experiment_items`."""
    if not items:
        return
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
        }
        for item in items
    ]
    conn.execute(upsert(experiment_items, dialect, _ITEM_CHANGES), rows)


def experiment_items_of(
    conn: Connection, project: str, experiment_id: str
) -> list[ExperimentItemRow]:
    """`ExperimentRecords.experiment_items`."""
    rows = conn.execute(
        select(experiment_items)
        .where(
            experiment_items.c.project == project,
            experiment_items.c.experiment_id == experiment_id,
        )
        .order_by(experiment_items.c.item_id)
    )
    return [
        ExperimentItemRow(
            item_id=row.item_id,
            status=row.status,
            updated_at=row.updated_at,
            run_id=row.run_id,
            trace_id=row.trace_id,
            error=row.error,
        )
        for row in rows
    ]


def experiment_scores(conn: Connection, project: str, experiment_id: str) -> list[ExperimentScore]:
    """`ExperimentRecords.experiment_scores`, in score id order."""
    joined = scores.outerjoin(
        experiment_items,
        and_(
            experiment_items.c.project == scores.c.project,
            experiment_items.c.experiment_id == scores.c.experiment_id,
            experiment_items.c.trace_id == scores.c.trace_id,
        ),
    )
    rows = conn.execute(
        select(scores.c.scorer_id, scores.c.value, scores.c.trace_id, experiment_items.c.item_id)
        .select_from(joined)
        .where(scores.c.project == project, scores.c.experiment_id == experiment_id)
        .order_by(scores.c.score_id)
    )
    return [ExperimentScore(row.scorer_id, row.value, row.trace_id, row.item_id) for row in rows]


def experiment_cost(conn: Connection, project: str, experiment_id: str) -> ExperimentCost:
    """`ExperimentRecords.experiment_cost`."""
    row = conn.execute(
        select(
            func.count(),
            func.sum(traces.c.total_cost),
            func.sum(traces.c.input_cost),
            func.sum(traces.c.output_cost),
            func.min(traces.c.cost_currency),
            func.max(traces.c.cost_currency),
            func.max(cast(traces.c.cost_is_estimated, Integer)),
        ).where(traces.c.project == project, traces.c.experiment_id == experiment_id)
    ).one()
    count, total, input_cost, output_cost, low, high, estimated = row
    return ExperimentCost(
        traces=count,
        total_cost=total,
        input_cost=input_cost,
        output_cost=output_cost,
        currency=low if low == high else None,
        is_estimated=bool(estimated),
    )
