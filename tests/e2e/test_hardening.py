"""`mcpd serve` as a real process, hardened: every listening address is part of the local-mode
rule, the data directory is private to its owner, and ingest beyond what the process may hold
is refused with 429 / RESOURCE_EXHAUSTED and a retry delay, losing nothing acknowledged."""

from __future__ import annotations

import asyncio
import json
import os
import re
import secrets
import stat
from pathlib import Path

import grpc
import grpc.aio
import httpx
import pytest
from google.rpc import status_pb2
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2

from mcpd.ingest.v1 import ingest_service_pb2_grpc
from mcpd.model.v1 import enums_pb2, telemetry_pb2
from mcpd.runtime.errors_grpc import rpc_failure_from
from mcpd.testing.daemon import DaemonProcess, DaemonStartError

pytestmark = pytest.mark.e2e

EXPOSED_OTLP = {"MCPD_OTLP_GRPC_ADDR": "0.0.0.0:0"}
TRACE_EXPORT = "/opentelemetry.proto.collector.trace.v1.TraceService/Export"


def test_otlp_grpc_off_loopback_without_credentials_refuses_to_start() -> None:
    # HTTP and gRPC on loopback (the harness's), OTLP/gRPC on every interface.
    daemon = DaemonProcess(extra_env=EXPOSED_OTLP, processes=1, start_timeout_s=30)
    with pytest.raises(DaemonStartError) as refused:
        daemon.start()
    assert daemon.returncode == 1
    refusal = "mcpd: cannot start: refusing to listen on 0.0.0.0:0 without credentials"
    assert refusal in daemon.stderr_tail
    assert "(KEYS_REQUIRED)" in str(refused.value)


def test_otlp_grpc_off_loopback_with_a_keys_file_starts_and_authenticates(tmp_path: Path) -> None:
    keys = tmp_path / "keys.toml"
    keys.write_text(
        '[[keys]]\nname = "collector"\nscope = "ingest"\nproject = "default"\n'
        'secret = "mcpd_k_test_hardening_0123456789abcdef"\n'
    )
    env = {**EXPOSED_OTLP, "MCPD_SECURITY_KEYS_FILE": str(keys)}
    with DaemonProcess(extra_env=env, processes=1) as daemon:
        banner = daemon.stderr_text()
        assert "auth       on (1 configured keys" in banner
        bound = re.search(r"OTLP/gRPC\s+0\.0\.0\.0:(\d+)", banner)
        assert bound is not None, banner
        with grpc.insecure_channel(f"127.0.0.1:{bound.group(1)}") as channel:
            export: grpc.UnaryUnaryMultiCallable[bytes, bytes] = channel.unary_unary(TRACE_EXPORT)
            with pytest.raises(grpc.RpcError) as refused:
                export(b"", timeout=10)  # an empty ExportTraceServiceRequest
    assert refused.value.code() == grpc.StatusCode.UNAUTHENTICATED


def _modes(data_dir: Path) -> dict[str, int]:
    """The permission bits of the directory and of everything under it, by relative path."""
    found = {".": stat.S_IMODE(data_dir.stat().st_mode)}
    for root, directories, files in os.walk(data_dir):
        for name in [*directories, *files]:
            path = Path(root, name)
            found[str(path.relative_to(data_dir))] = stat.S_IMODE(path.lstat().st_mode)
    return found


def _ingest_one_span(daemon: DaemonProcess) -> None:
    span = {
        "trace_id": "1" * 32,
        "span_id": "2" * 16,
        "name": "step",
        "kind": "generic",
        "status": "ok",
        "start_time": "2026-11-29T10:00:00Z",
        "end_time": "2026-11-29T10:00:01Z",
        "input": {"text": "a prompt nobody else may read"},
    }
    answer = httpx.post(f"{daemon.http_url}/v1/api/ingest", json={"spans": [span]}, timeout=30)
    assert answer.json()["accepted"] == 1, answer.text


def test_a_fresh_data_directory_is_private_to_its_owner(tmp_path: Path) -> None:
    data_dir = tmp_path / "fresh"
    env = {"MCPD_DATA_DIR": str(data_dir)}
    with DaemonProcess(extra_env=env, processes=1) as daemon:
        _ingest_one_span(daemon)
        modes = _modes(data_dir)  # while it runs: the SQLite -wal and -shm files exist
    for name in ("trace.db", "control.db", "run.db"):
        assert {name, f"{name}-wal", f"{name}-shm"} <= set(modes), sorted(modes)
    directories = {name for name in modes if (data_dir / name).is_dir()}
    assert {name: modes[name] for name in directories} == dict.fromkeys(directories, 0o700)
    files = set(modes) - directories
    assert {name: modes[name] for name in files} == dict.fromkeys(files, 0o600)


