"""Workers moving runs against a real `mcpd serve` on SQLite and PostgreSQL, over REST and gRPC:
claims hand out the pending step with its rendered input, prior and trace ids; complete merges
state and walks the graph (guards, the output template) to the end; fail retries after the
backoff and then ends the run; every conflict answers the StepConflict; a claim held open is
woken when work arrives; a spent step ceiling ends the run."""

from __future__ import annotations

import hashlib
import threading
import time
from typing import Any, cast

import grpc
import httpx
import pytest

from mcpd.model.v1 import enums_pb2, runs_pb2
from mcpd.orchestrator.v1 import orchestrator_service_pb2, orchestrator_service_pb2_grpc
from mcpd.runtime.errors_grpc import rpc_failure_from
from mcpd.testing.daemon import DaemonProcess
from tests.e2e.security_fixture import bearer, bearer_metadata

pytestmark = pytest.mark.e2e

DEFINITIONS: dict[str, dict[str, Any]] = {
    "pipeline": {
        "steps": [
            {"id": "classify", "kind": "task", "input": {"text": "${input.ticket}"}},
            {
                "id": "reply",
                "kind": "agent",
                "when": {"eq": ["${steps.classify.output.kind}", "refund"]},
                "input": {"kind": "${steps.classify.output.kind}", "seen": "${state.a}"},
            },
            {"id": "escalate", "kind": "task", "when": "${steps.classify.output.urgent}"},
        ],
        "output": {"kind": "${steps.classify.output.kind}", "reply": "${steps.reply.output}"},
    },
    "flaky": {
        "steps": [
            {
                "id": "call",
                "kind": "task",
                "retry": {"attempts": 2, "backoff": "fixed", "initial_ms": 1},
            }
        ]
    },
    "tolerant": {
        "steps": [
            {"id": "try_it", "kind": "task", "on_error": "continue"},
            {"id": "after", "kind": "task", "input": "${steps.try_it.status}"},
        ]
    },
    "charge": {"steps": [{"id": "pay", "kind": "task", "effect": "at_most_once"}]},
    "fanout": {
        "steps": [
            {"id": "fan", "kind": "parallel", "branches": [{"id": "a"}, {"id": "b"}]},
            {
                "id": "each",
                "kind": "foreach",
                "items": "${steps.fan.output.a}",
                "concurrency": 2,
                "body": {"id": "item", "input": "${item}"},
            },
        ],
        "output": "${steps.each.output}",
    },
    "approval": {
        "steps": [
            {"id": "approve", "kind": "wait_event", "event": "approved", "key": "${input.order}"},
            {"id": "ship", "kind": "task", "input": "${steps.approve.output}"},
        ]
    },
    "capped": {
        "limits": {"max_steps": 1},
        "steps": [{"id": "one", "kind": "task"}, {"id": "two", "kind": "task"}],
    },
}


@pytest.fixture(scope="module")
def defined(orchestrator_daemon: DaemonProcess) -> DaemonProcess:
    with httpx.Client(base_url=f"{orchestrator_daemon.http_url}/v1/api", timeout=20) as http:
        registration = {
            "worker_id": "setup",
            "definitions": [{"id": name, "body": body} for name, body in DEFINITIONS.items()],
        }
        answer = http.post(
            "/workers/register", json=registration, headers=bearer("alpha", "worker")
        )
        assert answer.status_code == 200, answer.text
    return orchestrator_daemon


@pytest.fixture
def http(defined: DaemonProcess, orchestrator_api: httpx.Client) -> httpx.Client:
    return orchestrator_api


def _start(http: httpx.Client, definition_id: str, run_input: Any = None) -> dict[str, Any]:
    body: dict[str, Any] = {"definition_id": definition_id}
    if run_input is not None:
        body["input"] = run_input
    answer = http.post("/runs", json=body, headers=bearer("alpha", "execute"))
    assert answer.status_code == 200, answer.text
    return cast(dict[str, Any], answer.json())


def _claim(
    http: httpx.Client, run_id: str | None, *, wait_ms: int = 0, project: str = "alpha"
) -> list[dict[str, Any]]:
    body: dict[str, Any] = {"worker_id": "w-1", "max": 10, "wait_ms": wait_ms}
    if run_id is not None:
        body["run_id"] = run_id
    answer = http.post("/workers/claim", json=body, headers=bearer(project, "worker"))
    assert answer.status_code == 200, answer.text
    return cast(list[dict[str, Any]], answer.json().get("leases", []))


