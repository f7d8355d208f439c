"""Datasets: named, fixed collections of cases an experiment runs against, kept in the trace store
beside the traces they are captured from.

- A dataset's name is unique in its project (a second create of one name is ALREADY_EXISTS); its
  id is minted by mcpd.
- Items are added in batches of at most `MAX_ITEMS`; each needs an `input`. An item may bring its
  own `item_id`: sending it again replaces its input, expected and metadata and keeps its place,
  so a client can sync a dataset from a file idempotently. Without one, mcpd mints it.
- A capture turns stored runs into items: the root span's input becomes the item's input, its
  output the expected answer when `use_output_as_expected`, and the trace id is kept as
  `source_trace_id`. A captured item's id derives from the dataset and the trace, so capturing a
  run twice (a retry) leaves one item. A trace not stored in the project, or whose root span
  recorded no input (nothing to feed a system under test), is not captured: `requested` (the
  distinct runs named) minus `captured` says how many were left out.
- Erasure of a subject empties the items captured from its traces in place (the trace store does
  it in the erasure's transaction).
"""

from __future__ import annotations

import asyncio
import hashlib
from typing import Literal

from google.protobuf import struct_pb2

from mcpd.evaluation.v1 import evaluation_service_pb2 as rpc
from mcpd.model.v1 import evaluation_pb2, query_pb2
from mcpd.runtime import cursors
from mcpd.runtime.clock import Clock, epoch_nanos
from mcpd.runtime.errors import InvalidArgument, NotFound, quoted
from mcpd.runtime.ids import new_id
from mcpd.signals.messages import python_of, timestamp_of, value_of
from mcpd.storage.evaluation_records import DatasetItemRow, DatasetRow
from mcpd.storage.interfaces import DatasetRecords
from services.evaluation.scorers import root_span
from services.evaluation.scoring import TraceReads

__all__ = ["MAX_ITEMS", "Datasets", "dataset_message", "item_message"]

MAX_ITEMS = 1000
MAX_NAME = 200
_DATASETS = "datasets"
_ITEMS = "dataset_items"
_POSITION = (int, str)


class Datasets:
    """The dataset RPCs over `store`; captures read runs through `traces`."""

    def __init__(self, store: DatasetRecords, traces: TraceReads, clock: Clock) -> None:
        self._store = store
        self._traces = traces
        self._clock = clock

    async def create(self, request: evaluation_pb2.Dataset) -> evaluation_pb2.Dataset:
        if request.dataset_id:
            raise InvalidArgument(
                "dataset_id is assigned by mcpd: leave it out", field="dataset_id"
            )
        name = request.name.strip()
        if not name or len(name) > MAX_NAME:
            raise InvalidArgument(f"name must be 1 to {MAX_NAME} characters", field="name")
        row = DatasetRow(
            dataset_id=new_id(),
            name=name,
            created_at=epoch_nanos(self._clock.now()),
            description=request.description if request.HasField("description") else None,
        )
        await asyncio.to_thread(self._store.create_dataset, request.project, row)
        return dataset_message(request.project, row)

    async def page(self, request: rpc.ListDatasetsRequest) -> rpc.ListDatasetsResponse:
        page = cursors.paging(request, _DATASETS, _POSITION)
        after = (page.after[0], page.after[1]) if page.after is not None else None
        rows = await asyncio.to_thread(
            self._store.datasets, request.project, after=after, limit=page.limit + 1
        )
        answer = rpc.ListDatasetsResponse()
        shown = cursors.page_of(request, _DATASETS, rows, page.limit, _dataset_key, answer.page)
        answer.datasets.extend(dataset_message(request.project, row) for row in shown)
        return answer

    async def get(self, project: str, dataset_id: str) -> evaluation_pb2.Dataset:
        return dataset_message(project, await self._stored(project, dataset_id))

    async def items(self, request: rpc.ListDatasetItemsRequest) -> rpc.ListDatasetItemsResponse:
        await self._stored(request.project, request.dataset_id)
        page = cursors.paging(request, _ITEMS, _POSITION)
        after = (page.after[0], page.after[1]) if page.after is not None else None
        rows = await asyncio.to_thread(
            self._store.dataset_items,
            request.project,
            request.dataset_id,
            after=after,
            limit=page.limit + 1,
        )
        answer = rpc.ListDatasetItemsResponse()
        shown = cursors.page_of(request, _ITEMS, rows, page.limit, _item_key, answer.page)
        answer.items.extend(item_message(row) for row in shown)
        return answer

    async def add(self, request: rpc.AddDatasetItemsRequest) -> evaluation_pb2.ItemsAdded:
        await self._stored(request.project, request.dataset_id)
        if not 1 <= len(request.items) <= MAX_ITEMS:
            raise InvalidArgument(f"items must hold 1 to {MAX_ITEMS} items", field="items")
        now = epoch_nanos(self._clock.now())
        # One nanosecond apart, so the items of one request keep its order.
        rows = [
            _item_row(request.dataset_id, item, f"items[{index}]", now + index)
            for index, item in enumerate(request.items)
        ]
        added = await asyncio.to_thread(self._store.add_dataset_items, request.project, rows)
        return evaluation_pb2.ItemsAdded(added=added)

    async def capture(self, request: rpc.CaptureToDatasetRequest) -> evaluation_pb2.CaptureResult:
        await self._stored(request.project, request.dataset_id)
        named = list(dict.fromkeys(request.capture.trace_ids))
        if not 1 <= len(named) <= MAX_ITEMS:
            raise InvalidArgument(
                f"trace_ids must name 1 to {MAX_ITEMS} runs", field="capture.trace_ids"
            )
        details = await asyncio.gather(
            *(self._traces.detail(request.project, trace_id) for trace_id in named)
        )
        now = epoch_nanos(self._clock.now())
        use_output = request.capture.use_output_as_expected
        found = [
            _captured(request.dataset_id, detail, use_output, now + index)
            for index, detail in enumerate(details)
        ]
        rows = [row for row in found if row is not None]
        captured = await asyncio.to_thread(self._store.add_dataset_items, request.project, rows)
        return evaluation_pb2.CaptureResult(captured=captured, requested=len(named))

    async def every_item(self, project: str, dataset_id: str) -> list[DatasetItemRow]:
        """Every item of a dataset, in order (an experiment's cases)."""
        found: list[DatasetItemRow] = []
        after: tuple[int, str] | None = None
        while True:
            rows = await asyncio.to_thread(
                self._store.dataset_items, project, dataset_id, after=after, limit=cursors.MAX_PAGE
            )
            found += rows
            if len(rows) < cursors.MAX_PAGE:
                return found
            after = (rows[-1].created_at, rows[-1].item_id)

    async def _stored(self, project: str, dataset_id: str) -> DatasetRow:
        row = await asyncio.to_thread(self._store.dataset, project, dataset_id)
        if row is None:
            raise NotFound(f"no dataset {quoted(dataset_id)} in this project", field="dataset_id")
        return row


