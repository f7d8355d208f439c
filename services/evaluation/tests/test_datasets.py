"""Datasets over a real SQLite trace store: creation, pages, items, captures and their refusals."""

from __future__ import annotations

from collections.abc import Mapping

import pytest

from mcpd import codec
from mcpd.evaluation.v1 import evaluation_service_pb2 as rpc
from mcpd.model.v1 import evaluation_pb2
from mcpd.runtime.clock import ManualClock
from mcpd.runtime.errors import AlreadyExists, InvalidArgument, McpdError, NotFound
from mcpd.storage.sql.stores import SqlTraceStore
from services.evaluation.datasets import MAX_ITEMS, Datasets
from services.evaluation.tests.doubles import StoredRuns, stored_run

P = "proj"


@pytest.fixture
def runs() -> StoredRuns:
    return StoredRuns(
        {
            "a" * 32: stored_run("a" * 32, input={"q": "refund?"}, output="issued"),
            "b" * 32: stored_run("b" * 32, input="hello"),
            "c" * 32: stored_run("c" * 32, output="no input recorded"),
        }
    )


@pytest.fixture
def datasets(traces: SqlTraceStore, runs: StoredRuns, clock: ManualClock) -> Datasets:
    return Datasets(traces, runs, clock)


async def created(datasets: Datasets, name: str = "golden") -> evaluation_pb2.Dataset:
    return await datasets.create(evaluation_pb2.Dataset(project=P, name=name, description="d"))


def items(*bodies: Mapping[str, object]) -> list[evaluation_pb2.DatasetItem]:
    return [codec.decode(body, evaluation_pb2.DatasetItem) for body in bodies]


def refused(error: pytest.ExceptionInfo[McpdError]) -> tuple[str, str | None]:
    return type(error.value).__name__, error.value.field


async def test_a_dataset_is_created_with_an_id_and_found_again(
    datasets: Datasets, clock: ManualClock
) -> None:
    made = await created(datasets)
    assert len(made.dataset_id) == 26
    shown = codec.encode(await datasets.get(P, made.dataset_id))
    assert shown == {
        "dataset_id": made.dataset_id,
        "name": "golden",
        "description": "d",
        "item_count": 0,
        "created_at": "2026-12-01T00:00:00.000Z",
        "correlation": {"project": P},
        "project": P,
    }


@pytest.mark.parametrize(
    ("body", "error", "field"),
    [
        ({"name": ""}, InvalidArgument, "name"),
        ({"name": "x" * 201}, InvalidArgument, "name"),
        ({"name": "x", "dataset_id": "mine"}, InvalidArgument, "dataset_id"),
    ],
)
async def test_a_bad_dataset_is_refused_naming_the_field(
    datasets: Datasets, body: dict[str, str], error: type[McpdError], field: str
) -> None:
    with pytest.raises(error) as raised:
        await datasets.create(codec.decode({**body, "project": P}, evaluation_pb2.Dataset))
    assert raised.value.field == field


async def test_a_name_is_taken_once_per_project(datasets: Datasets) -> None:
    await created(datasets)
    with pytest.raises(AlreadyExists) as raised:
        await created(datasets)
    assert raised.value.field == "name"
    other = await datasets.create(evaluation_pb2.Dataset(project="other", name="golden"))
    assert other.name == "golden"


async def test_datasets_page_newest_first_with_a_cursor(
    datasets: Datasets, clock: ManualClock
) -> None:
    for name in ("one", "two", "three"):
        await created(datasets, name)
        clock.advance(1)
    first = await datasets.page(rpc.ListDatasetsRequest(project=P, limit=2))
    assert [shown.name for shown in first.datasets] == ["three", "two"]
    assert first.page.has_more
    rest = await datasets.page(
        rpc.ListDatasetsRequest(project=P, limit=2, cursor=first.page.next_cursor)
    )
    assert [shown.name for shown in rest.datasets] == ["one"]
    assert not rest.page.has_more


async def test_items_are_added_listed_in_order_and_replaced_by_id(datasets: Datasets) -> None:
    made = await created(datasets)
    added = await datasets.add(
        rpc.AddDatasetItemsRequest(
            project=P,
            dataset_id=made.dataset_id,
            items=items(
                {"input": {"q": 1}, "expected": 2, "item_id": "mine"},
                {"input": "two", "metadata": {"level": "hard"}, "source_trace_id": "t-9"},
            ),
        )
    )
    assert added.added == 2
    again = await datasets.add(
        rpc.AddDatasetItemsRequest(
            project=P,
            dataset_id=made.dataset_id,
            items=items({"input": {"q": 10}, "item_id": "mine"}),
        )
    )
    assert again.added == 1
    listed = await datasets.items(
        rpc.ListDatasetItemsRequest(project=P, dataset_id=made.dataset_id)
    )
    shown = [codec.encode(item) for item in listed.items]
    assert shown[0] == {"item_id": "mine", "dataset_id": made.dataset_id, "input": {"q": 10}}
    assert {key: shown[1][key] for key in ("input", "metadata", "source_trace_id")} == {
        "input": "two",
        "metadata": {"level": "hard"},
        "source_trace_id": "t-9",
    }
    assert (await datasets.get(P, made.dataset_id)).item_count == 2


