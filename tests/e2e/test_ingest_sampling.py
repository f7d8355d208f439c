"""Sampling end to end: what real daemons keep under a project's sampling policy.

* deterministic: two daemons with separate stores, one fed over native REST and the other over
  OTLP/HTTP protobuf, keep exactly the traces OpenTelemetry's own TraceIdRatioBased sampler
  keeps, whole (both spans of every kept trace);
* tail: held traces are decided once their root has ended and settled: every trace with an
  error and every slow one is kept with all its spans, the rest (rate 0) are dropped; spans of
  a trace arriving after its decision follow it.

Sampled-out spans are accepted (the sender did nothing wrong), never rejected.
"""

from __future__ import annotations

import contextlib
import shutil
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, InstrumentationScope, KeyValue
from opentelemetry.proto.resource.v1.resource_pb2 import Resource
from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans, ScopeSpans, Span, Status
from opentelemetry.sdk.trace.sampling import Decision, TraceIdRatioBased

from mcpd.testing.daemon import DaemonProcess
from mcpd.testing.eventually import eventually
from tests.e2e.conftest import BACKENDS, PROCESSES, storage_env
from tests.e2e.ingest_payloads import (
    child_span,
    new_trace_id,
    simple_trace,
    stored_tables,
)

pytestmark = pytest.mark.e2e

# Local mode files every unauthenticated record under `security.local_project`, "default".
DETERMINISTIC = """
[[projects]]
id = "default"
sampling = { kind = "deterministic", rate = 0.5 }
"""
# Whole numbers (slow_ms, max_wait_s) must come back from the control store as integers.
TAIL = """
[[projects]]
id = "default"
sampling = { kind = "tail", rate = 0.0, slow_ms = 60000, settle_s = 0.5, max_wait_s = 5 }
"""
SLOW_NS = 60_000 * 1_000_000
TRACES = 200
# Old enough that nothing about them is still running.
START_NS = 1_764_410_400_000_000_000
END_NS = START_NS + 1_500_000_000


def _daemon(
    directory: Path, request: pytest.FixtureRequest, backend: str, policy: str
) -> tuple[DaemonProcess, dict[str, str]]:
    """A daemon (not started) whose stores are on `backend` and whose projects file holds
    `policy`; its files are kept after it stops, for the test to read and remove."""
    directory.mkdir(parents=True, exist_ok=True)
    projects = directory / "projects.toml"
    projects.write_text(policy)
    env = storage_env(backend, directory, request)
    daemon = DaemonProcess(
        extra_env={**env, "MCPD_INGEST_PROJECTS_FILE": str(projects)},
        keep_files=True,
        processes=PROCESSES,
    )
    return daemon, env


@contextlib.contextmanager
def _running(daemon: DaemonProcess) -> Iterator[DaemonProcess]:
    """`daemon` started, then stopped and its files removed, whatever happens."""
    try:
        daemon.start()
        yield daemon
    finally:
        daemon.stop()
        if daemon.workdir is not None:
            shutil.rmtree(daemon.workdir, ignore_errors=True)


def _stored(http: httpx.Client, trace_ids: list[str]) -> dict[str, int]:
    """Span count of each trace the daemon stored; a trace it did not store is absent."""
    stored = {}
    for trace_id in trace_ids:
        answer = http.get(f"/v1/api/traces/{trace_id}")
        assert answer.status_code in (200, 404), answer.text
        if answer.status_code == 200:
            stored[trace_id] = answer.json()["trace"]["span_count"]
    return stored


def _after_a_sweep(http: httpx.Client, start: int, end: int) -> str:
    """Return once a sweep that began after this call has finished; the probe trace's id.

    A trace sent now is decided by a later sweep than any that ran before: once it is stored,
    that sweep has finished (sweeps run one at a time), so every decision about what was sent
    before has been made, applied and remembered."""
    probe_id = new_trace_id()
    probe = simple_trace(probe_id, start_ns=start, end_ns=end, failing_child=True)
    assert _ingest(http, probe)["accepted"] == 2
    eventually(lambda: _assert_stored_whole(http, [probe_id]), timeout=20)
    return probe_id


def _ingest(http: httpx.Client, spans: list[dict[str, Any]]) -> dict[str, Any]:
    answer = http.post("/v1/api/ingest", json={"spans": spans})
    assert answer.status_code == 200, answer.text
    result: dict[str, Any] = answer.json()
    return result


def _otlp(spans: list[dict[str, Any]]) -> ExportTraceServiceRequest:
    """`spans` (native rows from `simple_trace` at START_NS..END_NS) as one OTLP export."""
    otlp_spans = [
        Span(
            trace_id=bytes.fromhex(span["trace_id"]),
            span_id=bytes.fromhex(span["span_id"]),
            parent_span_id=bytes.fromhex(span.get("parent_span_id") or ""),
            name=span["name"],
            kind=Span.SPAN_KIND_INTERNAL,
            start_time_unix_nano=START_NS,
            end_time_unix_nano=END_NS,
            status=Status(code=Status.STATUS_CODE_OK),
        )
        for span in spans
    ]
    service = KeyValue(key="service.name", value=AnyValue(string_value="sampled-bot"))
    return ExportTraceServiceRequest(
        resource_spans=[
            ResourceSpans(
                resource=Resource(attributes=[service]),
                scope_spans=[
                    ScopeSpans(scope=InstrumentationScope(name="sampling-e2e"), spans=otlp_spans)
                ],
            )
        ]
    )


