"""The walk over every construct but events and subworkflows, on a real SQLite run store with a
manual clock: sleeps, fan-outs over branches and items with their outputs and failures, loops
with `until` and `max_iterations`, and cancel."""

from __future__ import annotations

from typing import Any

import pytest

from mcpd.model.v1 import enums_pb2, runs_pb2
from mcpd.orchestrator.v1 import orchestrator_service_pb2 as rpc
from mcpd.runtime.errors import Conflict
from mcpd.signals.messages import python_of, value_of
from services.orchestrator.tests.daemon import PROJECT, Daemon, statuses, timer_kinds

RETRYABLE = enums_pb2.STEP_ERROR_CLASS_RETRYABLE
FATAL = enums_pb2.STEP_ERROR_CLASS_FATAL


def attempts(detail: runs_pb2.RunDetail) -> list[tuple[str, str, str]]:
    """(step key, kind, status) of every attempt, in the order written."""
    return [
        (
            a.step_key,
            enums_pb2.StepKind.Name(a.kind).removeprefix("STEP_KIND_").lower(),
            enums_pb2.AttemptStatus.Name(a.status).removeprefix("ATTEMPT_STATUS_").lower(),
        )
        for a in detail.attempts
    ]


def run_status(daemon: Daemon, run_id: str) -> str:
    status = daemon.detail(run_id).run.status
    return enums_pb2.RunStatus.Name(status).removeprefix("RUN_STATUS_").lower()


def inputs(leases: list[runs_pb2.StepLease]) -> dict[str, Any]:
    return {lease.step_key: python_of(lease.input) for lease in leases}


async def test_a_sleep_holds_the_run_until_its_timer_fires(daemon: Daemon) -> None:
    body = {
        "steps": [{"id": "rest", "kind": "sleep", "duration_ms": 500}, {"id": "go", "kind": "task"}]
    }
    daemon.define("nap", body)
    run_id = daemon.start("nap")
    detail = daemon.detail(run_id)
    assert attempts(detail) == [("rest", "wait", "pending")]
    assert timer_kinds(detail) == ["TIMER_KIND_SLEEP"]
    assert await daemon.claim(run_id) == []
    daemon.later(499)
    assert await daemon.claim(run_id) == []
    daemon.later(1)
    (lease,) = await daemon.claim(run_id)
    assert lease.step_key == "go"
    assert attempts(daemon.detail(run_id))[0] == ("rest", "wait", "succeeded")


@pytest.mark.parametrize(
    ("until", "expected"),
    [
        ("${input.at}", "claimable"),
        ("2020-01-01T00:00:00Z", "claimable"),
        ("next tuesday", "failed"),
    ],
)
async def test_sleep_until_waits_for_its_instant(daemon: Daemon, until: str, expected: str) -> None:
    body = {
        "steps": [
            {"id": "wake", "kind": "sleep_until", "until": until},
            {"id": "go", "kind": "task"},
        ]
    }
    daemon.define("alarm", body)
    run = daemon.runs.start(
        runs_pb2.StartRunRequest(
            project=PROJECT,
            definition_id="alarm",
            input=value_of({"at": "2026-01-01T00:00:02+00:00"}),
        )
    )
    if until.startswith("${"):
        # The manual clock starts at 2026-01-01T00:00:00Z: two seconds to go.
        assert await daemon.claim(run.run_id) == []
        daemon.later(2000)
    if expected == "claimable":
        (lease,) = await daemon.claim(run.run_id)
        assert lease.step_key == "go"
    else:
        detail = daemon.detail(run.run_id)
        assert run_status(daemon, run.run_id) == "failed"
        assert "RFC 3339" in detail.run.error


async def test_parallel_branches_are_offered_together_and_gathered_by_id(daemon: Daemon) -> None:
    body = {
        "steps": [
            {
                "id": "fan",
                "kind": "parallel",
                "branches": [
                    {"id": "left", "input": {"side": "${input.l}"}},
                    {"id": "right", "kind": "agent"},
                ],
            },
            {"id": "join", "kind": "task", "input": "${steps.fan.output}"},
        ]
    }
    daemon.define("fan", body)
    run = daemon.runs.start(
        runs_pb2.StartRunRequest(project=PROJECT, definition_id="fan", input=value_of({"l": "L"}))
    )
    leases = await daemon.claim(run.run_id)
    assert inputs(leases) == {"fan/left": {"side": "L"}, "fan/right": {"l": "L"}}
    kinds = {lease.step_key: lease.kind for lease in leases}
    assert kinds == {"fan/left": enums_pb2.STEP_KIND_TASK, "fan/right": enums_pb2.STEP_KIND_AGENT}
    by_key = {lease.step_key: lease for lease in leases}
    daemon.complete(by_key["fan/right"].lease_id, "r")
    assert await daemon.claim(run.run_id) == []
    ack = daemon.complete(by_key["fan/left"].lease_id, "l")
    assert ack.next == "claim"
    (join,) = await daemon.claim(run.run_id)
    assert python_of(join.input) == {"left": "l", "right": "r"}
    assert python_of(join.prior)["fan"] == {
        "status": "succeeded",
        "output": {"left": "l", "right": "r"},
    }


