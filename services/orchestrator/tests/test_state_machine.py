"""Random interleavings of claims, started, heartbeats, completions, failures, expiries (the
clock moving on) and cancels against a real run store on each SQL backend (PostgreSQL takes
other paths: the root of a run tree locked first, a lease read again under the lock, claims
that skip locked rows), checked after every step against the orchestrator's invariants:

- a terminal run holds no timer, no wait and no live attempt, and no `deadline_at`;
- each run's event log is numbered from 0 without gaps;
- a step has at most one live attempt;
- a lease call on an ended run is refused as a conflict, never applied;
- an `at_most_once` attempt that posted `started` never goes back to pending (its body would
  run twice): losing its lease fails the run instead.
"""

from __future__ import annotations

import asyncio
import tempfile
from contextlib import ExitStack
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, cast

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    Bundle,
    RuleBasedStateMachine,
    invariant,
    rule,
    run_state_machine_as_test,
)

from mcpd.model.v1 import enums_pb2, runs_pb2
from mcpd.orchestrator.v1 import orchestrator_service_pb2 as rpc
from mcpd.runtime.clock import ManualClock
from mcpd.runtime.errors import Conflict
from mcpd.testing.templates import PostgresTemplates, SqliteTemplates
from services.orchestrator.tests.daemon import LEASE_MS, PROJECT, open_daemon

LIVE = {
    enums_pb2.ATTEMPT_STATUS_PENDING,
    enums_pb2.ATTEMPT_STATUS_LEASED,
    enums_pb2.ATTEMPT_STATUS_STARTED,
    enums_pb2.ATTEMPT_STATUS_ORPHANED,
}
RUNNING = enums_pb2.RUN_STATUS_RUNNING
CLASSES = [
    enums_pb2.STEP_ERROR_CLASS_RETRYABLE,
    enums_pb2.STEP_ERROR_CLASS_FATAL,
    enums_pb2.STEP_ERROR_CLASS_UNSERVABLE,
]
FLOW = {
    "limits": {"run_timeout_ms": 20 * LEASE_MS},
    "steps": [
        {
            "id": "pay",
            "kind": "task",
            "effect": "at_most_once",
            "step_timeout_ms": 3 * LEASE_MS,
            "retry": {"attempts": 2, "backoff": "fixed", "initial_ms": 100},
        },
        {
            "id": "fan",
            "kind": "parallel",
            "on_error": "continue",
            "branches": [
                {"id": "a", "retry": {"attempts": 2, "backoff": "fixed", "initial_ms": 50}},
                {"id": "b"},
            ],
        },
    ],
}


