"""Workers and leases: claiming offerable attempts, and the calls a worker makes about a lease
(started, heartbeat, complete, fail), each one transition of the lease's run.

A lease has an identity of its own (`lease_id`, a `leases` row), so a call is told exactly what
is true, checked in this order: the lease's own complete or fail landed (`already_applied`,
with the attempt's status); the run has ended (`run_terminal`); a later attempt exists or the
attempt is no longer held by this lease (`fenced`); complete or fail of an `at_most_once`
attempt never started (`not_started`). Each is a 409 carrying the StepConflict, on gRPC as
ABORTED with the StepConflict in the status details.

A claim takes offerable attempts oldest first, one transition per run, all in one transaction
(skipping a run whose tree another transaction holds), and refuses the work of a run whose
tree has spent its root's `max_steps` or `max_cost_usd` (counted over every run of the tree)
by ending that run failed.
With nothing to hand out it waits up to `wait_ms` (at most four fifths of the time the caller
left the request) for `Wakeups` (work made runnable in this process or a sibling server
process), looking again every `POLL_S` for work no signal reaches (another host's replica).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Mapping
from contextlib import suppress
from dataclasses import dataclass
from functools import partial
from typing import Any, TypeVar, cast

from mcpd import codec
from mcpd.model.v1 import enums_pb2, runs_pb2
from mcpd.orchestrator.v1 import orchestrator_service_pb2 as rpc
from mcpd.runtime.errors import Conflict, InvalidArgument, NotFound, quoted
from mcpd.runtime.ids import new_id
from mcpd.signals.messages import python_of, timestamp_of, value_of
from mcpd.storage.run_records import AttemptRow, RunRow
from mcpd.workflows import idempotency_key
from services.orchestrator.bodies import step_at
from services.orchestrator.mover import Mover
from services.orchestrator.new_runs import run_correlation
from services.orchestrator.prices import Prices
from services.orchestrator.spans import root_span_id
from services.orchestrator.walk import Moves

__all__ = [
    "MAX_CLAIM",
    "MAX_WAIT_MS",
    "POLL_S",
    "Leases",
    "backoff_ms",
]

T = TypeVar("T")
MAX_CLAIM = 100
MAX_WAIT_MS = 60_000
POLL_S = 0.25
HELD_SHARE = 0.8
MAX_RETRY_AFTER_MS = 315_360_000_000
_NS_PER_MS = 1_000_000
_HELD = frozenset({"leased", "started", "orphaned"})
_RUN_STATUS = enums_pb2.RunStatus
_ATTEMPT_STATUS = enums_pb2.AttemptStatus
_ERROR_CLASSES = {
    enums_pb2.STEP_ERROR_CLASS_RETRYABLE: "retryable",
    enums_pb2.STEP_ERROR_CLASS_FATAL: "fatal",
    enums_pb2.STEP_ERROR_CLASS_INVALID_INPUT: "invalid_input",
    enums_pb2.STEP_ERROR_CLASS_UNSERVABLE: "unservable",
    enums_pb2.STEP_ERROR_CLASS_CANCELLED: "cancelled",
}


@dataclass(frozen=True, slots=True)
class _Call:
    """A lease call's view of its run: the moves so far and the attempt the lease holds."""

    moves: Moves
    row: AttemptRow
    lease_id: str