def test_an_existing_looser_data_directory_is_tightened(tmp_path: Path) -> None:
    data_dir = tmp_path / "old"
    data_dir.mkdir()
    data_dir.chmod(0o755)
    notes = data_dir / "notes.txt"
    notes.write_text("left by an older mcpd")
    notes.chmod(0o644)
    with DaemonProcess(extra_env={"MCPD_DATA_DIR": str(data_dir)}) as daemon:
        modes = _modes(data_dir)
        log = daemon.stderr_text()
    assert modes["."] == 0o700
    assert modes["notes.txt"] == 0o600
    (line,) = [line for line in log.splitlines() if "was open to other users" in line]
    logged = json.loads(line)
    assert logged["level"] == "warning"
    assert logged["msg"] == (
        f"the data directory {data_dir} was open to other users: set 1 directories to 0700 "
        "and 1 files to 0600"
    )


# One request at a time per ingest process: every concurrent one is refused.
TINY_BOUND = {"MCPD_INGEST_MAX_PENDING_BYTES": "1"}
# Enough exports at once that some reach ingest while another is still queued, even on a
# loaded machine where the gateway hands them on one by one.
BURST = 8
SPANS_PER_EXPORT = 200


def _otlp_export(trace_id: bytes) -> bytes:
    request = trace_service_pb2.ExportTraceServiceRequest()
    resource = request.resource_spans.add()
    service = resource.resource.attributes.add(key="service.name")
    service.value.string_value = "overload-e2e"
    scope = resource.scope_spans.add()
    start = 1_796_000_000_000_000_000
    for index in range(SPANS_PER_EXPORT):
        span = scope.spans.add(
            trace_id=trace_id,
            span_id=(index + 1).to_bytes(8, "big"),
            name="step",
            start_time_unix_nano=start + index,
            end_time_unix_nano=start + index + 1_000_000,
        )
        span.attributes.add(key="input.value").value.string_value = "x" * 500
    return request.SerializeToString()


async def _export_until_accepted(
    http: httpx.AsyncClient, body: bytes, refusals: list[httpx.Response]
) -> None:
    """Export like an OTLP exporter: on 429 wait the Retry-After the daemon asked for."""
    while True:
        answer = await http.post(
            "/v1/traces", content=body, headers={"content-type": "application/x-protobuf"}
        )
        if answer.status_code != 429:
            assert answer.status_code == 200, answer.text
            return
        refusals.append(answer)
        await asyncio.sleep(float(answer.headers["retry-after"]))


async def test_a_burst_beyond_the_bound_is_refused_with_retry_after_then_stored() -> None:
    trace_ids = [secrets.token_bytes(16) for _ in range(BURST)]
    refusals: list[httpx.Response] = []
    async with (
        DaemonProcess(extra_env=TINY_BOUND, processes=1) as daemon,
        httpx.AsyncClient(base_url=daemon.http_url, timeout=60) as http,
    ):
        await asyncio.gather(
            *(_export_until_accepted(http, _otlp_export(t), refusals) for t in trace_ids)
        )
        # Every export was acknowledged in the end, and every one of its spans is stored.
        for trace_id in trace_ids:
            detail = await http.get(f"/v1/api/traces/{trace_id.hex()}")
            assert detail.status_code == 200, detail.text
            assert detail.json()["trace"]["span_count"] == SPANS_PER_EXPORT
    assert refusals, "one request at a time was admitted, so a burst must see refusals"
    for refused in refusals:
        assert refused.headers["retry-after"] == "1"
        status = status_pb2.Status.FromString(refused.content)
        assert status.code == grpc.StatusCode.RESOURCE_EXHAUSTED.value[0]


async def test_native_grpc_refuses_with_resource_exhausted_and_retry_info() -> None:
    batches = [_native_batch(secrets.token_hex(16)) for _ in range(BURST)]
    async with (
        DaemonProcess(extra_env=TINY_BOUND) as daemon,
        grpc.aio.insecure_channel(daemon.grpc_addr) as channel,
    ):
        ingest = ingest_service_pb2_grpc.IngestServiceStub(channel).Ingest
        answers = await asyncio.gather(
            *(ingest(batch, timeout=60) for batch in batches), return_exceptions=True
        )
        refused = [answer for answer in answers if isinstance(answer, grpc.aio.AioRpcError)]
        assert refused, "one request at a time was admitted, so a burst must see refusals"
        for failure in map(rpc_failure_from, refused):
            assert failure.code == grpc.StatusCode.RESOURCE_EXHAUSTED
            assert (failure.reason, failure.retry_after_s) == ("INGEST_BUSY", 1.0)
        accepted = [a for a in answers if isinstance(a, telemetry_pb2.IngestResult)]
        assert len(accepted) + len(refused) == BURST
        assert [result.accepted for result in accepted] == [SPANS_PER_EXPORT] * len(accepted)
        # Drained: a refused batch sent again is taken.
        again = await ingest(batches[answers.index(refused[0])], timeout=60)
        assert again.accepted == SPANS_PER_EXPORT


def _native_batch(trace_id: str) -> telemetry_pb2.IngestBatch:
    batch = telemetry_pb2.IngestBatch()
    for index in range(SPANS_PER_EXPORT):
        span = batch.spans.add(
            trace_id=trace_id,
            span_id=f"{index + 1:016x}",
            name="step",
            kind=enums_pb2.SPAN_KIND_GENERIC,
        )
        span.start_time.FromNanoseconds(1_796_000_000_000_000_000 + index)
        span.end_time.FromNanoseconds(1_796_000_000_001_000_000 + index)
    return batch
