"""Starting and reading runs against a real `mcpd serve` on SQLite and PostgreSQL, over REST and
gRPC: the version pinned, the input checked against the definition's schema, the correlation
kept with the run's own project and id, the first events and the run timeout held, one run per
idempotency key, the listing newest first, and nothing read across projects."""

from __future__ import annotations

import re
from typing import Any

import grpc
import httpx
import pytest

from mcpd.model.v1 import enums_pb2, runs_pb2
from mcpd.orchestrator.v1 import orchestrator_service_pb2, orchestrator_service_pb2_grpc
from mcpd.signals.messages import python_of, value_of
from mcpd.testing.daemon import DaemonProcess
from tests.e2e.security_fixture import bearer, bearer_metadata

pytestmark = pytest.mark.e2e

SCHEMA = {
    "type": "object",
    "required": ["ticket"],
    "properties": {"ticket": {"type": "string"}, "tags": {"type": "array"}},
}
STEPS: list[dict[str, Any]] = [
    {"id": "classify", "kind": "task", "input": {"text": "${input.ticket}"}},
    {"id": "reply", "kind": "task"},
]
TRIAGE = {
    "input_schema": SCHEMA,
    "limits": {"run_timeout_ms": 3_600_000, "max_steps": 20},
    "steps": STEPS,
}
TRIAGE_2 = {**TRIAGE, "steps": [*STEPS, {"id": "close", "kind": "task"}]}
PLAIN = {"steps": [{"id": "rest", "kind": "agent"}]}
PAUSE = {"steps": [{"id": "child", "kind": "subworkflow", "definition_id": "plain"}]}
HEX32 = re.compile(r"[0-9a-f]{32}")
HEX16 = re.compile(r"[0-9a-f]{16}")


@pytest.fixture(scope="module")
def defined(orchestrator_daemon: DaemonProcess) -> DaemonProcess:
    """The daemon with `triage` at versions 1 and 2, `plain` and `pause` (a subworkflow of
    `plain`) in alpha, `triage` in beta."""
    with httpx.Client(base_url=f"{orchestrator_daemon.http_url}/v1/api", timeout=20) as http:
        for project, definition_id, body in [
            ("alpha", "triage", TRIAGE),
            ("alpha", "triage", TRIAGE_2),
            ("alpha", "plain", PLAIN),
            ("alpha", "pause", PAUSE),
            ("beta", "triage", TRIAGE),
        ]:
            posted = http.post(
                "/definitions",
                json={"id": definition_id, "body": body},
                headers=bearer(project, "execute"),
            )
            assert posted.status_code == 200, posted.text
    return orchestrator_daemon


@pytest.fixture
def http(defined: DaemonProcess, orchestrator_api: httpx.Client) -> httpx.Client:
    return orchestrator_api


def _start(http: httpx.Client, request: dict[str, Any], project: str = "alpha") -> httpx.Response:
    return http.post("/runs", json=request, headers=bearer(project, "execute"))


def _read(http: httpx.Client, path: str, project: str = "alpha", **params: Any) -> httpx.Response:
    return http.get(path, params=params, headers=bearer(project, "read"))


def test_a_start_pins_the_highest_version_and_keeps_the_context(http: httpx.Client) -> None:
    started = _start(
        http,
        {
            "definition_id": "triage",
            "input": {"ticket": "my refund never arrived", "tags": ["billing"]},
            "correlation": {
                "project": "beta",
                "run_id": "not-this-one",
                "session_id": "sess-7",
                "user_id": "user-3",
                "environment": "prod",
            },
        },
    )
    assert started.status_code == 200, started.text
    run = started.json()
    assert HEX32.fullmatch(run["trace_id"])
    assert run["root_run_id"] == run["run_id"]
    assert (run["project"], run["definition_id"], run["definition_version"]) == (
        "alpha",
        "triage",
        2,
    )
    assert run["status"] == "running"
    assert run["cursor"] == {"index": 0, "construct": "task", "step_key": "classify"}
    assert run["input"] == {"ticket": "my refund never arrived", "tags": ["billing"]}
    assert run["correlation"] == {
        "project": "alpha",
        "run_id": run["run_id"],
        "session_id": "sess-7",
        "user_id": "user-3",
        "environment": "prod",
    }
    assert run["max_steps"] == 20
    assert run["steps_used"] == 0
    assert run["depth"] == 0
    assert "deadline_at" in run
    for absent in ("output", "state", "error", "ended_at", "parent_run_id", "idempotency_key"):
        assert absent not in run

    detail = _read(http, f"/runs/{run['run_id']}")
    assert detail.status_code == 200, detail.text
    body = detail.json()
    assert body["run"] == run
    (attempt,) = body["attempts"]
    assert HEX16.fullmatch(attempt.pop("span_id"))
    assert attempt == {
        "run_id": run["run_id"],
        "step_key": "classify",
        "attempt": 1,
        "kind": "task",
        "effect": "at_least_once",
        "status": "pending",
        "input": {"text": "my refund never arrived"},
        "attempts_left": 0,
        "created_at": run["created_at"],
    }
    assert body["waits"] == []
    assert body["timers"] == [
        {"run_id": run["run_id"], "kind": "run_timeout", "due_at": run["deadline_at"]}
    ]

    events = _read(http, f"/runs/{run['run_id']}/events").json()
    assert events["has_more"] is False
    assert [(e["seq"], e["kind"], e["payload"]) for e in events["events"]] == [
        (0, "run_started", {"definition_id": "triage", "definition_version": 2}),
        (1, "run_cursor", {"index": 0, "construct": "task", "step_key": "classify"}),
    ]
    first = _read(http, f"/runs/{run['run_id']}/events", limit=1).json()
    assert [e["seq"] for e in first["events"]] == [0]
    assert first["has_more"] is True
    rest = _read(http, f"/runs/{run['run_id']}/events", after=0).json()
    assert [e["seq"] for e in rest["events"]] == [1]
    assert rest["has_more"] is False


