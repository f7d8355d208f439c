"""The runner of ``bench/sessions``: an import is reused only for its own corpus, and a baseline
daemon is measured beside this checkout's on the same data."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench.sessions.generator import GeneratorConfig, generate
from bench.sessions.run import MCP_MIXES, SessionsConfig, imported, run_sessions
from mcpd.testing.daemon import mcpd_executable

SMALL = GeneratorConfig(line_pool=4_000, vocabulary_size=5_000)


def test_an_import_is_reused_only_for_its_own_corpus(tmp_path: Path) -> None:
    corpus = generate(tmp_path / "corpus", 300, seed=7, config=SMALL)
    data = tmp_path / "data"
    first = imported(corpus, data, reuse=True)
    assert (first["reused"], first["events"], first["ingest_errors"]) == (False, 300, 0)
    again = imported(corpus, data, reuse=True)
    assert again == {**first, "reused": True}
    assert imported(corpus, data, reuse=False)["reused"] is False
    other = generate(tmp_path / "other", 300, seed=8, config=SMALL)
    assert imported(other, data, reuse=True)["reused"] is False
    assert imported(corpus, data, reuse=True)["reused"] is False  # the data now holds `other`


@pytest.mark.e2e
def test_a_baseline_is_served_beside_this_checkout(tmp_path: Path) -> None:
    config = SessionsConfig(
        events=400,
        queries=3,
        warmup=1,
        mcp_queries=2,
        baseline_mcpd=mcpd_executable(),
        fts5=False,
        workdir=tmp_path / "work",
        results_dir=tmp_path,
    )
    run_sessions(config)
    mcp = json.loads((tmp_path / "sessions.json").read_text())["mcp"]
    assert mcp["rounds"] == 1
    assert mcp["returncode"] == 0
    assert mcp["baseline"]["returncodes"] == [0]
    baseline = mcp["baseline"]["results"]
    for results, prefix in ((mcp["results"], "mcp: "), (baseline, "mcp baseline: ")):
        assert [r["label"] for r in results] == [prefix + label for label in MCP_MIXES]
        assert all((r["count"], r["errors"]) == (2, 0) for r in results)
