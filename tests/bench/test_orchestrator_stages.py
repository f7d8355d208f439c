"""The orchestrator stage bench on a real SQLite run store: every step of every run is charged
to a stage, the statements and transactions it counts are the store's own, the total row adds
the stages up, and the result is registered and written."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench.orchestrator import stages
from bench.registry import BENCHMARKS


def test_each_stage_is_charged_and_the_total_adds_them_up(tmp_path: Path) -> None:
    rows = stages.measure("sqlite", 5, data_dir=tmp_path, postgres_url=None)
    assert [row["stage"] for row in rows] == ["start", "claim", "complete", "total"]
    by_stage = {row["stage"]: row for row in rows}
    for name in ("start", "claim", "complete"):
        assert by_stage[name]["cpu_us_per_step"] > 0
        assert by_stage[name]["statements_per_step"] > 0
    # A start is one write transaction per run of three steps; a complete is one per step.
    assert by_stage["start"]["transactions_per_step"] == pytest.approx(1 / 3)
    assert by_stage["complete"]["transactions_per_step"] == pytest.approx(1.0)
    for figure in ("cpu_us_per_step", "wall_us_per_step", "statements_per_step"):
        parts = sum(by_stage[name][figure] for name in ("start", "claim", "complete"))
        assert by_stage["total"][figure] == pytest.approx(parts)


def test_the_bench_is_registered_and_writes_its_result(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("MCPD_TEST_POSTGRES_URL", raising=False)
    assert BENCHMARKS[stages.NAME].description == stages.DESCRIPTION
    stages.run(3, results_dir=tmp_path)
    written = json.loads((tmp_path / f"{stages.NAME}.json").read_text())
    assert written["config"] == {"runs": 3, "claim_max": stages.CLAIM_MAX}
    assert {row["backend"] for row in written["results"]} == {"sqlite"}
    assert written["not_measured"] == {"postgres": "MCPD_TEST_POSTGRES_URL is not set"}
