"""Runs: starting one against a pinned definition version, and reading runs, their journal and
their event log.

A start resolves the definition version (the highest stored when the request names none, and
the run records it), validates the input against the definition's `input_schema` (a 400 naming
`input.<path>`), stores the run's correlation as sent (the run store is the run's working
state; the spans the daemon writes for it go through ingest's redaction), and writes with the
run its first transition: `run_started`, the cursor on the first node, and the walk from there
(`constructs`), which leaves the first claimable step pending or the first wait open. A definition
with `limits.run_timeout_ms` gets its `deadline_at` and a `run_timeout` timer. An
`idempotency_key` makes the start idempotent in its project for 24 hours.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol, cast

from mcpd import codec
from mcpd.codec import enum_names
from mcpd.model.v1 import enums_pb2, runs_pb2, telemetry_pb2
from mcpd.orchestrator.v1 import orchestrator_service_pb2 as rpc
from mcpd.runtime import cursors
from mcpd.runtime.clock import epoch_nanos
from mcpd.runtime.errors import InvalidArgument, NotFound, quoted
from mcpd.signals.messages import python_of, timestamp_of, value_of
from mcpd.storage.interfaces import DefinitionReads, RunReads, RunStarts
from mcpd.storage.run_records import AttemptRow, RunEventRow, RunRow, TimerRow, WaitRow
from services.orchestrator.mover import Mover
from services.orchestrator.new_runs import (
    CORRELATION,
    check_input,
    first_transition,
    new_run_row,
    run_correlation,
)
from services.orchestrator.walk import Moves

__all__ = [
    "IDEMPOTENCY_TTL_NS",
    "RunStore",
    "Runs",
    "attempt_error",
    "run_message",
]

IDEMPOTENCY_TTL_NS = 24 * 3600 * 1_000_000_000
MAX_KEY_CHARS = 256
# The most runs one GetRunOutcomes reads.
MAX_OUTCOMES = 100
_RUN_STATUS = enum_names(enums_pb2.RunStatus.DESCRIPTOR)
_ATTEMPT_STATUS = enum_names(enums_pb2.AttemptStatus.DESCRIPTOR)
_CONSTRUCT = enum_names(enums_pb2.ConstructKind.DESCRIPTOR)
_STEP_KIND = enum_names(enums_pb2.StepKind.DESCRIPTOR)
_EFFECT = enum_names(enums_pb2.Effect.DESCRIPTOR)
_TIMER = enum_names(enums_pb2.TimerKind.DESCRIPTOR)
_EVENT_KIND = enum_names(enums_pb2.RunEventKind.DESCRIPTOR)
_LIST = "runs"
_POSITION = (int, str)
DEFAULT_EVENTS = 100


class RunStore(DefinitionReads, RunStarts, RunReads, Protocol):
    """What runs need of the run store (besides the transitions `mover` makes)."""


class Runs:
    """Starting, cancelling and reading the runs of a project."""

    def __init__(self, store: RunStore, mover: Mover) -> None:
        self._store = store
        self._mover = mover
        self._clock = mover.clock

    def outcomes(self, request: rpc.GetRunOutcomesRequest) -> rpc.GetRunOutcomesResponse:
        """The status and end of each run asked for that the project holds, in order."""
        if not 1 <= len(request.run_ids) <= MAX_OUTCOMES:
            raise InvalidArgument(f"run_ids must name 1 to {MAX_OUTCOMES} runs", field="run_ids")
        answer = rpc.GetRunOutcomesResponse()
        for run_id in request.run_ids:
            found = self._store.run_detail(request.project, run_id)
            if found is None:
                continue
            row = cast(Mapping[str, Any], found.run)
            status = enums_pb2.RunStatus.ValueType(_RUN_STATUS.by_name[row["status"]])
            outcome = answer.runs.add(run_id=run_id, status=status)
            if row["ended_at"] is not None:
                outcome.ended_at.CopyFrom(timestamp_of(row["ended_at"]))
        return answer

    def start(self, request: runs_pb2.StartRunRequest) -> runs_pb2.Run:
        """Start a run (see the module docstring); the same run again for a held key."""
        project = request.project
        version = request.version if request.HasField("version") else None
        if not request.definition_id:
            raise InvalidArgument("definition_id is required", field="definition_id")
        definition = self._store.definition(project, request.definition_id, version)
        if definition is None:
            field = "version" if version is not None else "definition_id"
            which = f" version {version}" if version is not None else ""
            raise NotFound(
                f"definition {quoted(request.definition_id)}{which} is not stored", field=field
            )
        document = python_of(request.input) if request.HasField("input") else None
        check_input(definition.body.get("input_schema"), document)
        key = request.idempotency_key if request.HasField("idempotency_key") else None
        if key is not None and not 1 <= len(key) <= MAX_KEY_CHARS:
            raise InvalidArgument(
                f"idempotency_key must be 1 to {MAX_KEY_CHARS} characters", field="idempotency_key"
            )
        now = epoch_nanos(self._clock.now())
        correlation = {name: _optional(request.correlation, name) for name in CORRELATION}
        run = new_run_row(
            definition,
            project=project,
            document=document,
            correlation=correlation,
            now=now,
            idempotency_key=key,
        )
        offered: list[bool] = []
        stored, _ = self._store.start_run(
            run,
            self._mover.decide(first_transition, now, offered),
            now=now,
            key_ttl_ns=IDEMPOTENCY_TTL_NS,
        )
        self._mover.wake_if(offered)
        return run_message(stored)

    def cancel(self, request: rpc.CancelRunRequest) -> runs_pb2.Run:
        """End a running run `cancelled` (its live attempts failed, its timers dropped); a run
        that has ended already is answered as it is."""

        def act(moves: Moves) -> runs_pb2.Run:
            if moves.status == "running":
                moves.end_run("cancelled")
            return run_message(cast(RunRow, moves.run))

        cancelled = self._mover.move(request.project, request.run_id, act)
        if cancelled is None:
            raise NotFound(f"run {quoted(request.run_id)} does not exist", field="run_id")
        return cancelled

    def get(self, request: rpc.GetRunRequest) -> runs_pb2.RunDetail:
        """One run with its attempts, timers and waits; NotFound naming `run_id`."""
        detail = self._store.run_detail(request.project, request.run_id)
        if detail is None:
            raise NotFound(f"run {quoted(request.run_id)} does not exist", field="run_id")
        return runs_pb2.RunDetail(
            run=run_message(detail.run),
            attempts=[_attempt_message(row) for row in detail.attempts],
            timers=[_timer_message(row) for row in detail.timers],
            waits=[_wait_message(row) for row in detail.waits],
        )

    def list(self, request: rpc.ListRunsRequest) -> runs_pb2.RunListResponse:
        """A page of the project's runs, newest first."""
        page = cursors.paging(request, _LIST, _POSITION)
        statuses = [_RUN_STATUS.by_number[number] for number in request.status if number]
        after = None if page.after is None else (int(page.after[0]), str(page.after[1]))
        found = self._store.list_runs(
            request.project,
            statuses=statuses,
            definition_id=request.definition_id if request.HasField("definition_id") else None,
            after=after,
            limit=page.limit + 1,
        )
        answer = runs_pb2.RunListResponse()
        shown = cursors.page_of(request, _LIST, found, page.limit, _run_key, answer.page)
        answer.runs.extend(run_message(row) for row in shown)
        return answer

    def events(self, request: rpc.ListRunEventsRequest) -> runs_pb2.RunEventPage:
        """The run's event log after `after`; NotFound naming `run_id` for no such run."""
        limit = cursors.limit_of(request, DEFAULT_EVENTS)
        after = request.after if request.HasField("after") else None
        found = self._store.run_events(
            request.project, request.run_id, after=after, limit=limit + 1
        )
        if not found and self._store.run_detail(request.project, request.run_id) is None:
            raise NotFound(f"run {quoted(request.run_id)} does not exist", field="run_id")
        return runs_pb2.RunEventPage(
            events=[_event_message(row) for row in found[:limit]], has_more=len(found) > limit
        )


