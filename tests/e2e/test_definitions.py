"""Definitions and worker registration against a real `mcpd serve` on SQLite and PostgreSQL,
over REST and gRPC: the versioning rule, refusals naming the field, 409 for a held version, the
project taken from the key, the lease settings a worker is told."""

from __future__ import annotations

from typing import Any, cast

import grpc
import httpx
import pytest
from google.protobuf import struct_pb2

from mcpd.model.v1 import runs_pb2
from mcpd.orchestrator.v1 import orchestrator_service_pb2, orchestrator_service_pb2_grpc
from mcpd.runtime.errors_grpc import rpc_failure_from
from mcpd.signals.messages import python_of, value_of
from mcpd.testing.daemon import DaemonProcess
from tests.e2e.conftest import ORCHESTRATOR_LEASE_TTL_MS
from tests.e2e.security_fixture import bearer, bearer_metadata

pytestmark = pytest.mark.e2e

FLOW = {"steps": [{"id": "classify", "kind": "agent", "input": {"text": "${input.ticket}"}}]}
FLOW_2 = {"steps": [*FLOW["steps"], {"id": "reply", "kind": "task"}]}


@pytest.fixture
def http(orchestrator_api: httpx.Client) -> httpx.Client:
    return orchestrator_api


def _post(http: httpx.Client, document: dict[str, Any], project: str = "alpha") -> httpx.Response:
    return http.post("/definitions", json=document, headers=bearer(project, "execute"))


def test_the_versioning_rule_over_rest(http: httpx.Client) -> None:
    first = _post(http, {"id": "triage", "body": FLOW})
    assert first.status_code == 200, first.text
    assert first.json() == {"id": "triage", "version": 1, "assigned": True}
    again = _post(http, {"id": "triage", "body": FLOW})
    assert again.json() == {"id": "triage", "version": 1, "assigned": False}
    second = _post(http, {"id": "triage", "body": FLOW_2})
    assert second.json() == {"id": "triage", "version": 2, "assigned": True}
    named = _post(http, {"id": "triage", "version": 7, "body": FLOW})
    assert named.json() == {"id": "triage", "version": 7, "assigned": False}

    held = _post(http, {"id": "triage", "version": 7, "body": FLOW_2})
    assert held.status_code == 409, held.text
    error = held.json()["error"]
    assert (error["field"], error["reason"]) == ("version", "DEFINITION_VERSION_HELD")

    read = http.get("/definitions/triage/versions/2", headers=bearer("alpha", "read"))
    assert read.status_code == 200, read.text
    stored = read.json()
    assert (stored["project"], stored["id"], stored["version"], stored["kind"]) == (
        "alpha",
        "triage",
        2,
        "workflow",
    )
    assert stored["body"] == FLOW_2
    assert "created_at" in stored
    missing = http.get("/definitions/triage/versions/3", headers=bearer("alpha", "read"))
    assert missing.status_code == 404
    assert missing.json()["error"]["field"] == "version"


def test_a_refused_body_names_the_field_and_stores_nothing(http: httpx.Client) -> None:
    body = {"steps": [{"id": "a", "kind": "task", "retry": {"attempts": 0}}]}
    refused = _post(http, {"id": "refused", "body": body})
    assert refused.status_code == 400, refused.text
    error = refused.json()["error"]
    assert error["field"] == "steps[0].retry.attempts"
    assert "must be at least 1" in error["message"]
    unknown = _post(
        http, {"id": "refused", "body": {"steps": [{"id": "a", "kind": "task", "guard": 1}]}}
    )
    assert unknown.status_code == 400
    assert unknown.json()["error"]["field"] == "steps[0].guard"
    bad_id = _post(http, {"id": "Refused", "body": FLOW})
    assert bad_id.json()["error"]["field"] == "id"
    no_body = _post(http, {"id": "refused"})
    assert no_body.json()["error"]["field"] == "body"
    listed = http.get("/definitions", headers=bearer("alpha", "read")).json()
    assert "refused" not in [d["id"] for d in listed["definitions"]]


def test_definitions_stay_in_the_project_of_the_key(http: httpx.Client) -> None:
    assert _post(http, {"id": "beta_only", "body": FLOW}, project="beta").status_code == 200
    alpha = http.get("/definitions", headers=bearer("alpha", "read")).json()
    beta = http.get("/definitions", headers=bearer("beta", "read")).json()
    assert "beta_only" not in [d["id"] for d in alpha["definitions"]]
    assert [d["id"] for d in beta["definitions"]] == ["beta_only"]
    crossing = http.get("/definitions/beta_only/versions/1", headers=bearer("alpha", "read"))
    assert crossing.status_code == 404
    # A key of another project naming this one is refused, not answered.
    foreign = http.post(
        "/definitions",
        json={"project": "beta", "id": "x", "body": FLOW},
        headers=bearer("alpha", "execute"),
    )
    assert foreign.status_code == 403, foreign.text


