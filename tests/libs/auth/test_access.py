"""Access rules from the proto options, and the scope hierarchy."""

from __future__ import annotations

import importlib

import pytest
from google.api import annotations_pb2
from google.protobuf import descriptor_pb2, descriptor_pool

from mcpd.auth.access import (
    AccessRule,
    KeyScope,
    access_rules,
    build_rules,
    parse_scope,
    scope_name,
    scope_satisfies,
    snake_case,
)
from mcpd.model.v1 import enums_pb2
from mcpd.options.v1 import access_pb2

SERVICES = {
    "account": "AccountService",
    "evaluation": "EvaluationService",
    "ingest": "IngestService",
    "intelligence": "IntelligenceService",
    "orchestrator": "OrchestratorService",
    "query": "QueryService",
}

INGEST = enums_pb2.KEY_SCOPE_INGEST
READ = enums_pb2.KEY_SCOPE_READ
WRITE = enums_pb2.KEY_SCOPE_WRITE
ADMIN = enums_pb2.KEY_SCOPE_ADMIN
EXECUTE = enums_pb2.KEY_SCOPE_EXECUTE
WORKER = enums_pb2.KEY_SCOPE_WORKER
UNSPECIFIED = enums_pb2.KEY_SCOPE_UNSPECIFIED


def _every_method_path() -> set[str]:
    paths = set()
    for package, service in SERVICES.items():
        module = importlib.import_module(f"mcpd.{package}.v1.{package}_service_pb2")
        descriptor = module.DESCRIPTOR.services_by_name[service]
        paths |= {f"/{descriptor.full_name}/{method.name}" for method in descriptor.methods}
    return paths


OTLP_EXPORTS = {
    "/opentelemetry.proto.collector.trace.v1.TraceService/Export",
    "/opentelemetry.proto.collector.logs.v1.LogsService/Export",
    "/opentelemetry.proto.collector.metrics.v1.MetricsService/Export",
}


def test_rules_cover_every_method_of_the_six_services_and_otlp_export() -> None:
    paths = _every_method_path()
    assert len(paths) > 60
    assert set(access_rules()) == paths | OTLP_EXPORTS


@pytest.mark.parametrize("path", sorted(OTLP_EXPORTS))
def test_otlp_export_needs_ingest_and_is_not_audited_when_allowed(path: str) -> None:
    method = path.removeprefix("/").replace("/", ".")
    assert access_rules()[path] == AccessRule(method, INGEST)
    assert not access_rules()[path].audited


def test_every_rule_grants_exactly_one_way_in() -> None:
    for rule in access_rules().values():
        ways = [rule.open, rule.session, rule.scope != UNSPECIFIED, rule.internal]
        assert ways.count(True) == 1, rule


