"""The one gRPC enforcement point: authentication, scopes, the project selector, and audit.

`AuthInterceptor` runs after the `ErrorInterceptor` (which `GrpcServer` puts first), so the
errors raised here reach callers as statuses with an ErrorInfo reason. For every mcpd RPC:

1. before the request is read, from the call's metadata alone, the `authorization: Bearer
   <token>` metadata, or the `x-mcpd-service-credential` of a calling mcpd service (never both),
   becomes a Principal (open RPCs stop here: they ignore both). A call refused for its
   credential never has its request deserialized, so a caller without a valid credential cannot
   make the server parse anything;
2. a call carrying `x-mcpd-check-access` metadata stops after the RPC's access rule (from its
   proto option) is checked: it is answered with an empty message when the credential would be
   admitted (the gateway's cheap check before it reads, inflates or converts a request body),
   and refused exactly as the call itself would be;
3. once the request is deserialized, the access rule is checked, and a top-level string
   `project` field is resolved by the selector rule and the resolved project is written back
   into the request, so handlers read one trusted value;
4. refusals are audited for every RPC, allowed calls for RPCs that declare an `audit_action`;
5. the principal is bound for `current_principal()` and unbound when the handler ends.

Methods that are not mcpd RPCs (health, reflection) pass through untouched.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from typing import Any, TypeAlias

import grpc
import grpc.aio
from google.protobuf.descriptor import FieldDescriptor
from google.protobuf.message import Message

from mcpd.auth.access import AccessRule, access_rules
from mcpd.auth.audit import AuditSink, StoreAuditSink
from mcpd.auth.authenticator import Authenticator
from mcpd.auth.metadata import (
    Metadata,
    bearer_token,
    client_address,
    forwarded_address,
    is_access_check,
    service_credential,
)
from mcpd.auth.policy import authorize, resolve_project
from mcpd.auth.principal import ANONYMOUS, Principal, bind_principal, unbind_principal
from mcpd.auth.tokens import audit_id
from mcpd.model.v1 import account_pb2, enums_pb2
from mcpd.runtime.clock import Clock, to_timestamp
from mcpd.runtime.errors import Internal, McpdError, PermissionDenied, Unauthenticated, Unavailable
from mcpd.runtime.ids import new_id

# StoreAuditSink and client_address live in their own modules; they are importable from here
# too because the interceptor is where callers first look for them.
__all__ = ["AuthInterceptor", "StoreAuditSink", "client_address"]

log = logging.getLogger("mcpd.auth")

# Strings: the grpc classes are generic only in their type stubs, not at runtime.
_Context: TypeAlias = "grpc.aio.ServicerContext[Any, Any]"
_Handler: TypeAlias = "grpc.RpcMethodHandler[Any, Any]"
_Continuation: TypeAlias = "Callable[[grpc.HandlerCallDetails], Awaitable[_Handler | None]]"
# An admitted call's principal, and its audit row's write when the handler may run beside it.
_Admitted: TypeAlias = "tuple[Principal, asyncio.Future[None] | None]"

# Request fields naming what an audited call touched, in order of preference.
RESOURCE_FIELDS = ("trace_id", "dataset_id", "run_id", "id")
# Audit rows hold caller-chosen text (a requested project, a trace id); bound what one row costs.
_MAX_AUDIT_TEXT = 256


class AuthInterceptor(grpc.aio.ServerInterceptor):
    """Authenticates, authorizes, resolves the project and audits every mcpd RPC.

    `rules` defaults to `access_rules()`, the rules of every generated mcpd service.
    """

    def __init__(
        self,
        authenticator: Authenticator,
        audit: AuditSink,
        *,
        clock: Clock,
        rules: Mapping[str, AccessRule] | None = None,
    ) -> None:
        self._authenticator = authenticator
        self._audit = audit
        self._clock = clock
        self._rules = access_rules() if rules is None else rules

    async def intercept_service(
        self, continuation: _Continuation, handler_call_details: grpc.HandlerCallDetails
    ) -> _Handler | None:
        """Authenticate and authorize an mcpd RPC from its metadata, then wrap its handler so
        the project is resolved once the request is read; pass anything else through."""
        handler = await continuation(handler_call_details)
        rule = self._rules.get(handler_call_details.method)
        if handler is None or rule is None:
            return handler
        metadata: Metadata = tuple(handler_call_details.invocation_metadata or ())
        checking = is_access_check(metadata)
        if rule.open:
            return _ACCESS_GRANTED if checking else handler
        if handler.request_streaming:
            # No mcpd RPC streams requests; there would be no request to read a project from,
            # so refuse rather than guard it halfway.
            raise Internal(f"{rule.method}: client-streaming RPCs are not supported")
        # Where the call came from, as the gateway states it: on every audit row.
        source = forwarded_address(metadata)
        principal = await self._authenticate(rule, metadata, source)
        if checking:
            await self._authorize(rule, principal, None, source)
            return _ACCESS_GRANTED

        async def admit(request: Any) -> _Admitted:
            return await self._admit(rule, principal, request, source)

        return _wrap(handler, admit)

    async def _authenticate(self, rule: AccessRule, metadata: Metadata, source: str) -> Principal:
        """The caller's principal; a refusal is audited and raised."""
        secret: str | None = None
        try:
            service = service_credential(metadata)
            secret = service[1] if service is not None else bearer_token(metadata)
            if service is None:
                return await self._authenticator.authenticate(secret, source=source)
            if bearer_token(metadata) is not None:
                raise Unauthenticated(
                    "present either the service credential or an authorization, not both",
                    reason="AMBIGUOUS_CREDENTIALS",
                )
            return self._authenticator.authenticate_service(*service)
        except Unauthenticated as refusal:
            # Nothing of the request is read yet: the row names who, not what was asked for.
            who = audit_id(secret) if secret else ANONYMOUS
            await self._record_refusal(rule, who, "", None, refusal, source)
            raise

    async def _authorize(
        self, rule: AccessRule, principal: Principal, request: Any, source: str
    ) -> None:
        """Let `principal` call `rule`'s RPC (`request`, when read, names what for the audit)."""
        try:
            authorize(principal, rule)
        except (Unauthenticated, PermissionDenied) as refusal:
            requested = _string_field(request, "project") if request is not None else None
            project = requested or _only_project(principal)
            await self._record_refusal(rule, principal.audit_id, project, request, refusal, source)
            raise

    async def _admit(
        self, rule: AccessRule, principal: Principal, request: Any, source: str
    ) -> _Admitted:
        """Authorize `principal` for the request, resolve its project (written back into the
        request) and audit; the principal to bind for the handler, with the audit write still
        under way when the handler may run beside it.

        Runs once the request is read, which costs nothing a holder of a valid credential
        could not cost anyway, so a refusal's audit row can name the resource asked for.
        A read's row is written while the handler runs, and its answer waits for the row (so
        no answer leaves unaudited); any other call's row is written before the handler runs,
        so no change happens unaudited.
        """
        await self._authorize(rule, principal, request, source)
        requested = _string_field(request, "project")
        project = _only_project(principal)
        if requested is not None:
            try:
                project = resolve_project(principal, requested)
            except PermissionDenied as refusal:
                # A PROJECT_REQUIRED InvalidArgument is not audited: it names no one else's data.
                await self._record_refusal(
                    rule, principal.audit_id, requested, request, refusal, source
                )
                raise
            request.project = project
        if not rule.audited:
            return principal, None
        recording = self._record_allowed(rule, principal, project, request, source)
        if rule.reads_only:
            return principal, asyncio.ensure_future(recording)
        await recording
        return principal, None

    async def _record_allowed(
        self, rule: AccessRule, principal: Principal, project: str, request: Any, source: str
    ) -> None:
        event = self._event(rule, principal.audit_id, project, request, allowed=True, source=source)
        try:
            await self._audit.record(event)
        except Exception as exc:
            # No unaudited access: without its row, the read does not happen.
            log.error(
                "audit write failed; refusing %s",
                rule.method,
                exc_info=exc,
                extra={"rpc": rule.method},
            )
            raise Unavailable(
                "the audit log cannot be written, so the request was not served",
                reason="AUDIT_UNAVAILABLE",
            ) from exc

    async def _record_refusal(
        self,
        rule: AccessRule,
        who: str,
        project: str,
        request: Any | None,
        refusal: McpdError,
        source: str,
    ) -> None:
        event = self._event(
            rule, who, project, request, allowed=False, source=source, reason=refusal.reason
        )
        try:
            await self._audit.record(event)
        except Exception as exc:
            # The caller is refused either way; a lost refusal row must not become a 503 that
            # hides the real answer.
            log.error(
                "audit write failed for a refusal (%s) of %s",
                refusal.reason,
                rule.method,
                exc_info=exc,
                extra={"rpc": rule.method},
            )

    def _event(
        self,
        rule: AccessRule,
        who: str,
        project: str,
        request: Any | None,
        *,
        allowed: bool,
        source: str,
        reason: str = "",
    ) -> account_pb2.AuditEvent:
        event = account_pb2.AuditEvent(
            audit_id=new_id(),
            timestamp=to_timestamp(self._clock.now()),
            principal=who,
            subject="",  # spec: proxy-asserted identity, always empty in this build
            action=rule.endpoint_id,
            project=project[:_MAX_AUDIT_TEXT],
            result=enums_pb2.AUDIT_RESULT_ALLOWED if allowed else enums_pb2.AUDIT_RESULT_REFUSED,
            count=1,
        )
        resource = _resource(request) if request is not None else ""
        if resource:
            event.resource = resource[:_MAX_AUDIT_TEXT]
        if source:
            # Stated by the gateway, or by whoever reached the gRPC port directly.
            event.source = source[:_MAX_AUDIT_TEXT]
        if reason:
            event.reason = reason
        return event


