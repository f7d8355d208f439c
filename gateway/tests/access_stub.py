"""An upstream's answer to the gateway's access checks, for servers that stand in for mcpd's."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, TypeAlias

import grpc
import grpc.aio

from mcpd.auth.metadata import Metadata, is_access_check
from mcpd.runtime.errors import PermissionDenied, Unauthenticated

# Strings: the grpc classes are generic only in their type stubs, not at runtime.
Context: TypeAlias = "grpc.aio.ServicerContext[Any, Any]"
Handler: TypeAlias = "grpc.RpcMethodHandler[Any, Any]"


class AccessCheckStub(grpc.aio.ServerInterceptor):
    """Answers calls carrying `x-mcpd-check-access` as mcpd's auth interceptor does, deciding by
    the caller's `authorization`: `Bearer wrong` UNAUTHENTICATED, `Bearer forbidden`
    PERMISSION_DENIED, anything else granted (an empty answer). Other calls pass through.

    Put it after the ErrorInterceptor, which maps what it raises. `checks` lists the method
    of every check, in order.
    """

    def __init__(self) -> None:
        self.checks: list[str] = []

    async def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], Awaitable[Handler | None]],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> Handler | None:
        metadata: Metadata = tuple(handler_call_details.invocation_metadata or ())
        if not is_access_check(metadata):
            return await continuation(handler_call_details)
        self.checks.append(handler_call_details.method)
        match dict(metadata).get("authorization"):
            case "Bearer wrong":
                raise Unauthenticated("unknown key", reason="UNKNOWN_KEY")
            case "Bearer forbidden":
                raise PermissionDenied("this key may not do that", reason="SCOPE")
        return grpc.unary_unary_rpc_method_handler(_granted)


async def _granted(request: bytes, context: Context) -> bytes:
    return b""
