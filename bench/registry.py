"""Every benchmark ``python -m bench`` knows, by name, in the order they run."""

from __future__ import annotations

from bench import capabilities_roundtrip, evaluation, startup
from bench.config import Benchmark
from bench.ingest import run as ingest
from bench.ingest import stages as ingest_stages
from bench.intelligence import passes as intelligence_passes
from bench.intelligence import quality as intelligence_quality
from bench.orchestrator import floor as orchestrator_floor
from bench.orchestrator import run as orchestrator
from bench.orchestrator import stages as orchestrator_stages
from bench.overload import run as overload
from bench.sessions import run as sessions

BENCHMARKS: dict[str, Benchmark] = {
    benchmark.name: benchmark
    for benchmark in (
        capabilities_roundtrip.BENCHMARK,
        startup.BENCHMARK,
        sessions.BENCHMARK,
        ingest.BENCHMARK,
        ingest_stages.BENCHMARK,
        overload.BENCHMARK,
        orchestrator.BENCHMARK,
        orchestrator_stages.BENCHMARK,
        orchestrator_floor.BENCHMARK,
        evaluation.BENCHMARK,
        intelligence_quality.BENCHMARK,
        intelligence_passes.BENCHMARK,
    )
}
