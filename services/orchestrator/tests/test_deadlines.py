"""The orchestrator's deadlines on a real SQLite run store with a manual clock: a lapsed lease
orphans its attempt and a heartbeat inside the reclaim window restores it; a closed window
requeues an at_least_once attempt (or one never started) and fails an at_most_once run whose
body started; a step timeout times the attempt out and retries it; a run timeout ends the run
holding nothing; a retry honours `retry_after_ms` over the backoff; timers fire only when due."""

from __future__ import annotations

import asyncio
import threading
from collections import Counter

import pytest

from mcpd.model.v1 import enums_pb2, runs_pb2
from mcpd.orchestrator.v1 import orchestrator_service_pb2 as rpc
from mcpd.runtime.errors import Conflict
from mcpd.signals.messages import value_of
from services.orchestrator.tests.daemon import LEASE_MS, PROJECT, Daemon, statuses, timer_kinds


async def test_a_lapsed_lease_orphans_and_a_heartbeat_in_the_window_restores(
    daemon: Daemon,
) -> None:
    daemon.define("one", {"steps": [{"id": "a", "kind": "task"}]})
    run_id = daemon.start("one")
    (lease,) = await daemon.claim(run_id)
    assert daemon.later(LEASE_MS - 1) == 0
    assert daemon.later(1) == 1
    detail = daemon.detail(run_id)
    assert statuses(detail) == [(1, "ATTEMPT_STATUS_ORPHANED")]
    assert detail.attempts[0].reclaim_until.ToNanoseconds() > 0
    assert timer_kinds(detail) == ["TIMER_KIND_RECLAIM"]
    # Not offerable while the window is open.
    assert await daemon.claim(run_id) == []
    state = daemon.leases.heartbeat(daemon.lease(lease.lease_id))
    assert state.reclaimed is True
    detail = daemon.detail(run_id)
    assert statuses(detail) == [(1, "ATTEMPT_STATUS_LEASED")]
    assert timer_kinds(detail) == ["TIMER_KIND_LEASE_EXPIRY"]
    assert daemon.leases.heartbeat(daemon.lease(lease.lease_id)).reclaimed is False


async def test_a_closed_window_requeues_and_the_old_lease_is_fenced(daemon: Daemon) -> None:
    daemon.define("one", {"steps": [{"id": "a", "kind": "task"}]})
    run_id = daemon.start("one")
    (first,) = await daemon.claim(run_id)
    daemon.later(LEASE_MS)
    daemon.later(LEASE_MS)
    assert statuses(daemon.detail(run_id)) == [(1, "ATTEMPT_STATUS_PENDING")]
    (second,) = await daemon.claim(run_id)
    assert (second.attempt, second.lease_id != first.lease_id) == (1, True)
    with pytest.raises(Conflict) as caught:
        daemon.leases.heartbeat(daemon.lease(first.lease_id))
    assert caught.value.reason == "FENCED"
    (conflict,) = caught.value.details
    assert isinstance(conflict, runs_pb2.StepConflict)
    assert conflict.attempt_status == enums_pb2.ATTEMPT_STATUS_LEASED
    daemon.leases.complete(rpc.CompleteStepRequest(project=PROJECT, lease_id=second.lease_id))
    assert daemon.detail(run_id).run.status == enums_pb2.RUN_STATUS_SUCCEEDED


async def test_an_at_most_once_body_that_started_fails_the_run_when_its_lease_is_lost(
    daemon: Daemon,
) -> None:
    daemon.define("pay", {"steps": [{"id": "charge", "kind": "task", "effect": "at_most_once"}]})
    run_id = daemon.start("pay")
    (lease,) = await daemon.claim(run_id)
    daemon.leases.started(daemon.lease(lease.lease_id))
    daemon.later(LEASE_MS)
    daemon.later(LEASE_MS)
    detail = daemon.detail(run_id)
    assert detail.run.status == enums_pb2.RUN_STATUS_FAILED
    assert "at_most_once" in detail.run.error
    # The terminal invariant, in the transaction that ended it.
    assert statuses(detail) == [(1, "ATTEMPT_STATUS_FAILED")]
    assert list(detail.timers) == []
    assert not detail.run.HasField("deadline_at")