class Orchestration(RuleBasedStateMachine):
    """The orchestrator's domain over one store and a manual clock."""

    leases = Bundle("leases")

    def __init__(self, sqlite: SqliteTemplates, postgres: PostgresTemplates | None) -> None:
        super().__init__()
        self.cleanup = ExitStack()
        directory = Path(self.cleanup.enter_context(tempfile.TemporaryDirectory()))
        clock = ManualClock(datetime(2026, 1, 1, tzinfo=UTC))
        self.daemon = open_daemon(self.cleanup, directory, clock, sqlite, postgres)
        self.daemon.define("flow", FLOW)
        self.runs: list[str] = []
        self.lease_runs: dict[str, str] = {}

    def teardown(self) -> None:
        self.cleanup.close()

    @rule()
    def start(self) -> None:
        self.runs.append(self.daemon.start("flow"))

    @rule(target=leases, data=st.data())
    def claim(self, data: st.DataObject) -> Any:
        # One run's work at a time: runs started in one millisecond have ids in random order.
        if not self.runs:
            return "no-lease"
        run_id = data.draw(st.sampled_from(self.runs))
        found = asyncio.run(self.daemon.claim(run_id, most=1))
        if not found:
            return "no-lease"
        self.lease_runs[found[0].lease_id] = run_id
        return found[0].lease_id

    @rule(lease=leases)
    def started(self, lease: str) -> None:
        self._call(lambda: self.daemon.leases.started(self.daemon.lease(lease)), lease)

    @rule(lease=leases)
    def heartbeat(self, lease: str) -> None:
        self._call(lambda: self.daemon.leases.heartbeat(self.daemon.lease(lease)), lease)

    @rule(lease=leases)
    def complete(self, lease: str) -> None:
        self._call(lambda: self.daemon.complete(lease, "done"), lease)

    @rule(lease=leases, kind=st.sampled_from(CLASSES))
    def fail(self, lease: str, kind: int) -> None:
        self._call(lambda: self.daemon.fail(lease, kind), lease)

    @rule(ms=st.sampled_from([10, 100, LEASE_MS, 3 * LEASE_MS]))
    def time_passes(self, ms: int) -> None:
        self.daemon.later(ms)

    @rule(data=st.data())
    def cancel(self, data: st.DataObject) -> None:
        if self.runs:
            run_id = data.draw(st.sampled_from(self.runs))
            self.daemon.runs.cancel(rpc.CancelRunRequest(project=PROJECT, run_id=run_id))

    def _call(self, call: Any, lease: str) -> None:
        if lease == "no-lease":
            return
        run_ended = self._run_of(lease) not in (None, RUNNING)
        refused = None
        try:
            call()
        except Conflict as conflict:
            refused = conflict.reason
        if refused is not None:
            assert refused in {"FENCED", "ALREADY_APPLIED", "RUN_TERMINAL", "NOT_STARTED"}
        else:
            assert not run_ended, "a lease call on an ended run was applied"

    def _run_of(self, lease: str) -> int | None:
        run_id = self.lease_runs.get(lease)
        return None if run_id is None else self.daemon.detail(run_id).run.status

    @invariant()
    def every_run_holds_its_invariants(self) -> None:
        # One read of each run for the checks below: the reads are most of the test's time.
        for run_id in self.runs:
            detail = self.daemon.detail(run_id)
            _a_terminal_run_holds_nothing(detail)
            _a_step_has_one_live_attempt_at_most(detail)
            _a_started_at_most_once_body_never_returns_to_pending(detail)

    @invariant()
    def event_logs_have_no_gaps(self) -> None:
        for run_id in self.runs:
            request = rpc.ListRunEventsRequest(project=PROJECT, run_id=run_id)
            seqs = [event.seq for event in self.daemon.runs.events(request).events]
            assert seqs == list(range(len(seqs)))


def _a_terminal_run_holds_nothing(detail: runs_pb2.RunDetail) -> None:
    if detail.run.status == RUNNING:
        return
    assert list(detail.timers) == []
    assert list(detail.waits) == []
    assert not detail.run.HasField("deadline_at")
    assert [a.step_key for a in detail.attempts if a.status in LIVE] == []


def _a_step_has_one_live_attempt_at_most(detail: runs_pb2.RunDetail) -> None:
    live = [a.step_key for a in detail.attempts if a.status in LIVE]
    assert len(live) == len(set(live))


def _a_started_at_most_once_body_never_returns_to_pending(detail: runs_pb2.RunDetail) -> None:
    for attempt in detail.attempts:
        if attempt.effect == enums_pb2.EFFECT_AT_MOST_ONCE:
            assert not (
                attempt.HasField("started_at")
                and attempt.status == enums_pb2.ATTEMPT_STATUS_PENDING
            )


SETTINGS = settings(
    max_examples=15,
    stateful_step_count=25,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)


def test_invariants_hold(
    postgres_backend: PostgresTemplates | None, sqlite_templates: SqliteTemplates
) -> None:
    # Any zero-argument factory will do (Hypothesis's docstring), though its hint names a class.
    factory = cast(
        "type[RuleBasedStateMachine]", lambda: Orchestration(sqlite_templates, postgres_backend)
    )
    run_state_machine_as_test(factory, settings=SETTINGS)
