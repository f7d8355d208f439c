"""A stub query service for the MCP edge tests: the four tool RPCs over a real gRPC server,
answering envelopes that echo the arguments, refusing scripted keys; and the gateway before it
on a real uvicorn."""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import json
from collections.abc import AsyncIterator
from typing import Any

import grpc
import grpc.aio
from google.protobuf.struct_pb2 import Struct

from cli.http_server import HttpServer
from gateway.app import create_app
from gateway.mcp import ToolCatalog
from mcpd import codec
from mcpd.query.v1 import query_service_pb2
from mcpd.runtime.errors import PermissionDenied, ResourceExhausted, Unauthenticated
from mcpd.runtime.interceptors import ErrorInterceptor

Context = grpc.aio.ServicerContext[Any, Any]
TOOLS = ("search_sessions", "open", "list_sessions", "file_attention")


def _schemas() -> ToolCatalog:
    """A small stand-in for the tools' catalogue: strict inputs, an envelope-shaped output."""
    inputs = {
        name: {
            "type": "object",
            "properties": {"query": {"type": "string"}, "id": {"type": "string"}},
            "additionalProperties": False,
        }
        for name in TOOLS
    }
    outputs = {
        name: {
            "type": "object",
            "required": ["schema_version", "tool", "request", "data", "warnings", "performance"],
        }
        for name in TOOLS
    }
    return ToolCatalog({name: f"the {name} tool" for name in TOOLS}, inputs, outputs)


CATALOG = _schemas()


@dataclasses.dataclass
class Call:
    """One call the stub received."""

    rpc: str
    project: str
    arguments: dict[str, Any]
    metadata: dict[str, str]


RPCS = {
    "SearchSessions": "search_sessions",
    "Open": "open",
    "ListSessions": "list_sessions",
    "FileAttention": "file_attention",
}


class SessionServicer:
    """The four tool RPCs: an envelope echoing the arguments; scripted refusals.

    The envelope comes as JSON when the request asks for it, as the query service sends it, or
    always as a Struct with `struct_only`, as a query service that predates `json_envelope`."""

    def __init__(self, *, struct_only: bool = False) -> None:
        self.calls: list[Call] = []
        self.struct_only = struct_only

    def handler(self) -> grpc.GenericRpcHandler:
        """The four RPCs, served generically (the rest of QueryService is absent)."""
        return grpc.method_handlers_generic_handler(
            "mcpd.query.v1.QueryService",
            {
                rpc: grpc.unary_unary_rpc_method_handler(
                    functools.partial(self._answer, rpc, tool),
                    request_deserializer=query_service_pb2.SessionToolRequest.FromString,
                    response_serializer=query_service_pb2.SessionToolResponse.SerializeToString,
                )
                for rpc, tool in RPCS.items()
            },
        )

    async def _answer(
        self, rpc: str, tool: str, request: query_service_pb2.SessionToolRequest, context: Context
    ) -> query_service_pb2.SessionToolResponse:
        metadata = {k: v for k, v in context.invocation_metadata() or () if isinstance(v, str)}
        arguments = codec.encode(request.arguments)
        self.calls.append(Call(rpc, request.project, arguments, metadata))
        match metadata.get("authorization"):
            case "Bearer wrong":
                raise Unauthenticated("unknown key", reason="UNKNOWN_KEY")
            case "Bearer other-project":
                raise PermissionDenied("not your project", field="project")
            case "Bearer busy":
                raise ResourceExhausted("queue full")
        envelope: dict[str, Any] = {
            "schema_version": f"moraine.mcp.{tool}.v1",
            "tool": tool,
            "request": arguments,
            "data": {"results": [], "score": 1.0, "count": 3},
            "warnings": [],
            "performance": {"elapsed_ms": 1},
        }
        is_error = arguments.get("query") == "refuse"
        if is_error:
            del envelope["data"]
            envelope["schema_version"] = "moraine.mcp.error.v1"
            envelope["error"] = {"code": "invalid_request", "message": "no", "details": {}}
        if request.json_envelope and not self.struct_only:
            return query_service_pb2.SessionToolResponse(
                envelope_json=json.dumps(envelope).encode(), is_error=is_error
            )
        return query_service_pb2.SessionToolResponse(
            envelope=codec.decode(envelope, Struct), is_error=is_error
        )


@dataclasses.dataclass
class Gateway:
    url: str
    servicer: SessionServicer


@contextlib.asynccontextmanager
async def stub_gateway(*, struct_only: bool = False, **app_options: Any) -> AsyncIterator[Gateway]:
    """The gateway (stand-in catalogue) on port 0, before the stub query service."""
    servicer = SessionServicer(struct_only=struct_only)
    server = grpc.aio.server(interceptors=[ErrorInterceptor()])
    server.add_generic_rpc_handlers([servicer.handler()])
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    channel = grpc.aio.insecure_channel(f"127.0.0.1:{port}")
    app = create_app(lambda service: channel, mcp_tools=lambda: CATALOG, **app_options)
    try:
        async with HttpServer(app, "127.0.0.1:0") as http:
            yield Gateway(f"http://127.0.0.1:{http.port}/mcp", servicer)
    finally:
        await channel.close()
        await server.stop(None)