def test_a_named_version_is_pinned_and_a_missing_one_names_the_field(http: httpx.Client) -> None:
    pinned = _start(http, {"definition_id": "triage", "version": 1, "input": {"ticket": "t"}})
    assert pinned.status_code == 200, pinned.text
    assert pinned.json()["definition_version"] == 1
    assert "deadline_at" in pinned.json()
    missing = _start(http, {"definition_id": "triage", "version": 9, "input": {"ticket": "t"}})
    assert missing.status_code == 404
    assert missing.json()["error"]["field"] == "version"
    unknown = _start(http, {"definition_id": "nothing_here"})
    assert unknown.status_code == 404
    assert unknown.json()["error"]["field"] == "definition_id"
    nameless = _start(http, {"input": {"ticket": "t"}})
    assert nameless.status_code == 400
    assert nameless.json()["error"]["field"] == "definition_id"


def test_input_that_fails_the_schema_names_the_path_and_starts_nothing(
    http: httpx.Client,
) -> None:
    before = _read(http, "/runs", definition_id="triage", limit=100).json()["runs"]
    wrong_type = _start(http, {"definition_id": "triage", "input": {"ticket": 42}})
    assert wrong_type.status_code == 400, wrong_type.text
    error = wrong_type.json()["error"]
    assert error["field"] == "input.ticket"
    assert "input_schema" in error["message"]
    no_ticket = _start(http, {"definition_id": "triage", "input": {"tags": []}})
    assert no_ticket.status_code == 400
    assert no_ticket.json()["error"]["field"] == "input"
    assert "ticket" in no_ticket.json()["error"]["message"]
    no_input = _start(http, {"definition_id": "triage"})
    assert no_input.status_code == 400
    after = _read(http, "/runs", definition_id="triage", limit=100).json()["runs"]
    assert [r["run_id"] for r in after] == [r["run_id"] for r in before]


def test_a_definition_without_schema_or_timeout_takes_any_input(http: httpx.Client) -> None:
    started = _start(http, {"definition_id": "plain", "input": [1, "two"]})
    assert started.status_code == 200, started.text
    run = started.json()
    assert run["input"] == [1, "two"]
    assert run["cursor"] == {"index": 0, "construct": "agent", "step_key": "rest"}
    assert "deadline_at" not in run
    detail = _read(http, f"/runs/{run['run_id']}").json()
    assert detail["timers"] == []
    # A node without an input template hands the step the run's input.
    assert [(a["kind"], a["input"]) for a in detail["attempts"]] == [("agent", [1, "two"])]


def test_a_subworkflow_starts_a_child_run_that_a_cancel_reaches(http: httpx.Client) -> None:
    started = _start(http, {"definition_id": "pause"})
    assert started.status_code == 200, started.text
    parent = started.json()
    runs = _read(http, "/runs", definition_id="plain", limit=100).json()["runs"]
    (child,) = [run for run in runs if run.get("parent_run_id") == parent["run_id"]]
    assert (child["root_run_id"], child["parent_step_key"], child["depth"]) == (
        parent["run_id"],
        "child",
        1,
    )
    assert child["trace_id"] == parent["trace_id"]
    cancelled = http.post(
        f"/runs/{parent['run_id']}/cancel", headers=bearer("alpha", "execute")
    ).json()
    assert cancelled["status"] == "cancelled"
    assert _read(http, f"/runs/{child['run_id']}").json()["run"]["status"] == "cancelled"