def test_the_listing_pages_in_id_order_with_the_highest_versions(http: httpx.Client) -> None:
    for name in ("list_c", "list_a", "list_b"):
        assert _post(http, {"id": name, "body": FLOW}, project="beta").status_code == 200
    assert _post(http, {"id": "list_b", "body": FLOW_2}, project="beta").status_code == 200
    seen: list[tuple[str, int]] = []
    params: dict[str, str] = {"limit": "2"}
    while True:
        page = http.get("/definitions", params=params, headers=bearer("beta", "read")).json()
        seen += [(d["id"], d["version"]) for d in page["definitions"]]
        if not page["page"]["has_more"]:
            break
        params["cursor"] = page["page"]["next_cursor"]
    assert [item for item in seen if item[0].startswith("list_")] == [
        ("list_a", 1),
        ("list_b", 2),
        ("list_c", 1),
    ]
    assert [item[0] for item in seen] == sorted(item[0] for item in seen)


def test_registering_a_worker_places_every_definition_and_gives_the_lease_settings(
    http: httpx.Client,
) -> None:
    registration = {
        "worker_id": "w-1",
        "definitions": [{"id": "worker_flow", "body": FLOW}, {"id": "worker_flow", "body": FLOW_2}],
    }
    answer = http.post("/workers/register", json=registration, headers=bearer("alpha", "worker"))
    assert answer.status_code == 200, answer.text
    assert answer.json() == {
        "worker_id": "w-1",
        "registered": [
            {"id": "worker_flow", "version": 1, "assigned": True},
            {"id": "worker_flow", "version": 2, "assigned": True},
        ],
        "lease_ttl_ms": ORCHESTRATOR_LEASE_TTL_MS,
        "heartbeat_ms": ORCHESTRATOR_LEASE_TTL_MS // 3,
    }


def test_a_refused_registration_names_the_document_and_stores_none(http: httpx.Client) -> None:
    registration = {
        "worker_id": "w-2",
        "definitions": [
            {"id": "reg_ok", "body": FLOW},
            {"id": "reg_bad", "body": {"steps": [{"id": "a", "kind": "sleep"}]}},
        ],
    }
    answer = http.post("/workers/register", json=registration, headers=bearer("alpha", "worker"))
    assert answer.status_code == 400, answer.text
    assert answer.json()["error"]["field"] == "definitions[1].steps[0].duration_ms"
    held = {
        "worker_id": "w-2",
        "definitions": [
            {"id": "reg_ok", "body": FLOW},
            {"id": "triage_held", "version": 1, "body": FLOW},
            {"id": "triage_held", "version": 1, "body": FLOW_2},
        ],
    }
    conflict = http.post("/workers/register", json=held, headers=bearer("alpha", "worker"))
    assert conflict.status_code == 409, conflict.text
    assert conflict.json()["error"]["field"] == "definitions[2].version"
    listed = http.get("/definitions", headers=bearer("alpha", "read")).json()
    names = [d["id"] for d in listed["definitions"]]
    assert "reg_ok" not in names
    assert "triage_held" not in names
    nobody = http.post(
        "/workers/register", json={"definitions": []}, headers=bearer("alpha", "worker")
    )
    assert nobody.json()["error"]["field"] == "worker_id"


def test_the_same_calls_over_grpc(orchestrator_daemon: DaemonProcess) -> None:
    metadata = bearer_metadata("beta", "execute")
    with grpc.insecure_channel(orchestrator_daemon.grpc_addr) as channel:
        stub = orchestrator_service_pb2_grpc.OrchestratorServiceStub(channel)
        document = runs_pb2.DefinitionDocument(id="over_grpc", body=value_of(FLOW))
        placed = stub.CreateDefinition(document, metadata=metadata, timeout=10)
        assert (placed.id, placed.version, placed.assigned) == ("over_grpc", 1, True)
        document.version = 1
        document.body.CopyFrom(value_of(FLOW_2))
        with pytest.raises(grpc.RpcError) as caught:
            stub.CreateDefinition(document, metadata=metadata, timeout=10)
        assert caught.value.code() is grpc.StatusCode.ABORTED
        failure = rpc_failure_from(cast(grpc.aio.AioRpcError, caught.value))
        assert (failure.reason, failure.field) == ("DEFINITION_VERSION_HELD", "version")
        read_metadata = bearer_metadata("beta", "read")
        stored = stub.GetDefinitionVersion(
            orchestrator_service_pb2.GetDefinitionVersionRequest(id="over_grpc", version=1),
            metadata=read_metadata,
            timeout=10,
        )
        assert stored.project == "beta"
        assert python_of(stored.body) == FLOW
        assert isinstance(stored.body, struct_pb2.Value)
