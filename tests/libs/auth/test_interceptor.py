"""The auth interceptor end to end: real server, real stubs, real status details."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any

import grpc
import grpc.aio
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from mcpd.account.v1 import account_service_pb2
from mcpd.auth.metadata import _peer_host, bearer_token
from mcpd.auth.principal import PrincipalKind
from mcpd.auth.tokens import audit_id, new_api_key
from mcpd.model.v1 import account_pb2, enums_pb2
from mcpd.query.v1 import query_service_pb2 as q
from mcpd.runtime.clock import to_timestamp
from mcpd.runtime.errors import Unauthenticated
from mcpd.runtime.errors_grpc import RpcFailure, rpc_failure_from
from tests.libs.auth.conftest import (
    ADMIN_SECRET,
    INGEST_SECRET,
    READ_SECRET,
    STREAMS,
    Served,
)

ALLOWED = enums_pb2.AUDIT_RESULT_ALLOWED
REFUSED = enums_pb2.AUDIT_RESULT_REFUSED


def bearer(secret: str) -> tuple[tuple[str, str], ...]:
    return (("authorization", f"Bearer {secret}"),)


async def failure(call: Awaitable[Any]) -> RpcFailure:
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await call
    return rpc_failure_from(caught.value)


def audit_rows(served: Served) -> list[tuple[str, str, str, str, str | None, int]]:
    """(principal, action, project, subject, resource, result) of every audit row."""
    return [
        (
            e.principal,
            e.action,
            e.project,
            e.subject,
            e.resource if e.HasField("resource") else None,
            e.result,
        )
        for e in served.store.audit
    ]


# Authentication.


async def test_no_credentials_is_unauthenticated_and_audited(served: Served) -> None:
    got = await failure(served.query.GetTrace(q.GetTraceRequest(project="a", trace_id="t1")))
    assert (got.code, got.reason) == (grpc.StatusCode.UNAUTHENTICATED, "CREDENTIALS_REQUIRED")
    # Refused before the request was read: the row names who asked, not what they asked for.
    assert audit_rows(served) == [("anonymous", "get_trace", "", "", None, REFUSED)]
    assert served.recorder.calls == []


@pytest.mark.parametrize("header", ["Basic dXNlcjpwYXNz", "Bearer", "Bearer a b", "token"])
async def test_malformed_authorization_is_unauthenticated(served: Served, header: str) -> None:
    got = await failure(
        served.query.GetCapabilities(
            q.GetCapabilitiesRequest(), metadata=(("authorization", header),)
        )
    )
    assert (got.code, got.reason) == (grpc.StatusCode.UNAUTHENTICATED, "MALFORMED_AUTHORIZATION")
    # Refused for a method that is not itself audited: every refusal is.
    assert audit_rows(served) == [("anonymous", "get_capabilities", "", "", None, REFUSED)]


async def test_unknown_token_is_audited_under_its_own_digest(served: Served) -> None:
    token = new_api_key()
    got = await failure(
        served.query.DeleteTrace(q.DeleteTraceRequest(trace_id="t9"), metadata=bearer(token))
    )
    assert (got.code, got.reason) == (grpc.StatusCode.UNAUTHENTICATED, "UNKNOWN_CREDENTIALS")
    assert audit_rows(served) == [(audit_id(token), "delete_trace", "", "", None, REFUSED)]
    assert token not in repr(served.store.audit)


async def test_scheme_is_case_insensitive(served: Served) -> None:
    metadata = (("authorization", f"bEaReR {READ_SECRET}"),)
    await served.query.GetCapabilities(q.GetCapabilitiesRequest(), metadata=metadata)
    assert [c.method for c in served.recorder.calls] == ["GetCapabilities"]


# Scopes.


async def test_wrong_scope_is_permission_denied_and_audited(served: Served) -> None:
    got = await failure(
        served.query.GetCapabilities(q.GetCapabilitiesRequest(), metadata=bearer(INGEST_SECRET))
    )
    assert (got.code, got.reason, got.metadata) == (
        grpc.StatusCode.PERMISSION_DENIED,
        "SCOPE_REQUIRED",
        {"scope": "read"},
    )
    assert audit_rows(served) == [
        (audit_id(INGEST_SECRET), "get_capabilities", "a", "", None, REFUSED)
    ]
    assert served.recorder.calls == []


async def test_admin_does_not_grant_read(served: Served) -> None:
    got = await failure(
        served.query.GetTrace(q.GetTraceRequest(project="a"), metadata=bearer(ADMIN_SECRET))
    )
    assert (got.code, got.reason) == (grpc.StatusCode.PERMISSION_DENIED, "SCOPE_REQUIRED")


async def test_right_scope_reaches_the_handler_with_the_project_filled_in(served: Served) -> None:
    response = await served.query.GetCapabilities(
        q.GetCapabilitiesRequest(), metadata=bearer(READ_SECRET)
    )
    assert response.backend == "a"  # the servicer echoes the project it was given
    [call] = served.recorder.calls
    assert call.request.project == "a"
    assert call.principal.kind is PrincipalKind.KEY
    assert call.principal.audit_id == audit_id(READ_SECRET)
    assert served.store.audit == []  # GetCapabilities declares no audit_action


async def test_session_only_method(served: Served) -> None:
    got = await failure(
        served.account.GetAccount(
            account_service_pb2.GetAccountRequest(), metadata=bearer(ADMIN_SECRET)
        )
    )
    assert (got.code, got.reason) == (grpc.StatusCode.PERMISSION_DENIED, "SESSION_REQUIRED")
    token = served.session()
    account = await served.account.GetAccount(
        account_service_pb2.GetAccountRequest(), metadata=bearer(token)
    )
    assert account == account_pb2.Account(email="bob@example.com", project="bobs")


async def test_session_reaches_its_own_project_only(served: Served) -> None:
    token = served.session(project="bobs")
    await served.query.GetCapabilities(q.GetCapabilitiesRequest(), metadata=bearer(token))
    assert served.recorder.calls[0].request.project == "bobs"
    got = await failure(
        served.query.GetCapabilities(q.GetCapabilitiesRequest(project="a"), metadata=bearer(token))
    )
    assert got.reason == "PROJECT_NOT_GRANTED"


# Projects.


async def test_multi_project_key_must_name_a_project(served: Served) -> None:
    got = await failure(
        served.query.DeleteTrace(q.DeleteTraceRequest(trace_id="t1"), metadata=bearer(ADMIN_SECRET))
    )
    assert (got.code, got.reason, got.field) == (
        grpc.StatusCode.INVALID_ARGUMENT,
        "PROJECT_REQUIRED",
        "project",
    )
    assert served.recorder.calls == []
    # Naming a granted one works, and the delete is audited as allowed.
    await served.query.DeleteTrace(
        q.DeleteTraceRequest(project="b", trace_id="t1"), metadata=bearer(ADMIN_SECRET)
    )
    assert served.recorder.calls[0].request.project == "b"
    assert audit_rows(served) == [(audit_id(ADMIN_SECRET), "delete_trace", "b", "", "t1", ALLOWED)]


async def test_another_project_is_permission_denied_and_audited(served: Served) -> None:
    got = await failure(
        served.query.GetTrace(
            q.GetTraceRequest(project="b", trace_id="t2"), metadata=bearer(READ_SECRET)
        )
    )
    assert (got.code, got.reason, got.field) == (
        grpc.StatusCode.PERMISSION_DENIED,
        "PROJECT_NOT_GRANTED",
        "project",
    )
    assert audit_rows(served) == [(audit_id(READ_SECRET), "get_trace", "b", "", "t2", REFUSED)]
    assert served.recorder.calls == []


# Audit of allowed calls.


async def test_allowed_audited_call_writes_an_allowed_row(served: Served) -> None:
    await served.query.GetTrace(q.GetTraceRequest(trace_id="t1"), metadata=bearer(READ_SECRET))
    [event] = served.store.audit
    assert event.principal == audit_id(READ_SECRET)
    assert (event.action, event.project, event.resource, event.subject) == (
        "get_trace",
        "a",
        "t1",
        "",
    )
    assert event.result == ALLOWED
    assert event.timestamp == to_timestamp(served.clock.now())
    assert len(event.audit_id) == 26
    assert [c.method for c in served.recorder.calls] == ["GetTrace"]


async def test_resource_is_absent_when_the_request_names_none(served: Served) -> None:
    await served.query.ListSpans(q.ListSpansRequest(), metadata=bearer(READ_SECRET))
    await served.query.ListSpans(q.ListSpansRequest(trace_id="t5"), metadata=bearer(READ_SECRET))
    who = audit_id(READ_SECRET)
    assert audit_rows(served) == [
        (who, "list_spans", "a", "", None, ALLOWED),
        (who, "list_spans", "a", "", "t5", ALLOWED),
    ]


async def test_rows_carry_the_stated_source_the_refusal_reason_and_a_count_of_one(
    served: Served,
) -> None:
    forwarded = (*bearer(READ_SECRET), ("x-forwarded-for", "203.0.113.7, 10.0.0.1"))
    await served.query.GetTrace(q.GetTraceRequest(trace_id="t1"), metadata=forwarded)
    await failure(
        served.query.GetTrace(q.GetTraceRequest(project="b"), metadata=bearer(READ_SECRET))
    )
    allowed, refused = served.store.audit
    assert (allowed.source, allowed.count, allowed.HasField("reason")) == ("203.0.113.7", 1, False)
    # A direct gRPC caller states no address, and the check sees only the call's metadata.
    assert (refused.HasField("source"), refused.count) == (False, 1)
    assert refused.reason == "PROJECT_NOT_GRANTED"


async def test_an_audit_write_failure_fails_an_allowed_call(served: Served) -> None:
    served.store.fail_audit = True
    got = await failure(
        served.query.GetTrace(q.GetTraceRequest(trace_id="t1"), metadata=bearer(READ_SECRET))
    )
    assert (got.code, got.reason) == (grpc.StatusCode.UNAVAILABLE, "AUDIT_UNAVAILABLE")
    # A read runs beside its audit write; its answer is refused with it: no unaudited read.
    assert [call.method for call in served.recorder.calls] == ["GetTrace"]
    # Unaudited methods do not depend on the audit log.
    await served.query.GetCapabilities(q.GetCapabilitiesRequest(), metadata=bearer(READ_SECRET))


async def test_an_audit_write_failure_keeps_a_change_from_happening(served: Served) -> None:
    served.store.fail_audit = True
    got = await failure(
        served.query.DeleteTrace(
            q.DeleteTraceRequest(project="b", trace_id="t1"), metadata=bearer(ADMIN_SECRET)
        )
    )
    assert (got.code, got.reason) == (grpc.StatusCode.UNAVAILABLE, "AUDIT_UNAVAILABLE")
    assert served.recorder.calls == []  # the handler never ran: no unaudited change


async def test_an_audit_write_failure_still_refuses(served: Served) -> None:
    served.store.fail_audit = True
    got = await failure(
        served.query.GetTrace(q.GetTraceRequest(project="b"), metadata=bearer(READ_SECRET))
    )
    assert (got.code, got.reason) == (grpc.StatusCode.PERMISSION_DENIED, "PROJECT_NOT_GRANTED")


# Authentication before the request is read.

GET_TRACE = "/mcpd.query.v1.QueryService/GetTrace"
NOT_PROTOBUF = b"\xff\xff\xff\xff"  # a field tag with a varint that never ends
CHECK = (("x-mcpd-check-access", "1"),)


def raw(served: Served, path: str) -> grpc.aio.UnaryUnaryMultiCallable[bytes, bytes]:
    """A call of `path` that sends and returns bytes as they are."""
    return served.channel.unary_unary(path)


async def test_a_refused_request_is_never_read(served: Served) -> None:
    # Bytes that do not decode: refused for the credential, not for the bytes.
    got = await failure(raw(served, GET_TRACE)(NOT_PROTOBUF))
    assert (got.code, got.reason) == (grpc.StatusCode.UNAUTHENTICATED, "CREDENTIALS_REQUIRED")
    got = await failure(raw(served, GET_TRACE)(NOT_PROTOBUF, metadata=bearer(new_api_key())))
    assert (got.code, got.reason) == (grpc.StatusCode.UNAUTHENTICATED, "UNKNOWN_CREDENTIALS")
    assert served.recorder.calls == []


async def test_an_undecodable_request_is_invalid_argument_logged_in_one_line(
    served: Served, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.INFO):
        got = await failure(raw(served, GET_TRACE)(NOT_PROTOBUF, metadata=bearer(READ_SECRET)))
    assert (got.code, got.reason) == (grpc.StatusCode.INVALID_ARGUMENT, "MALFORMED_PROTOBUF")
    assert GET_TRACE in got.message
    assert len(got.message) < 200
    [record] = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert record.levelno == logging.WARNING
    assert record.exc_info is None
    assert "undecodable request" in record.getMessage()
    assert served.recorder.calls == []


async def test_an_access_check_answers_without_calling_or_auditing(served: Served) -> None:
    answer = await raw(served, GET_TRACE)(NOT_PROTOBUF, metadata=(*CHECK, *bearer(READ_SECRET)))
    assert answer == b""
    assert served.recorder.calls == []
    assert served.store.audit == []  # the call itself, when it comes, is audited


async def test_an_access_check_is_refused_and_audited_as_the_call_would_be(
    served: Served,
) -> None:
    got = await failure(raw(served, GET_TRACE)(b"", metadata=(*CHECK, *bearer(INGEST_SECRET))))
    assert (got.code, got.reason, got.metadata) == (
        grpc.StatusCode.PERMISSION_DENIED,
        "SCOPE_REQUIRED",
        {"scope": "read"},
    )
    got = await failure(raw(served, GET_TRACE)(b"", metadata=CHECK))
    assert (got.code, got.reason) == (grpc.StatusCode.UNAUTHENTICATED, "CREDENTIALS_REQUIRED")
    assert audit_rows(served) == [
        (audit_id(INGEST_SECRET), "get_trace", "a", "", None, REFUSED),
        ("anonymous", "get_trace", "", "", None, REFUSED),
    ]
    assert served.recorder.calls == []


async def test_an_access_check_of_an_open_method_is_granted(served: Served) -> None:
    health = "/mcpd.query.v1.QueryService/GetHealth"
    assert await raw(served, health)(b"", metadata=CHECK) == b""
    assert served.recorder.calls == []


# Open methods, non-mcpd methods, local mode.


async def test_open_method_needs_no_credentials_and_ignores_the_header(served: Served) -> None:
    assert (await served.query.GetHealth(q.GetHealthRequest())).status == "ok"
    garbage = (("authorization", "Basic nonsense"),)
    assert (await served.query.GetHealth(q.GetHealthRequest(), metadata=garbage)).status == "ok"
    assert served.store.audit == []


async def test_health_and_other_non_mcpd_services_pass_through(served: Served) -> None:
    health = health_pb2_grpc.HealthStub(served.channel)
    response = await health.Check(health_pb2.HealthCheckRequest(service=""))
    assert response.status == health_pb2.HealthCheckResponse.SERVING


async def test_local_mode_serves_anonymous_on_the_local_project(local: Served) -> None:
    await local.query.GetTrace(q.GetTraceRequest(trace_id="t1"))
    [call] = local.recorder.calls
    assert call.principal.kind is PrincipalKind.ANONYMOUS
    assert call.request.project == "default"
    assert audit_rows(local) == [("anonymous", "get_trace", "default", "", "t1", ALLOWED)]
    got = await failure(local.account.GetAccount(account_service_pb2.GetAccountRequest()))
    assert (got.code, got.reason) == (grpc.StatusCode.UNAUTHENTICATED, "SESSION_REQUIRED")


async def test_local_mode_refuses_a_client_relayed_from_another_address(local: Served) -> None:
    relayed = (("x-forwarded-for", "203.0.113.7"),)
    got = await failure(local.query.GetCapabilities(q.GetCapabilitiesRequest(), metadata=relayed))
    assert (got.code, got.reason) == (grpc.StatusCode.UNAUTHENTICATED, "CREDENTIALS_REQUIRED")
    [event] = local.store.audit
    assert (event.principal, event.source, event.result) == ("anonymous", "203.0.113.7", REFUSED)
    local_client = (("x-forwarded-for", "127.0.0.1"),)
    await local.query.GetCapabilities(q.GetCapabilitiesRequest(), metadata=local_client)
    assert [c.method for c in local.recorder.calls] == ["GetCapabilities"]


async def test_local_mode_ends_when_an_account_appears(local: Served) -> None:
    await local.query.GetCapabilities(q.GetCapabilitiesRequest())
    token = local.session()
    got = await failure(local.query.GetCapabilities(q.GetCapabilitiesRequest()))
    assert got.reason == "CREDENTIALS_REQUIRED"
    await local.query.GetCapabilities(q.GetCapabilitiesRequest(), metadata=bearer(token))


# The principal's lifetime.


async def test_principal_is_bound_during_the_call_and_reset_after(served: Served) -> None:
    await served.query.GetTrace(q.GetTraceRequest(trace_id="t1"), metadata=bearer(READ_SECRET))
    await served.query.GetHealth(q.GetHealthRequest())
    assert served.recorder.calls[0].principal.audit_id == audit_id(READ_SECRET)
    # Seen by the probe interceptor right outside the auth wrapper, after each handler.
    assert served.recorder.bound_after == [None, None]


# Streaming.


async def test_server_streaming_is_guarded_and_binds_the_principal(served: Served) -> None:
    count: Callable[..., grpc.aio.UnaryStreamCall[bytes, bytes]] = served.channel.unary_stream(
        f"/{STREAMS}/Count"
    )
    answers = [r async for r in count(b"3", metadata=bearer(READ_SECRET))]
    assert answers == [b"0", b"1", b"2"]
    assert {c.principal.audit_id for c in served.recorder.calls} == {audit_id(READ_SECRET)}
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        _ = [r async for r in count(b"3")]
    assert rpc_failure_from(caught.value).reason == "CREDENTIALS_REQUIRED"


async def test_client_streaming_mcpd_rpcs_fail_closed(served: Served) -> None:
    upload: grpc.aio.StreamUnaryMultiCallable[bytes, bytes] = served.channel.stream_unary(
        f"/{STREAMS}/Upload"
    )
    got = await failure(upload(iter([b"x"]), metadata=bearer(READ_SECRET)))
    assert got.code == grpc.StatusCode.INTERNAL


# Helpers: the bearer header and the client address.


def test_bearer_token_parsing() -> None:
    assert bearer_token(()) is None
    assert bearer_token((("x-other", "1"),)) is None
    assert bearer_token((("authorization", "Bearer  abc "),)) == "abc"
    for bad in (
        (("authorization", "Bearer abc"), ("authorization", "Bearer def")),
        (("authorization", ""),),
        (("authorization", b"Bearer abc"),),
    ):
        with pytest.raises(Unauthenticated) as caught:
            bearer_token(bad)
        assert caught.value.reason == "MALFORMED_AUTHORIZATION"


async def test_client_address_prefers_the_forwarded_for_header(served: Served) -> None:
    await served.query.GetCapabilities(q.GetCapabilitiesRequest(), metadata=bearer(READ_SECRET))
    forwarded = (*bearer(READ_SECRET), ("x-forwarded-for", "203.0.113.7, 10.0.0.1"))
    await served.query.GetCapabilities(q.GetCapabilitiesRequest(), metadata=forwarded)
    direct, proxied = served.recorder.calls
    assert (direct.address, direct.direct_address) == ("127.0.0.1", "127.0.0.1")
    assert (proxied.address, proxied.direct_address) == ("203.0.113.7", "127.0.0.1")


def test_peer_host_drops_the_port() -> None:
    assert _peer_host("ipv4:10.1.2.3:5555") == "10.1.2.3"
    assert _peer_host("ipv6:[::1]:5555") == "::1"
    assert _peer_host("unix:/tmp/sock") == "unix:/tmp/sock"