def test_the_service_credential_reaches_what_services_call_and_nothing_else() -> None:
    accepting = {path for path, rule in access_rules().items() if rule.accepts_service}
    assert accepting == {
        # The query service's erasure of a subject's runs.
        "/mcpd.orchestrator.v1.OrchestratorService/EraseSubjectRuns",
        # The run watches' runs.
        "/mcpd.orchestrator.v1.OrchestratorService/GetRunShapes",
        # The runs of the experiments mcpd drives.
        "/mcpd.orchestrator.v1.OrchestratorService/StartRun",
        "/mcpd.orchestrator.v1.OrchestratorService/GetRunOutcomes",
        "/mcpd.orchestrator.v1.OrchestratorService/CancelRun",
        # The cause chain of a failed run's step, for its derived outcome note.
        "/mcpd.orchestrator.v1.OrchestratorService/GetStepCause",
        # The orchestrator's run spans; a scoring pass's scores; derived outcome notes.
        "/mcpd.ingest.v1.IngestService/Ingest",
        # A scoring pass's runs (GetTraceJson is GetTrace's REST twin, with its access).
        "/mcpd.query.v1.QueryService/ListTraces",
        "/mcpd.query.v1.QueryService/GetTrace",
        "/mcpd.query.v1.QueryService/GetTraceJson",
        # Monitors' and objectives' windows (a score_mean monitor's scores: GetScoreStats,
        # figures only; ListScores, which returns the scores themselves, is not reached).
        "/mcpd.query.v1.QueryService/GetAnalyticsSummary",
        "/mcpd.query.v1.QueryService/GetScoreStats",
    }
    internal = [path for path, rule in access_rules().items() if rule.internal]
    assert internal == [
        "/mcpd.orchestrator.v1.OrchestratorService/EraseSubjectRuns",
        "/mcpd.orchestrator.v1.OrchestratorService/GetRunShapes",
        "/mcpd.orchestrator.v1.OrchestratorService/GetRunOutcomes",
    ]


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        (
            "/mcpd.query.v1.QueryService/GetTrace",
            AccessRule(
                "mcpd.query.v1.QueryService.GetTrace",
                READ,
                audit_action="get_trace",
                service=True,
            ),
        ),
        (
            "/mcpd.query.v1.QueryService/DeleteTrace",
            AccessRule(
                "mcpd.query.v1.QueryService.DeleteTrace", ADMIN, audit_action="delete_trace"
            ),
        ),
        (
            "/mcpd.query.v1.QueryService/ListSpans",
            AccessRule("mcpd.query.v1.QueryService.ListSpans", READ, audit_action="list_spans"),
        ),
        (
            "/mcpd.account.v1.AccountService/Signup",
            AccessRule("mcpd.account.v1.AccountService.Signup", UNSPECIFIED, open=True),
        ),
        (
            "/mcpd.account.v1.AccountService/GetAccount",
            AccessRule("mcpd.account.v1.AccountService.GetAccount", UNSPECIFIED, session=True),
        ),
        (
            "/mcpd.orchestrator.v1.OrchestratorService/Claim",
            AccessRule(
                "mcpd.orchestrator.v1.OrchestratorService.Claim",
                WORKER,
                unaudited_because="a worker gets the input of the step it leases; "
                "the run's event log names it",
            ),
        ),
        (
            "/mcpd.ingest.v1.IngestService/Ingest",
            AccessRule("mcpd.ingest.v1.IngestService.Ingest", INGEST, service=True),
        ),
        (
            "/mcpd.orchestrator.v1.OrchestratorService/EraseSubjectRuns",
            AccessRule(
                "mcpd.orchestrator.v1.OrchestratorService.EraseSubjectRuns",
                UNSPECIFIED,
                internal=True,
                audit_action="erase_subject_runs",
            ),
        ),
    ],
)
def test_declared_rules(path: str, expected: AccessRule) -> None:
    assert access_rules()[path] == expected


def test_endpoint_id_is_the_audit_action_or_the_snake_case_rpc_name() -> None:
    rules = access_rules()
    assert rules["/mcpd.query.v1.QueryService/GetTrace"].endpoint_id == "get_trace"
    assert rules["/mcpd.query.v1.QueryService/GetTrace"].audited
    assert rules["/mcpd.query.v1.QueryService/GetMetricSeries"].endpoint_id == "get_metric_series"
    assert not rules["/mcpd.query.v1.QueryService/GetMetricSeries"].audited
    assert snake_case("GetTrace") == "get_trace"
    assert snake_case("Erase") == "erase"
    assert snake_case("GetHTTPStatus") == "get_http_status"


def test_rules_are_read_only() -> None:
    with pytest.raises(TypeError):
        access_rules()["/x/y"] = access_rules()["/mcpd.query.v1.QueryService/GetTrace"]  # type: ignore[index]


def _service_without_option() -> descriptor_pb2.FileDescriptorProto:
    file = descriptor_pb2.FileDescriptorProto(name="t.proto", package="t.v1", syntax="proto3")
    file.message_type.add(name="Empty")
    service = file.service.add(name="Bare")
    service.method.add(name="Do", input_type=".t.v1.Empty", output_type=".t.v1.Empty")
    return file


def test_a_method_without_an_access_option_fails_the_build() -> None:
    pool = descriptor_pool.DescriptorPool()
    pool.Add(_service_without_option())
    service = pool.FindServiceByName("t.v1.Bare")
    with pytest.raises(ValueError, match=r"t\.v1\.Bare\.Do declares no"):
        build_rules([service])


