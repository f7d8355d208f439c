"""Datasets, items and experiments in the trace store (`DatasetRecords`, `ExperimentRecords`), the
same behaviour on every backend; and the erasure of a subject emptying captured items in place."""

from __future__ import annotations

from typing import Any

import pytest

from mcpd.runtime.errors import AlreadyExists
from mcpd.signals.queries import ErasureSubject
from mcpd.storage.evaluation_records import (
    DatasetItemRow,
    DatasetRow,
    ExperimentItemRow,
    ExperimentRow,
    ExperimentScore,
)
from tests.libs.signals.samples import score, span
from tests.libs.storage.helpers import OpenedStore
from tests.libs.storage.query_data import R0, P, at, batch, settle, usd

OTHER = "other-project"


def item(item_id: str, created_ms: int, dataset_id: str = "ds-1", **fields: Any) -> DatasetItemRow:
    return DatasetItemRow(
        item_id=item_id, dataset_id=dataset_id, created_at=at(created_ms), **fields
    )


def experiment(experiment_id: str, created_ms: int, **fields: Any) -> ExperimentRow:
    values: dict[str, Any] = {
        "name": f"run {experiment_id}",
        "dataset_id": "ds-1",
        "status": "running",
        "driven": False,
    }
    values.update(fields)
    return ExperimentRow(experiment_id=experiment_id, created_at=at(created_ms), **values)


def test_a_dataset_is_stored_counted_and_paged_newest_first(
    migrated_trace_store: OpenedStore,
) -> None:
    store = migrated_trace_store.store
    for index, name in enumerate(["alpha", "beta", "gamma"]):
        store.create_dataset(P, DatasetRow(f"ds-{index}", name, at(index), f"about {name}"))
    store.create_dataset(OTHER, DatasetRow("ds-x", "alpha", at(9)))
    store.add_dataset_items(P, [item("i-1", 10, "ds-1"), item("i-2", 11, "ds-1")])

    first = store.datasets(P, after=None, limit=2)
    assert [(row.dataset_id, row.name, row.item_count) for row in first] == [
        ("ds-2", "gamma", 0),
        ("ds-1", "beta", 2),
    ]
    rest = store.datasets(P, after=(first[-1].created_at, first[-1].dataset_id), limit=2)
    assert [row.dataset_id for row in rest] == ["ds-0"]
    assert store.dataset(P, "ds-1") == DatasetRow("ds-1", "beta", at(1), "about beta", 2)
    assert store.dataset(P, "ds-x") is None
    assert store.dataset(OTHER, "ds-x") == DatasetRow("ds-x", "alpha", at(9), None, 0)


def test_a_taken_name_is_refused(migrated_trace_store: OpenedStore) -> None:
    store = migrated_trace_store.store
    store.create_dataset(P, DatasetRow("ds-1", "golden", at(0)))
    with pytest.raises(AlreadyExists) as refused:
        store.create_dataset(P, DatasetRow("ds-2", "golden", at(1)))
    assert refused.value.field == "name"
    assert [row.dataset_id for row in store.datasets(P, after=None, limit=10)] == ["ds-1"]


def test_items_keep_their_order_and_a_resent_item_replaces_its_payloads(
    migrated_trace_store: OpenedStore,
) -> None:
    store = migrated_trace_store.store
    store.create_dataset(P, DatasetRow("ds-1", "golden", at(0)))
    written = store.add_dataset_items(
        P,
        [
            item("i-b", 10, input={"q": "two"}, expected="2"),
            item("i-a", 10, input={"q": "one"}, metadata={"level": "easy"}),
            item("i-c", 12, input=[1, 2], source_trace_id="t-1"),
        ],
    )
    assert written == 3
    assert store.add_dataset_items(P, [item("i-b", 50, input={"q": "TWO"}, expected=None)]) == 1
    settle(migrated_trace_store)

    page = store.dataset_items(P, "ds-1", after=None, limit=2)
    assert [(row.item_id, row.input, row.expected, row.metadata) for row in page] == [
        ("i-a", {"q": "one"}, None, {"level": "easy"}),
        ("i-b", {"q": "TWO"}, None, None),
    ]
    assert page[1].created_at == at(10), "a re-sent item keeps its place"
    rest = store.dataset_items(P, "ds-1", after=(page[-1].created_at, page[-1].item_id), limit=2)
    assert rest == [item("i-c", 12, input=[1, 2], source_trace_id="t-1")]
    assert store.dataset_items(OTHER, "ds-1", after=None, limit=10) == []
    assert store.dataset(P, "ds-1").item_count == 3


def test_an_experiment_changes_only_from_the_status_it_expects(
    migrated_trace_store: OpenedStore,
) -> None:
    store = migrated_trace_store.store
    created = experiment("ex-1", 0, status="pending", driven=True, metadata={"definition_id": "d"})
    store.create_experiment(P, created)
    assert store.experiment(P, "ex-1") == created
    assert store.experiment(OTHER, "ex-1") is None

    started = experiment(
        "ex-1", 0, status="running", driven=True, started_at=at(5), metadata={"definition_id": "d"}
    )
    assert store.change_experiment(P, started, expected=["pending"]) is True
    finished = experiment(
        "ex-1",
        0,
        status="succeeded",
        driven=True,
        started_at=at(5),
        finished_at=at(9),
        metadata={"definition_id": "d"},
    )
    cancelled = experiment("ex-1", 0, status="cancelled", driven=True, finished_at=at(8))
    assert store.change_experiment(P, cancelled, expected=["pending", "running"]) is True
    assert store.change_experiment(P, finished, expected=["running"]) is False
    assert store.experiment(P, "ex-1") == cancelled


