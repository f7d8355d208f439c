"""One `EvaluationClient.run_experiment` under way (see `mcpd.sdk.evaluation`): each chunk of
items is run on the task, recorded as root spans through ingest, linked to its items and scored;
what was run and why anything failed is kept for the end."""

from __future__ import annotations

import hashlib
import json
import secrets
import time
import traceback
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeAlias

from opentelemetry import trace
from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags

from mcpd.model.v1 import enums_pb2, evaluation_pb2, telemetry_pb2
from mcpd.runtime.errors import InvalidArgument
from mcpd.signals.messages import python_of, timestamp_of, value_of

if TYPE_CHECKING:
    from mcpd.sdk.evaluation import EvaluationClient

__all__ = ["ExperimentRun", "ItemRun", "Task"]

Task: TypeAlias = Callable[[Any], Any]
# The longest pause between two passes over a run whose trace is not readable yet.
_MAX_POLL_S = 1.0
_EMPTIED = "the item was emptied by an erasure"


@dataclass(frozen=True, slots=True)
class ItemRun:
    """What the task did with one dataset item: its answer, or why it failed (`error`); the
    trace recording it (None for an item with no input to run, emptied by an erasure)."""

    item_id: str
    trace_id: str | None
    output: Any = None
    error: str | None = None