class Leases:
    """Claims and the lease calls of a project's workers."""

    def __init__(self, mover: Mover, prices: Prices) -> None:
        self._mover = mover
        self._prices = prices

    # Claims.

    async def claim(
        self, request: runs_pb2.ClaimRequest, time_left_s: float | None
    ) -> runs_pb2.ClaimResponse:
        """Up to `max` leases, waiting up to `wait_ms` for work (see the module docstring)."""
        if not request.worker_id:
            raise InvalidArgument("worker_id is required: who is claiming", field="worker_id")
        if not 1 <= request.max <= MAX_CLAIM:
            raise InvalidArgument(f"max must be 1 to {MAX_CLAIM}", field="max")
        if request.wait_ms > MAX_WAIT_MS:
            raise InvalidArgument(f"wait_ms must be 0 to {MAX_WAIT_MS}", field="wait_ms")
        wait_s = request.wait_ms / 1000
        if time_left_s is not None:
            wait_s = min(wait_s, max(time_left_s * HELD_SHARE, 0.0))
        until = time.monotonic() + wait_s
        while True:
            with self._mover.wakeups.listening() as woken:
                leases = await asyncio.to_thread(self._claim_once, request)
                left = until - time.monotonic()
                if leases or left <= 0:
                    return runs_pb2.ClaimResponse(leases=leases)
                with suppress(TimeoutError):
                    await asyncio.wait_for(woken.wait(), timeout=min(left, POLL_S))

    def _claim_once(self, request: runs_pb2.ClaimRequest) -> list[runs_pb2.StepLease]:
        only = request.run_id if request.HasField("run_id") else None
        worker_id = request.worker_id
        taken = self._mover.claim(
            request.project,
            run_id=only,
            limit=request.max,
            act=lambda wanted: partial(self._lease, wanted=wanted, worker_id=worker_id),
        )
        leases = [lease for granted in taken for lease in granted or []]
        return leases[: request.max]

    def _lease(
        self, moves: Moves, *, wanted: list[tuple[str, int]], worker_id: str
    ) -> list[runs_pb2.StepLease]:
        if moves.status != "running":
            return []
        spent = _spent_ceiling(moves)
        if spent is not None:
            moves.end_run("failed", error=spent)
            return []
        leases = []
        for step_key, number in wanted:
            row = moves.attempt(step_key, number)
            if (
                row is None
                or row["kind"] == "wait"
                or row["status"] != "pending"
                or moves.has_timer("retry", step_key)
            ):
                continue
            lease_id = new_id()
            expires = moves.now + self._mover.lease_ttl_ns
            moves.update_attempt(
                row,
                status="leased",
                lease_owner=worker_id,
                lease_id=lease_id,
                lease_until=expires,
            )
            moves.set_timer("lease_expiry", step_key, number, expires)
            node = step_at(moves.body, step_key).step
            if "step_timeout_ms" in node:
                due = moves.now + node["step_timeout_ms"] * _NS_PER_MS
                moves.set_timer("step_timeout", step_key, number, due)
            moves.changes.new_leases.append(
                {
                    "lease_id": lease_id,
                    "run_id": row["run_id"],
                    "step_key": step_key,
                    "attempt": number,
                    "worker_id": worker_id,
                    "issued_at": moves.now,
                    "outcome": None,
                }
            )
            moves.event(
                "step_leased", {"step_key": step_key, "attempt": number, "worker_id": worker_id}
            )
            leases.append(_lease_message(moves, row, node, lease_id, expires))
        return leases

    # Lease calls.

    def started(self, request: rpc.LeaseRequest) -> runs_pb2.LeaseState:
        """The worker is about to run the body: the attempt is `started` and its lease renewed."""

        def decide(call: _Call) -> runs_pb2.LeaseState:
            reclaimed = self._restore(call)
            if call.row["status"] == "leased":
                call.moves.update_attempt(call.row, status="started", started_at=call.moves.now)
                call.moves.event(
                    "step_started",
                    {"step_key": call.row["step_key"], "attempt": call.row["attempt"]},
                )
            return self._renew(call, reclaimed)

        return self._call(request.project, request.lease_id, decide)

    def heartbeat(self, request: rpc.LeaseRequest) -> runs_pb2.LeaseState:
        """Renew the lease; inside a reclaim window, restore the attempt (`reclaimed`)."""
        return self._call(
            request.project, request.lease_id, lambda call: self._renew(call, self._restore(call))
        )

    def complete(self, request: rpc.CompleteStepRequest) -> runs_pb2.StepAck:
        """The attempt succeeded: its output kept, the state merged, the run walked on."""
        result = request.result
        output = python_of(result.output) if result.HasField("output") else None
        state = python_of(result.state) if result.HasField("state") else None
        if state is not None and not isinstance(state, dict):
            raise InvalidArgument("result.state must be a JSON object", field="result.state")
        usage = codec.encode(result.usage) if result.HasField("usage") else None
        cost = None if usage is None else self._prices.cost(request.project, usage)

        def decide(call: _Call) -> runs_pb2.StepAck:
            moves, row = call.moves, call.row
            _require_started(call)
            self._restore(call)
            moves.update_attempt(
                row,
                status="succeeded",
                output=output,
                usage=usage,
                cost_usd=cost,
                lease_until=None,
                ended_at=moves.now,
            )
            self._release(call, "completed")
            merged = None if state is None else {**(moves.run["state"] or {}), **state}
            moves.set_run(
                steps_used=moves.run["steps_used"] + 1,
                cost_usd=moves.run["cost_usd"] + (cost or 0.0),
                **({} if merged is None else {"state": merged}),
            )
            moves.event("step_finished", {"step_key": row["step_key"], "attempt": row["attempt"]})
            moves.advance()
            return _ack(moves)

        return self._call(request.project, request.lease_id, decide)

    def fail(self, request: rpc.FailStepRequest) -> runs_pb2.StepAck:
        """The attempt failed: retried while the budget allows, else the node's on_error."""
        error = request.failure.error
        kind = _ERROR_CLASSES.get(getattr(error, "class"))
        if kind is None:
            raise InvalidArgument("failure.error.class is required", field="failure.error.class")
        if not error.message:
            raise InvalidArgument(
                "failure.error.message is required", field="failure.error.message"
            )
        retry_after = error.retry_after_ms if error.HasField("retry_after_ms") else None
        if retry_after is not None and retry_after > MAX_RETRY_AFTER_MS:
            raise InvalidArgument(
                f"failure.error.retry_after_ms must be at most {MAX_RETRY_AFTER_MS}",
                field="failure.error.retry_after_ms",
            )
        stored = codec.encode(error)

        def decide(call: _Call) -> runs_pb2.StepAck:
            moves, row = call.moves, call.row
            _require_started(call)
            self._restore(call)
            self._release(call, "failed")
            step_key, number = row["step_key"], row["attempt"]
            left = row["attempts_left"] or 0
            moves.event(
                "step_failed",
                {
                    "step_key": step_key,
                    "attempt": number,
                    "class": kind,
                    "message": error.message,
                    "attempts_left": left,
                },
            )
            # A started at_most_once body may have run: it cannot go back to another worker.
            body_may_have_run = row["effect"] == "at_most_once" and row["started_at"] is not None
            if kind == "unservable" and not body_may_have_run:
                # Back to pending for another worker, after one lease length, budget unspent.
                moves.set_timer("retry", step_key, number, moves.now + self._mover.lease_ttl_ns)
                moves.update_attempt(
                    row, status="pending", lease_owner=None, lease_id=None, lease_until=None
                )
                return _ack(moves, attempts_left=left)
            moves.update_attempt(
                row, status="failed", error=stored, lease_until=None, ended_at=moves.now
            )
            if kind == "retryable" and left > 0:
                step = step_at(moves.body, step_key).step
                delay = max(backoff_ms(step, number), retry_after or 0)
                moves.set_timer("retry", step_key, number + 1, moves.now + delay * _NS_PER_MS)
            moves.advance()
            return _ack(moves, attempts_left=left)

        return self._call(request.project, request.lease_id, decide)

    def _call(self, project: str, lease_id: str, decide: Callable[[_Call], T]) -> T:
        """Run `decide` in a transition of the lease's run, after the conflict checks."""
        if not lease_id:
            raise InvalidArgument("lease_id is required", field="lease_id")
        missing = NotFound(f"lease {quoted(lease_id)} does not exist", field="lease_id")

        def checked(moves: Moves) -> T:
            lease = moves.lease
            if lease is None:
                raise missing
            row = moves.attempt(lease["step_key"], lease["attempt"])
            assert row is not None  # a lease row references its attempt's run, never removed
            _check(moves, row, lease_id, lease["outcome"])
            return decide(_Call(moves, row, lease_id))

        answer = self._mover.move_lease(project, lease_id, checked)
        if answer is None:
            raise missing
        return answer

    def _restore(self, call: _Call) -> bool:
        """An orphaned attempt contacted inside its reclaim window returns to where it was."""
        row = call.row
        if row["status"] != "orphaned":
            return False
        status = "started" if row["started_at"] is not None else "leased"
        call.moves.update_attempt(row, status=status, orphaned_at=None, reclaim_until=None)
        call.moves.clear_timer("reclaim", row["step_key"])
        return True

    def _renew(self, call: _Call, reclaimed: bool) -> runs_pb2.LeaseState:
        expires = call.moves.now + self._mover.lease_ttl_ns
        call.moves.update_attempt(call.row, lease_until=expires)
        call.moves.set_timer("lease_expiry", call.row["step_key"], call.row["attempt"], expires)
        return runs_pb2.LeaseState(expires_at=timestamp_of(expires), reclaimed=reclaimed)

    def _release(self, call: _Call, outcome: str) -> None:
        """This lease's own complete or fail landed: no lease timers hold the attempt now."""
        for kind in ("lease_expiry", "step_timeout", "reclaim"):
            call.moves.clear_timer(kind, call.row["step_key"])
        call.moves.changes.lease_outcomes.append((call.lease_id, outcome))
        call.moves.update_attempt(call.row, lease_owner=None, lease_id=None)


