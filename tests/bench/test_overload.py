"""``bench/overload``: the open loop, the durability check, and one short run against a real
daemon. Nothing is timed."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from bench.__main__ import build_parser as bench_parser
from bench.ingest.load import RefusedError, Stream
from bench.ingest.spans import Corpus, build_corpus
from bench.overload.run import (
    Offered,
    OverloadConfig,
    build_parser,
    check_durability,
    config_from_args,
    expected_by_trace,
    offer,
    run,
)
from bench.registry import BENCHMARKS


@pytest.fixture(scope="module")
def corpus() -> Corpus:
    return build_corpus("1kb", templates=2, warmup_templates=1, spans_per_request=32, seed=5)


def test_registered_and_configured() -> None:
    assert "overload" in BENCHMARKS
    assert bench_parser().parse_args(["overload", "--seconds", "5"]).names == ["overload"]
    config = config_from_args(
        build_parser().parse_args(
            ["--duration", "3", "--rate", "900", "--env", "MCPD_INGEST_MAX_PENDING_BYTES=1"]
        )
    )
    assert (config.duration_s, config.rate_spans_s, config.factor) == (3.0, 900.0, 3.0)
    assert config.env == (("MCPD_INGEST_MAX_PENDING_BYTES", "1"),)
    assert OverloadConfig().duration_s == 60.0
    with pytest.raises(SystemExit):
        build_parser().parse_args(["--env", "HOME=/tmp"])


async def test_the_open_loop_keeps_its_schedule_whatever_the_replies(corpus: Corpus) -> None:
    answers = iter(range(1000))

    async def every_other_refused(body: bytes) -> None:
        if next(answers) % 2:
            raise RefusedError("HTTP 429", retry_after="1")

    offered = await offer(
        every_other_refused,
        Stream(corpus.measured["otlp"]),
        requests_per_s=100.0,
        duration_s=0.1,
        max_in_flight=50,
    )
    # Requests start at 0, 10, ..., 90 ms: ten, whatever the machine's speed.
    assert (offered.scheduled, offered.sent, offered.not_sent) == (10, 10, 0)
    assert (offered.accepted, offered.refused, offered.refused_with_retry_after) == (5, 5, 5)
    assert offered.retry_after_values == {"1": 5}
    assert len(offered.acked) == len(offered.unacked) == 5


async def test_requests_beyond_the_in_flight_cap_are_not_sent(corpus: Corpus) -> None:
    release = asyncio.Event()

    async def held(body: bytes) -> None:
        await release.wait()

    # Held well past the 0.1 s schedule, so the first three are in flight throughout it.
    asyncio.get_running_loop().call_later(1.0, release.set)
    offered = await offer(
        held,
        Stream(corpus.measured["otlp"]),
        requests_per_s=100.0,
        duration_s=0.1,
        max_in_flight=3,
    )
    assert (offered.scheduled, offered.sent, offered.not_sent, offered.accepted) == (10, 3, 7, 3)


def test_durability_counts_every_acknowledged_span(corpus: Corpus) -> None:
    offered = Offered(acked=[(0, 0), (1, 4)], unacked=[(0, 1)])
    acked = expected_by_trace(corpus, offered.acked)
    assert sum(acked.values()) == 64
    stored = dict(acked)
    missing = next(iter(stored))
    stored[missing] -= 1
    unacked = next(iter(expected_by_trace(corpus, offered.unacked)))
    stored[unacked] = 2
    durability = check_durability(corpus, offered, stored)
    assert (durability.acknowledged_spans, durability.lost_spans) == (64, 1)
    assert durability.stored_unacknowledged_spans == 2


@pytest.mark.e2e
def test_a_short_run_against_the_daemon(tmp_path: Path) -> None:
    config = OverloadConfig(
        duration_s=2.0,
        calibrate_s=1.0,
        templates=2,
        spans_per_request=64,
        processes=1,
        env=(("MCPD_INGEST_MAX_PENDING_BYTES", "1"),),
        results_dir=tmp_path,
    )
    document = run(config)
    saved = json.loads((tmp_path / "overload.json").read_text())
    assert saved["benchmark"] == "overload"
    assert saved["sustainable_spans_s"] == document["sustainable_spans_s"] > 0
    requests = saved["requests"]
    assert requests["accepted"] > 0
    assert requests["refused_with_retry_after"] == requests["refused_429_503"]
    assert saved["durability"]["lost_spans"] == 0
    assert saved["durability"]["stored_unacknowledged_spans"] == 0
    assert saved["durability"]["acknowledged_spans"] == requests["accepted"] * 64
    assert set(saved["memory"]["peak_by_process_mib"]) == {"supervisor", "server-1"}
    assert saved["memory"]["peak_total_mib"] > 0
