"""The one gRPC enforcement point: authentication, scopes, the project selector, and audit.

`AuthInterceptor` runs after the `ErrorInterceptor` (which `GrpcServer` puts first), so the
errors raised here reach callers as statuses with an ErrorInfo reason. For every mcpd RPC it
wraps the handler so that, before the servicer runs:

1. the `authorization: Bearer <token>` metadata is read (open RPCs stop here: they ignore it);
2. the token (or its absence, in local mode) becomes a Principal;
3. the RPC's access rule (from its proto option) is checked;
4. a top-level string `project` field of the request is resolved by the selector rule and the
   resolved project is written back into the request, so handlers read one trusted value;
5. refusals are audited for every RPC, allowed calls for RPCs that declare an `audit_action`;
6. the principal is bound for `current_principal()` and unbound when the handler ends.

Methods that are not mcpd RPCs (health, reflection) pass through untouched.
"""

from __future__ import annotations

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
from mcpd.auth.metadata import Metadata, bearer_token, client_address
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
        """Wrap the handler of an mcpd RPC; pass anything else through."""
        handler = await continuation(handler_call_details)
        rule = self._rules.get(handler_call_details.method)
        if handler is None or rule is None or rule.open:
            return handler
        if handler.request_streaming:
            # No mcpd RPC streams requests; there would be no request to read a project from,
            # so refuse rather than guard it halfway.
            raise Internal(f"{rule.method}: client-streaming RPCs are not supported")
        metadata: Metadata = tuple(handler_call_details.invocation_metadata or ())

        async def admit(request: Any) -> Principal:
            return await self._admit(rule, metadata, request)

        return _wrap(handler, admit)

    async def _admit(self, rule: AccessRule, metadata: Metadata, request: Any) -> Principal:
        requested = _string_field(request, "project")
        token: str | None = None
        principal: Principal | None = None
        try:
            token = bearer_token(metadata)
            principal = await self._authenticator.authenticate(token)
            authorize(principal, rule)
            project = _only_project(principal)
            if requested is not None:
                project = resolve_project(principal, requested)
                request.project = project
        except (Unauthenticated, PermissionDenied) as refusal:
            # A PROJECT_REQUIRED InvalidArgument is not audited: it names no one else's data.
            if principal is not None:
                who = principal.audit_id
            else:
                who = audit_id(token) if token else ANONYMOUS
            project = requested or (_only_project(principal) if principal else "")
            await self._record_refusal(rule, who, project, request, refusal)
            raise
        if rule.audited:
            await self._record_allowed(rule, principal, project, request)
        return principal

    async def _record_allowed(
        self, rule: AccessRule, principal: Principal, project: str, request: Any
    ) -> None:
        event = self._event(rule, principal.audit_id, project, request, allowed=True)
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
        self, rule: AccessRule, who: str, project: str, request: Any, refusal: McpdError
    ) -> None:
        event = self._event(rule, who, project, request, allowed=False)
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
        self, rule: AccessRule, who: str, project: str, request: Any, *, allowed: bool
    ) -> account_pb2.AuditEvent:
        event = account_pb2.AuditEvent(
            audit_id=new_id(),
            timestamp=to_timestamp(self._clock.now()),
            principal=who,
            subject="",  # spec: proxy-asserted identity, always empty in this build
            action=rule.endpoint_id,
            project=project[:_MAX_AUDIT_TEXT],
            result=enums_pb2.AUDIT_RESULT_ALLOWED if allowed else enums_pb2.AUDIT_RESULT_REFUSED,
        )
        resource = _resource(request)
        if resource:
            event.resource = resource[:_MAX_AUDIT_TEXT]
        return event


def _wrap(handler: _Handler, admit: Callable[[Any], Awaitable[Principal]]) -> _Handler:
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
    behavior: Any, admit: Callable[[Any], Awaitable[Principal]]
) -> Callable[[Any, _Context], Awaitable[Any]]:
    async def call(request: Any, context: _Context) -> Any:
        bound = bind_principal(await admit(request))
        try:
            result = behavior(request, context)
            if inspect.isawaitable(result):
                result = await result
            return result
        finally:
            unbind_principal(bound)

    return call


def _streaming(
    behavior: Any, admit: Callable[[Any], Awaitable[Principal]]
) -> Callable[[Any, _Context], AsyncIterator[Any]]:
    async def call(request: Any, context: _Context) -> AsyncIterator[Any]:
        bound = bind_principal(await admit(request))
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
