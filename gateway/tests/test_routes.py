"""Path templates and the router, without any HTTP in between."""

from __future__ import annotations

import importlib
import pkgutil

import pytest

import mcpd
from gateway.rest.catalog import load_rpcs
from gateway.rest.routes import Match, MethodNotAllowed, Router
from gateway.rest.templates import PathTemplate, Variable
from mcpd.orchestrator.v1 import orchestrator_service_pb2
from mcpd.query.v1 import query_service_pb2

STEP_CAUSE = orchestrator_service_pb2.GetStepCauseRequest.DESCRIPTOR
TRACE = query_service_pb2.GetTraceRequest.DESCRIPTOR
GRPC_ONLY = frozenset(
    {
        "mcpd.query.v1.QueryService.GetTrace",
        "mcpd.orchestrator.v1.OrchestratorService.EraseSubjectRuns",
        "mcpd.orchestrator.v1.OrchestratorService.GetRunShapes",
        "mcpd.orchestrator.v1.OrchestratorService.GetRunOutcomes",
    }
)
"""RPCs deliberately without an http binding: REST serves GetTraceJson instead of GetTrace, and
EraseSubjectRuns, GetRunShapes and GetRunOutcomes are internal (only mcpd's services call
them)."""


def rest_methods() -> set[str]:
    """Every RPC in every generated module but `GRPC_ONLY`, found independently of the catalog."""
    found = set()
    for info in pkgutil.walk_packages(mcpd.__path__, "mcpd."):
        if info.name.endswith("_pb2"):
            file = importlib.import_module(info.name).DESCRIPTOR
            for service in file.services_by_name.values():
                found |= {m.full_name for m in service.methods}
    assert GRPC_ONLY.issubset(found), "a GRPC_ONLY method no longer exists"
    return found - GRPC_ONLY


def test_every_rpc_gets_a_route() -> None:
    rpcs = load_rpcs()
    assert {r.method.full_name for r in rpcs} == rest_methods()
    assert len(rpcs) == len(rest_methods()) > 60
    assert len({r.operation_id for r in rpcs}) == len(rpcs)


def test_template_parsing() -> None:
    template = PathTemplate.parse("/v1/api/runs/{run_id}/steps/{step_key=*}/cause", STEP_CAUSE)
    assert template.segments[:3] == ("v1", "api", "runs")
    assert [v.name for v in template.variables] == ["run_id", "step_key"]
    assert template.field_paths == (("run_id",), ("step_key",))


@pytest.mark.parametrize(
    "text",
    [
        "v1/api/traces",
        "/v1/api/traces/{trace_id=**}",
        "/v1/api/traces/{trace_id=traces/*}",
        "/v1/api/traces/{trace_id}:undelete",
        "/v1/api/traces/{nope}",
        "/v1/api/traces/{include}",
        "/v1/api/traces/{trace_id}/{trace_id}",
    ],
)
def test_unsupported_templates_fail_at_load(text: str) -> None:
    with pytest.raises(ValueError, match="path template"):
        PathTemplate.parse(text, TRACE)


def _router(*routes: tuple[str, str]) -> Router[str]:
    router: Router[str] = Router()
    for method, text in routes:
        router.add(method, PathTemplate.parse(text, STEP_CAUSE), f"{method} {text}")
    return router


def test_literals_win_over_variables_in_any_order() -> None:
    variable = ("GET", "/x/{run_id}/steps")
    literal = ("GET", "/x/compare/steps")
    for order in ((variable, literal), (literal, variable)):
        router = _router(*order)
        found = router.match("GET", "/x/compare/steps")
        assert isinstance(found, Match)
        assert found.target == "GET /x/compare/steps"
        found = router.match("GET", "/x/other/steps")
        assert isinstance(found, Match)
        assert found.params == {"run_id": "other"}


def test_backtracks_out_of_a_literal_dead_end() -> None:
    router = _router(("GET", "/x/compare"), ("GET", "/x/{run_id}/steps"))
    found = router.match("GET", "/x/compare/steps")
    assert isinstance(found, Match)
    assert found.params == {"run_id": "compare"}


def test_method_not_allowed_lists_the_most_specific_paths_methods() -> None:
    router = _router(("GET", "/x/compare"), ("POST", "/x/compare"), ("DELETE", "/x/{run_id}"))
    assert router.match("PUT", "/x/compare") == MethodNotAllowed(("GET", "POST"))
    # A less specific template that has the method still serves it.
    found = router.match("DELETE", "/x/compare")
    assert isinstance(found, Match)
    assert found.params == {"run_id": "compare"}


def test_no_match() -> None:
    router = _router(("GET", "/x/{run_id}"))
    for path in ("/x", "/x/", "/x/a/b", "/y/a", "", "x/a"):
        assert router.match("GET", path) is None, path


def test_segments_are_decoded_after_splitting() -> None:
    router = _router(("GET", "/x/{run_id}"))
    found = router.match("GET", "/x/a%2Fb%20c")
    assert isinstance(found, Match)
    assert found.params == {"run_id": "a/b c"}


def test_duplicate_routes_are_refused() -> None:
    router = _router(("GET", "/x/{run_id}"))
    with pytest.raises(ValueError, match="collides"):
        router.add("GET", PathTemplate.parse("/x/{step_key}", STEP_CAUSE), "again")


def test_variable_carries_field_descriptors() -> None:
    template = PathTemplate.parse("/t/{trace_id}", TRACE)
    (variable,) = template.variables
    assert isinstance(variable, Variable)
    assert variable.fields[-1].full_name == "mcpd.query.v1.GetTraceRequest.trace_id"
