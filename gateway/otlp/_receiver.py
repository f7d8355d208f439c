"""The OTLP/HTTP receiver: `POST /v1/traces`, `/v1/logs`, `/v1/metrics`, relayed over gRPC.

The gateway maps nothing and parses a binary body not at all: it inflates a gzip body, turns
OTLP/JSON into the protobuf of the signal's Export*ServiceRequest (within the size limit), and
calls the opentelemetry-proto collector service's `Export` on the ingest role with the caller's
credentials, passing binary protobuf as the bytes it came in, so the service is the one place
that parses it (and refuses bytes that do not decode with INVALID_ARGUMENT MALFORMED_PROTOBUF,
which reaches the client as a 400). The service's Export*ServiceResponse (partial success
included) or failure comes back in the request's encoding.
"""

from __future__ import annotations

import asyncio
import functools
import logging

import grpc
import grpc.aio
from google.rpc import status_pb2
from starlette.requests import Request
from starlette.responses import Response

from gateway.access import AccessCheck
from gateway.otlp import _json
from gateway.otlp._body import Encoding, gunzip, is_gzipped, media_type, read_body
from gateway.otlp._signals import SIGNALS, Signal
from gateway.otlp._status import RefusalError, encode_status, upstream_failure
from gateway.rest import UPSTREAM_NOT_CONFIGURED, ChannelFor, Endpoint, forwarded_metadata
from mcpd.runtime.errors import Internal, McpdError, Unavailable

log = logging.getLogger("mcpd.gateway.otlp")

MAX_BODY_BYTES = 20 * 1024 * 1024
"""The default limit of a request body, compressed and inflated: OTLP's recommended 20 MiB."""

# Preparing a body larger than this (its inflated size estimated from the compressed one) runs in
# a worker thread, so one large export does not hold up every other request on the event loop.
# Below it the hop to a thread costs more than the work: inflating is fast, reading JSON is slow
# (Python builds the message), and a binary body is passed on untouched.
_INLINE_LIMIT = {Encoding.PROTOBUF: 1024 * 1024, Encoding.JSON: 32 * 1024}
_GZIP_RATIO_GUESS = 8


class OtlpReceiver:
    """The three OTLP/HTTP export endpoints, relaying to the OTLP collector services.

    `channel_for` is the gateway's (called with the collector service's full name,
    `opentelemetry.proto.collector.trace.v1.TraceService`, per request; a `LookupError` answers
    503). Every upstream call carries `deadline_s` and the caller's `Authorization`, W3C trace
    context and address, as the REST transcoder forwards them. Before the body is read, `access`
    checks the caller's credential with the ingest process (`gateway.access`).
    """

    def __init__(
        self,
        channel_for: ChannelFor,
        *,
        deadline_s: float,
        access: AccessCheck,
        max_body_bytes: int = MAX_BODY_BYTES,
    ) -> None:
        if deadline_s <= 0 or max_body_bytes <= 0:
            raise ValueError("need a positive deadline_s and max_body_bytes")
        self._channel_for = channel_for
        self._deadline_s = deadline_s
        self._access = access
        self._max_body_bytes = max_body_bytes

    def endpoints(self) -> list[tuple[str, str, Endpoint]]:
        """`(method, path, endpoint)` of each signal, for the transcoder's `endpoints=`."""
        return [("POST", signal.path, functools.partial(self.export, signal)) for signal in SIGNALS]

    async def export(self, signal: Signal, request: Request) -> Response:
        """Serve one OTLP/HTTP export request of `signal`."""
        # Until the request says otherwise, failures are written in JSON (readable with curl).
        media, encoding = "application/json", Encoding.JSON
        try:
            media, encoding = media_type(request)
            answer = await self._relay(signal, request, encoding)
            if encoding is Encoding.JSON:
                answer = _json.encode(signal.response_class.FromString(answer))
            return Response(answer, media_type=media)
        except RefusalError as refusal:
            failed = refusal
        except McpdError as err:
            failed = RefusalError.of(err)
        except grpc.aio.AioRpcError as exc:
            http, status, headers = upstream_failure(exc)
            return _failure(http, status, media, encoding, headers)
        except Exception:
            log.exception("unhandled error serving POST %s", signal.path)
            failed = RefusalError.of(Internal("internal error"))
        return _failure(failed.http, failed.status(), media, encoding, failed.headers)

    async def _relay(self, signal: Signal, request: Request, encoding: Encoding) -> bytes:
        gzipped = is_gzipped(request)
        metadata = forwarded_metadata(request)
        try:
            channel = self._channel_for(signal.service)
        except LookupError:
            raise Unavailable(
                f"no upstream is configured for {signal.service}", reason=UPSTREAM_NOT_CONFIGURED
            ) from None
        # The credential first: reading, inflating and decoding the body is the costly part.
        await self._access.require(channel, signal.grpc_path, metadata)
        body = await read_body(request, self._max_body_bytes)
        work = len(body) * (_GZIP_RATIO_GUESS if gzipped else 1)
        if encoding is Encoding.PROTOBUF and not gzipped:
            payload = body
        elif work <= _INLINE_LIMIT[encoding]:
            payload = self._decode(signal, encoding, gzipped, body)
        else:
            payload = await asyncio.to_thread(self._decode, signal, encoding, gzipped, body)
        # Bytes in, bytes out: no serializers, so a protobuf body goes upstream as it came and
        # the service's answer comes back without being decoded.
        call: grpc.aio.UnaryUnaryMultiCallable[bytes, bytes] = channel.unary_unary(signal.grpc_path)
        try:
            return await call(payload, timeout=self._deadline_s, metadata=metadata)
        except grpc.aio.UsageError as exc:
            # A closed channel: the process is shutting down or the peer went away.
            raise Unavailable(str(exc)) from exc

    def _decode(self, signal: Signal, encoding: Encoding, gzipped: bool, body: bytes) -> bytes:
        """The serialized request to forward: the (inflated) body itself when it is binary
        protobuf."""
        if gzipped:
            body = gunzip(body, self._max_body_bytes)
        if encoding is Encoding.JSON:
            return _json.parse(signal.request_class, body).SerializeToString()
        return body


def _failure(
    http: int, status: status_pb2.Status, media: str, encoding: Encoding, headers: dict[str, str]
) -> Response:
    body = encode_status(status, json_body=encoding is Encoding.JSON)
    return Response(body, status_code=http, media_type=media, headers=headers)
