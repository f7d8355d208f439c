"""Bad input against a real daemon: each probe gets its status, the daemon keeps serving, and
what was stored before is still exactly there afterwards.

The daemon runs with keys (so nothing is let in for free) and one ingest worker (so what the
gateway relays crosses a process, as in production). Every probe is a request an attacker or a
careless client could send: compression tricks, malformed encodings, hostile identifiers and
filters, tampered cursors, bodies over the limits, undecodable protobuf on every gRPC port.
"""

from __future__ import annotations

import asyncio
import contextlib
import gzip
import json
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

import grpc
import grpc.aio
import httpx
import pytest
from google.rpc import error_details_pb2, status_pb2
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2

from mcpd.testing.daemon import DaemonProcess
from tests.e2e.ingest_payloads import agent_trace, new_trace_id
from tests.e2e.security_fixture import key_secret, write_keys_file

pytestmark = pytest.mark.e2e

INGEST = key_secret("alpha", "ingest")
READ = key_secret("alpha", "read")
UNKNOWN = "mcpd_k_not_a_key_of_this_daemon_0000"
OTLP_LIMIT = 20 * 1024 * 1024
REST_LIMIT = 64 * 1024 * 1024
UNDECODABLE = b"\xff\xff\xff\xff"  # a field tag whose varint never ends

Probe = Callable[[httpx.AsyncClient, DaemonProcess], Awaitable["Answer"]]


@dataclass(frozen=True)
class Answer:
    """What a probe got back: the HTTP status (or gRPC code name), the error reason, and the
    size of the answer's body (or status message)."""

    status: int | str
    reason: str | None = None
    size: int = 0


@pytest.fixture(scope="module")
def daemon(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DaemonProcess]:
    keys = write_keys_file(tmp_path_factory.mktemp("keys") / "keys.toml")
    env = {"MCPD_SECURITY_KEYS_FILE": str(keys)}
    with DaemonProcess(extra_env=env, processes=1) as process:
        yield process


@pytest.fixture(scope="module")
def stored(daemon: DaemonProcess) -> dict[str, Any]:
    """Two traces ingested before any probe; what reading them back gives."""
    with httpx.Client(base_url=daemon.http_url, timeout=30) as http:
        for _ in range(2):
            answer = http.post(
                "/v1/api/ingest", json=agent_trace(new_trace_id()), headers=_bearer(INGEST)
            )
            assert answer.status_code == 200, answer.text
            assert answer.json()["rejected"] == 0
        return _snapshot(http)


@pytest.fixture
async def http(daemon: DaemonProcess) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=daemon.http_url, timeout=60) as client:
        yield client


def _bearer(secret: str) -> dict[str, str]:
    return {"authorization": f"Bearer {secret}"}


def _snapshot(http: httpx.Client) -> dict[str, Any]:
    """Every stored trace and span of project alpha, as the read key sees them."""
    traces = http.get("/v1/api/traces", params={"limit": "1000"}, headers=_bearer(READ))
    spans = http.get("/v1/api/spans", params={"limit": "1000"}, headers=_bearer(READ))
    assert traces.status_code == spans.status_code == 200, (traces.text, spans.text)
    return {"traces": traces.json()["traces"], "spans": spans.json()["spans"]}


async def _http_answer(response: httpx.Response) -> Answer:
    """The status, and the reason of the REST error shape or of OTLP's google.rpc.Status."""
    media = response.headers.get("content-type", "")
    reason = None
    if media == "application/x-protobuf":
        status = status_pb2.Status.FromString(response.content)
        for detail in status.details:
            info = error_details_pb2.ErrorInfo()
            if detail.Unpack(info):
                reason = info.reason
    elif media.startswith("application/json"):
        error = response.json().get("error")
        if isinstance(error, dict):
            reason = error.get("reason")
    return Answer(response.status_code, reason, len(response.content))


def _otlp(body: bytes, *, key: str | None = INGEST, gzipped: bool = False) -> Probe:
    headers = {
        "content-type": "application/json" if body[:1] in b"{[" else "application/x-protobuf"
    }
    if gzipped:
        headers["content-encoding"] = "gzip"
    if key is not None:
        headers.update(_bearer(key))

    async def probe(http: httpx.AsyncClient, daemon: DaemonProcess) -> Answer:
        return await _http_answer(await http.post("/v1/traces", content=body, headers=headers))

    return probe


def _rest(method: str, path: str, *, body: bytes | None = None, key: str | None = READ) -> Probe:
    headers = {"content-type": "application/json"}
    if key is not None:
        headers.update(_bearer(key))

    async def probe(http: httpx.AsyncClient, daemon: DaemonProcess) -> Answer:
        response = await http.request(method, path, content=body, headers=headers)
        return await _http_answer(response)

    return probe