def _optional(message: telemetry_pb2.Correlation, name: str) -> str | None:
    present: bool = message.HasField(name)  # type: ignore[arg-type]  # a field named at run time
    return str(getattr(message, name)) if present else None


def _run_key(row: RunRow) -> tuple[int, str]:
    return row["created_at"], row["run_id"]


def run_message(stored: RunRow) -> runs_pb2.Run:
    """The spec's Run of a stored row."""
    row = cast(Mapping[str, Any], stored)
    run = runs_pb2.Run(
        run_id=row["run_id"],
        project=row["project"],
        definition_id=row["definition_id"],
        definition_version=row["definition_version"],
        status=enums_pb2.RunStatus.ValueType(_RUN_STATUS.by_name[row["status"]]),
        trace_id=row["trace_id"],
        steps_used=row["steps_used"],
        cost_usd=row["cost_usd"],
        root_run_id=row["root_run_id"],
        depth=row["depth"],
        created_at=timestamp_of(row["created_at"]),
        updated_at=timestamp_of(row["updated_at"]),
    )
    run.cursor.index = row["cursor_index"]
    run.cursor.construct = enums_pb2.ConstructKind.ValueType(
        _CONSTRUCT.by_name[row["cursor_construct"]]
    )
    if row["cursor_step_key"] is not None:
        run.cursor.step_key = row["cursor_step_key"]
    for name in ("input", "output", "state"):
        if row[name] is not None:
            getattr(run, name).CopyFrom(value_of(row[name]))
    run.correlation.CopyFrom(run_correlation(stored))
    for name in (
        "error",
        "max_steps",
        "max_cost_usd",
        "idempotency_key",
        "parent_run_id",
        "parent_step_key",
    ):
        if row[name] is not None:
            setattr(run, name, row[name])
    for name in ("deadline_at", "ended_at"):
        if row[name] is not None:
            getattr(run, name).CopyFrom(timestamp_of(row[name]))
    return run