def test_an_idempotency_key_starts_one_run_per_project(http: httpx.Client) -> None:
    request = {"definition_id": "triage", "input": {"ticket": "t"}, "idempotency_key": "order-1"}
    first = _start(http, request).json()
    again = _start(http, {**request, "input": {"ticket": "different"}}).json()
    assert again == first
    assert first["idempotency_key"] == "order-1"
    other_project = _start(http, request, project="beta").json()
    assert other_project["run_id"] != first["run_id"]
    assert other_project["project"] == "beta"
    empty = _start(http, {**request, "idempotency_key": ""})
    assert empty.status_code == 400
    assert empty.json()["error"]["field"] == "idempotency_key"


def test_the_listing_is_newest_first_pages_and_filters(http: httpx.Client) -> None:
    started = [
        _start(http, {"definition_id": "plain", "input": {"n": n}}).json()["run_id"]
        for n in range(3)
    ]
    seen: list[str] = []
    params: dict[str, Any] = {"definition_id": "plain", "limit": 2}
    while True:
        page = _read(http, "/runs", **params).json()
        assert len(page["runs"]) <= 2
        seen += [r["run_id"] for r in page["runs"]]
        if not page["page"]["has_more"]:
            break
        params["cursor"] = page["page"]["next_cursor"]
    assert seen[:3] == started[::-1]
    assert len(seen) == len(set(seen))
    running = _read(http, "/runs", definition_id="plain", status="running", limit=100).json()
    assert set(started) <= {r["run_id"] for r in running["runs"]} <= set(seen)
    assert {r["status"] for r in running["runs"]} == {"running"}
    ended = _read(http, "/runs", definition_id="plain", status="succeeded").json()
    assert ended["runs"] == []
    # A cursor belongs to its filters.
    mixed = _read(http, "/runs", definition_id="triage", cursor=params.get("cursor", ""))
    assert mixed.status_code == 400
    assert mixed.json()["error"]["field"] == "cursor"


def test_runs_stay_in_their_project(http: httpx.Client) -> None:
    run = _start(http, {"definition_id": "triage", "input": {"ticket": "t"}}).json()
    for path in (f"/runs/{run['run_id']}", f"/runs/{run['run_id']}/events"):
        crossing = _read(http, path, project="beta")
        assert crossing.status_code == 404, crossing.text
        assert crossing.json()["error"]["field"] == "run_id"
    listed = _read(http, "/runs", project="beta", limit=100).json()["runs"]
    assert run["run_id"] not in [r["run_id"] for r in listed]
    refused = _start(http, {"project": "beta", "definition_id": "triage", "input": {"ticket": "t"}})
    assert refused.status_code == 403
    reader = http.post(
        "/runs",
        json={"definition_id": "triage", "input": {"ticket": "t"}},
        headers=bearer("alpha", "read"),
    )
    assert reader.status_code == 403


def test_the_same_calls_over_grpc(defined: DaemonProcess) -> None:
    with grpc.insecure_channel(defined.grpc_addr) as channel:
        stub = orchestrator_service_pb2_grpc.OrchestratorServiceStub(channel)
        request = runs_pb2.StartRunRequest(
            definition_id="triage", input=value_of({"ticket": "over grpc"}), idempotency_key="g"
        )
        run = stub.StartRun(request, metadata=bearer_metadata("beta", "execute"), timeout=10)
        assert (run.project, run.definition_version, run.status) == (
            "beta",
            1,
            enums_pb2.RUN_STATUS_RUNNING,
        )
        assert run.correlation.run_id == run.run_id
        again = stub.StartRun(request, metadata=bearer_metadata("beta", "execute"), timeout=10)
        assert again == run
        detail = stub.GetRun(
            orchestrator_service_pb2.GetRunRequest(run_id=run.run_id),
            metadata=bearer_metadata("beta", "read"),
            timeout=10,
        )
        assert detail.run == run
        assert [t.kind for t in detail.timers] == [enums_pb2.TIMER_KIND_RUN_TIMEOUT]
        page = stub.ListRunEvents(
            orchestrator_service_pb2.ListRunEventsRequest(run_id=run.run_id, after=0),
            metadata=bearer_metadata("beta", "read"),
            timeout=10,
        )
        assert [(e.seq, e.kind) for e in page.events] == [(1, enums_pb2.RUN_EVENT_KIND_RUN_CURSOR)]
        assert python_of(page.events[0].payload) == {
            "index": 0,
            "construct": "task",
            "step_key": "classify",
        }
        with pytest.raises(grpc.RpcError) as caught:
            stub.StartRun(
                runs_pb2.StartRunRequest(definition_id="triage", input=value_of({"ticket": 1})),
                metadata=bearer_metadata("beta", "execute"),
                timeout=10,
            )
        assert caught.value.code() is grpc.StatusCode.INVALID_ARGUMENT