def _lease_call(
    http: httpx.Client, lease_id: str, action: str, body: Any = None, project: str = "alpha"
) -> httpx.Response:
    return http.post(
        f"/leases/{lease_id}/{action}",
        json=body if body is not None else {},
        headers=bearer(project, "worker"),
    )


def _run(http: httpx.Client, run_id: str) -> dict[str, Any]:
    answer = http.get(f"/runs/{run_id}", headers=bearer("alpha", "read"))
    assert answer.status_code == 200, answer.text
    return cast(dict[str, Any], answer.json())


def _events(http: httpx.Client, run_id: str) -> list[dict[str, Any]]:
    answer = http.get(f"/runs/{run_id}/events", headers=bearer("alpha", "read"))
    return cast(list[dict[str, Any]], answer.json()["events"])


def test_a_run_walks_its_steps_to_the_end(http: httpx.Client) -> None:
    run = _start(http, "pipeline", {"ticket": "where is my refund"})
    run_id = run["run_id"]
    (lease,) = _claim(http, run_id)
    assert (lease["step_key"], lease["attempt"], lease["kind"], lease["effect"]) == (
        "classify",
        1,
        "task",
        "at_least_once",
    )
    assert lease["input"] == {"text": "where is my refund"}
    assert lease["prior"] == {}
    assert lease["idempotency_key"] == hashlib.sha256(f"{run_id}:classify".encode()).hexdigest()
    assert (lease["run_id"], lease["project"], lease["trace_id"]) == (
        run_id,
        "alpha",
        run["trace_id"],
    )
    assert lease["correlation"] == {"project": "alpha", "run_id": run_id}
    assert len(lease["span_id"]) == len(lease["parent_span_id"]) == 16
    assert _claim(http, run_id) == []

    beat = _lease_call(http, lease["lease_id"], "heartbeat")
    assert beat.status_code == 200, beat.text
    assert beat.json()["reclaimed"] is False
    assert beat.json()["expires_at"] >= lease["expires_at"]

    done = _lease_call(
        http,
        lease["lease_id"],
        "complete",
        {"output": {"kind": "refund", "urgent": False}, "state": {"a": 1}},
    )
    assert done.status_code == 200, done.text
    assert done.json() == {"run_status": "running", "next": "claim"}
    again = _lease_call(http, lease["lease_id"], "complete", {"output": {"kind": "other"}})
    assert again.status_code == 409
    assert again.json() == {
        "error": "conflict",
        "reason": "already_applied",
        "message": again.json()["message"],
        "attempt": 1,
        "attempt_status": "succeeded",
        "run_status": "running",
    }

    (reply,) = _claim(http, run_id)
    assert (reply["step_key"], reply["kind"]) == ("reply", "agent")
    assert reply["input"] == {"kind": "refund", "seen": 1}
    assert reply["prior"] == {
        "classify": {"status": "succeeded", "output": {"kind": "refund", "urgent": False}}
    }
    assert reply["state"] == {"a": 1}
    last = _lease_call(http, reply["lease_id"], "complete", {"output": "sent", "state": {"b": 2}})
    assert last.json() == {"run_status": "succeeded", "next": "idle"}

    detail = _run(http, run_id)
    ended = detail["run"]
    assert ended["status"] == "succeeded"
    assert ended["output"] == {"kind": "refund", "reply": "sent"}
    assert ended["state"] == {"a": 1, "b": 2}
    assert ended["steps_used"] == 2
    assert ended["cursor"] == {"index": 3, "construct": "end"}
    assert "ended_at" in ended
    assert detail["timers"] == []
    assert [(a["step_key"], a["status"]) for a in detail["attempts"]] == [
        ("classify", "succeeded"),
        ("reply", "succeeded"),
        ("escalate", "skipped"),
    ]
    events = _events(http, run_id)
    assert [e["seq"] for e in events] == list(range(len(events)))
    assert [(e["kind"], e.get("payload")) for e in events] == [
        ("run_started", {"definition_id": "pipeline", "definition_version": 1}),
        ("run_cursor", {"index": 0, "construct": "task", "step_key": "classify"}),
        ("step_leased", {"step_key": "classify", "attempt": 1, "worker_id": "w-1"}),
        ("step_finished", {"step_key": "classify", "attempt": 1}),
        ("run_cursor", {"index": 1, "construct": "agent", "step_key": "reply"}),
        ("step_leased", {"step_key": "reply", "attempt": 1, "worker_id": "w-1"}),
        ("step_finished", {"step_key": "reply", "attempt": 1}),
        ("run_cursor", {"index": 2, "construct": "task", "step_key": "escalate"}),
        ("step_skipped", {"step_key": "escalate"}),
        ("run_cursor", {"index": 3, "construct": "end"}),
        ("run_ended", {"status": "succeeded"}),
    ]
    # The lease's own complete landed before the run ended: that is what it is told.
    late = _lease_call(http, reply["lease_id"], "heartbeat")
    assert late.status_code == 409
    assert (late.json()["reason"], late.json()["run_status"]) == ("already_applied", "succeeded")


