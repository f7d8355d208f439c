"""The request-floor bench: a bare gRPC server in a process of its own answers every call, the
CPU of both sides is charged per call, and the result is registered and written."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench.config import BenchConfig
from bench.orchestrator import floor
from bench.registry import BENCHMARKS


@pytest.mark.e2e
def test_the_bare_server_is_called_and_both_sides_are_charged(tmp_path: Path) -> None:
    assert BENCHMARKS[floor.NAME].description == floor.DESCRIPTION
    floor.run(BenchConfig(results_dir=tmp_path), calls=80)
    written = json.loads((tmp_path / f"{floor.NAME}.json").read_text())
    assert written["config"]["calls"] == 80
    assert written["config"]["threads"] == floor.THREADS
    [row] = written["results"]
    assert row["calls"] == 80
    assert row["calls_per_s"] > 0
    assert row["server_cpu_ms_per_call"] > 0
    assert row["caller_cpu_ms_per_call"] > 0