def backoff_ms(node: Mapping[str, Any], attempt: int) -> int:
    """The delay before the attempt after `attempt` (1-based), from the node's `retry`."""
    retry = node.get("retry", {})
    initial = retry.get("initial_ms", 1000)
    if retry.get("backoff", "exponential") == "fixed":
        return int(initial)
    return int(min(initial * 2 ** (attempt - 1), retry.get("max_ms", 60_000)))


def _check(moves: Moves, row: AttemptRow, lease_id: str, outcome: str | None) -> None:
    """The conflict a call about this lease meets, in the order of the module docstring."""
    latest = moves.latest(row["step_key"])
    if outcome is not None:
        _conflict(moves, row, "already_applied", f"this lease's {outcome[:-1]} already landed")
    if moves.status != "running":
        _conflict(moves, row, "run_terminal", f"the run has ended {moves.status}")
    if (
        (latest is not None and latest["attempt"] > row["attempt"])
        or row["lease_id"] != lease_id
        or row["status"] not in _HELD
    ):
        _conflict(moves, row, "fenced", "a later attempt exists or another lease ended this one")


def _require_started(call: _Call) -> None:
    if call.row["effect"] == "at_most_once" and call.row["started_at"] is None:
        _conflict(
            call.moves,
            call.row,
            "not_started",
            "an at_most_once step must post started before complete or fail",
        )