async def _granted(request: bytes, context: _Context) -> bytes:
    # The empty serialization is a valid message of every type: the caller's answer type.
    return b""


# No deserializer: an access check's request is never read.
_ACCESS_GRANTED: _Handler = grpc.unary_unary_rpc_method_handler(_granted)


def _wrap(handler: _Handler, admit: Callable[[Any], Awaitable[_Admitted]]) -> _Handler:
    if handler.response_streaming:
        return grpc.unary_stream_rpc_method_handler(
            _streaming(handler.unary_stream, admit),
            request_deserializer=handler.request_deserializer,
            response_serializer=handler.response_serializer,
        )
    return grpc.unary_unary_rpc_method_handler(
        _unary(handler.unary_unary, admit),
        request_deserializer=handler.request_deserializer,
        response_serializer=handler.response_serializer,
    )


def _unary(
    behavior: Any, admit: Callable[[Any], Awaitable[_Admitted]]
) -> Callable[[Any, _Context], Awaitable[Any]]:
    async def call(request: Any, context: _Context) -> Any:
        principal, recording = await admit(request)
        bound = bind_principal(principal)
        try:
            try:
                result = behavior(request, context)
                if inspect.isawaitable(result):
                    result = await result
            finally:
                if recording is not None:
                    # A failed audit write refuses the call, whatever the handler answered.
                    await recording
            return result
        finally:
            unbind_principal(bound)

    return call