async def test_a_failed_branch_fails_the_run_at_once_and_its_live_sibling(daemon: Daemon) -> None:
    body = {"steps": [{"id": "fan", "kind": "parallel", "branches": [{"id": "a"}, {"id": "b"}]}]}
    daemon.define("fan", body)
    run_id = daemon.start("fan")
    leases = {lease.step_key: lease for lease in await daemon.claim(run_id)}
    ack = daemon.fail(leases["fan/a"].lease_id, FATAL, "a broke")
    assert ack.run_status == enums_pb2.RUN_STATUS_FAILED
    detail = daemon.detail(run_id)
    assert detail.run.error == "a broke"
    assert attempts(detail) == [
        ("fan", "wait", "failed"),
        ("fan/a", "task", "failed"),
        ("fan/b", "task", "failed"),
    ]
    with pytest.raises(Conflict) as caught:
        daemon.complete(leases["fan/b"].lease_id, "late")
    assert caught.value.reason == "RUN_TERMINAL"


async def test_on_error_continue_waits_for_every_branch_and_keeps_null_for_the_failed(
    daemon: Daemon,
) -> None:
    body = {
        "steps": [
            {
                "id": "fan",
                "kind": "parallel",
                "on_error": "continue",
                "branches": [{"id": "a"}, {"id": "b"}],
            },
            {
                "id": "after",
                "kind": "task",
                "input": {"status": "${steps.fan.status}", "out": "${steps.fan.output}"},
            },
        ]
    }
    daemon.define("fan", body)
    run_id = daemon.start("fan")
    leases = {lease.step_key: lease for lease in await daemon.claim(run_id)}
    daemon.fail(leases["fan/a"].lease_id, FATAL, "a broke")
    assert run_status(daemon, run_id) == "running"
    assert await daemon.claim(run_id) == []
    daemon.complete(leases["fan/b"].lease_id, {"ok": True})
    (after,) = await daemon.claim(run_id)
    assert python_of(after.input) == {"status": "failed", "out": {"a": None, "b": {"ok": True}}}


async def test_foreach_offers_items_within_its_concurrency_in_item_order(daemon: Daemon) -> None:
    body = {
        "steps": [
            {
                "id": "each",
                "kind": "foreach",
                "items": "${input.tickets}",
                "concurrency": 2,
                "body": {"id": "triage", "input": {"ticket": "${item}", "at": "${index}"}},
            }
        ],
        "output": "${steps.each.output}",
    }
    daemon.define("each", body)
    run = daemon.runs.start(
        runs_pb2.StartRunRequest(
            project=PROJECT, definition_id="each", input=value_of({"tickets": ["t0", "t1", "t2"]})
        )
    )
    first = await daemon.claim(run.run_id)
    assert inputs(first) == {
        "each[0]": {"ticket": "t0", "at": 0},
        "each[1]": {"ticket": "t1", "at": 1},
    }
    by_key = {lease.step_key: lease for lease in first}
    daemon.complete(by_key["each[1]"].lease_id, "one")
    (third,) = await daemon.claim(run.run_id)
    assert inputs([third]) == {"each[2]": {"ticket": "t2", "at": 2}}
    daemon.complete(third.lease_id, "two")
    daemon.complete(by_key["each[0]"].lease_id, "zero")
    detail = daemon.detail(run.run_id)
    assert run_status(daemon, run.run_id) == "succeeded"
    assert python_of(detail.run.output) == ["zero", "one", "two"]
    # The items are rendered once, when the node starts, and kept on its row.
    assert python_of(detail.attempts[0].input) == ["t0", "t1", "t2"]