def test_deterministic_sampling_agrees_across_processes_routes_and_opentelemetry(
    tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    trace_ids = [new_trace_id() for _ in range(TRACES)]
    spans = [
        span
        for trace_id in trace_ids
        for span in simple_trace(trace_id, start_ns=START_NS, end_ns=END_NS)
    ]
    assert len(spans) == 2 * TRACES
    sampler = TraceIdRatioBased(0.5)
    predicted = {
        trace_id
        for trace_id in trace_ids
        if sampler.should_sample(None, int(trace_id, 16), "handle_request").decision
        is Decision.RECORD_AND_SAMPLE
    }

    native_daemon, _ = _daemon(tmp_path / "native", request, "sqlite", DETERMINISTIC)
    otlp_daemon, _ = _daemon(tmp_path / "otlp", request, "sqlite", DETERMINISTIC)
    with (
        _running(native_daemon),
        _running(otlp_daemon),
        httpx.Client(base_url=native_daemon.http_url, timeout=30) as native,
        httpx.Client(base_url=otlp_daemon.http_url, timeout=30) as otlp,
    ):
        result = _ingest(native, spans)
        exported = otlp.post(
            "/v1/traces",
            content=_otlp(spans).SerializeToString(),
            headers={"content-type": "application/x-protobuf"},
        )
        assert exported.status_code == 200, exported.text
        response = ExportTraceServiceResponse.FromString(exported.content)
        stored_native = _stored(native, trace_ids)
        stored_otlp = _stored(otlp, trace_ids)

    # Sampled-out spans are accepted, not rejected: the sender did nothing wrong.
    assert result == {"accepted": 2 * TRACES, "rejected": 0, "duplicate": 0, "errors": []}
    assert not response.HasField("partial_success"), response
    # Both processes, fed by different routes, keep the same traces: the ones OpenTelemetry's
    # own sampler keeps at the same rate. And each is kept whole.
    assert set(stored_native) == predicted
    assert set(stored_otlp) == predicted
    assert 0.3 * TRACES <= len(predicted) <= 0.7 * TRACES
    assert set(stored_native.values()) == {2}
    assert set(stored_otlp.values()) == {2}


def _assert_stored_whole(http: httpx.Client, trace_ids: list[str]) -> None:
    """Each trace is stored with both its spans."""
    assert _stored(http, trace_ids) == dict.fromkeys(trace_ids, 2)


def _rows(tables: dict[str, str], table: str) -> str:
    (found,) = [rows for name, rows in tables.items() if name.split(":")[-1] == table]
    return found


@pytest.mark.parametrize("backend", BACKENDS)
def test_tail_sampling_keeps_errors_and_slow_traces_and_stragglers_follow_the_decision(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    daemon, env = _daemon(tmp_path, request, backend, TAIL)
    now = time.time_ns()
    # Every root ended a second ago, so every trace settles (0.5 s) by the same sweep.
    start, end = now - 2_000_000_000, now - 1_000_000_000
    fast_ok = {}
    for _ in range(20):
        trace_id = new_trace_id()
        fast_ok[trace_id] = simple_trace(trace_id, start_ns=start, end_ns=end)
    failing = {}
    for _ in range(5):
        trace_id = new_trace_id()
        failing[trace_id] = simple_trace(trace_id, start_ns=start, end_ns=end, failing_child=True)
    slow_id = new_trace_id()
    slow = {slow_id: simple_trace(slow_id, start_ns=end - SLOW_NS - 500_000_000, end_ns=end)}
    kept = {**failing, **slow}
    sent = [span for spans in (*fast_ok.values(), *kept.values()) for span in spans]

    with _running(daemon), httpx.Client(base_url=daemon.http_url, timeout=30) as http:
        result = _ingest(http, sent)
        # Every error trace and the slow trace.
        eventually(lambda: _assert_stored_whole(http, list(kept)), timeout=20)
        probes = [_after_a_sweep(http, start, end)]
        dropped_after_decision = _stored(http, list(fast_ok))

        # Stragglers: a span of a kept trace lands in it; one of a dropped trace does not. One
        # that reaches the sweeping server follows its remembered decision at once; one held by
        # another server follows it at the next sweep.
        kept_id, dropped_id = next(iter(failing)), next(iter(fast_ok))
        late_kept = child_span(kept_id, failing[kept_id][0]["span_id"], start_ns=start, end_ns=end)
        late_dropped = child_span(
            dropped_id, fast_ok[dropped_id][0]["span_id"], start_ns=start, end_ns=end
        )
        late = _ingest(http, [late_kept, late_dropped])
        probes.append(_after_a_sweep(http, start, end))
        after_stragglers = _stored(http, [kept_id, dropped_id])
        # Stopped before the dropped trace's straggler could have been decided on its own
        # (max_wait_s after it arrived): the trace's remembered verdict decided it.
        daemon.stop()
        assert daemon.returncode == 0, daemon.stderr_tail
        tables = stored_tables(env, daemon.data_dir)

    assert result == {"accepted": len(sent), "rejected": 0, "duplicate": 0, "errors": []}
    assert late == {"accepted": 2, "rejected": 0, "duplicate": 0, "errors": []}
    assert dropped_after_decision == {}
    assert after_stragglers == {kept_id: 3}
    # Behind the daemon's back: nothing is held any more (so the fast traces, and the dropped
    # trace's straggler, were decided and deleted rather than still waiting), and the spans
    # and traces tables hold exactly the kept traces.
    assert _rows(tables, "held_spans") == ""
    for table in ("spans", "traces"):
        rows = _rows(tables, table)
        assert all(trace_id in rows for trace_id in [*kept, *probes]), table
        assert not any(trace_id in rows for trace_id in fast_ok), table
    spans_rows = _rows(tables, "spans")
    assert late_kept["span_id"] in spans_rows
    assert late_dropped["span_id"] not in spans_rows
