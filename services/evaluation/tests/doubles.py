"""Stand-ins for the services the evaluation service calls, at the edge of what its unit tests
isolate: stored runs (the query service), score writes (ingest) and orchestrator runs. The e2e
tests run the real services."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from google.protobuf.timestamp_pb2 import Timestamp

from mcpd.model.v1 import query_pb2, telemetry_pb2
from mcpd.runtime.errors import FailedPrecondition
from mcpd.signals.messages import value_of
from mcpd.storage.evaluation_records import DatasetItemRow
from services.evaluation.experiments import ExperimentPlan


def stored_run(trace_id: str, *, input: Any = None, output: Any = None) -> query_pb2.TraceDetail:
    """A stored run whose root span carries `input` and `output` (None: absent)."""
    root = telemetry_pb2.Span(trace_id=trace_id, span_id="0" * 15 + "1", name="run", is_root=True)
    if input is not None:
        root.input.CopyFrom(value_of(input))
    if output is not None:
        root.output.CopyFrom(value_of(output))
    trace = telemetry_pb2.Trace(trace_id=trace_id, root_span_id=root.span_id)
    return query_pb2.TraceDetail(trace=trace, spans=[root])


@dataclass
class StoredRuns:
    """`TraceReads` over a dict of stored runs by trace id."""

    runs: dict[str, query_pb2.TraceDetail] = field(default_factory=dict)

    async def newest(self, project: str, *, since: Timestamp | None, limit: int) -> list[str]:
        return list(self.runs)[:limit]

    async def detail(self, project: str, trace_id: str) -> query_pb2.TraceDetail | None:
        return self.runs.get(trace_id)


@dataclass
class WrittenScores:
    """`ScoreWrites` keeping every score written."""

    scores: list[telemetry_pb2.Score] = field(default_factory=list)

    async def write(self, scores: Sequence[telemetry_pb2.Score], *, ingest_key: str) -> int:
        self.scores += scores
        return len(scores)


@dataclass
class StartedRun:
    run_id: str
    trace_id: str
    input: Any
    experiment_id: str
    status: str = "running"


@dataclass
class Orchestrator:
    """`RunControl` over runs kept here: a start is idempotent per key, as the orchestrator's;
    `refuse` makes every start refused; a test moves runs along by setting their status, and
    `interruption` runs once, at the next start or outcomes call (what happens meanwhile)."""

    runs: dict[str, StartedRun] = field(default_factory=dict)
    cancelled: list[str] = field(default_factory=list)
    refuse: str | None = None
    interruption: Callable[[], Awaitable[object]] | None = None

    async def _interrupted(self) -> None:
        interruption, self.interruption = self.interruption, None
        if interruption is not None:
            await interruption()

    async def start(
        self, project: str, plan: ExperimentPlan, item: DatasetItemRow, experiment_id: str
    ) -> tuple[str, str]:
        await self._interrupted()
        if self.refuse is not None:
            raise FailedPrecondition(self.refuse)
        key = f"{experiment_id}:{item.item_id}"
        if key not in self.runs:
            number = len(self.runs) + 1
            self.runs[key] = StartedRun(
                f"run-{number}", f"{number:032x}", item.input, experiment_id
            )
        run = self.runs[key]
        return run.run_id, run.trace_id

    async def outcomes(self, project: str, run_ids: Sequence[str]) -> dict[str, str]:
        await self._interrupted()
        return {run_id: self.run(run_id).status for run_id in run_ids}

    async def cancel(self, project: str, run_id: str) -> None:
        self.cancelled.append(run_id)
        run = self.run(run_id)
        if run.status == "running":
            run.status = "cancelled"

    def run(self, run_id: str) -> StartedRun:
        return next(run for run in self.runs.values() if run.run_id == run_id)