async def test_an_at_most_once_body_never_started_is_requeued(daemon: Daemon) -> None:
    daemon.define("pay", {"steps": [{"id": "charge", "kind": "task", "effect": "at_most_once"}]})
    run_id = daemon.start("pay")
    await daemon.claim(run_id)
    daemon.later(LEASE_MS)
    daemon.later(LEASE_MS)
    assert statuses(daemon.detail(run_id)) == [(1, "ATTEMPT_STATUS_PENDING")]


async def test_a_step_timeout_times_out_the_attempt_and_retries_it(daemon: Daemon) -> None:
    body = {
        "steps": [
            {
                "id": "slow",
                "kind": "task",
                "step_timeout_ms": 300,
                "retry": {"attempts": 2, "backoff": "fixed", "initial_ms": 50},
            }
        ]
    }
    daemon.define("slow", body)
    run_id = daemon.start("slow")
    (lease,) = await daemon.claim(run_id)
    assert lease.deadline_ms == 300
    daemon.leases.heartbeat(daemon.lease(lease.lease_id))
    daemon.later(300)
    detail = daemon.detail(run_id)
    assert statuses(detail) == [(1, "ATTEMPT_STATUS_TIMED_OUT")]
    assert timer_kinds(detail) == ["TIMER_KIND_RETRY"]
    daemon.later(49)
    assert await daemon.claim(run_id) == []
    daemon.later(1)
    (retry,) = await daemon.claim(run_id)
    assert retry.attempt == 2
    daemon.later(300)
    detail = daemon.detail(run_id)
    assert detail.run.status == enums_pb2.RUN_STATUS_FAILED
    assert detail.run.error == "step_timeout_ms 300 passed"


async def test_a_run_timeout_ends_the_run_holding_nothing(daemon: Daemon) -> None:
    daemon.define(
        "capped", {"limits": {"run_timeout_ms": 5000}, "steps": [{"id": "a", "kind": "task"}]}
    )
    run_id = daemon.start("capped")
    (lease,) = await daemon.claim(run_id)
    daemon.leases.started(daemon.lease(lease.lease_id))
    for _ in range(4):
        daemon.leases.heartbeat(daemon.lease(lease.lease_id))
        daemon.later(LEASE_MS)
    daemon.later(LEASE_MS)
    detail = daemon.detail(run_id)
    assert detail.run.status == enums_pb2.RUN_STATUS_TIMED_OUT
    assert statuses(detail) == [(1, "ATTEMPT_STATUS_FAILED")]
    assert list(detail.timers) == []
    assert not detail.run.HasField("deadline_at")
    with pytest.raises(Conflict) as caught:
        daemon.leases.heartbeat(daemon.lease(lease.lease_id))
    assert caught.value.reason == "RUN_TERMINAL"


async def test_retry_after_wins_when_larger_than_the_backoff(daemon: Daemon) -> None:
    body = {"steps": [{"id": "a", "kind": "task", "retry": {"attempts": 3, "initial_ms": 100}}]}
    daemon.define("limited", body)
    run_id = daemon.start("limited")

    async def fail_with(retry_after_ms: int | None) -> None:
        (lease,) = await daemon.claim(run_id)
        error = runs_pb2.StepError(message="rate limited")
        setattr(error, "class", enums_pb2.STEP_ERROR_CLASS_RETRYABLE)
        if retry_after_ms is not None:
            error.retry_after_ms = retry_after_ms
        failure = runs_pb2.StepFailure(error=error)
        request = rpc.FailStepRequest(project=PROJECT, lease_id=lease.lease_id, failure=failure)
        daemon.leases.fail(request)

    await fail_with(2000)
    daemon.later(1999)
    assert await daemon.claim(run_id) == []
    daemon.later(1)
    # Exponential from 100 ms: the second wait is 200 ms, larger than a 10 ms retry_after.
    await fail_with(10)
    daemon.later(199)
    assert await daemon.claim(run_id) == []
    daemon.later(1)
    (third,) = await daemon.claim(run_id)
    assert third.attempt == 3
    assert [a.attempts_left for a in daemon.detail(run_id).attempts] == [2, 1, 0]