class ExperimentRun:
    """One `run_experiment` under way: what it has run, and what it has to say at the end."""

    def __init__(
        self,
        client: EvaluationClient,
        experiment_id: str,
        task: Task,
        scorers: tuple[str, ...],
        config: evaluation_pb2.ScorerConfig,
        trace_wait_s: float,
    ) -> None:
        self._client = client
        self._experiment_id = experiment_id
        self._task = task
        self._name = getattr(task, "__name__", None) or type(task).__name__
        self._scorers = scorers
        self._config = config
        self._trace_wait_s = trace_wait_s
        self.runs: list[ItemRun] = []
        self.skipped: list[evaluation_pb2.SkippedScorer] = []
        self._unreadable = 0

    def chunk(self, pool: ThreadPoolExecutor, items: Sequence[evaluation_pb2.DatasetItem]) -> None:
        """Run, record and score a chunk of items."""
        done = list(pool.map(self._run_one, items))
        spans = [span for _, span in done if span is not None]
        if spans:
            self._store(spans)
            self._client.record_runs(
                self._experiment_id,
                [(run.item_id, run.trace_id) for run, _ in done if run.trace_id],
            )
        self.runs += [run for run, _ in done]
        by_id = {item.item_id: item for item in items}
        deadline = time.monotonic() + self._trace_wait_s
        answered = [run for run, _ in done if run.error is None and run.trace_id is not None]
        for result in pool.map(
            lambda run: self._score(run, by_id[run.item_id], deadline), answered
        ):
            self.skipped += result.skipped
            self._unreadable += not result.traces_scored

    def failure(self) -> str | None:
        """Why the experiment failed, or None when it did not."""
        failed = [run for run in self.runs if run.error is not None]
        reasons = []
        if failed:
            first = failed[0]
            reasons.append(
                f"{len(failed)} of {len(self.runs)} items failed; "
                f"the first, {first.item_id}: {first.error}"
            )
        if self._unreadable:
            reasons.append(
                f"{self._unreadable} of the runs' traces were not readable within "
                f"{self._trace_wait_s:g} s, so they were not scored (does the project sample "
                "its traces?)"
            )
        return "; ".join(reasons) or None

    def _run_one(
        self, item: evaluation_pb2.DatasetItem
    ) -> tuple[ItemRun, telemetry_pb2.Span | None]:
        """Call the task on the item's input: its run and the root span recording it."""
        if not item.HasField("input"):
            return ItemRun(item.item_id, None, error=_EMPTIED), None
        span = telemetry_pb2.Span(
            trace_id=secrets.token_hex(16),
            span_id=secrets.token_hex(8),
            name=self._name,
            kind=enums_pb2.SPAN_KIND_AGENT_RUN,
            input=item.input,
            metadata=value_of({"dataset_id": item.dataset_id, "item_id": item.item_id}),
        )
        span.correlation.project = self._client.project
        span.correlation.experiment_id = self._experiment_id
        start = time.time_ns()
        try:
            # The task's own OpenTelemetry spans (model and tool calls) nest under this run.
            with trace.use_span(_current(span), end_on_exit=False):
                output = self._task(python_of(item.input))
        except Exception as error:  # the task's failure is its item's, recorded on the span
            end = time.time_ns()
            message = f"{type(error).__name__}: {error}"
            span.error.kind = type(error).__name__
            span.error.stack = traceback.format_exc()
            return self._ended(span, item, start, end, error=message), span
        end = time.time_ns()
        try:
            span.output.CopyFrom(value_of(output))
        except TypeError as error:
            return self._ended(span, item, start, end, error=f"the task's answer: {error}"), span
        return self._ended(span, item, start, end, output=output), span

    @staticmethod
    def _ended(
        span: telemetry_pb2.Span,
        item: evaluation_pb2.DatasetItem,
        start: int,
        end: int,
        *,
        output: Any = None,
        error: str | None = None,
    ) -> ItemRun:
        span.start_time.CopyFrom(timestamp_of(start))
        span.end_time.CopyFrom(timestamp_of(end))
        if error is None:
            span.status = enums_pb2.SPAN_STATUS_OK
        else:
            span.status = enums_pb2.SPAN_STATUS_ERROR
            span.error.message = error
        return ItemRun(item.item_id, span.trace_id, output=output, error=error)

    def _store(self, spans: Sequence[telemetry_pb2.Span]) -> None:
        """Record the spans as one batch, keyed so a retry stores them once."""
        digest = hashlib.sha256("\n".join(span.span_id for span in spans).encode()).hexdigest()
        batch = telemetry_pb2.IngestBatch(
            spans=spans, ingest_key=f"experiment:{self._experiment_id}:{digest[:32]}"
        )
        result: telemetry_pb2.IngestResult = self._client.call("Ingest", batch, retry=True)
        if result.errors:
            first = result.errors[0]
            raise InvalidArgument(
                f"ingest refused {result.rejected} of the experiment's runs: {first.message}"
            )

    def _score(
        self, run: ItemRun, item: evaluation_pb2.DatasetItem, deadline: float
    ) -> evaluation_pb2.ScoreRunResult:
        """Score one run, again while its trace is not readable yet, until `deadline`; the last
        pass's result (no run scored: the trace never became readable)."""
        assert run.trace_id is not None
        request = evaluation_pb2.ScoreRunRequest(
            trace_ids=[run.trace_id],
            scorers=self._scorers,
            config=self._config,
            source=enums_pb2.SCORE_SOURCE_EXPERIMENT,
        )
        if self._client.project:
            request.project = self._client.project
        if item.HasField("expected"):
            expected = python_of(item.expected)
            request.config.expected = (
                expected if isinstance(expected, str) else json.dumps(expected, sort_keys=True)
            )
        poll_s = 0.05
        while True:
            result: evaluation_pb2.ScoreRunResult = self._client.call(
                "RunScorers", request, retry=True
            )
            if result.traces_scored or time.monotonic() >= deadline:
                return result
            time.sleep(min(poll_s, max(deadline - time.monotonic(), 0.0)))
            poll_s = min(poll_s * 2, _MAX_POLL_S)


def _current(span: telemetry_pb2.Span) -> NonRecordingSpan:
    """The run's span as OpenTelemetry's current span, for the task's spans to nest under."""
    return NonRecordingSpan(
        SpanContext(
            trace_id=int(span.trace_id, 16),
            span_id=int(span.span_id, 16),
            is_remote=False,
            trace_flags=TraceFlags(TraceFlags.SAMPLED),
        )
    )