def _streaming(
    behavior: Any, admit: Callable[[Any], Awaitable[_Admitted]]
) -> Callable[[Any, _Context], AsyncIterator[Any]]:
    async def call(request: Any, context: _Context) -> AsyncIterator[Any]:
        principal, recording = await admit(request)
        if recording is not None:
            await recording  # before the first response leaves
        bound = bind_principal(principal)
        try:
            result = behavior(request, context)
            if hasattr(result, "__aiter__"):
                async for response in result:
                    yield response
            elif inspect.isawaitable(result):
                await result  # a handler that writes with context.write()
            elif result is not None:
                for response in result:
                    yield response
        finally:
            # ValueError: the generator was finalized outside the RPC's context (never drained),
            # and the binding went away with that context already.
            with contextlib.suppress(ValueError):
                unbind_principal(bound)

    return call


def _string_field(request: Any, name: str) -> str | None:
    """The value of a top-level singular string field `name`, None when there is no such field."""
    if not isinstance(request, Message):
        return None
    field = request.DESCRIPTOR.fields_by_name.get(name)
    if field is None or field.type != FieldDescriptor.TYPE_STRING or field.is_repeated:
        return None
    value = getattr(request, name)
    return value if isinstance(value, str) else None


def _resource(request: Any) -> str:
    for name in RESOURCE_FIELDS:
        value = _string_field(request, name)
        if value:
            return value
    return ""


def _only_project(principal: Principal) -> str:
    if len(principal.projects) == 1:
        (only,) = principal.projects
        return only
    return ""
