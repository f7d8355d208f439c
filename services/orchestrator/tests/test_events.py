"""Waits, published events and signals on a real run store with a manual clock: an event goes to
the matching wait that expires soonest and becomes the step's output; with nobody waiting it is
parked for 24 hours for a wait that accepts parked events; supplied ids deduplicate always,
derived ids only while parked; a wait's timeout applies `on_timeout`; a signal finds the key by
run id; an event and a wait arriving at the same moment always meet."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from mcpd.model.v1 import enums_pb2, runs_pb2
from mcpd.orchestrator.v1 import orchestrator_service_pb2 as rpc
from mcpd.runtime.errors import Conflict, NotFound
from mcpd.signals.messages import python_of, value_of
from services.orchestrator.events import derived_event_id
from services.orchestrator.tests.daemon import PROJECT, Daemon

DELIVERED = enums_pb2.EVENT_OUTCOME_DELIVERED
PARKED = enums_pb2.EVENT_OUTCOME_PARKED
DUPLICATE = enums_pb2.EVENT_OUTCOME_DUPLICATE
DAY_MS = 24 * 3600 * 1000


def approval(**wait: Any) -> dict[str, Any]:
    node = {"id": "approve", "kind": "wait_event", "event": "approval", "key": "${input.order}"}
    return {
        "steps": [
            {**node, **wait},
            {"id": "ship", "kind": "task", "input": "${steps.approve.output}"},
        ]
    }


def start(daemon: Daemon, name: str, order: str) -> str:
    request = runs_pb2.StartRunRequest(
        project=PROJECT, definition_id=name, input=value_of({"order": order})
    )
    return daemon.runs.start(request).run_id


def publish(
    daemon: Daemon, key: str, payload: Any = None, event_id: str | None = None
) -> runs_pb2.EventReceipt:
    request = runs_pb2.PublishEventRequest(project=PROJECT, event="approval", key=key)
    if payload is not None:
        request.payload.CopyFrom(value_of(payload))
    if event_id is not None:
        request.event_id = event_id
    return daemon.events.publish(request)


def waits(daemon: Daemon, run_id: str) -> list[tuple[str, str, str]]:
    return [(w.step_key, w.event, w.key) for w in daemon.detail(run_id).waits]


async def test_an_event_resumes_the_waiting_run_with_its_payload(daemon: Daemon) -> None:
    daemon.define("approve", approval(timeout_ms=60_000))
    run_id = start(daemon, "approve", "o-1")
    assert waits(daemon, run_id) == [("approve", "approval", "o-1")]
    receipt = publish(daemon, "o-1", {"by": "ana"})
    assert receipt.outcome == DELIVERED
    assert receipt.event_id == derived_event_id(PROJECT, "approval", "o-1", {"by": "ana"})
    detail = daemon.detail(run_id)
    assert list(detail.waits) == []
    assert list(detail.timers) == []  # the wait's timeout went with it
    (lease,) = await daemon.claim(run_id)
    assert (lease.step_key, python_of(lease.input)) == ("ship", {"by": "ana"})
    events = daemon.runs.events(rpc.ListRunEventsRequest(project=PROJECT, run_id=run_id)).events
    by_kind = {enums_pb2.RunEventKind.Name(e.kind): python_of(e.payload) for e in events}
    assert by_kind["RUN_EVENT_KIND_RUN_WAITING"] == {
        "step_key": "approve",
        "event": "approval",
        "key": "o-1",
        "expires_at": "2026-01-01T00:01:00.000Z",
    }
    assert by_kind["RUN_EVENT_KIND_RUN_RESUMED"] == {
        "step_key": "approve",
        "event_id": receipt.event_id,
    }


async def test_an_event_nobody_waits_for_is_parked_for_a_wait_that_accepts_it(
    daemon: Daemon,
) -> None:
    daemon.define("strict", approval())
    daemon.define("lenient", approval(accept_parked=True))
    assert publish(daemon, "o-2", "yes").outcome == PARKED
    strict = start(daemon, "strict", "o-2")
    assert waits(daemon, strict) == [("approve", "approval", "o-2")]
    lenient = start(daemon, "lenient", "o-2")
    assert waits(daemon, lenient) == []
    (lease,) = await daemon.claim(lenient)
    assert python_of(lease.input) == "yes"
    # Taken once: the next lenient run waits.
    again = start(daemon, "lenient", "o-2")
    assert waits(daemon, again) == [("approve", "approval", "o-2")]


async def test_a_parked_event_lapses_after_a_day(daemon: Daemon) -> None:
    daemon.define("lenient", approval(accept_parked=True))
    publish(daemon, "o-3", "late")
    daemon.later(DAY_MS)
    run_id = start(daemon, "lenient", "o-3")
    assert waits(daemon, run_id) == [("approve", "approval", "o-3")]


async def test_supplied_ids_deduplicate_always_and_derived_ones_while_parked(
    daemon: Daemon,
) -> None:
    daemon.define("approve", approval())
    first = start(daemon, "approve", "o-4")
    second = start(daemon, "approve", "o-4")
    assert publish(daemon, "o-4", "ok", event_id="evt-1").outcome == DELIVERED
    # The same supplied id again: a duplicate, though another run is waiting on the key.
    assert publish(daemon, "o-4", "ok", event_id="evt-1").outcome == DUPLICATE
    assert waits(daemon, second) == [("approve", "approval", "o-4")]
    assert waits(daemon, first) == []
    # Two identical approvals without ids for two waiting runs are two events.
    third = start(daemon, "approve", "o-4")
    assert publish(daemon, "o-4", "ok").outcome == DELIVERED
    assert publish(daemon, "o-4", "ok").outcome == DELIVERED
    assert waits(daemon, second) == waits(daemon, third) == []
    # Nobody waits now: the first is parked, the identical second is its duplicate.
    assert publish(daemon, "o-4", "ok").outcome == PARKED
    assert publish(daemon, "o-4", "ok").outcome == DUPLICATE


async def test_the_wait_that_expires_soonest_gets_the_event(daemon: Daemon) -> None:
    daemon.define("slow", approval(timeout_ms=90_000))
    daemon.define("quick", approval(timeout_ms=30_000))
    slow = start(daemon, "slow", "o-5")
    quick = start(daemon, "quick", "o-5")
    publish(daemon, "o-5", 1)
    assert waits(daemon, quick) == []
    assert waits(daemon, slow) == [("approve", "approval", "o-5")]


@pytest.mark.parametrize(("on_timeout", "status"), [("fail", "failed"), ("continue", "running")])
async def test_a_wait_times_out_by_its_on_timeout(
    daemon: Daemon, on_timeout: str, status: str
) -> None:
    daemon.define("approve", approval(timeout_ms=1000, on_timeout=on_timeout))
    run_id = start(daemon, "approve", "o-6")
    daemon.later(999)
    assert waits(daemon, run_id) != []
    daemon.later(1)
    detail = daemon.detail(run_id)
    assert enums_pb2.RunStatus.Name(detail.run.status) == f"RUN_STATUS_{status.upper()}"
    assert list(detail.waits) == []
    if status == "failed":
        assert detail.run.error == "no approval event within timeout_ms 1000"
    else:
        (lease,) = await daemon.claim(run_id)
        assert lease.step_key == "ship"
    assert publish(daemon, "o-6", 1).outcome == PARKED


async def test_a_signal_routes_by_the_runs_own_wait(daemon: Daemon) -> None:
    daemon.define("approve", approval())
    run_id = start(daemon, "approve", "o-7")

    def signal(run: str, event: str = "approval") -> runs_pb2.EventReceipt:
        request = rpc.SignalRunRequest(project=PROJECT, run_id=run)
        request.signal.event = event
        request.signal.payload.CopyFrom(value_of("signalled"))
        return daemon.events.signal(request)

    with pytest.raises(Conflict) as caught:
        signal(run_id, "refund")
    assert (caught.value.field, caught.value.reason) == ("signal.event", "NO_OPEN_WAIT")
    with pytest.raises(NotFound):
        signal("no-such-run")
    assert signal(run_id).outcome == DELIVERED
    (lease,) = await daemon.claim(run_id)
    assert python_of(lease.input) == "signalled"
    with pytest.raises(Conflict):
        signal(run_id)


def test_an_event_and_a_wait_arriving_together_always_meet(daemon: Daemon) -> None:
    daemon = daemon
    daemon.define("lenient", approval(accept_parked=True))
    orders = [f"race-{n}" for n in range(12)]
    runs: dict[str, str] = {}
    failures: list[BaseException] = []
    for order in orders:
        barrier = threading.Barrier(2)

        def starter(order: str = order, barrier: threading.Barrier = barrier) -> None:
            try:
                barrier.wait()
                runs[order] = start(daemon, "lenient", order)
            except BaseException as error:  # surfaced by the assertion below
                failures.append(error)

        def publisher(order: str = order, barrier: threading.Barrier = barrier) -> None:
            try:
                barrier.wait()
                publish(daemon, order, order)
            except BaseException as error:  # surfaced by the assertion below
                failures.append(error)

        threads = [threading.Thread(target=starter), threading.Thread(target=publisher)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    assert failures == []
    # Whichever came first, every run got its event: none still waits.
    assert {order: waits(daemon, run_id) for order, run_id in runs.items()} == {
        order: [] for order in orders
    }