def _raw_get(target: str, key: str = READ) -> Probe:
    """A GET written on the socket (HTTP clients refuse URLs this long); the server may answer
    and close before it has all been sent, so what it answered is read whatever happens."""

    async def probe(http: httpx.AsyncClient, daemon: DaemonProcess) -> Answer:
        host, _, port = daemon.http_addr.rpartition(":")
        reader, writer = await asyncio.open_connection(host, int(port))
        # Reading from the start: once the server closes on unread bytes, the kernel resets
        # the connection and drops what was not read yet.
        status = asyncio.ensure_future(reader.readuntil(b"\r\n\r\n"))
        head = f"GET {target} HTTP/1.1\r\nHost: {host}\r\nAuthorization: Bearer {key}\r\n"
        writer.write(f"{head}Connection: close\r\n\r\n".encode())
        with contextlib.suppress(ConnectionError):
            await writer.drain()
        answer = await status
        with contextlib.suppress(ConnectionError):
            answer += await reader.read()
        writer.close()
        status_line, _, rest = answer.partition(b"\r\n")
        body = rest.partition(b"\r\n\r\n")[2]
        reason = json.loads(body)["error"].get("reason") if body.startswith(b"{") else None
        return Answer(int(status_line.split()[1]), reason, len(body))

    return probe


def _grpc(address: str, path: str, body: bytes, *, key: str | None) -> Probe:
    async def probe(http: httpx.AsyncClient, daemon: DaemonProcess) -> Answer:
        metadata = tuple(_bearer(key).items()) if key is not None else ()
        async with grpc.aio.insecure_channel(getattr(daemon, address)) as channel:
            call: grpc.aio.UnaryUnaryMultiCallable[bytes, bytes] = channel.unary_unary(path)
            try:
                await call(body, metadata=metadata, timeout=30)
            except grpc.aio.AioRpcError as failure:
                return Answer(failure.code().name, size=len(failure.details() or ""))
        return Answer("OK")

    return probe


def _deep(depth: int) -> bytes:
    return b'{"spans": [{"input": ' + b"[" * depth + b"]" * depth + b"}]}"


EXPORT = "/opentelemetry.proto.collector.trace.v1.TraceService/Export"
INGEST_RPC = "/mcpd.ingest.v1.IngestService/Ingest"
GET_TRACE = "/mcpd.query.v1.QueryService/GetTrace"
VALID_EXPORT = trace_service_pb2.ExportTraceServiceRequest().SerializeToString()