def test_a_retryable_failure_is_retried_then_a_fatal_one_ends_the_run(http: httpx.Client) -> None:
    run_id = _start(http, "flaky")["run_id"]
    (first,) = _claim(http, run_id)
    failed = _lease_call(
        http, first["lease_id"], "fail", {"error": {"class": "retryable", "message": "busy"}}
    )
    assert failed.status_code == 200, failed.text
    assert failed.json() == {"run_status": "running", "next": "idle", "attempts_left": 1}
    # The retry timer fires after the 1 ms backoff and wakes the held claim.
    (second,) = _claim(http, run_id, wait_ms=5000)
    assert (second["step_key"], second["attempt"]) == ("call", 2)
    stale = _lease_call(http, first["lease_id"], "heartbeat")
    assert stale.status_code == 409
    assert stale.json()["reason"] == "already_applied"
    fatal = _lease_call(
        http,
        second["lease_id"],
        "fail",
        {"error": {"class": "fatal", "message": "card declined", "details": {"code": 51}}},
    )
    assert fatal.json() == {"run_status": "failed", "next": "idle", "attempts_left": 0}
    detail = _run(http, run_id)
    assert detail["run"]["status"] == "failed"
    assert detail["run"]["error"] == "card declined"
    assert "deadline_at" not in detail["run"]
    assert detail["timers"] == []
    assert [(a["attempt"], a["status"], a["attempts_left"]) for a in detail["attempts"]] == [
        (1, "failed", 1),
        (2, "failed", 0),
    ]
    assert detail["attempts"][1]["error"] == {
        "class": "fatal",
        "message": "card declined",
        "details": {"code": 51},
    }
    kinds = [e["kind"] for e in _events(http, run_id)]
    assert kinds[-2:] == ["step_failed", "run_ended"]
    ended = _lease_call(http, second["lease_id"], "complete", {"output": 1})
    assert ended.json()["reason"] == "already_applied"


def test_on_error_continue_moves_on_and_later_steps_read_the_failure(http: httpx.Client) -> None:
    run_id = _start(http, "tolerant")["run_id"]
    (lease,) = _claim(http, run_id)
    _lease_call(
        http, lease["lease_id"], "fail", {"error": {"class": "invalid_input", "message": "x"}}
    )
    (after,) = _claim(http, run_id)
    assert after["step_key"] == "after"
    assert after["input"] == "failed"
    assert after["prior"]["try_it"] == {
        "status": "failed",
        "error": {"class": "invalid_input", "message": "x"},
    }
    cause = http.get(f"/runs/{run_id}/steps/after/cause", headers=bearer("alpha", "read"))
    assert cause.status_code == 200, cause.text
    assert cause.json() == {
        "run_id": run_id,
        "step_key": "after",
        "status": "leased",
        "attempts": 1,
        "chain": [
            {
                "step_key": "try_it",
                "status": "failed",
                "attempts": 1,
                "template_path": "steps.try_it.status",
                "consumed_by": "after",
                "depth": 1,
                "silent_producer": False,
            }
        ],
        "truncated": False,
    }


def test_an_at_most_once_step_must_post_started_first(http: httpx.Client) -> None:
    run_id = _start(http, "charge")["run_id"]
    (lease,) = _claim(http, run_id)
    assert lease["effect"] == "at_most_once"
    early = _lease_call(http, lease["lease_id"], "complete", {"output": "paid"})
    assert early.status_code == 409
    assert (early.json()["reason"], early.json()["attempt_status"]) == ("not_started", "leased")
    started = _lease_call(http, lease["lease_id"], "started")
    assert started.status_code == 200, started.text
    assert _run(http, run_id)["attempts"][0]["status"] == "started"
    assert "started_at" in _run(http, run_id)["attempts"][0]
    done = _lease_call(http, lease["lease_id"], "complete", {"output": "paid"})
    assert done.json()["run_status"] == "succeeded"