def _attempt_message(stored: AttemptRow) -> runs_pb2.StepAttempt:
    row = cast(Mapping[str, Any], stored)
    attempt = runs_pb2.StepAttempt(
        run_id=row["run_id"],
        step_key=row["step_key"],
        attempt=row["attempt"],
        kind=enums_pb2.StepKind.ValueType(_STEP_KIND.by_name[row["kind"]]),
        effect=enums_pb2.Effect.ValueType(_EFFECT.by_name[row["effect"]]),
        status=enums_pb2.AttemptStatus.ValueType(_ATTEMPT_STATUS.by_name[row["status"]]),
        span_id=row["span_id"],
        created_at=timestamp_of(row["created_at"]),
    )
    for name in ("input", "output"):
        if row[name] is not None:
            getattr(attempt, name).CopyFrom(value_of(row[name]))
    # The journal keeps a StepError and a StepUsage in the spec's JSON shape.
    if row["error"] is not None:
        attempt.error.CopyFrom(attempt_error(row["error"]))
    if row["usage"] is not None:
        attempt.usage.CopyFrom(codec.decode(row["usage"], runs_pb2.StepUsage))
    for name in ("cost_usd", "lease_owner", "attempts_left"):
        if row[name] is not None:
            setattr(attempt, name, row[name])
    for name in ("lease_until", "started_at", "orphaned_at", "reclaim_until", "ended_at"):
        if row[name] is not None:
            getattr(attempt, name).CopyFrom(timestamp_of(row[name]))
    return attempt


def attempt_error(stored: Any) -> runs_pb2.StepError:
    """The StepError an attempt's journal row keeps, in the spec's JSON shape."""
    return codec.decode(stored, runs_pb2.StepError)


def _timer_message(row: TimerRow) -> runs_pb2.RunTimer:
    timer = runs_pb2.RunTimer(
        run_id=row["run_id"],
        kind=enums_pb2.TimerKind.ValueType(_TIMER.by_name[row["kind"]]),
        due_at=timestamp_of(row["due_at"]),
    )
    if row["step_key"]:
        timer.step_key = row["step_key"]
    return timer


def _wait_message(row: WaitRow) -> runs_pb2.RunWait:
    return runs_pb2.RunWait(
        run_id=row["run_id"],
        step_key=row["step_key"],
        event=row["event"],
        key=row["key"],
        expires_at=timestamp_of(row["expires_at"]),
    )


def _event_message(row: RunEventRow) -> runs_pb2.RunEvent:
    event = runs_pb2.RunEvent(
        run_id=row["run_id"],
        seq=row["seq"],
        kind=enums_pb2.RunEventKind.ValueType(_EVENT_KIND.by_name[row["kind"]]),
        at=timestamp_of(row["at"]),
    )
    if row["payload"] is not None:
        event.payload.CopyFrom(value_of(row["payload"]))
    return event
