"""Every RPC but the internal ones is reachable over REST (itself, or through a twin answering its
response rendered as JSON), declares who may call it, and has a role serving it."""

from __future__ import annotations

import pytest
from google.protobuf.descriptor import MethodDescriptor

from cli.roles import GRPC_ROLES, SERVICE_ROLES
from gateway.otlp import SERVICES as OTLP_SERVICES
from mcpd.options.v1 import access_pb2
from tests.contract.api_surface import http_rule, methods, rendered_twin, services

METHODS = sorted(methods(), key=lambda m: m.full_name)


def test_the_six_services_exist() -> None:
    assert sorted(s.full_name for s in services()) == [
        "mcpd.account.v1.AccountService",
        "mcpd.evaluation.v1.EvaluationService",
        "mcpd.ingest.v1.IngestService",
        "mcpd.intelligence.v1.IntelligenceService",
        "mcpd.orchestrator.v1.OrchestratorService",
        "mcpd.query.v1.QueryService",
    ]


def test_every_service_has_a_grpc_role() -> None:
    # mcpd's six, plus the OTLP collector services the ingest role serves for OTLP/HTTP.
    assert set(SERVICE_ROLES) == {s.full_name for s in services()} | set(OTLP_SERVICES)
    assert {SERVICE_ROLES[name] for name in OTLP_SERVICES} == {"ingest"}
    assert set(SERVICE_ROLES.values()) <= set(GRPC_ROLES)


@pytest.mark.parametrize("method", METHODS, ids=lambda m: m.full_name)
def test_rpc_has_http_route_and_access_rule(method: MethodDescriptor) -> None:
    rule = http_rule(method)
    access = method.GetOptions().Extensions[access_pb2.access]
    if access.internal:
        # Only mcpd's services call it, over gRPC: no route leads a client to it.
        assert rule is None, f"{method.full_name} is internal but has a REST route"
        assert rendered_twin(method) is None
        return
    if rule is None:
        twin = rendered_twin(method)
        assert twin is not None, f"{method.full_name} has no REST route and no rendered twin"
        assert (
            twin.GetOptions().Extensions[access_pb2.access]
            == (method.GetOptions().Extensions[access_pb2.access])
        )
        rule = http_rule(twin)
        assert rule is not None
    assert rule.WhichOneof("pattern") in {"get", "post", "delete", "put", "patch"}
    declared = [access.open, access.session, access.scope != 0]
    assert declared.count(True) == 1, f"{method.full_name} must declare exactly one access rule"


def _routes() -> list[str]:
    routes = []
    for method in METHODS:
        rule = http_rule(method)
        if rule is not None:
            verb = str(rule.WhichOneof("pattern"))
            routes.append(f"{verb.upper()} {getattr(rule, verb)}")
    return routes


def test_routes_are_unique() -> None:
    routes = _routes()
    assert len(routes) == len(set(routes))


def test_rest_table_of_the_architecture_is_covered() -> None:
    routes = set(_routes())
    # A sample across every owner of ARCHITECTURE section 7.
    for route in [
        "POST /v1/api/ingest",
        "GET /v1/api/traces/{trace_id}",
        "DELETE /v1/api/traces/{trace_id}",
        "GET /v1/api/metrics/{name}/series",
        "GET /v1/api/capabilities",
        "POST /v1/api/erasure",
        "POST /v1/api/account/signup",
        "DELETE /v1/api/account/keys/{id}",
        "GET /v1/api/runs/{run_id}/steps/{step_key}/cause",
        "POST /v1/api/leases/{lease_id}/fail",
        "GET /v1/api/experiments/compare",
        "POST /v1/api/monitors/{monitor_id}/acknowledge",
        "GET /v1/api/traces/{trace_id}/notes",
        "GET /healthz",
    ]:
        assert route in routes
