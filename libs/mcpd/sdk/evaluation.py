"""A client for evaluation: datasets, experiments and their comparison, over the daemon's gRPC
port, and `run_experiment`, which runs a Python function over a dataset as an experiment.

Like the orchestrator's `Client`, it sends Python JSON values as the protocol's JSON values,
answers with the protocol's messages (`mcpd.model.v1.evaluation_pb2`), and raises a refusal as
the `mcpd.runtime.errors.McpdError` subclass the daemon named. Where the daemon bounds a batch
(items, runs, captured traces: 1,000 a call) or pages an answer, the client splits and pages
for you.

An API key has exactly one scope, and evaluation needs three: `read` (datasets, items,
experiments, comparisons), `write` (creating and changing them, scoring) and `ingest` (the
traces `run_experiment` records). Give `ScopedKeys` for those; one string is for a credential
that holds every scope (a session token), and none is local mode.

`run_experiment` drives an experiment the way docs/evaluation.md describes for a caller: it
creates the experiment and then, a chunk of items at a time, calls the task on each item's
input on a small thread pool, records one root span per item through ingest (an `agent_run`
named after the task, with the item's input, the task's answer as output, or its exception as
the error, and the experiment's id in its correlation), says which item each trace was for
(`RecordExperimentRuns`, so a comparison pairs), and scores the runs whose task returned, one
pass per item with the item's `expected` as `config.expected`. A pass reads the trace back
from the query service, so a pass that found it not stored yet is retried until `trace_wait_s`
has passed. The experiment then ends `failed` when an item failed (its task raised or answered
what is not JSON) or a trace never became readable, with how many and the first reason, else
`succeeded`.
"""

from __future__ import annotations

import contextlib
import itertools
import random
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, TypeAlias, TypeVar

import grpc

from mcpd import codec
from mcpd.codec import enum_names
from mcpd.evaluation.v1 import evaluation_service_pb2 as rpc
from mcpd.evaluation.v1.evaluation_service_pb2_grpc import EvaluationServiceStub
from mcpd.ingest.v1 import ingest_service_pb2
from mcpd.ingest.v1.ingest_service_pb2_grpc import IngestServiceStub
from mcpd.model.v1 import enums_pb2, evaluation_pb2
from mcpd.options.v1 import access_pb2
from mcpd.runtime.errors import McpdError, Unavailable
from mcpd.sdk._experiment_run import ExperimentRun, ItemRun, Task
from mcpd.sdk.client import DEFAULT_TIMEOUT_S, metadata_for, refusal_of
from mcpd.signals.messages import python_of, value_of

__all__ = ["EvaluationClient", "ExperimentResult", "ItemRun", "ScopedKeys", "Task"]

DatasetRef: TypeAlias = str | evaluation_pb2.Dataset
ExperimentRef: TypeAlias = str | evaluation_pb2.Experiment
_T = TypeVar("_T")
_EXPERIMENT_STATUS = enum_names(enums_pb2.ExperimentStatus.DESCRIPTOR)

# The daemon's bound on items, runs and captured traces per call, and its largest page.
MAX_BATCH = 1000
_EXPERIMENT_PAGE = 100  # each listed experiment is summarised from its scores: smaller pages
DEFAULT_CONCURRENCY = 8
MAX_CONCURRENCY = 100
DEFAULT_TRACE_WAIT_S = 60.0
# Items run, recorded and scored together: bounds what is held in memory, and a long run
# shows progress in the daemon as it goes.
_CHUNK = 100
# A call of an idempotent RPC (ingest with its key, recording runs, scoring) is retried on
# Unavailable, jittered, this many times in all.
_ATTEMPTS = 4
_FIRST_BACKOFF_S = 0.2
# The daemon's default grpc.max_message_bytes. grpc's own client default (4 MiB) would refuse
# a page of large items.
_MAX_MESSAGE_BYTES = 64 * 1024 * 1024