def test_an_unservable_step_returns_to_pending_for_another_worker(http: httpx.Client) -> None:
    run_id = _start(http, "flaky")["run_id"]
    (lease,) = _claim(http, run_id)
    answer = _lease_call(
        http, lease["lease_id"], "fail", {"error": {"class": "unservable", "message": "no handler"}}
    )
    assert answer.json() == {"run_status": "running", "next": "idle", "attempts_left": 1}
    detail = _run(http, run_id)
    (attempt,) = detail["attempts"]
    assert (attempt["attempt"], attempt["status"]) == (1, "pending")
    assert "lease_owner" not in attempt
    # Held back one lease length, budget unspent: not offerable yet.
    assert [(t["kind"], t["step_key"]) for t in detail["timers"]] == [("retry", "call")]
    assert _claim(http, run_id) == []
    fenced = _lease_call(http, lease["lease_id"], "heartbeat")
    assert fenced.json()["reason"] == "already_applied"


def test_a_spent_step_ceiling_ends_the_run_at_the_next_claim(http: httpx.Client) -> None:
    run_id = _start(http, "capped")["run_id"]
    (lease,) = _claim(http, run_id)
    _lease_call(http, lease["lease_id"], "complete", {"output": 1})
    assert _claim(http, run_id) == []
    run = _run(http, run_id)["run"]
    assert run["status"] == "failed"
    assert run["error"].startswith("max_steps spent")
    detail = _run(http, run_id)
    assert [a["status"] for a in detail["attempts"]] == ["succeeded", "failed"]


def test_a_held_claim_is_woken_when_work_arrives(http: httpx.Client) -> None:
    answers: list[list[dict[str, Any]]] = []
    began = time.monotonic()

    def hold() -> None:
        with httpx.Client(base_url=str(http.base_url), timeout=30) as client:
            answers.append(_claim(client, None, wait_ms=20_000, project="beta"))

    holder = threading.Thread(target=hold)
    holder.start()
    time.sleep(0.5)
    registration = {
        "worker_id": "w-beta",
        "definitions": [{"id": "one", "body": DEFINITIONS["charge"]}],
    }
    http.post("/workers/register", json=registration, headers=bearer("beta", "worker"))
    started = http.post("/runs", json={"definition_id": "one"}, headers=bearer("beta", "execute"))
    holder.join(timeout=25)
    assert [[lease["run_id"] for lease in found] for found in answers] == [
        [started.json()["run_id"]]
    ]
    # Answered on arrival, long before the 20 s the claim could have waited.
    assert time.monotonic() - began < 10


def test_lease_calls_stay_in_the_project_and_need_a_lease(http: httpx.Client) -> None:
    run_id = _start(http, "charge")["run_id"]
    (lease,) = _claim(http, run_id)
    foreign = _lease_call(http, lease["lease_id"], "heartbeat", project="beta")
    assert foreign.status_code == 404
    assert foreign.json()["error"]["field"] == "lease_id"
    unknown = _lease_call(http, "no-such-lease", "started")
    assert unknown.status_code == 404
    bad = _lease_call(http, lease["lease_id"], "complete", {"state": [1, 2]})
    assert bad.status_code == 400
    assert bad.json()["error"]["field"] == "result.state"
    no_worker = http.post("/workers/claim", json={"max": 1}, headers=bearer("alpha", "worker"))
    assert no_worker.json()["error"]["field"] == "worker_id"
    too_many = http.post(
        "/workers/claim", json={"worker_id": "w", "max": 101}, headers=bearer("alpha", "worker")
    )
    assert too_many.json()["error"]["field"] == "max"
    reader = http.post(
        "/workers/claim", json={"worker_id": "w", "max": 1}, headers=bearer("alpha", "read")
    )
    assert reader.status_code == 403


def test_a_conflict_over_grpc_carries_the_step_conflict(defined: DaemonProcess) -> None:
    with grpc.insecure_channel(defined.grpc_addr) as channel:
        stub = orchestrator_service_pb2_grpc.OrchestratorServiceStub(channel)
        execute, worker = bearer_metadata("alpha", "execute"), bearer_metadata("alpha", "worker")
        run = stub.StartRun(
            runs_pb2.StartRunRequest(definition_id="charge"), metadata=execute, timeout=10
        )
        claimed = stub.Claim(
            runs_pb2.ClaimRequest(worker_id="g", max=1, wait_ms=0, run_id=run.run_id),
            metadata=worker,
            timeout=10,
        )
        (lease,) = claimed.leases
        with pytest.raises(grpc.RpcError) as caught:
            stub.CompleteStep(
                orchestrator_service_pb2.CompleteStepRequest(lease_id=lease.lease_id),
                metadata=worker,
                timeout=10,
            )
        assert caught.value.code() is grpc.StatusCode.ABORTED
        failure = rpc_failure_from(cast(grpc.aio.AioRpcError, caught.value))
        assert failure.reason == "NOT_STARTED"
        (detail,) = failure.details
        conflict = runs_pb2.StepConflict()
        assert detail.Unpack(conflict)
        assert (conflict.reason, conflict.attempt, conflict.attempt_status) == (
            enums_pb2.CONFLICT_REASON_NOT_STARTED,
            1,
            enums_pb2.ATTEMPT_STATUS_LEASED,
        )
        assert conflict.run_status == enums_pb2.RUN_STATUS_RUNNING