@pytest.mark.parametrize(
    ("open_", "session", "scope"),
    [
        (True, False, READ),
        (False, True, ADMIN),
        (True, True, UNSPECIFIED),
        (False, False, UNSPECIFIED),
    ],
)
def test_an_incoherent_access_option_fails_the_build(
    open_: bool, session: bool, scope: KeyScope
) -> None:
    file = _service_without_option()
    access = file.service[0].method[0].options.Extensions[access_pb2.access]
    access.open, access.session, access.scope = open_, session, scope
    pool = descriptor_pool.DescriptorPool()
    pool.Add(file)
    with pytest.raises(ValueError, match="exactly one of open, session, scope, internal"):
        build_rules([pool.FindServiceByName("t.v1.Bare")])


def _built(access: access_pb2.Access, *, route: bool = False) -> dict[str, AccessRule]:
    file = _service_without_option()
    options = file.service[0].method[0].options
    options.Extensions[access_pb2.access].CopyFrom(access)
    if route:
        options.Extensions[annotations_pb2.http].post = "/v1/api/do"
    pool = descriptor_pool.DescriptorPool()
    pool.Add(file)
    return build_rules([pool.FindServiceByName("t.v1.Bare")])


@pytest.mark.parametrize(
    ("access", "route", "problem"),
    [
        # Internal is a way in of its own, never beside another one.
        (access_pb2.Access(internal=True, scope=ADMIN), False, "exactly one of"),
        (access_pb2.Access(internal=True, open=True), False, "exactly one of"),
        (access_pb2.Access(internal=True, session=True), False, "exactly one of"),
        # A REST route would let the gateway's clients reach it.
        (access_pb2.Access(internal=True), True, "cannot have a google.api.http route"),
        # `service` widens a scope; with nothing to widen it would open the method.
        (access_pb2.Access(service=True, open=True), False, "beside a scope"),
        (access_pb2.Access(service=True, session=True), False, "beside a scope"),
        (access_pb2.Access(service=True, internal=True), False, "beside a scope"),
    ],
)
def test_an_inconsistent_service_rule_fails_the_build(
    access: access_pb2.Access, route: bool, problem: str
) -> None:
    with pytest.raises(ValueError, match=problem):
        _built(access, route=route)


def test_consistent_service_rules_build() -> None:
    (internal,) = _built(access_pb2.Access(internal=True)).values()
    assert (internal.internal, internal.accepts_service) == (True, True)
    (widened,) = _built(access_pb2.Access(scope=INGEST, service=True), route=True).values()
    assert (widened.service, widened.accepts_service, widened.scope) == (True, True, INGEST)
    (plain,) = _built(access_pb2.Access(scope=INGEST), route=True).values()
    assert not plain.accepts_service


# Scope table: granted (row) x needed (column). Admin covers execute and worker, nothing else.
@pytest.mark.parametrize(
    ("granted", "needed", "ok"),
    [
        *[(scope, scope, True) for scope in (INGEST, READ, WRITE, ADMIN, EXECUTE, WORKER)],
        (ADMIN, EXECUTE, True),
        (ADMIN, WORKER, True),
        (ADMIN, READ, False),
        (ADMIN, WRITE, False),
        (ADMIN, INGEST, False),
        (WRITE, READ, False),
        (READ, WRITE, False),
        (EXECUTE, WORKER, False),
        (WORKER, EXECUTE, False),
        (EXECUTE, ADMIN, False),
        (INGEST, READ, False),
        (UNSPECIFIED, UNSPECIFIED, False),
        (ADMIN, UNSPECIFIED, False),
    ],
)
def test_scope_satisfies(granted: KeyScope, needed: KeyScope, ok: bool) -> None:
    assert scope_satisfies(granted, needed) is ok


def test_scope_names_round_trip() -> None:
    for name in ("ingest", "read", "write", "admin", "execute", "worker"):
        assert scope_name(parse_scope(name)) == name
    with pytest.raises(ValueError, match="unknown key scope"):
        parse_scope("unspecified")
