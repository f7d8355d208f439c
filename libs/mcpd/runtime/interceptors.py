"""Server interceptors shared by every mcpd gRPC server.

`ErrorInterceptor` is where handler exceptions become statuses, so servicers just raise:

- `McpdError` -> its code and message, with one `google.rpc.ErrorInfo` in the status details;
- grpc's own abort (`context.abort`, including `abort_with`) -> passed through untouched;
- `NotImplementedError` (what the generated base servicers raise) -> UNIMPLEMENTED;
- any other `Exception` -> INTERNAL "internal error", stack logged with an incident id that the
  caller also receives, so a bug report can be matched to the log without leaking internals;
- a request that does not decode as the method's message -> INVALID_ARGUMENT
  (MALFORMED_PROTOBUF), with one warning line and no stack: it is the caller's mistake (or a
  probe's), and grpc's own answer would be UNKNOWN with a traceback per call.

Only `Exception` is caught: `asyncio.CancelledError` (a client that went away, a server
shutting down) must keep propagating.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, TypeAlias

import grpc
import grpc.aio

from mcpd.runtime.errors import Internal, InvalidArgument, McpdError, Unimplemented
from mcpd.runtime.errors_grpc import abort_with
from mcpd.runtime.ids import new_id

log = logging.getLogger("mcpd.runtime.grpc")

# Strings: the grpc classes are generic only in their type stubs, not at runtime.
_Context: TypeAlias = "grpc.aio.ServicerContext[Any, Any]"
_Handler: TypeAlias = "grpc.RpcMethodHandler[Any, Any]"
_Continuation: TypeAlias = "Callable[[grpc.HandlerCallDetails], Awaitable[_Handler | None]]"
_Deserializer: TypeAlias = "Callable[[bytes], Any] | None"

MALFORMED_PROTOBUF = "MALFORMED_PROTOBUF"


class ErrorInterceptor(grpc.aio.ServerInterceptor):
    """Maps exceptions raised by handlers (unary or streaming) to gRPC statuses."""

    async def intercept_service(
        self, continuation: _Continuation, handler_call_details: grpc.HandlerCallDetails
    ) -> _Handler | None:
        """Wrap the handler's behaviour; interceptors after this one that raise are mapped too."""
        method = handler_call_details.method
        try:
            handler = await continuation(handler_call_details)
        except Exception as exc:
            # An interceptor further in refused the call (authentication, admission) before any
            # behaviour existed: answer with a handler that reports the same mapped error.
            return _failing_handler(method, exc)
        if handler is None:
            return None  # unknown method: grpc answers UNIMPLEMENTED itself
        return _wrap(handler, method)


def _failing_handler(method: str, exc: Exception) -> _Handler:
    async def fail(request: object, context: _Context) -> None:
        await _report(exc, method, context)

    # A unary handler without deserializer answers any call shape: it only needs to abort.
    return grpc.unary_unary_rpc_method_handler(fail)


class _Undecodable:
    """What a request that failed to deserialize becomes, so the handler can refuse it."""

    __slots__ = ("error",)

    def __init__(self, error: Exception) -> None:
        self.error = error


def _tolerant(deserializer: _Deserializer) -> _Deserializer:
    """`deserializer`, answering `_Undecodable` instead of raising inside grpc."""
    if deserializer is None:
        return None

    def deserialize(data: bytes) -> Any:
        try:
            return deserializer(data)
        except Exception as exc:  # DecodeError, or whatever a custom deserializer raises
            return _Undecodable(exc)

    return deserialize


def _refuse_undecodable(request: object, method: str) -> None:
    if isinstance(request, _Undecodable):
        # The error's text is upb's, short and about the bytes; never the bytes themselves.
        log.warning(
            "%s: undecodable request refused (%s)", method, request.error, extra={"rpc": method}
        )
        raise InvalidArgument(
            f"the request is not a valid protobuf message for {method}",
            reason=MALFORMED_PROTOBUF,
        )


def _wrap(handler: _Handler, method: str) -> _Handler:
    if handler.request_streaming and handler.response_streaming:
        return grpc.stream_stream_rpc_method_handler(
            _streaming(handler.stream_stream, method),
            request_deserializer=handler.request_deserializer,
            response_serializer=handler.response_serializer,
        )
    if handler.request_streaming:
        return grpc.stream_unary_rpc_method_handler(
            _unary(handler.stream_unary, method),
            request_deserializer=handler.request_deserializer,
            response_serializer=handler.response_serializer,
        )
    # A unary request is read before any handler runs: refused in the handler, not by grpc.
    deserializer = _tolerant(handler.request_deserializer)
    if handler.response_streaming:
        return grpc.unary_stream_rpc_method_handler(
            _streaming(handler.unary_stream, method),
            request_deserializer=deserializer,
            response_serializer=handler.response_serializer,
        )
    return grpc.unary_unary_rpc_method_handler(
        _unary(handler.unary_unary, method),
        request_deserializer=deserializer,
        response_serializer=handler.response_serializer,
    )


def _unary(behavior: Any, method: str) -> Callable[[Any, _Context], Awaitable[Any]]:
    async def call(request: Any, context: _Context) -> Any:
        try:
            _refuse_undecodable(request, method)
            # grpc.aio accepts plain functions as handlers too (the generated base servicer's
            # methods are); run those inline, as grpc would without a migration thread pool.
            result = behavior(request, context)
            if inspect.isawaitable(result):
                result = await result
            return result
        except Exception as exc:
            await _report(exc, method, context)

    return call


def _streaming(behavior: Any, method: str) -> Callable[[Any, _Context], AsyncIterator[Any]]:
    async def call(request: Any, context: _Context) -> AsyncIterator[Any]:
        try:
            _refuse_undecodable(request, method)
            result = behavior(request, context)
            if hasattr(result, "__aiter__"):
                async for response in result:
                    yield response
            elif inspect.isawaitable(result):
                # A coroutine handler that writes with context.write() and returns nothing.
                await result
            elif result is not None:
                for response in result:
                    yield response
        except Exception as exc:
            await _report(exc, method, context)

    return call


async def _report(exc: Exception, method: str, context: _Context) -> None:
    """End the RPC with the status for `exc`; re-raise when grpc already ended it."""
    if isinstance(exc, grpc.aio.AbortError) or context.done():
        # The handler aborted (the status is on its way), or the RPC is over: nothing to add.
        raise exc
    err: McpdError
    if isinstance(exc, McpdError):
        err = exc
        if isinstance(exc, Internal):
            log.error("%s failed: %s", method, exc.message, exc_info=exc, extra={"rpc": method})
    elif isinstance(exc, NotImplementedError):
        err = Unimplemented(f"{method} is not implemented")
    else:
        incident = new_id()
        log.error(
            "unexpected error in %s (incident %s)",
            method,
            incident,
            exc_info=exc,
            extra={"rpc": method, "incident_id": incident},
        )
        err = Internal("internal error", metadata={"incident_id": incident})
    await abort_with(context, err)