def test_experiments_page_newest_first_by_dataset_and_the_driven_ones_are_found(
    migrated_trace_store: OpenedStore,
) -> None:
    store = migrated_trace_store.store
    store.create_experiment(P, experiment("ex-1", 1, driven=True, status="pending"))
    store.create_experiment(P, experiment("ex-2", 2, dataset_id="ds-2"))
    store.create_experiment(P, experiment("ex-3", 3, driven=True, status="succeeded"))
    store.create_experiment(OTHER, experiment("ex-4", 4, driven=True, status="running"))

    first = store.experiments(P, dataset_id=None, after=None, limit=2)
    assert [row.experiment_id for row in first] == ["ex-3", "ex-2"]
    rest = store.experiments(
        P, dataset_id=None, after=(first[-1].created_at, first[-1].experiment_id), limit=2
    )
    assert [row.experiment_id for row in rest] == ["ex-1"]
    over = store.experiments(P, dataset_id="ds-2", after=None, limit=10)
    assert [row.experiment_id for row in over] == ["ex-2"]
    driven = store.driven_experiments(["pending", "running"])
    assert [(project, row.experiment_id) for project, row in driven] == [
        (P, "ex-1"),
        (OTHER, "ex-4"),
    ]


def test_an_experiments_scores_join_their_items_and_its_traces_carry_its_cost(
    migrated_trace_store: OpenedStore,
) -> None:
    store = migrated_trace_store.store
    joined = {"experiment_id": "ex-1"}
    spans = [
        span(
            "s-1", project=P, trace_id="t-1", start_time=at(1), is_root=True, **joined, **usd(0.5)
        ),
        span(
            "s-2", project=P, trace_id="t-2", start_time=at(2), is_root=True, **joined, **usd(0.25)
        ),
        span("s-3", project=P, trace_id="t-3", start_time=at(3), is_root=True, **usd(4.0)),
    ]
    scores = [
        score("sc-1", project=P, trace_id="t-1", scorer_id="exact", value=1.0, **joined),
        score("sc-2", project=P, trace_id="t-2", scorer_id="exact", value=0.0, **joined),
        score("sc-3", project=P, trace_id="t-3", scorer_id="exact", value=1.0),
    ]
    assert store.write_batches([batch(spans=spans, scores=scores)]) == [True]
    store.put_experiment_items(
        P,
        "ex-1",
        [ExperimentItemRow("i-1", "started", at(1), run_id="r-1", trace_id="t-1")],
    )
    store.put_experiment_items(
        P,
        "ex-1",
        [
            ExperimentItemRow("i-1", "scored", at(5), run_id="r-1", trace_id="t-1"),
            ExperimentItemRow("i-2", "failed", at(6), error="boom"),
        ],
    )
    settle(migrated_trace_store)

    assert store.experiment_items(P, "ex-1") == [
        ExperimentItemRow("i-1", "scored", at(5), run_id="r-1", trace_id="t-1"),
        ExperimentItemRow("i-2", "failed", at(6), error="boom"),
    ]
    assert store.experiment_items(OTHER, "ex-1") == []
    assert store.experiment_scores(P, "ex-1") == [
        ExperimentScore("exact", 1.0, "t-1", "i-1"),
        ExperimentScore("exact", 0.0, "t-2", None),
    ]
    cost = store.experiment_cost(P, "ex-1")
    assert (cost.traces, cost.total_cost, cost.currency) == (2, 0.75, "USD")
    assert store.experiment_cost(OTHER, "ex-1").traces == 0


def test_erasure_empties_captured_items_in_place_and_names_their_datasets(
    migrated_trace_store: OpenedStore,
) -> None:
    store = migrated_trace_store.store
    spans = [
        span("s-1", project=P, trace_id="t-1", start_time=at(1), is_root=True, user_id="u-1"),
        span("s-2", project=P, trace_id="t-2", start_time=at(2), is_root=True, user_id="u-2"),
    ]
    assert store.write_batches([batch(spans=spans, received_at=R0)]) == [True]
    store.add_dataset_items(
        P,
        [
            item("i-1", 1, "ds-b", input="said by u-1", expected="x", source_trace_id="t-1"),
            item("i-2", 2, "ds-a", input="also u-1", source_trace_id="t-1"),
            item("i-3", 3, "ds-a", input="said by u-2", source_trace_id="t-2"),
            item("i-4", 4, "ds-a", input="typed by hand"),
        ],
    )
    store.add_dataset_items(OTHER, [item("i-9", 1, "ds-a", input="x", source_trace_id="t-1")])

    counts = store.erase_subject(P, ErasureSubject(user_ids=("u-1",)))
    settle(migrated_trace_store)

    assert (counts.dataset_items, counts.datasets) == (2, ("ds-a", "ds-b"))
    kept = {
        row.item_id: (row.input, row.expected, row.source_trace_id)
        for dataset_id in ("ds-a", "ds-b")
        for row in store.dataset_items(P, dataset_id, after=None, limit=10)
    }
    assert kept == {
        "i-1": (None, None, "t-1"),
        "i-2": (None, None, "t-1"),
        "i-3": ("said by u-2", None, "t-2"),
        "i-4": ("typed by hand", None, None),
    }
    assert [row.input for row in store.dataset_items(OTHER, "ds-a", after=None, limit=1)] == ["x"]
    again = store.erase_subject(P, ErasureSubject(user_ids=("u-1",)))
    assert (again.dataset_items, again.datasets) == (0, ())