def _dataset_key(row: DatasetRow) -> tuple[int, str]:
    return row.created_at, row.dataset_id


def _item_key(row: DatasetItemRow) -> tuple[int, str]:
    return row.created_at, row.item_id


def dataset_message(project: str, row: DatasetRow) -> evaluation_pb2.Dataset:
    """The spec's Dataset of a stored row."""
    message = evaluation_pb2.Dataset(
        dataset_id=row.dataset_id,
        name=row.name,
        item_count=row.item_count,
        created_at=timestamp_of(row.created_at),
        project=project,
    )
    message.correlation.project = project
    if row.description is not None:
        message.description = row.description
    return message


def item_message(row: DatasetItemRow) -> evaluation_pb2.DatasetItem:
    """The spec's DatasetItem of a stored row (an item emptied by erasure has no input)."""
    message = evaluation_pb2.DatasetItem(item_id=row.item_id, dataset_id=row.dataset_id)
    for name in ("input", "expected", "metadata"):
        value = getattr(row, name)
        if value is not None:
            getattr(message, name).CopyFrom(value_of(value))
    if row.source_trace_id is not None:
        message.source_trace_id = row.source_trace_id
    return message


def _item_row(
    dataset_id: str, item: evaluation_pb2.DatasetItem, path: str, now: int
) -> DatasetItemRow:
    if item.dataset_id and item.dataset_id != dataset_id:
        raise InvalidArgument(
            f"the item names dataset {quoted(item.dataset_id)}, the request {quoted(dataset_id)}",
            field=f"{path}.dataset_id",
        )
    if not _has_value(item, "input"):
        raise InvalidArgument("an item needs an input", field=f"{path}.input")
    return DatasetItemRow(
        item_id=item.item_id or new_id(),
        dataset_id=dataset_id,
        created_at=now,
        input=python_of(item.input),
        expected=python_of(item.expected) if _has_value(item, "expected") else None,
        metadata=python_of(item.metadata) if _has_value(item, "metadata") else None,
        source_trace_id=item.source_trace_id if item.HasField("source_trace_id") else None,
    )


def _captured(
    dataset_id: str, detail: query_pb2.TraceDetail | None, use_output: bool, now: int
) -> DatasetItemRow | None:
    """The item a stored run becomes (its root span's input, and output when asked); None for a
    run not stored or without input."""
    root = root_span(detail) if detail is not None else None
    if detail is None or root is None or not _set(root.input):
        return None
    trace_id = detail.trace.trace_id
    digest = hashlib.sha256(f"{dataset_id}\n{trace_id}".encode()).hexdigest()
    return DatasetItemRow(
        item_id=f"captured-{digest[:32]}",
        dataset_id=dataset_id,
        created_at=now,
        input=python_of(root.input),
        expected=python_of(root.output) if use_output and _set(root.output) else None,
        source_trace_id=trace_id,
    )


def _set(value: struct_pb2.Value) -> bool:
    """Whether a Value holds anything (an empty one would read as JSON null)."""
    return value.WhichOneof("kind") is not None


def _has_value(
    item: evaluation_pb2.DatasetItem, name: Literal["input", "expected", "metadata"]
) -> bool:
    value: struct_pb2.Value = getattr(item, name)
    return item.HasField(name) and _set(value)
