"""The tools as the query service serves them: one unary gRPC call per tool call."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import grpc
import grpc.aio
import orjson
from google.protobuf.struct_pb2 import Struct

from gateway.mcp.catalog import TOOL_RPCS
from gateway.mcp.envelopes import ToolAnswer, elapsed_since, error_answer, failure_answer
from gateway.mcp.server import Caller
from mcpd import codec
from mcpd.query.v1 import query_service_pb2
from mcpd.runtime.errors_grpc import rpc_failure_from

QUERY_SERVICE = query_service_pb2.DESCRIPTOR.services_by_name["QueryService"].full_name

ChannelFor = Callable[[str], grpc.aio.Channel]


class UpstreamTools:
    """A `ToolBackend` calling `mcpd.query.v1.QueryService` with the caller's metadata.

    The auth interceptor of the query service authenticates the forwarded `authorization`,
    checks the scope, resolves the project selector and audits; nothing is enforced here.
    """

    def __init__(self, channel_for: ChannelFor, *, deadline_s: float) -> None:
        if deadline_s <= 0:
            raise ValueError("deadline_s must be positive")
        self._channel_for = channel_for
        self._deadline_s = deadline_s

    async def call(self, tool: str, arguments: dict[str, Any], caller: Caller) -> ToolAnswer:
        """Send the call to the query service; a failed RPC becomes an error envelope."""
        began = time.monotonic()
        # codec.decode refuses what a Struct cannot carry (too deep, not finite) as
        # InvalidArgument, which the server turns into `invalid_request`.
        request = query_service_pb2.SessionToolRequest(
            project=caller.project,
            arguments=codec.decode(arguments, Struct, path="arguments"),
            json_envelope=True,
        )
        try:
            channel = self._channel_for(QUERY_SERVICE)
        except LookupError:
            return error_answer(
                tool,
                arguments,
                "backend_failure",
                f"no upstream is configured for {QUERY_SERVICE}",
                details={"retryable": False},
                elapsed_ms=elapsed_since(began),
            )
        rpc = channel.unary_unary(
            f"/{QUERY_SERVICE}/{TOOL_RPCS[tool]}",
            request_serializer=query_service_pb2.SessionToolRequest.SerializeToString,
            response_deserializer=query_service_pb2.SessionToolResponse.FromString,
        )
        try:
            response: query_service_pb2.SessionToolResponse = await rpc(
                request, timeout=self._deadline_s, metadata=caller.metadata
            )
        except grpc.aio.AioRpcError as exc:
            return failure_answer(
                tool, arguments, rpc_failure_from(exc), elapsed_ms=elapsed_since(began)
            )
        except grpc.aio.UsageError as exc:
            # A closed channel: the process is shutting down or the peer went away.
            return error_answer(
                tool,
                arguments,
                "backend_failure",
                f"the query service is not reachable: {exc}",
                details={"retryable": True},
                elapsed_ms=elapsed_since(began),
            )
        return ToolAnswer(envelope_of(response), is_error=response.is_error)


def envelope_of(response: query_service_pb2.SessionToolResponse) -> dict[str, Any]:
    """The envelope of a tool's response, sent as JSON or as a Struct."""
    if response.HasField("envelope"):
        # A query service that predates `json_envelope` (a rolling upgrade) sends a Struct;
        # codec.encode gives integral numbers back as JSON integers (a Struct holds doubles).
        return codec.encode(response.envelope)
    envelope: dict[str, Any] = orjson.loads(response.envelope_json)
    return envelope
