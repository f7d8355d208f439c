"""The spans the orchestrator writes for runs and attempts, in the spec's JSON shape, queued in
the transaction of the change they record (`RunChanges.spans`) and sent to ingest by
`outbox`.

A run is a `workflow_run` span (its id derived from the run id, the root of its trace; a child
run's hangs under its parent's subworkflow step), with the run's input and output. Each attempt
that ends is a span under its run's: `workflow_step` for a task, `agent_run` for an agent step,
and for a node's own row the construct's kind (`workflow_parallel` for parallel and foreach,
`workflow_loop`, `workflow_sleep`, `workflow_wait_event`; `workflow_step` for a subworkflow).
Worker spans nest under the attempt's span, whose id the lease carries. Every span carries the
run's correlation.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any, cast

from mcpd import codec
from mcpd.model.v1 import enums_pb2, telemetry_pb2
from mcpd.signals.messages import timestamp_of, value_of
from mcpd.storage.run_records import AttemptRow, RunRow
from services.orchestrator.new_runs import run_correlation

__all__ = ["attempt_span", "root_span_id", "run_span"]

_NODE_KINDS = {
    "parallel": enums_pb2.SPAN_KIND_WORKFLOW_PARALLEL,
    "foreach": enums_pb2.SPAN_KIND_WORKFLOW_PARALLEL,
    "loop": enums_pb2.SPAN_KIND_WORKFLOW_LOOP,
    "sleep": enums_pb2.SPAN_KIND_WORKFLOW_SLEEP,
    "sleep_until": enums_pb2.SPAN_KIND_WORKFLOW_SLEEP,
    "wait_event": enums_pb2.SPAN_KIND_WORKFLOW_WAIT_EVENT,
}
_ERRORS = frozenset({"failed", "timed_out", "cancelled"})


def root_span_id(run_id: str) -> str:
    """The run's own span id, derived from its id: 16 lowercase hex characters."""
    return hashlib.blake2b(run_id.encode(), digest_size=8).hexdigest()


def run_span(run: Mapping[str, Any], parent_span_id: str | None) -> dict[str, Any]:
    """The `workflow_run` span of a run that has ended."""
    span = _span(run, root_span_id(run["run_id"]), parent_span_id, run["definition_id"])
    span.kind = enums_pb2.SPAN_KIND_WORKFLOW_RUN
    span.is_root = parent_span_id is None
    _times(span, run["created_at"], run["ended_at"])
    _status(span, run["status"], run["error"])
    # The run's input and output are its trace's: what a scorer reads as the run's answer.
    for name in ("input", "output"):
        if run[name] is not None:
            getattr(span, name).CopyFrom(value_of(run[name]))
    span.attributes.struct_value.update(
        {
            "mcpd.run.definition_id": run["definition_id"],
            "mcpd.run.definition_version": run["definition_version"],
            "mcpd.run.status": run["status"],
            "mcpd.run.steps_used": run["steps_used"],
        }
    )
    return codec.encode(span)


def attempt_span(run: Mapping[str, Any], row: AttemptRow, construct: str) -> dict[str, Any]:
    """The span of an attempt that has ended; `construct` is its node's kind."""
    span = _span(run, row["span_id"], root_span_id(run["run_id"]), row["step_key"])
    if row["kind"] == "agent":
        span.kind = enums_pb2.SPAN_KIND_AGENT_RUN
    elif row["kind"] == "wait":
        span.kind = _NODE_KINDS.get(construct, enums_pb2.SPAN_KIND_WORKFLOW_STEP)
    else:
        span.kind = enums_pb2.SPAN_KIND_WORKFLOW_STEP
    _times(span, row["started_at"] or row["created_at"], row["ended_at"])
    error = row["error"] or {}
    _status(span, row["status"], error.get("message"))
    span.attributes.struct_value.update(
        {
            "mcpd.step.key": row["step_key"],
            "mcpd.step.attempt": row["attempt"],
            "mcpd.step.status": row["status"],
            "mcpd.step.effect": row["effect"],
        }
    )
    if error.get("class"):
        # What the derived outcome note of the run names (services/intelligence/outcomes.py).
        span.attributes.struct_value.update({"mcpd.step.error_class": error["class"]})
    return codec.encode(span)


def _span(
    run: Mapping[str, Any], span_id: str, parent_span_id: str | None, name: str
) -> telemetry_pb2.Span:
    span = telemetry_pb2.Span(trace_id=run["trace_id"], span_id=span_id, name=name)
    if parent_span_id is not None:
        span.parent_span_id = parent_span_id
    span.correlation.CopyFrom(run_correlation(cast(RunRow, run)))
    return span


def _times(span: telemetry_pb2.Span, start: int, end: int | None) -> None:
    span.start_time.CopyFrom(timestamp_of(start))
    span.end_time.CopyFrom(timestamp_of(end if end is not None else start))


def _status(span: telemetry_pb2.Span, status: str, message: str | None) -> None:
    if status in _ERRORS:
        span.status = enums_pb2.SPAN_STATUS_ERROR
        span.error.message = message or status
    else:
        span.status = enums_pb2.SPAN_STATUS_OK
