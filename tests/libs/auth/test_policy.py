"""authorize and resolve_project: the scope rule and the project selector rule."""

from __future__ import annotations

import pytest

from mcpd.auth.access import ALL_SCOPES, access_rules
from mcpd.auth.policy import authorize, resolve_project
from mcpd.auth.principal import Principal, PrincipalKind
from mcpd.model.v1 import enums_pb2
from mcpd.runtime.errors import InvalidArgument, PermissionDenied, Unauthenticated

RULES = access_rules()
GET_TRACE = RULES["/mcpd.query.v1.QueryService/GetTrace"]
LIST_SPANS = RULES["/mcpd.query.v1.QueryService/ListSpans"]
DELETE_TRACE = RULES["/mcpd.query.v1.QueryService/DeleteTrace"]
CLAIM = RULES["/mcpd.orchestrator.v1.OrchestratorService/Claim"]
GET_ACCOUNT = RULES["/mcpd.account.v1.AccountService/GetAccount"]
SIGNUP = RULES["/mcpd.account.v1.AccountService/Signup"]


def _key(*scopes: enums_pb2.KeyScope.ValueType, projects: tuple[str, ...] = ("p",)) -> Principal:
    return Principal(PrincipalKind.KEY, "0123456789abcdef", frozenset(scopes), frozenset(projects))


SESSION = Principal(PrincipalKind.SESSION, "feedfacefeedface", ALL_SCOPES, frozenset({"p"}))
ANON = Principal(PrincipalKind.ANONYMOUS, "anonymous", ALL_SCOPES, frozenset({"default"}))


def test_matching_scope_passes() -> None:
    authorize(_key(enums_pb2.KEY_SCOPE_READ), GET_TRACE)
    authorize(_key(enums_pb2.KEY_SCOPE_ADMIN), DELETE_TRACE)
    authorize(_key(enums_pb2.KEY_SCOPE_ADMIN), CLAIM)  # admin also where worker is needed


def test_wrong_scope_is_refused_naming_the_scope() -> None:
    with pytest.raises(PermissionDenied) as caught:
        authorize(_key(enums_pb2.KEY_SCOPE_ADMIN), GET_TRACE)
    assert caught.value.reason == "SCOPE_REQUIRED"
    assert caught.value.metadata == {"scope": "read"}
    assert "read" in caught.value.message


def test_open_methods_pass_anyone() -> None:
    authorize(_key(enums_pb2.KEY_SCOPE_INGEST), SIGNUP)
    authorize(ANON, SIGNUP)


def test_sessions_and_anonymous_hold_every_scope() -> None:
    for rule in (GET_TRACE, DELETE_TRACE, CLAIM):
        authorize(SESSION, rule)
        authorize(ANON, rule)


def test_session_methods_need_a_session() -> None:
    authorize(SESSION, GET_ACCOUNT)
    with pytest.raises(PermissionDenied) as as_key:
        authorize(_key(*ALL_SCOPES), GET_ACCOUNT)
    assert as_key.value.reason == "SESSION_REQUIRED"
    with pytest.raises(Unauthenticated) as as_anonymous:
        authorize(ANON, GET_ACCOUNT)
    assert as_anonymous.value.reason == "SESSION_REQUIRED"


def test_single_project_is_filled_in() -> None:
    assert resolve_project(_key(projects=("p",)), "") == "p"
    assert resolve_project(_key(projects=("p",)), "p") == "p"


def test_multi_project_key_must_name_one() -> None:
    key = _key(projects=("a", "b"))
    assert resolve_project(key, "b") == "b"
    with pytest.raises(InvalidArgument) as caught:
        resolve_project(key, "")
    assert (caught.value.field, caught.value.reason) == ("project", "PROJECT_REQUIRED")


def test_a_project_not_granted_is_refused() -> None:
    with pytest.raises(PermissionDenied) as caught:
        resolve_project(_key(projects=("a", "b")), "c")
    assert (caught.value.field, caught.value.reason) == ("project", "PROJECT_NOT_GRANTED")
    with pytest.raises(PermissionDenied):
        resolve_project(ANON, "other")


SERVICE = Principal(PrincipalKind.SERVICE, "service:query", frozenset(), frozenset())
ERASE_RUNS = RULES["/mcpd.orchestrator.v1.OrchestratorService/EraseSubjectRuns"]
INGEST = RULES["/mcpd.ingest.v1.IngestService/Ingest"]


def test_a_service_passes_only_the_rules_that_accept_services() -> None:
    authorize(SERVICE, ERASE_RUNS)
    authorize(SERVICE, INGEST)
    authorize(SERVICE, SIGNUP)  # open: anyone
    for rule in (LIST_SPANS, DELETE_TRACE, CLAIM, GET_ACCOUNT):
        with pytest.raises(PermissionDenied) as caught:
            authorize(SERVICE, rule)
        assert caught.value.reason == "SERVICE_NOT_ACCEPTED"


def test_an_internal_rule_refuses_every_other_principal() -> None:
    for principal in (_key(*ALL_SCOPES), SESSION, ANON):
        with pytest.raises(PermissionDenied) as caught:
            authorize(principal, ERASE_RUNS)
        assert caught.value.reason == "INTERNAL_RPC"


def test_a_service_reaches_the_project_it_names_and_must_name_one() -> None:
    assert resolve_project(SERVICE, "any-project") == "any-project"
    with pytest.raises(InvalidArgument) as caught:
        resolve_project(SERVICE, "")
    assert (caught.value.reason, caught.value.field) == ("PROJECT_REQUIRED", "project")
