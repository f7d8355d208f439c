"""The service credential at the auth interceptor: accepted only where the access rules say,
audited as the calling service, never mixed with a client's credential, never logged."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator

import grpc
import pytest

from mcpd.auth.metadata import SERVICE_CREDENTIAL
from mcpd.auth.principal import PrincipalKind
from mcpd.auth.service_identity import ServiceCredential
from mcpd.auth.tokens import audit_id
from mcpd.model.v1 import enums_pb2, telemetry_pb2
from mcpd.orchestrator.v1 import orchestrator_service_pb2 as o
from mcpd.query.v1 import query_service_pb2 as q
from tests.libs.auth.conftest import ADMIN_SECRET, CONFIGURED, SERVICE_SECRET, Served, serve
from tests.libs.auth.test_interceptor import audit_rows, bearer, failure

ALLOWED = enums_pb2.AUDIT_RESULT_ALLOWED
REFUSED = enums_pb2.AUDIT_RESULT_REFUSED
AS_QUERY = ServiceCredential(SERVICE_SECRET).metadata("query")
ERASE = o.EraseSubjectRunsRequest(project="b", user_ids=["u-hash", "u"])


async def test_a_service_erases_runs_in_the_project_it_names_audited_as_itself(
    served: Served,
) -> None:
    answer = await served.orchestrator.EraseSubjectRuns(ERASE, metadata=AS_QUERY)

    assert answer.runs_erased == 2
    (call,) = served.recorder.calls
    assert call.principal.kind is PrincipalKind.SERVICE
    assert call.principal.audit_id == "service:query"
    assert call.request.project == "b"
    assert audit_rows(served) == [("service:query", "erase_subject_runs", "b", "", None, ALLOWED)]


async def test_no_client_credential_reaches_an_internal_rpc(served: Served) -> None:
    # An admin key of the very project: refused, and the refusal is audited.
    refused = await failure(
        served.orchestrator.EraseSubjectRuns(ERASE, metadata=bearer(ADMIN_SECRET))
    )
    assert (refused.code, refused.reason) == (grpc.StatusCode.PERMISSION_DENIED, "INTERNAL_RPC")
    missing = await failure(served.orchestrator.EraseSubjectRuns(ERASE))
    assert (missing.code, missing.reason) == (
        grpc.StatusCode.UNAUTHENTICATED,
        "CREDENTIALS_REQUIRED",
    )
    assert served.recorder.calls == []
    rows = audit_rows(served)
    assert (audit_id(ADMIN_SECRET), "erase_subject_runs", "b", "", None, REFUSED) in rows


async def test_local_mode_does_not_reach_an_internal_rpc(local: Served) -> None:
    refused = await failure(local.orchestrator.EraseSubjectRuns(ERASE))
    assert (refused.code, refused.reason) == (grpc.StatusCode.PERMISSION_DENIED, "INTERNAL_RPC")
    # ... while the service credential does, in local mode too.
    assert (await local.orchestrator.EraseSubjectRuns(ERASE, metadata=AS_QUERY)).runs_erased == 2


async def test_a_public_rpc_refuses_the_service_credential_alone(served: Served) -> None:
    refused = await failure(
        served.query.GetCapabilities(q.GetCapabilitiesRequest(project="a"), metadata=AS_QUERY)
    )
    assert (refused.code, refused.reason) == (
        grpc.StatusCode.PERMISSION_DENIED,
        "SERVICE_NOT_ACCEPTED",
    )
    assert served.recorder.calls == []
    assert ("service:query", "get_capabilities", "a", "", None, REFUSED) in audit_rows(served)


async def test_a_public_rpc_that_services_call_accepts_it_and_clients_keys_still(
    served: Served,
) -> None:
    batch = telemetry_pb2.IngestBatch(spans=[telemetry_pb2.Span(name="timer fired")])
    assert (await served.ingest.Ingest(batch, metadata=AS_QUERY)).accepted == 1
    (call,) = served.recorder.calls
    assert call.principal.audit_id == "service:query"
    refused = await failure(served.ingest.Ingest(batch, metadata=bearer(ADMIN_SECRET)))
    assert refused.reason == "SCOPE_REQUIRED"  # the rule's scope is unchanged for keys


async def test_a_service_names_the_project_it_acts_on(served: Served) -> None:
    refused = await failure(
        served.orchestrator.EraseSubjectRuns(o.EraseSubjectRunsRequest(), metadata=AS_QUERY)
    )
    assert (refused.code, refused.reason, refused.field) == (
        grpc.StatusCode.INVALID_ARGUMENT,
        "PROJECT_REQUIRED",
        "project",
    )


async def test_a_wrong_credential_is_refused_and_audited_by_digest(
    served: Served, caplog: pytest.LogCaptureFixture
) -> None:
    forged = "mcpd_c_not-the-credential-of-this-deployment"
    with caplog.at_level(logging.DEBUG):
        refused = await failure(
            served.orchestrator.EraseSubjectRuns(
                ERASE, metadata=ServiceCredential(forged).metadata("query")
            )
        )
        await served.orchestrator.EraseSubjectRuns(ERASE, metadata=AS_QUERY)
    assert (refused.code, refused.reason) == (
        grpc.StatusCode.UNAUTHENTICATED,
        "UNKNOWN_CREDENTIALS",
    )
    assert (audit_id(forged), "erase_subject_runs", "", "", None, REFUSED) in audit_rows(served)
    for secret in (forged, SERVICE_SECRET):
        assert secret not in caplog.text
        assert all(secret not in str(event) for event in served.store.audit)


async def test_a_call_presenting_both_credentials_is_refused(served: Served) -> None:
    both = (*AS_QUERY, *bearer(ADMIN_SECRET))
    refused = await failure(served.orchestrator.EraseSubjectRuns(ERASE, metadata=both))
    assert (refused.code, refused.reason) == (
        grpc.StatusCode.UNAUTHENTICATED,
        "AMBIGUOUS_CREDENTIALS",
    )
    malformed = await failure(
        served.orchestrator.EraseSubjectRuns(ERASE, metadata=((SERVICE_CREDENTIAL, "query"),))
    )
    assert malformed.reason == "MALFORMED_SERVICE_CREDENTIAL"
    assert served.recorder.calls == []


@pytest.fixture
async def without_service() -> AsyncIterator[Served]:
    """A server that was given no service credential."""
    async with serve(CONFIGURED, service_secret=None) as running:
        yield running


async def test_a_server_without_a_service_credential_accepts_none(
    without_service: Served,
) -> None:
    refused = await failure(without_service.orchestrator.EraseSubjectRuns(ERASE, metadata=AS_QUERY))
    assert refused.reason == "UNKNOWN_CREDENTIALS"