# (probe, expected answer): the answer's reason is checked when the expectation names one.
PROBES: dict[str, tuple[Probe, Answer]] = {
    # Compression.
    "gzip bomb": (
        _otlp(gzip.compress(b"\x00" * (OTLP_LIMIT * 4)), gzipped=True),
        Answer(413, "BODY_TOO_LARGE"),
    ),
    "many gzip members at the size limit": (
        _otlp(gzip.compress(b"") * (OTLP_LIMIT // 20), gzipped=True),
        Answer(400, "MALFORMED_GZIP"),
    ),
    "many gzip members without a key": (
        _otlp(gzip.compress(b"") * (OTLP_LIMIT // 20), key=None, gzipped=True),
        Answer(401, "CREDENTIALS_REQUIRED"),
    ),
    "gzip body with an unknown key": (
        _otlp(b"not gzip", key=UNKNOWN, gzipped=True),
        Answer(401, "UNKNOWN_CREDENTIALS"),
    ),
    "truncated gzip": (
        _otlp(gzip.compress(VALID_EXPORT * 100)[:-9], gzipped=True),
        Answer(400, "MALFORMED_GZIP"),
    ),
    # Sizes.
    "OTLP body over the limit": (_otlp(b"\x0a\x00" * (OTLP_LIMIT // 2 + 1)), Answer(413)),
    "REST body over the limit": (
        _rest("POST", "/v1/api/ingest", body=b" " * (REST_LIMIT + 1), key=INGEST),
        Answer(413, "BODY_TOO_LARGE"),
    ),
    "REST body over the limit without a key": (
        _rest("POST", "/v1/api/ingest", body=b" " * (REST_LIMIT + 1), key=None),
        Answer(413, "BODY_TOO_LARGE"),
    ),
    # Encodings.
    "deeply nested JSON": (
        _rest("POST", "/v1/api/ingest", body=_deep(100_000), key=INGEST),
        Answer(400, "MALFORMED_JSON"),
    ),
    "NaN in JSON": (
        _rest("POST", "/v1/api/ingest", body=b'{"spans": [{"input": NaN}]}', key=INGEST),
        Answer(400),
    ),
    "invalid UTF-8": (
        _rest("POST", "/v1/api/ingest", body=b'{"spans": [{"name": "caf\xe9"}]}', key=INGEST),
        Answer(400),
    ),
    "a lone surrogate": (
        _rest("POST", "/v1/api/ingest", body=b'{"spans": [{"name": "\\ud800"}]}', key=INGEST),
        Answer(400),
    ),
    "OTLP JSON that is not an export": (_otlp(b'{"resourceSpans": 7}'), Answer(400)),
    "OTLP protobuf that does not decode": (_otlp(UNDECODABLE), Answer(400, "MALFORMED_PROTOBUF")),
    # Undecodable protobuf on every gRPC port, with and without a key.
    "gRPC: undecodable Ingest": (
        _grpc("grpc_addr", INGEST_RPC, UNDECODABLE, key=INGEST),
        Answer("INVALID_ARGUMENT"),
    ),
    "gRPC: undecodable GetTrace": (
        _grpc("grpc_addr", GET_TRACE, UNDECODABLE, key=READ),
        Answer("INVALID_ARGUMENT"),
    ),
    "gRPC: undecodable without a key": (
        _grpc("grpc_addr", INGEST_RPC, UNDECODABLE, key=None),
        Answer("UNAUTHENTICATED"),
    ),
    "OTLP/gRPC: undecodable Export": (
        _grpc("otlp_grpc_addr", EXPORT, UNDECODABLE, key=INGEST),
        Answer("INVALID_ARGUMENT"),
    ),
    "OTLP/gRPC: undecodable Export without a key": (
        _grpc("otlp_grpc_addr", EXPORT, UNDECODABLE, key=None),
        Answer("UNAUTHENTICATED"),
    ),
    # Hostile identifiers, filters and cursors.
    "path traversal in a trace id": (
        _rest("GET", "/v1/api/traces/" + quote("../../../etc/passwd", safe="")),
        Answer(400),
    ),
    "path traversal in a metric name": (
        _rest("GET", "/v1/api/metrics/" + quote("../../control.db", safe="") + "/series"),
        Answer(200),  # a name like any other: no such series
    ),
    "SQL in a filter": (_rest("GET", "/v1/api/traces?model=" + quote("x' OR '1'='1")), Answer(200)),
    "FTS syntax in q": (_rest("GET", "/v1/api/spans?q=" + quote('") OR 1=1 --')), Answer(200)),
    "a tampered cursor": (_rest("GET", "/v1/api/traces?cursor=AAAA" + "A" * 40), Answer(400)),
    "a tampered delta cursor": (
        _rest("GET", "/v1/api/deltas?signal=spans&cursor=" + quote("x" * 64)),
        Answer(400),
    ),
    "a 2 MB query string": (_raw_get("/v1/api/traces?limit=" + "9" * 2_000_000), Answer(400)),
    "a 2 MB unknown field in a JSON body": (
        _rest("POST", "/v1/api/ingest", body=b'{"' + b"f" * 2_000_000 + b'": 1}', key=INGEST),
        Answer(400),
    ),
    "a 2 MB timestamp in a JSON body": (
        _rest(
            "POST",
            "/v1/api/ingest",
            body=b'{"spans": [{"start_time": "' + b"9" * 2_000_000 + b'"}]}',
            key=INGEST,
        ),
        Answer(400),
    ),
    # Unauthenticated reads never reach the data.
    "a read without a key": (_rest("GET", "/v1/api/spans", key=None), Answer(401)),
    "a read with an unknown key": (_rest("GET", "/v1/api/spans", key=UNKNOWN), Answer(401)),
}


@pytest.mark.parametrize("name", list(PROBES))
async def test_bad_input_is_refused_and_changes_nothing(
    daemon: DaemonProcess, stored: dict[str, Any], http: httpx.AsyncClient, name: str
) -> None:
    probe, expected = PROBES[name]
    answer = await probe(http, daemon)
    assert answer.status == expected.status, (name, answer)
    if expected.reason is not None:
        assert answer.reason == expected.reason, (name, answer)
    if answer.status not in (200, "OK"):
        # A refusal quotes at most a few hundred characters of what it refuses.
        assert answer.size < 2048, (name, answer)
    health = await http.get("/healthz")
    assert health.status_code == 200
    assert health.json()["status"] == "ok"
    with httpx.Client(base_url=daemon.http_url, timeout=30) as reader:
        assert _snapshot(reader) == stored