async def test_a_retried_item_renders_its_own_item_again(daemon: Daemon) -> None:
    body = {
        "steps": [
            {
                "id": "each",
                "kind": "foreach",
                "items": "${input.xs}",
                "body": {
                    "id": "work",
                    "input": "${item}",
                    "retry": {"attempts": 2, "backoff": "fixed", "initial_ms": 10},
                },
            }
        ]
    }
    daemon.define("each", body)
    run = daemon.runs.start(
        runs_pb2.StartRunRequest(
            project=PROJECT, definition_id="each", input=value_of({"xs": [7, 8]})
        )
    )
    (first,) = await daemon.claim(run.run_id)
    daemon.fail(first.lease_id, RETRYABLE)
    daemon.later(10)
    (again,) = await daemon.claim(run.run_id)
    assert (again.step_key, again.attempt, python_of(again.input)) == ("each[0]", 2, 7)


@pytest.mark.parametrize(("items", "status"), [("${input.none}", "failed"), ([], "succeeded")])
async def test_foreach_over_nothing_or_not_an_array(
    daemon: Daemon, items: Any, status: str
) -> None:
    daemon.define(
        "each", {"steps": [{"id": "each", "kind": "foreach", "items": items, "body": {"id": "b"}}]}
    )
    run_id = daemon.start("each")
    assert run_status(daemon, run_id) == status
    if status == "failed":
        assert "not an array" in daemon.detail(run_id).run.error


async def test_a_loop_runs_its_body_until_the_guard_holds(daemon: Daemon) -> None:
    body = {
        "steps": [
            {
                "id": "poll",
                "kind": "loop",
                "max_iterations": 10,
                "until": {"gte": ["${steps.check.output.n}", 3]},
                "body": {
                    "id": "check",
                    "input": {"i": "${iteration}", "last": "${steps.check.output.n}"},
                },
            }
        ],
        "output": "${steps.poll.output}",
    }
    daemon.define("poll", body)
    run_id = daemon.start("poll")
    seen = []
    for n in range(1, 4):
        (lease,) = await daemon.claim(run_id)
        seen.append((lease.step_key, python_of(lease.input)))
        daemon.complete(lease.lease_id, {"n": n})
    assert seen == [
        ("poll[0]/check", {"i": 0, "last": None}),
        ("poll[1]/check", {"i": 1, "last": 1}),
        ("poll[2]/check", {"i": 2, "last": 2}),
    ]
    assert run_status(daemon, run_id) == "succeeded"
    assert python_of(daemon.detail(run_id).run.output) == {"n": 3}


async def test_a_loop_stops_at_max_iterations(daemon: Daemon) -> None:
    body = {
        "steps": [
            {
                "id": "poll",
                "kind": "loop",
                "max_iterations": 2,
                "until": "${input.never}",
                "body": {"id": "c"},
            }
        ]
    }
    daemon.define("poll", body)
    run_id = daemon.start("poll")
    for _ in range(2):
        (lease,) = await daemon.claim(run_id)
        daemon.complete(lease.lease_id, "x")
    assert run_status(daemon, run_id) == "succeeded"
    assert [key for key, _, _ in attempts(daemon.detail(run_id))] == [
        "poll",
        "poll[0]/c",
        "poll[1]/c",
    ]


async def test_cancel_ends_the_run_and_fences_its_lease(daemon: Daemon) -> None:
    body = {"limits": {"run_timeout_ms": 60000}, "steps": [{"id": "a", "kind": "task"}]}
    daemon.define("one", body)
    run_id = daemon.start("one")
    (lease,) = await daemon.claim(run_id)
    cancelled = daemon.runs.cancel(rpc.CancelRunRequest(project=PROJECT, run_id=run_id))
    assert cancelled.status == enums_pb2.RUN_STATUS_CANCELLED
    assert not cancelled.HasField("deadline_at")
    detail = daemon.detail(run_id)
    assert statuses(detail) == [(1, "ATTEMPT_STATUS_FAILED")]
    assert list(detail.timers) == []
    events = daemon.runs.events(rpc.ListRunEventsRequest(project=PROJECT, run_id=run_id)).events
    assert python_of(events[-1].payload) == {"status": "cancelled"}
    with pytest.raises(Conflict) as caught:
        daemon.leases.heartbeat(daemon.lease(lease.lease_id))
    assert caught.value.reason == "RUN_TERMINAL"
    again = daemon.runs.cancel(rpc.CancelRunRequest(project=PROJECT, run_id=run_id))
    assert again.status == enums_pb2.RUN_STATUS_CANCELLED
    assert len(
        daemon.runs.events(rpc.ListRunEventsRequest(project=PROJECT, run_id=run_id)).events
    ) == len(events)
