"""Rows of the evaluation service's tables in the trace store: datasets, their items, experiments
and the items of the runs an experiment drives.

Times are nanoseconds since the epoch; JSON values (`input`, `expected`, `metadata`) are the
Python values of the JSON documents, None when absent. The evaluation service turns these rows
into the spec's Dataset, DatasetItem and Experiment.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = [
    "DatasetItemRow",
    "DatasetRow",
    "ExperimentCost",
    "ExperimentItemRow",
    "ExperimentRow",
    "ExperimentScore",
    "ItemErasure",
]


@dataclass(frozen=True, slots=True)
class DatasetRow:
    """A dataset; `item_count` is counted when read (0 in a row being written)."""

    dataset_id: str
    name: str
    created_at: int
    description: str | None = None
    item_count: int = 0


@dataclass(frozen=True, slots=True)
class DatasetItemRow:
    """One case of a dataset. The erasure of a subject empties an item captured from one of its
    traces in place: its input, expected and metadata are None from then on."""

    item_id: str
    dataset_id: str
    created_at: int
    input: Any = None
    expected: Any = None
    metadata: Any = None
    source_trace_id: str | None = None


@dataclass(frozen=True, slots=True)
class ExperimentRow:
    """An experiment. `driven` when mcpd runs its items (its metadata names a definition);
    `status` is the spec's ExperimentStatus value name (pending, running, ...)."""

    experiment_id: str
    name: str
    dataset_id: str
    status: str
    created_at: int
    driven: bool
    started_at: int | None = None
    finished_at: int | None = None
    baseline_id: str | None = None
    error: str | None = None
    metadata: Any = None


@dataclass(frozen=True, slots=True)
class ExperimentItemRow:
    """The run of one item of an experiment. For one mcpd drives, where that run got to:
    `status` is `started`, `ran` (the run succeeded; its trace is yet to be scored), `scored`
    or `failed` (`error` says why); a caller's runs are `recorded` (`RecordExperimentRuns`)."""

    item_id: str
    status: str
    updated_at: int
    run_id: str | None = None
    trace_id: str | None = None
    error: str | None = None


@dataclass(frozen=True, slots=True)
class ExperimentScore:
    """One score on a trace of an experiment, with the dataset item that trace ran (None when no
    item is known for it)."""

    scorer_id: str
    value: float
    trace_id: str | None
    item_id: str | None


@dataclass(frozen=True, slots=True)
class ExperimentCost:
    """What the traces of an experiment carry: how many there are, and their summed costs
    (None when no trace carries one). `currency` is the traces' currency when they agree."""

    traces: int
    total_cost: float | None = None
    input_cost: float | None = None
    output_cost: float | None = None
    currency: str | None = None
    is_estimated: bool = False


@dataclass(frozen=True, slots=True)
class ItemErasure:
    """What the erasure of a subject did to dataset items: how many were emptied in place and
    the datasets they sit in (sorted)."""

    items: int = 0
    datasets: tuple[str, ...] = ()