def test_fan_outs_and_cancel_over_rest(http: httpx.Client) -> None:
    run_id = _start(http, "fanout")["run_id"]
    branches = {lease["step_key"]: lease for lease in _claim(http, run_id)}
    assert sorted(branches) == ["fan/a", "fan/b"]
    _lease_call(http, branches["fan/a"]["lease_id"], "complete", {"output": ["x", "y", "z"]})
    _lease_call(http, branches["fan/b"]["lease_id"], "complete", {"output": None})
    items = _claim(http, run_id)
    assert [(lease["step_key"], lease["input"]) for lease in items] == [
        ("each[0]", "x"),
        ("each[1]", "y"),
    ]
    cancelled = http.post(f"/runs/{run_id}/cancel", headers=bearer("alpha", "execute"))
    assert cancelled.status_code == 200, cancelled.text
    assert cancelled.json()["status"] == "cancelled"
    late = _lease_call(http, items[0]["lease_id"], "complete", {"output": 1})
    assert (late.status_code, late.json()["reason"]) == (409, "run_terminal")
    detail = _run(http, run_id)
    assert detail["timers"] == []
    assert {a["status"] for a in detail["attempts"] if a["step_key"].startswith("each[")} == {
        "failed"
    }
    missing = http.post("/runs/nope/cancel", headers=bearer("alpha", "execute"))
    assert missing.status_code == 404


def test_events_and_signals_over_rest(http: httpx.Client) -> None:
    run_id = _start(http, "approval", {"order": "o-9"})["run_id"]
    waits = _run(http, run_id)["waits"]
    assert [(w["step_key"], w["event"], w["key"]) for w in waits] == [
        ("approve", "approved", "o-9")
    ]
    published = http.post(
        "/events",
        json={"event": "approved", "key": "o-9", "payload": {"by": "ana"}, "event_id": "e-9"},
        headers=bearer("alpha", "execute"),
    )
    assert published.status_code == 200, published.text
    assert published.json() == {"outcome": "delivered", "event_id": "e-9"}
    (lease,) = _claim(http, run_id)
    assert lease["input"] == {"by": "ana"}
    again = http.post(
        "/events",
        json={"event": "approved", "key": "o-9", "event_id": "e-9"},
        headers=bearer("alpha", "execute"),
    )
    assert again.json() == {"outcome": "duplicate", "event_id": "e-9"}

    other = _start(http, "approval", {"order": "o-10"})["run_id"]
    signalled = http.post(
        f"/runs/{other}/signal",
        json={"event": "approved", "payload": "by signal"},
        headers=bearer("alpha", "execute"),
    )
    assert signalled.status_code == 200, signalled.text
    assert signalled.json()["outcome"] == "delivered"
    refused = http.post(
        f"/runs/{other}/signal", json={"event": "approved"}, headers=bearer("alpha", "execute")
    )
    assert refused.status_code == 409
    assert refused.json()["error"]["field"] == "signal.event"
    assert "approved" in refused.json()["error"]["message"]
    parked = http.post(
        "/events", json={"event": "approved", "key": "nobody"}, headers=bearer("alpha", "execute")
    )
    assert parked.json()["outcome"] == "parked"


def test_a_runs_spans_reach_the_trace_views(http: httpx.Client) -> None:
    run = _start(http, "charge")
    (lease,) = _claim(http, run["run_id"])
    _lease_call(http, lease["lease_id"], "started")
    _lease_call(http, lease["lease_id"], "complete", {"output": "paid"})
    deadline = time.monotonic() + 20
    while True:
        answer = http.get(f"/traces/{run['trace_id']}", headers=bearer("alpha", "read"))
        spans = answer.json().get("spans", []) if answer.status_code == 200 else []
        if len(spans) >= 2 or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    by_kind = {span["kind"]: span for span in spans}
    assert set(by_kind) == {"workflow_run", "workflow_step"}, answer.text
    step, top = by_kind["workflow_step"], by_kind["workflow_run"]
    assert step["span_id"] == lease["span_id"]
    assert step["parent_span_id"] == top["span_id"] == lease["parent_span_id"]
    assert top["correlation"]["run_id"] == run["run_id"]
    assert (top["name"], step["name"]) == ("charge", "pay")