def _scopes() -> dict[str, str]:
    """The scope each RPC this client calls needs, by method name, read from the protos'
    access options (the rule the daemon enforces)."""
    services = (
        rpc.DESCRIPTOR.services_by_name["EvaluationService"],
        ingest_service_pb2.DESCRIPTOR.services_by_name["IngestService"],
    )
    return {
        method.name: enums_pb2.KeyScope.Name(
            method.GetOptions().Extensions[access_pb2.access].scope
        )
        .removeprefix("KEY_SCOPE_")
        .lower()
        for service in services
        for method in service.methods
    }


_SCOPES = _scopes()


@dataclass(frozen=True, slots=True)
class ScopedKeys:
    """One API key per scope evaluation needs (a key has exactly one scope). A call needing a
    scope with no key here raises ValueError before anything is sent."""

    read: str | None = None
    write: str | None = None
    ingest: str | None = None


@dataclass(frozen=True, slots=True)
class ExperimentResult:
    """An experiment `run_experiment` ran: the experiment as it ended, each item's run in
    dataset order, and every scorer that declined on a run, with its reason."""

    experiment: evaluation_pb2.Experiment
    runs: tuple[ItemRun, ...]
    skipped: tuple[evaluation_pb2.SkippedScorer, ...]

    @property
    def status(self) -> str:
        """How the experiment ended, by its spec name: `succeeded`, `failed` or `cancelled`."""
        return _EXPERIMENT_STATUS.by_number[self.experiment.status]

    @property
    def summary(self) -> dict[str, dict[str, Any]]:
        """Per scorer, `{"mean", "stdev", "count"}` (the experiment's summary as Python)."""
        found: dict[str, dict[str, Any]] = python_of(self.experiment.summary) or {}
        return found

    @property
    def failed(self) -> tuple[ItemRun, ...]:
        """The items that failed: the task raised or answered what is not JSON, or the item
        had no input to run."""
        return tuple(run for run in self.runs if run.error is not None)