def _conflict(moves: Moves, row: AttemptRow, reason: str, message: str) -> None:
    conflict = runs_pb2.StepConflict(
        error="conflict",
        reason=enums_pb2.ConflictReason.Value(f"CONFLICT_REASON_{reason.upper()}"),
        message=message,
        attempt=row["attempt"],
        attempt_status=_ATTEMPT_STATUS.Value(f"ATTEMPT_STATUS_{row['status'].upper()}"),
        run_status=_RUN_STATUS.Value(f"RUN_STATUS_{moves.status.upper()}"),
    )
    raise Conflict(message, reason=reason.upper(), details=[conflict])


def _spent_ceiling(moves: Moves) -> str | None:
    """Why the run may take no more steps, when the ceilings of its tree's root are spent by
    the steps and cost of the whole tree."""
    root = moves.root().run
    if root["max_steps"] is None and root["max_cost_usd"] is None:
        return None
    steps, cost = moves.tree_totals()
    if root["max_steps"] is not None and steps >= root["max_steps"]:
        return f"max_steps spent: {steps} of {root['max_steps']} steps used"
    if root["max_cost_usd"] is not None and cost >= root["max_cost_usd"]:
        return f"max_cost_usd spent: {cost} of {root['max_cost_usd']} USD"
    return None


def _ack(moves: Moves, attempts_left: int | None = None) -> runs_pb2.StepAck:
    ack = runs_pb2.StepAck(
        run_status=_RUN_STATUS.Value(f"RUN_STATUS_{moves.status.upper()}"),
        next="claim" if moves.offered else "idle",
    )
    if attempts_left is not None:
        ack.attempts_left = attempts_left
    return ack


def _lease_message(
    moves: Moves, row: AttemptRow, node: Mapping[str, Any], lease_id: str, expires: int
) -> runs_pb2.StepLease:
    run = moves.run
    lease = runs_pb2.StepLease(
        lease_id=lease_id,
        run_id=run["run_id"],
        project=run["project"],
        definition_id=run["definition_id"],
        definition_version=run["definition_version"],
        step_key=row["step_key"],
        kind=enums_pb2.StepKind.Value(f"STEP_KIND_{row['kind'].upper()}"),
        attempt=row["attempt"],
        effect=enums_pb2.Effect.Value(f"EFFECT_{row['effect'].upper()}"),
        expires_at=timestamp_of(expires),
        idempotency_key=idempotency_key(run["run_id"], row["step_key"]),
        prior=value_of(moves.prior()),
        correlation=run_correlation(cast(RunRow, run)),
        trace_id=run["trace_id"],
        span_id=row["span_id"],
        parent_span_id=root_span_id(run["run_id"]),
    )
    if "step_timeout_ms" in node:
        lease.deadline_ms = node["step_timeout_ms"]
    if row["input"] is not None:
        lease.input.CopyFrom(value_of(row["input"]))
    if run["state"] is not None:
        lease.state.CopyFrom(value_of(run["state"]))
    return lease
