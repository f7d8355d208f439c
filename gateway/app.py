"""The gateway's ASGI app: REST (with /healthz and OpenAPI), OTLP/HTTP, and MCP (Streamable HTTP
at /mcp)."""

from __future__ import annotations

import contextlib
import functools
from collections.abc import AsyncIterator, Callable
from typing import TYPE_CHECKING, Any

import grpc
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Mount, Route
from starlette.types import ASGIApp, Receive, Scope, Send

from gateway.access import AccessCheck
from gateway.lazy_mcp import LazyMcpEndpoint
from gateway.otlp import MAX_BODY_BYTES as OTLP_MAX_BODY_BYTES
from gateway.otlp import OPENAPI_PATHS as OTLP_OPENAPI_PATHS
from gateway.otlp import OtlpReceiver
from gateway.paths import MCP_PATH, OPENAPI_PATH
from gateway.rest import (
    HTTP_STATUS,
    ChannelFor,
    RestTranscoder,
    build_openapi,
    error_response,
    load_comments,
    load_rpcs,
)
from mcpd.auth.metadata import SERVICE_CREDENTIAL
from mcpd.version import mcpd_version

if TYPE_CHECKING:
    from gateway.mcp import McpHttpEndpoint, ToolCatalog

MAX_DEADLINE_S = 300.0
MAX_BODY_BYTES = 64 * 1024 * 1024


def create_app(
    channel_for: ChannelFor,
    *,
    default_deadline_s: float = 30.0,
    max_deadline_s: float = MAX_DEADLINE_S,
    max_body_bytes: int = MAX_BODY_BYTES,
    otlp_max_body_bytes: int = OTLP_MAX_BODY_BYTES,
    mcp_tools: Callable[[], ToolCatalog] | None = None,
) -> Starlette:
    """The gateway app.

    `channel_for` receives a proto service's full name (`mcpd.query.v1.QueryService`) and returns
    the channel to the process serving it; it is called per request, so it should hand out
    long-lived channels, and a `LookupError` from it answers 503. Every REST route, `/healthz`
    included, is generated from the `google.api.http` annotations; requests carry
    `default_deadline_s` upstream unless an `X-Mcpd-Timeout` header (capped at `max_deadline_s`)
    says otherwise. The descriptors are read and the routes built here, so a proto annotation
    the gateway cannot serve fails at start. A request with a body (REST or OTLP/HTTP) has its
    credential checked by the serving process before the body is read (`gateway.access`).

    `POST /v1/traces`, `/v1/logs` and `/v1/metrics` receive OTLP/HTTP (protobuf or JSON, gzip or
    not, at most `otlp_max_body_bytes` inflated) and relay each export to the OTLP collector
    service of its signal (`opentelemetry.proto.collector.trace.v1.TraceService`, ...), which
    `channel_for` must know, with `default_deadline_s`.

    `/mcp` serves the session-search tools of the catalogue `mcp_tools` makes (the composition
    root builds it from the tools' own schemas; without it there is no `/mcp`) over Streamable
    HTTP, forwarding each call to the query service with the caller's `Authorization`. The MCP
    endpoint is built in the background once the app starts (`gateway.lazy_mcp`) and runs in
    the app's lifespan, so the server must run it (uvicorn `lifespan="on"`).

    A request carrying the service credential's header (`x-mcpd-service-credential`) is refused
    with 403 before it is routed: only mcpd's services present that credential, to each other,
    and never through the gateway, which forwards `authorization` and trace context alone.
    """
    rpcs = load_rpcs()
    openapi_document = functools.cache(
        lambda: build_openapi(
            rpcs, describe=load_comments(), version=mcpd_version(), extra_paths=_OWN_PATHS
        )
    )

    async def openapi(request: Request) -> Response:
        return JSONResponse(openapi_document())

    access = AccessCheck(deadline_s=default_deadline_s)
    otlp = OtlpReceiver(
        channel_for,
        deadline_s=default_deadline_s,
        access=access,
        max_body_bytes=otlp_max_body_bytes,
    )
    rest = RestTranscoder(
        rpcs,
        channel_for,
        default_deadline_s=default_deadline_s,
        max_deadline_s=max_deadline_s,
        max_body_bytes=max_body_bytes,
        access=access,
        endpoints=[("GET", OPENAPI_PATH, openapi), *otlp.endpoints()],
    )
    mcp = None
    if mcp_tools is not None:
        catalog = mcp_tools

        def build_mcp() -> McpHttpEndpoint:
            from gateway.mcp import McpHttpEndpoint, UpstreamTools, build_server
            from gateway.mcp import caller_from_request as mcp_caller

            return McpHttpEndpoint(
                build_server(
                    catalog(),
                    UpstreamTools(channel_for, deadline_s=default_deadline_s),
                    caller_of=mcp_caller,
                )
            )

        mcp = LazyMcpEndpoint(build_mcp)

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        if mcp is None:
            yield
            return
        async with mcp.run():
            yield

    # /mcp, every method (an ASGI app as a Route endpoint): before the catch-all. Plain
    # endpoints such as the OTLP/HTTP receivers (POST /v1/traces, /v1/logs, /v1/metrics) are
    # registered with the transcoder, like the OpenAPI document above, so they get the same
    # 404/405 handling: a method-restricted Starlette Route placed here would only partially
    # match a wrong method and fall through to the transcoder's 404. The transcoder answers
    # everything else, so every error has the one body shape (OTLP's own failures excepted:
    # OTLP/HTTP specifies a google.rpc.Status body).
    routes: list[BaseRoute] = [] if mcp is None else [Route(MCP_PATH, endpoint=mcp)]
    routes.append(Mount("", app=rest))
    return Starlette(
        routes=routes,
        middleware=[Middleware(RefuseServiceCredential)],
        exception_handlers={HTTPException: _http_exception},
        lifespan=lifespan,
    )