async def test_the_state_merges_shallowly_and_the_input_renders_per_attempt(
    daemon: Daemon,
) -> None:
    body = {
        "steps": [
            {"id": "a", "kind": "task"},
            {"id": "b", "kind": "task", "input": {"from_state": "${state.k}", "n": "${state.n}"}},
        ]
    }
    daemon.define("state", body)
    run_id = daemon.start("state")
    (first,) = await daemon.claim(run_id)
    result = runs_pb2.StepResult(state=value_of({"k": {"x": 1}, "n": 1}))
    daemon.leases.complete(
        rpc.CompleteStepRequest(project=PROJECT, lease_id=first.lease_id, result=result)
    )
    (second,) = await daemon.claim(run_id)
    assert second.input == value_of({"from_state": {"x": 1}, "n": 1})
    result = runs_pb2.StepResult(state=value_of({"k": {"y": 2}}))
    daemon.leases.complete(
        rpc.CompleteStepRequest(project=PROJECT, lease_id=second.lease_id, result=result)
    )
    # Shallow: a key's new value replaces the old one whole; other keys stay.
    assert daemon.detail(run_id).run.state == value_of({"k": {"y": 2}, "n": 1})


def test_racing_claims_lease_each_attempt_once(daemon: Daemon) -> None:
    daemon = daemon
    daemon.define("one", {"steps": [{"id": "a", "kind": "task"}]})
    started = {daemon.start("one") for _ in range(24)}
    barrier = threading.Barrier(4)
    taken: list[runs_pb2.StepLease] = []
    failures: list[BaseException] = []

    def worker(name: str) -> None:
        try:
            barrier.wait()
            while found := asyncio.run(daemon.claim(None, worker_id=name, most=3)):
                taken.extend(found)
        except BaseException as error:  # surfaced by the assertion below
            failures.append(error)

    threads = [threading.Thread(target=worker, args=(f"w{n}",)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert failures == []
    assert Counter(lease.run_id for lease in taken) == Counter(dict.fromkeys(started, 1))
    assert len({lease.lease_id for lease in taken}) == len(started)
    for run_id in started:
        leased = [
            event
            for event in daemon.runs.events(
                rpc.ListRunEventsRequest(project=PROJECT, run_id=run_id)
            ).events
            if event.kind == enums_pb2.RUN_EVENT_KIND_STEP_LEASED
        ]
        assert len(leased) == 1


async def test_usage_is_priced_charged_and_counted_against_the_spend_ceiling(
    daemon: Daemon,
) -> None:
    daemon.control.set_price_overrides(PROJECT, {"house-model": {"input": 2.0, "output": 8.0}})
    body = {
        "limits": {"max_cost_usd": 0.01},
        "steps": [{"id": "think", "kind": "agent"}, {"id": "again", "kind": "agent"}],
    }
    daemon.define("spend", body)
    run_id = daemon.start("spend")
    (lease,) = await daemon.claim(run_id)
    usage = runs_pb2.StepUsage(input_tokens=1000, output_tokens=1000, model="house-model")
    result = runs_pb2.StepResult(usage=usage)
    daemon.leases.complete(
        rpc.CompleteStepRequest(project=PROJECT, lease_id=lease.lease_id, result=result)
    )
    detail = daemon.detail(run_id)
    # 1,000 tokens at 2 and 1,000 at 8 per million.
    assert detail.attempts[0].cost_usd == pytest.approx(0.01)
    assert detail.attempts[0].usage.model == "house-model"
    assert detail.run.cost_usd == pytest.approx(0.01)
    assert await daemon.claim(run_id) == []
    ended = daemon.detail(run_id).run
    assert ended.status == enums_pb2.RUN_STATUS_FAILED
    assert ended.error.startswith("max_cost_usd spent")


async def test_a_started_at_most_once_step_failed_unservable_is_not_requeued(
    daemon: Daemon,
) -> None:
    daemon.define("pay", {"steps": [{"id": "charge", "kind": "task", "effect": "at_most_once"}]})
    run_id = daemon.start("pay")
    (lease,) = await daemon.claim(run_id)
    daemon.leases.started(daemon.lease(lease.lease_id))
    daemon.fail(lease.lease_id, enums_pb2.STEP_ERROR_CLASS_UNSERVABLE, "no handler after all")
    detail = daemon.detail(run_id)
    assert statuses(detail) == [(1, "ATTEMPT_STATUS_FAILED")]
    assert detail.run.status == enums_pb2.RUN_STATUS_FAILED
    assert detail.run.error == "no handler after all"