class EvaluationClient:
    """Datasets, experiments and comparisons of one project (the keys', or `project` for keys
    that grant several). `channel` is a channel the caller opened and closes (shared with other
    clients, say); without it the client opens one to `target` and `close()` closes it."""

    def __init__(
        self,
        target: str,
        *,
        api_key: str | ScopedKeys | None = None,
        project: str | None = None,
        channel: grpc.Channel | None = None,
        timeout_s: float = DEFAULT_TIMEOUT_S,
    ) -> None:
        if channel is None:
            options = [("grpc.max_receive_message_length", _MAX_MESSAGE_BYTES)]
            channel = grpc.insecure_channel(target, options=options)
            self._owns_channel = True
        else:
            self._owns_channel = False
        self._channel = channel
        self.stub = EvaluationServiceStub(channel)
        self._ingest = IngestServiceStub(channel)
        self._keys = api_key
        self.project = project or ""
        self.timeout_s = timeout_s

    def close(self) -> None:
        if self._owns_channel:
            self._channel.close()

    def __enter__(self) -> EvaluationClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def call(
        self, method: str, request: Any, *, timeout_s: float | None = None, retry: bool = False
    ) -> Any:
        """Call an RPC of EvaluationService (or IngestService's `Ingest`) by name, with the key
        of the scope it needs, raising the daemon's refusal as McpdError. With `retry` (only for
        an idempotent call), Unavailable is tried again a few times, jittered."""
        stub = self._ingest if method == "Ingest" else self.stub
        metadata = self._metadata(method)
        attempt = 1
        while True:
            try:
                return getattr(stub, method)(
                    request, metadata=metadata, timeout=timeout_s or self.timeout_s
                )
            except grpc.RpcError as failure:
                refusal = refusal_of(failure)
            if not (retry and isinstance(refusal, Unavailable) and attempt < _ATTEMPTS):
                raise refusal from None
            backoff = _FIRST_BACKOFF_S * 2 ** (attempt - 1) * random.uniform(0.5, 1.0)
            time.sleep(max(backoff, refusal.retry_after_s or 0.0))
            attempt += 1

    # --- datasets ----------------------------------------------------------------------------

    def create_dataset(
        self, name: str, *, description: str | None = None
    ) -> evaluation_pb2.Dataset:
        """A new dataset (AlreadyExists when the project has one of that name)."""
        request = evaluation_pb2.Dataset(name=name)
        if description is not None:
            request.description = description
        if self.project:
            request.project = self.project
        made: evaluation_pb2.Dataset = self.call("CreateDataset", request)
        return made

    def get_dataset(self, dataset: DatasetRef) -> evaluation_pb2.Dataset:
        """The dataset as stored now (its `item_count` up to date)."""
        request = rpc.GetDatasetRequest(project=self.project, dataset_id=_dataset_id(dataset))
        found: evaluation_pb2.Dataset = self.call("GetDataset", request)
        return found

    def datasets(self) -> Iterator[evaluation_pb2.Dataset]:
        """Every dataset of the project, oldest first, paged as it is read."""
        request = rpc.ListDatasetsRequest(project=self.project, limit=MAX_BATCH)
        while True:
            page: rpc.ListDatasetsResponse = self.call("ListDatasets", request)
            yield from page.datasets
            if not page.page.has_more:
                return
            request.cursor = page.page.next_cursor

    def find_dataset(self, name: str) -> evaluation_pb2.Dataset | None:
        """The dataset called `name` (names are unique in a project), or None."""
        wanted = name.strip()
        return next((found for found in self.datasets() if found.name == wanted), None)

    def add_items(
        self, dataset: DatasetRef, items: Iterable[Mapping[str, Any] | evaluation_pb2.DatasetItem]
    ) -> evaluation_pb2.ItemsAdded:
        """Add items, each a dict as the REST API takes it (`input`, and optionally `expected`,
        `metadata`, `item_id`, `source_trace_id`) or a DatasetItem, in batches of at most
        1,000. An item given its `item_id` again replaces that item. A batch the daemon refuses
        stores none of its items; the batches before it stay."""
        dataset_id = _dataset_id(dataset)
        added = 0
        numbered = enumerate(items)
        while batch := list(itertools.islice(numbered, MAX_BATCH)):
            request = rpc.AddDatasetItemsRequest(
                dataset_id=dataset_id, items=[_item_of(item, index) for index, item in batch]
            )
            if self.project:
                request.project = self.project
            answer: evaluation_pb2.ItemsAdded = self.call("AddDatasetItems", request)
            added += answer.added
        return evaluation_pb2.ItemsAdded(added=added)

    def items(self, dataset: DatasetRef) -> Iterator[evaluation_pb2.DatasetItem]:
        """Every item of the dataset, in the order they were added, paged as it is read."""
        request = rpc.ListDatasetItemsRequest(
            project=self.project, dataset_id=_dataset_id(dataset), limit=MAX_BATCH
        )
        while True:
            page: rpc.ListDatasetItemsResponse = self.call("ListDatasetItems", request)
            yield from page.items
            if not page.page.has_more:
                return
            request.cursor = page.page.next_cursor

    def capture(
        self, dataset: DatasetRef, trace_ids: Iterable[str], *, use_output_as_expected: bool = False
    ) -> evaluation_pb2.CaptureResult:
        """Turn stored runs into items (their root span's input, and output as the expected
        answer when asked), 1,000 runs a call; the counts are summed over the calls."""
        dataset_id = _dataset_id(dataset)
        total = evaluation_pb2.CaptureResult()
        for batch in _batches(dict.fromkeys(trace_ids), MAX_BATCH):
            request = rpc.CaptureToDatasetRequest(dataset_id=dataset_id)
            request.capture.trace_ids.extend(batch)
            request.capture.use_output_as_expected = use_output_as_expected
            if self.project:
                request.project = self.project
            answer: evaluation_pb2.CaptureResult = self.call("CaptureToDataset", request)
            total.captured += answer.captured
            total.requested += answer.requested
        return total

    # --- experiments -------------------------------------------------------------------------

    def create_experiment(
        self,
        name: str,
        dataset: DatasetRef,
        *,
        baseline: ExperimentRef | None = None,
        metadata: Mapping[str, Any] | None = None,
    ) -> evaluation_pb2.Experiment:
        """A new experiment over `dataset`, compared against `baseline`. Metadata naming a
        `definition_id` makes mcpd drive it (docs/evaluation.md); otherwise it is the caller's,
        `running` at once."""
        request = evaluation_pb2.Experiment(name=name, dataset_id=_dataset_id(dataset))
        if baseline is not None:
            request.baseline_id = _experiment_id(baseline)
        if metadata is not None:
            request.metadata.CopyFrom(value_of(dict(metadata)))
        if self.project:
            request.project = self.project
        made: evaluation_pb2.Experiment = self.call("CreateExperiment", request)
        return made

    def get_experiment(self, experiment: ExperimentRef) -> evaluation_pb2.Experiment:
        """The experiment with its summary, cost and item count as they stand."""
        request = rpc.GetExperimentRequest(
            project=self.project, experiment_id=_experiment_id(experiment)
        )
        found: evaluation_pb2.Experiment = self.call("GetExperiment", request)
        return found

    def experiments(
        self, *, dataset: DatasetRef | None = None
    ) -> Iterator[evaluation_pb2.Experiment]:
        """Every experiment of the project (over `dataset` when given), paged as it is read."""
        request = rpc.ListExperimentsRequest(project=self.project, limit=_EXPERIMENT_PAGE)
        if dataset is not None:
            request.dataset_id = _dataset_id(dataset)
        while True:
            page: rpc.ListExperimentsResponse = self.call("ListExperiments", request)
            yield from page.experiments
            if not page.page.has_more:
                return
            request.cursor = page.page.next_cursor

    def record_runs(self, experiment: ExperimentRef, runs: Iterable[tuple[str, str]]) -> int:
        """Say which dataset item each run, (item_id, trace_id), was for, so the experiment's
        scores pair item by item when compared; 1,000 a call. How many were recorded."""
        experiment_id = _experiment_id(experiment)
        recorded = 0
        for batch in _batches(runs, MAX_BATCH):
            request = rpc.RecordExperimentRunsRequest(
                project=self.project,
                experiment_id=experiment_id,
                runs=[rpc.ExperimentRun(item_id=item, trace_id=trace) for item, trace in batch],
            )
            answer: rpc.RecordExperimentRunsResponse = self.call(
                "RecordExperimentRuns", request, retry=True
            )
            recorded += answer.recorded
        return recorded

    def finish_experiment(
        self, experiment: ExperimentRef, *, error: str | None = None
    ) -> evaluation_pb2.Experiment:
        """End a caller's experiment: `succeeded`, or `failed` with `error`."""
        request = rpc.FinishExperimentRequest(
            project=self.project, experiment_id=_experiment_id(experiment)
        )
        if error is not None:
            request.error = error
        ended: evaluation_pb2.Experiment = self.call("FinishExperiment", request)
        return ended

    def cancel_experiment(self, experiment: ExperimentRef) -> evaluation_pb2.Experiment:
        """Cancel a pending or running experiment (and the runs mcpd started for it)."""
        request = rpc.CancelExperimentRequest(
            project=self.project, experiment_id=_experiment_id(experiment)
        )
        cancelled: evaluation_pb2.Experiment = self.call("CancelExperiment", request)
        return cancelled

    def compare(
        self, baseline: ExperimentRef, candidate: ExperimentRef
    ) -> evaluation_pb2.ExperimentComparison:
        """The two experiments scorer by scorer: means and n per side, delta, its standard
        error (paired by item where it can be), whether it is decidable, and `regressed`."""
        request = rpc.CompareExperimentsRequest(
            project=self.project,
            baseline=_experiment_id(baseline),
            candidate=_experiment_id(candidate),
        )
        compared: evaluation_pb2.ExperimentComparison = self.call("CompareExperiments", request)
        return compared

    def run_experiment(
        self,
        name: str,
        dataset: DatasetRef,
        task: Task,
        *,
        scorers: Sequence[str],
        config: evaluation_pb2.ScorerConfig | Mapping[str, Any] | None = None,
        metadata: Mapping[str, Any] | None = None,
        baseline: ExperimentRef | None = None,
        concurrency: int = DEFAULT_CONCURRENCY,
        trace_wait_s: float = DEFAULT_TRACE_WAIT_S,
    ) -> ExperimentResult:
        """Run `task` (a function of an item's input, returning its answer as Python JSON) over
        every item of `dataset` as the experiment `name`, `concurrency` items at a time, and
        score each answer with `scorers` (ids; `config` as the REST API's ScorerConfig, each
        item's `expected` filling `config.expected`). See the module docstring for what is
        recorded. `trace_wait_s` bounds the wait for the recorded traces to become readable
        (longer for a project that tail-samples). A task that raises fails its item, not the
        call; a refusal from the daemon ends the experiment `failed` and is raised."""
        if isinstance(scorers, str):
            raise TypeError("scorers is a list of scorer ids, not one string")
        if not 1 <= concurrency <= MAX_CONCURRENCY:
            raise ValueError(f"concurrency must be 1 to {MAX_CONCURRENCY}")
        if metadata is not None and "definition_id" in metadata:
            raise ValueError(
                "metadata.definition_id would make mcpd drive the experiment itself; leave it "
                "out to run a function, or use create_experiment to have mcpd run a definition"
            )
        made = self.create_experiment(name, dataset, baseline=baseline, metadata=metadata)
        run = ExperimentRun(
            self,
            made.experiment_id,
            task,
            tuple(scorers),
            _config_of(config),
            trace_wait_s,
        )
        try:
            with ThreadPoolExecutor(concurrency, thread_name_prefix="mcpd-experiment") as pool:
                for chunk in _batches(self.items(made.dataset_id), _CHUNK):
                    run.chunk(pool, chunk)
            ended = self.finish_experiment(made.experiment_id, error=run.failure())
        except KeyboardInterrupt:
            _quietly(lambda: self.cancel_experiment(made.experiment_id))
            raise
        except Exception as error:  # the experiment must not be left running; re-raised
            reason = f"the SDK's run stopped: {type(error).__name__}: {error}"
            _quietly(lambda: self.finish_experiment(made.experiment_id, error=reason))
            raise
        return ExperimentResult(ended, tuple(run.runs), tuple(run.skipped))

    def _metadata(self, method: str) -> tuple[tuple[str, str], ...]:
        if self._keys is None or isinstance(self._keys, str):
            return metadata_for(self._keys)
        scope = _SCOPES[method]
        key = getattr(self._keys, scope, None)
        if key is None:
            raise ValueError(f"{method} needs a key of scope {scope}, and ScopedKeys has none")
        return metadata_for(key)


