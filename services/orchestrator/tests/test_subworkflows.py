"""Subworkflows on a real SQLite run store with a manual clock: a child run started with the
parent's context, its end ending the parent's step, a cancel walking down the tree and a
cancelled child failing its parent, and the step ceiling counted across the whole tree."""

from __future__ import annotations

from typing import Any

import pytest

from mcpd.model.v1 import enums_pb2, runs_pb2
from mcpd.orchestrator.v1 import orchestrator_service_pb2 as rpc
from mcpd.runtime.errors import Conflict
from mcpd.signals.messages import python_of, value_of
from services.orchestrator.tests.daemon import PROJECT, Daemon

FATAL = enums_pb2.STEP_ERROR_CLASS_FATAL
CHILD = {
    "input_schema": {"type": "object", "required": ["n"]},
    "steps": [{"id": "work", "kind": "task", "input": "${input.n}"}],
    "output": {"doubled": "${steps.work.output}"},
}


def parent(**node: Any) -> dict[str, Any]:
    child = {"id": "sub", "kind": "subworkflow", "definition_id": "child", "input": {"n": 21}}
    return {
        "steps": [
            {**child, **node},
            {"id": "after", "kind": "task", "input": "${steps.sub.output}"},
        ]
    }


def status(daemon: Daemon, run_id: str) -> str:
    value = daemon.detail(run_id).run.status
    return enums_pb2.RunStatus.Name(value).removeprefix("RUN_STATUS_").lower()


def children(daemon: Daemon, run_id: str) -> list[runs_pb2.Run]:
    listed = daemon.runs.list(rpc.ListRunsRequest(project=PROJECT, definition_id="child"))
    return [run for run in listed.runs if run.parent_run_id == run_id]


def start(daemon: Daemon, name: str, **correlation: str) -> str:
    request = runs_pb2.StartRunRequest(project=PROJECT, definition_id=name)
    for field, value in correlation.items():
        setattr(request.correlation, field, value)
    return daemon.runs.start(request).run_id


async def test_a_child_runs_with_the_parents_context_and_its_output_ends_the_step(
    daemon: Daemon,
) -> None:
    daemon.define("child", CHILD)
    daemon.define("parent", parent())
    run_id = start(daemon, "parent", session_id="s-1", user_id="u-1")
    top = daemon.detail(run_id).run
    (child,) = children(daemon, run_id)
    assert (child.root_run_id, child.parent_step_key, child.depth) == (run_id, "sub", 1)
    assert child.trace_id == top.trace_id
    assert (child.correlation.session_id, child.correlation.user_id) == ("s-1", "u-1")
    assert child.correlation.run_id == child.run_id
    assert python_of(child.input) == {"n": 21}
    (lease,) = await daemon.claim(None)
    assert (lease.run_id, lease.step_key, python_of(lease.input)) == (child.run_id, "work", 21)
    daemon.complete(lease.lease_id, 42)
    assert status(daemon, child.run_id) == "succeeded"
    (after,) = await daemon.claim(run_id)
    assert python_of(after.input) == {"doubled": 42}
    sub = next(a for a in daemon.detail(run_id).attempts if a.step_key == "sub")
    assert sub.kind == enums_pb2.STEP_KIND_WAIT
    assert python_of(sub.output) == {"doubled": 42}


async def test_a_failed_child_fails_its_step_and_the_parent(daemon: Daemon) -> None:
    daemon.define("child", CHILD)
    daemon.define("parent", parent())
    run_id = start(daemon, "parent")
    (lease,) = await daemon.claim(None)
    daemon.fail(lease.lease_id, FATAL, "cannot double")
    assert status(daemon, run_id) == "failed"
    assert daemon.detail(run_id).run.error == "cannot double"


async def test_a_cancel_walks_down_the_tree(daemon: Daemon) -> None:
    daemon.define("child", CHILD)
    daemon.define("parent", parent())
    run_id = start(daemon, "parent")
    (lease,) = await daemon.claim(None)
    daemon.runs.cancel(rpc.CancelRunRequest(project=PROJECT, run_id=run_id))
    (child,) = children(daemon, run_id)
    assert status(daemon, child.run_id) == "cancelled"
    assert list(daemon.detail(child.run_id).timers) == []
    with pytest.raises(Conflict) as caught:
        daemon.complete(lease.lease_id, 1)
    assert caught.value.reason == "RUN_TERMINAL"


async def test_a_cancelled_child_fails_its_parent(daemon: Daemon) -> None:
    daemon.define("child", CHILD)
    daemon.define("parent", parent())
    run_id = start(daemon, "parent")
    (child,) = children(daemon, run_id)
    daemon.runs.cancel(rpc.CancelRunRequest(project=PROJECT, run_id=child.run_id))
    assert status(daemon, run_id) == "failed"
    assert child.run_id in daemon.detail(run_id).run.error


async def test_the_step_ceiling_counts_the_whole_tree(daemon: Daemon) -> None:
    daemon.define(
        "child",
        {"steps": [{"id": "a", "kind": "task"}, {"id": "b", "kind": "task"}]},
    )
    daemon.define(
        "parent",
        {
            "limits": {"max_steps": 2},
            "steps": [
                {"id": "first", "kind": "task"},
                {"id": "sub", "kind": "subworkflow", "definition_id": "child"},
            ],
        },
    )
    run_id = start(daemon, "parent")
    (first,) = await daemon.claim(run_id)
    daemon.complete(first.lease_id, 1)
    (child,) = children(daemon, run_id)
    (a,) = await daemon.claim(child.run_id)
    daemon.complete(a.lease_id, 1)
    assert await daemon.claim(child.run_id) == []
    assert status(daemon, child.run_id) == "failed"
    assert daemon.detail(child.run_id).run.error.startswith("max_steps spent: 2 of 2")
    assert status(daemon, run_id) == "failed"


@pytest.mark.parametrize(
    ("node", "message"),
    [
        ({"definition_id": "nowhere"}, "'nowhere' is not stored"),
        ({"input": {"m": 1}}, "input_schema"),
    ],
)
async def test_a_child_that_cannot_start_fails_the_step(
    daemon: Daemon, node: dict[str, Any], message: str
) -> None:
    daemon.define("child", CHILD)
    daemon.define("parent", parent(**node))
    run_id = start(daemon, "parent")
    assert status(daemon, run_id) == "failed"
    assert message in daemon.detail(run_id).run.error
    assert children(daemon, run_id) == []


async def test_a_child_that_ends_at_once_moves_the_parent_in_the_same_start(
    daemon: Daemon,
) -> None:
    daemon.define("child", {"steps": [{"id": "skip", "kind": "task", "when": "${input.go}"}]})
    daemon.define("parent", parent(input={"go": False}))
    request = runs_pb2.StartRunRequest(project=PROJECT, definition_id="parent")
    request.input.CopyFrom(value_of(None))
    run_id = daemon.runs.start(request).run_id
    (child,) = children(daemon, run_id)
    assert status(daemon, child.run_id) == "succeeded"
    (after,) = await daemon.claim(run_id)
    assert after.step_key == "after"