@pytest.mark.parametrize(
    ("bodies", "field"),
    [
        ([{"input": 1}, {"expected": 2}], "items[1].input"),
        ([{"input": 1, "dataset_id": "another"}], "items[0].dataset_id"),
        ([], "items"),
    ],
)
async def test_bad_items_are_refused_and_none_is_stored(
    datasets: Datasets, bodies: list[dict[str, object]], field: str
) -> None:
    made = await created(datasets)
    with pytest.raises(InvalidArgument) as raised:
        await datasets.add(
            rpc.AddDatasetItemsRequest(project=P, dataset_id=made.dataset_id, items=items(*bodies))
        )
    assert raised.value.field == field
    assert (await datasets.get(P, made.dataset_id)).item_count == 0


async def test_too_many_items_at_once_are_refused(datasets: Datasets) -> None:
    made = await created(datasets)
    many = items(*[{"input": index} for index in range(MAX_ITEMS + 1)])
    with pytest.raises(InvalidArgument) as raised:
        await datasets.add(
            rpc.AddDatasetItemsRequest(project=P, dataset_id=made.dataset_id, items=many)
        )
    assert raised.value.field == "items"


async def test_an_unknown_dataset_is_not_found_and_not_reachable_from_another_project(
    datasets: Datasets,
) -> None:
    made = await created(datasets)
    with pytest.raises(NotFound) as raised:
        await datasets.get("other", made.dataset_id)
    assert raised.value.field == "dataset_id"
    with pytest.raises(NotFound):
        await datasets.add(
            rpc.AddDatasetItemsRequest(
                project="other", dataset_id=made.dataset_id, items=items({"input": 1})
            )
        )
    with pytest.raises(NotFound):
        await datasets.items(
            rpc.ListDatasetItemsRequest(project="other", dataset_id=made.dataset_id)
        )


async def test_a_capture_keeps_the_trace_and_takes_the_output_only_when_asked(
    datasets: Datasets,
) -> None:
    made = await created(datasets)
    capture = evaluation_pb2.CaptureRequest(
        trace_ids=["a" * 32, "b" * 32, "c" * 32, "d" * 32, "a" * 32],
        use_output_as_expected=True,
    )
    result = await datasets.capture(
        rpc.CaptureToDatasetRequest(project=P, dataset_id=made.dataset_id, capture=capture)
    )
    # Four distinct runs named; c recorded no input and d is not stored.
    assert (result.requested, result.captured) == (4, 2)
    listed = await datasets.items(
        rpc.ListDatasetItemsRequest(project=P, dataset_id=made.dataset_id)
    )
    captured = {item.source_trace_id: codec.encode(item) for item in listed.items}
    assert captured["a" * 32]["input"] == {"q": "refund?"}
    assert captured["a" * 32]["expected"] == "issued"
    assert "expected" not in captured["b" * 32]

    without = evaluation_pb2.CaptureRequest(trace_ids=["a" * 32])
    again = await datasets.capture(
        rpc.CaptureToDatasetRequest(project=P, dataset_id=made.dataset_id, capture=without)
    )
    assert (again.requested, again.captured) == (1, 1)
    relisted = await datasets.items(
        rpc.ListDatasetItemsRequest(project=P, dataset_id=made.dataset_id)
    )
    assert len(relisted.items) == 2, "capturing a run again replaces its item"
    replaced = next(item for item in relisted.items if item.source_trace_id == "a" * 32)
    assert not replaced.HasField("expected")


async def test_a_capture_names_between_one_and_the_most_runs(datasets: Datasets) -> None:
    made = await created(datasets)
    for named in ([], [f"{index:032x}" for index in range(MAX_ITEMS + 1)]):
        capture = evaluation_pb2.CaptureRequest(trace_ids=named)
        with pytest.raises(InvalidArgument) as raised:
            await datasets.capture(
                rpc.CaptureToDatasetRequest(project=P, dataset_id=made.dataset_id, capture=capture)
            )
        assert raised.value.field == "capture.trace_ids"
