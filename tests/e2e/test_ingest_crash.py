"""Ingest under `kill -9`: a batch is stored whole or not at all, and nothing acknowledged is lost.

The daemon runs on the embedded default (SQLite). A large native batch is posted and the daemon
is killed with SIGKILL while the batch's transaction is writing (detected by the trace store's
write-ahead log growing), then restarted on the same data directory: the batch is either
entirely there (spans, trace rows and ingest key) or entirely absent, and the producer's retry
with the same key completes it exactly once. A second test kills the daemon in the middle of a
stream of acknowledged batches: every acknowledged batch is there after the restart.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from mcpd.testing.daemon import DaemonProcess
from tests.e2e.conftest import PROCESSES
from tests.e2e.ingest_payloads import new_span_id, new_trace_id

pytestmark = pytest.mark.e2e

TRACES = 1_000
SPANS_PER_TRACE = 20
PAYLOAD = "x" * 200


def _batch(
    key: str, traces: int = TRACES, spans_per_trace: int = SPANS_PER_TRACE
) -> tuple[dict[str, Any], list[str]]:
    spans: list[dict[str, Any]] = []
    trace_ids = [new_trace_id() for _ in range(traces)]
    for trace_id in trace_ids:
        root = new_span_id()
        for position in range(spans_per_trace):
            span_id = root if position == 0 else new_span_id()
            span: dict[str, Any] = {
                "trace_id": trace_id,
                "span_id": span_id,
                "name": f"step-{position}",
                "kind": "agent_run" if position == 0 else "tool_call",
                "status": "ok",
                "start_time": "2026-11-29T10:00:00Z",
                "end_time": "2026-11-29T10:00:01Z",
                "is_root": position == 0,
                "is_event": False,
                "input": {"text": PAYLOAD},
                "correlation": {"project": ""},
            }
            if position:
                span["parent_span_id"] = root
            spans.append(span)
    return {"spans": spans, "ingest_key": key}, trace_ids


def _stored(data_dir: Path, key: str, trace_ids: list[str]) -> tuple[int, int, int]:
    """(spans with the key, trace rows of the batch's traces, ingest key rows)."""
    with sqlite3.connect(data_dir / "trace.db") as db:
        (spans,) = db.execute("SELECT count(*) FROM spans WHERE ingest_key = ?", (key,)).fetchone()
        marks = ",".join("?" * len(trace_ids))
        (traces,) = db.execute(
            f"SELECT count(*) FROM traces WHERE trace_id IN ({marks})",
            trace_ids,
        ).fetchone()
        (keys,) = db.execute(
            "SELECT count(*) FROM ingest_keys WHERE ingest_key = ?", (key,)
        ).fetchone()
    return spans, traces, keys


def _kill_when_wal_grows(
    daemon: DaemonProcess, wal: Path, baseline: int, done: threading.Event
) -> bool:
    """SIGKILL the daemon as soon as the WAL grows past `baseline`; False if the post ended
    first (the write never showed in the WAL before the answer)."""
    while not done.is_set():
        if wal.exists() and wal.stat().st_size > baseline:
            assert daemon.pid is not None
            os.killpg(daemon.pid, signal.SIGKILL)
            return True
        time.sleep(0.0005)
    return False


async def test_kill_9_during_a_large_batch_leaves_all_or_nothing(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    data_dir.mkdir()
    env = {"MCPD_DATA_DIR": str(data_dir)}
    key = "crash-batch"
    batch, trace_ids = _batch(key)
    wal = data_dir / "trace.db-wal"

    daemon = DaemonProcess(extra_env=env, processes=PROCESSES)
    daemon.start()
    try:
        baseline = wal.stat().st_size if wal.exists() else 0
        done = threading.Event()
        killer = asyncio.create_task(
            asyncio.to_thread(_kill_when_wal_grows, daemon, wal, baseline, done)
        )
        async with httpx.AsyncClient(base_url=daemon.http_url, timeout=120) as http:
            try:
                answer: httpx.Response | None = await http.post("/v1/api/ingest", json=batch)
            except httpx.HTTPError:
                answer = None
        done.set()
        killed = await killer
    finally:
        daemon.stop()

    assert killed, f"the batch was answered before it reached the WAL: {answer}"
    assert answer is None, "a killed daemon cannot have answered"
    spans, traces, keys = _stored(data_dir, key, trace_ids)
    assert (spans, traces, keys) in {(0, 0, 0), (TRACES * SPANS_PER_TRACE, TRACES, 1)}

    # The producer retries with the same key: the batch ends up stored exactly once.
    async with (
        DaemonProcess(extra_env=env, processes=PROCESSES) as restarted,
        httpx.AsyncClient(base_url=restarted.http_url, timeout=120) as http,
    ):
        retried = (await http.post("/v1/api/ingest", json=batch)).json()
        again = (await http.post("/v1/api/ingest", json=batch)).json()
    total = TRACES * SPANS_PER_TRACE
    if spans == 0:
        assert (retried["accepted"], retried["duplicate"]) == (total, 0)
    else:
        assert (retried["accepted"], retried["duplicate"]) == (0, total)
    assert (again["accepted"], again["duplicate"]) == (0, total)
    assert _stored(data_dir, key, trace_ids) == (total, TRACES, 1)


async def test_every_acknowledged_batch_survives_kill_9(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    data_dir.mkdir()
    env = {"MCPD_DATA_DIR": str(data_dir)}
    acknowledged: list[tuple[str, list[str]]] = []
    enough = asyncio.Event()

    daemon = DaemonProcess(extra_env=env, processes=PROCESSES)
    daemon.start()
    try:

        async def stream(http: httpx.AsyncClient, worker: int) -> None:
            for sequence in range(1_000):
                key = f"stream-{worker}-{sequence}"
                body, trace_ids = _batch(key, traces=5, spans_per_trace=2)
                try:
                    answer = await http.post("/v1/api/ingest", json=body)
                except httpx.HTTPError:
                    return
                if answer.status_code != 200:
                    return
                assert answer.json()["accepted"] == len(body["spans"])
                acknowledged.append((key, trace_ids))
                if len(acknowledged) >= 40:
                    enough.set()

        async with httpx.AsyncClient(base_url=daemon.http_url, timeout=30) as http:
            workers = [asyncio.create_task(stream(http, worker)) for worker in range(4)]
            await asyncio.wait_for(enough.wait(), timeout=60)
            assert daemon.pid is not None
            os.killpg(daemon.pid, signal.SIGKILL)
            await asyncio.gather(*workers)
    finally:
        daemon.stop()

    assert len(acknowledged) >= 40
    for key, trace_ids in acknowledged:
        assert _stored(data_dir, key, trace_ids) == (len(trace_ids) * 2, len(trace_ids), 1), key