def _config_of(
    config: evaluation_pb2.ScorerConfig | Mapping[str, Any] | None,
) -> evaluation_pb2.ScorerConfig:
    if config is None:
        return evaluation_pb2.ScorerConfig()
    if isinstance(config, evaluation_pb2.ScorerConfig):
        return config
    return codec.decode(dict(config), evaluation_pb2.ScorerConfig, path="config")


def _item_of(
    item: Mapping[str, Any] | evaluation_pb2.DatasetItem, index: int
) -> evaluation_pb2.DatasetItem:
    if isinstance(item, evaluation_pb2.DatasetItem):
        return item
    return codec.decode(dict(item), evaluation_pb2.DatasetItem, path=f"items[{index}]")


def _dataset_id(dataset: DatasetRef) -> str:
    return dataset if isinstance(dataset, str) else dataset.dataset_id


def _experiment_id(experiment: ExperimentRef) -> str:
    return experiment if isinstance(experiment, str) else experiment.experiment_id


def _batches(values: Iterable[_T], size: int) -> Iterator[list[_T]]:
    """`values` in lists of at most `size`, read as they are needed."""
    walked = iter(values)
    while batch := list(itertools.islice(walked, size)):
        yield batch


def _quietly(call: Callable[[], object]) -> None:
    """Make a last call on the way out of a failure, which must not hide that failure."""
    with contextlib.suppress(McpdError):
        call()