class RefuseServiceCredential:
    """ASGI middleware: an HTTP request that carries the service credential's header is answered
    403 (SERVICE_CREDENTIAL_REFUSED), whatever its route; anything else goes on to `app`."""

    def __init__(self, app: ASGIApp) -> None:
        self._app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Refuse or pass on one ASGI connection."""
        if scope["type"] == "http" and any(name == _SERVICE_HEADER for name, _ in scope["headers"]):
            refusal = error_response(
                grpc.StatusCode.PERMISSION_DENIED,
                f"the {SERVICE_CREDENTIAL} header is mcpd's own: clients authenticate with "
                "authorization",
                reason=SERVICE_CREDENTIAL_REFUSED,
            )
            await refusal(scope, receive, send)
            return
        await self._app(scope, receive, send)


SERVICE_CREDENTIAL_REFUSED = "SERVICE_CREDENTIAL_REFUSED"
# ASGI header names are lowercase bytes.
_SERVICE_HEADER = SERVICE_CREDENTIAL.encode("latin-1")


_OWN_PATHS: dict[str, dict[str, Any]] = {
    **OTLP_OPENAPI_PATHS,
    OPENAPI_PATH: {
        "get": {
            "operationId": "Gateway_GetOpenApi",
            "tags": ["Gateway"],
            "summary": "This document",
            "security": [],
            "responses": {
                "200": {
                    "description": "The OpenAPI 3.1 document of the REST surface.",
                    "content": {"application/json": {"schema": {"type": "object"}}},
                },
                "4XX": {"$ref": "#/components/responses/Error"},
            },
        }
    },
}


async def _http_exception(request: Request, exc: Exception) -> Response:
    # Only reached from routes mounted beside the transcoder; keeps their errors in the one shape.
    assert isinstance(exc, HTTPException)
    code = _GRPC_FOR_HTTP.get(exc.status_code, grpc.StatusCode.UNKNOWN)
    headers: dict[str, Any] = dict(exc.headers or {})
    return error_response(code, exc.detail, http=exc.status_code, headers=headers)


# The first code the table maps to each HTTP status, so 400 reads INVALID_ARGUMENT; 405 is
# UNIMPLEMENTED as grpc-gateway reports it.
_GRPC_FOR_HTTP = {http: code for code, http in reversed(list(HTTP_STATUS.items()))}
_GRPC_FOR_HTTP[405] = grpc.StatusCode.UNIMPLEMENTED
