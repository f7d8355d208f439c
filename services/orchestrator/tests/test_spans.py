"""The spans the orchestrator queues for runs and attempts, on a real SQLite run store: one per
ended attempt under the run's span, the run's own when it ends (a child's under its parent's
subworkflow step), each with the run's trace and correlation; erasing a run drops its queued
spans."""

from __future__ import annotations

from typing import Any

from mcpd.model.v1 import runs_pb2
from services.orchestrator.spans import root_span_id
from services.orchestrator.tests.daemon import PROJECT, Daemon


def queued(daemon: Daemon) -> list[dict[str, Any]]:
    return [span for _, span in daemon.store.queued_spans(limit=100)]


async def test_an_ended_run_has_a_span_per_attempt_under_its_own(daemon: Daemon) -> None:
    daemon.define("two", {"steps": [{"id": "a", "kind": "task"}, {"id": "b", "kind": "agent"}]})
    request = runs_pb2.StartRunRequest(project=PROJECT, definition_id="two")
    request.correlation.session_id = "s-9"
    run = daemon.runs.start(request)
    assert queued(daemon) == []
    for _ in range(2):
        (lease,) = await daemon.claim(run.run_id)
        assert lease.parent_span_id == root_span_id(run.run_id)
        daemon.complete(lease.lease_id, "ok")
    spans = queued(daemon)
    assert [(s["name"], s["kind"], s["status"]) for s in spans] == [
        ("a", "workflow_step", "ok"),
        ("b", "agent_run", "ok"),
        ("two", "workflow_run", "ok"),
    ]
    top = spans[-1]
    assert top["span_id"] == root_span_id(run.run_id)
    assert top["is_root"] is True
    assert "parent_span_id" not in top
    attempts = daemon.detail(run.run_id).attempts
    assert [s["span_id"] for s in spans[:2]] == [a.span_id for a in attempts]
    for span in spans:
        assert span["trace_id"] == run.trace_id
        assert span["correlation"] == {
            "project": PROJECT,
            "run_id": run.run_id,
            "session_id": "s-9",
        }
    assert {s.get("parent_span_id") for s in spans[:2]} == {root_span_id(run.run_id)}


async def test_a_child_runs_span_hangs_under_its_parents_step(daemon: Daemon) -> None:
    daemon.define("child", {"steps": [{"id": "work", "kind": "task"}]})
    daemon.define(
        "parent", {"steps": [{"id": "sub", "kind": "subworkflow", "definition_id": "child"}]}
    )
    run_id = daemon.start("parent")
    (lease,) = await daemon.claim(None)
    daemon.fail(lease.lease_id, 2, "broken")
    by_name = {span["name"]: span for span in queued(daemon)}
    sub = next(a for a in daemon.detail(run_id).attempts if a.step_key == "sub")
    assert by_name["child"]["parent_span_id"] == sub.span_id
    assert by_name["child"]["status"] == "error"
    assert by_name["sub"]["kind"] == "workflow_step"
    assert by_name["parent"]["error"] == {"message": "broken"}


async def test_erasing_a_run_drops_its_queued_spans(daemon: Daemon) -> None:
    daemon.define("one", {"steps": [{"id": "a", "kind": "task"}]})
    request = runs_pb2.StartRunRequest(project=PROJECT, definition_id="one")
    request.correlation.user_id = "u-gone"
    run = daemon.runs.start(request)
    (lease,) = await daemon.claim(run.run_id)
    daemon.complete(lease.lease_id, 1)
    assert len(queued(daemon)) == 2
    erased = daemon.store.erase_subject(PROJECT, ["u-gone"])
    assert erased.runs_erased == 1
    assert queued(daemon) == []
