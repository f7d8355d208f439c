"""Unit tests of the benchmark harness. No real daemon is started and nothing is timed."""

from __future__ import annotations

import contextlib
import io
import json
import math
import os
import sys
from pathlib import Path

import httpx
import pytest
import sqlalchemy as sa
from sqlalchemy.engine import make_url

from bench.__main__ import build_parser, main
from bench.capabilities_roundtrip import classify_error, overhead_rows
from bench.config import BenchConfig
from bench.harness import (
    LatencyResult,
    format_table,
    machine_facts,
    percentile,
    percentiles,
    postgres_database,
    print_table,
    run_load,
    write_result,
)
from bench.registry import BENCHMARKS
from mcpd.testing.pytest_plugin import POSTGRES_ENV, POSTGRES_SKIP

# ---------------------------------------------------------------------------------------------
# percentile


@pytest.mark.parametrize(
    ("values", "pct", "expected"),
    [
        ([1.0, 2.0, 3.0, 4.0], 50, 2.5),
        ([1.0, 2.0, 3.0, 4.0, 5.0], 50, 3.0),
        ([1.0, 2.0, 3.0, 4.0, 5.0], 25, 2.0),
        ([1.0, 2.0, 3.0, 4.0, 5.0], 75, 4.0),
        ([1.0, 2.0, 3.0, 4.0, 5.0], 0, 1.0),
        ([1.0, 2.0, 3.0, 4.0, 5.0], 100, 5.0),
        ([10.0, 20.0], 50, 15.0),
        ([10.0, 20.0], 25, 12.5),
        ([0.0, 100.0], 99, 99.0),
        ([float(v) for v in range(101)], 90, 90.0),
        ([float(v) for v in range(101)], 99, 99.0),
        ([float(v) for v in range(1, 11)], 50, 5.5),
    ],
)
def test_percentile_known_values(values: list[float], pct: float, expected: float) -> None:
    assert percentile(values, pct) == expected


def test_percentile_interpolates_between_ranks() -> None:
    # rank = 9 * 0.9 = 8.1 -> 9 + 0.1 * (10 - 9)
    assert percentile([float(v) for v in range(1, 11)], 90) == pytest.approx(9.1)
    # rank = 9 * 0.99 = 8.91 -> 9 + 0.91 * (10 - 9)
    assert percentile([float(v) for v in range(1, 11)], 99) == pytest.approx(9.91)


def test_percentile_ignores_input_order() -> None:
    assert percentile([5.0, 1.0, 4.0, 2.0, 3.0], 50) == 3.0
    assert percentile((v for v in [3.0, 1.0, 2.0]), 100) == 3.0


def test_percentile_single_value_is_every_percentile() -> None:
    for pct in (0, 1, 50, 99, 100):
        assert percentile([7.25], pct) == 7.25


def test_percentile_repeated_values_are_exact() -> None:
    assert percentile([0.1] * 1000, 99) == 0.1


def test_percentile_accepts_ints() -> None:
    result = percentile([1, 2, 3, 4], 50)
    assert result == 2.5
    assert isinstance(percentile([1, 2, 3], 50), float)


@pytest.mark.parametrize("pct", [-0.1, 100.1, math.nan])
def test_percentile_rejects_out_of_range(pct: float) -> None:
    with pytest.raises(ValueError, match="percentile"):
        percentile([1.0, 2.0], pct)


def test_percentile_rejects_empty() -> None:
    with pytest.raises(ValueError, match="empty"):
        percentile([], 50)


def test_percentiles_match_percentile() -> None:
    values = [9.0, 3.0, 7.0, 1.0, 5.0, 2.0]
    assert percentiles(values, (0, 50, 90, 100)) == [
        percentile(values, 0),
        percentile(values, 50),
        percentile(values, 90),
        percentile(values, 100),
    ]


# ---------------------------------------------------------------------------------------------
# LatencyResult


def test_latency_result_from_samples() -> None:
    result = LatencyResult.from_samples(
        "rest", 4, [0.004, 0.001, 0.003, 0.002], errors=1, duration_s=2.0
    )
    assert result.count == 4
    assert result.errors == 1
    assert result.rps == 2.0
    assert result.p50_ms == pytest.approx(2.5)
    assert result.mean_ms == pytest.approx(2.5)
    assert result.min_ms == pytest.approx(1.0)
    assert result.max_ms == pytest.approx(4.0)
    assert result.p99_ms == pytest.approx(3.97)


def test_latency_result_without_successes_has_no_latency() -> None:
    result = LatencyResult.from_samples(
        "grpc", 1, [], errors=3, duration_s=1.0, error_kinds={"grpc UNAVAILABLE": 3}
    )
    assert result.count == 0
    assert result.rps == 0.0
    assert result.p50_ms is None
    assert result.max_ms is None
    data = result.to_dict()
    assert data["error_kinds"] == {"grpc UNAVAILABLE": 3}
    json.dumps(data, allow_nan=False)


def test_latency_result_cpu_percentages() -> None:
    result = LatencyResult.from_samples(
        "rest", 1, [0.001], duration_s=4.0, client_cpu_s=2.0, server_cpu_s=6.0
    )
    assert result.client_cpu_pct == 50.0
    assert result.server_cpu_pct == 150.0
    assert result.to_dict()["server_cpu_pct"] == 150.0
    unknown = LatencyResult.from_samples("rest", 1, [0.001], duration_s=4.0)
    assert unknown.client_cpu_pct is None
    assert unknown.table_row()["daemon cpu%"] is None


# ---------------------------------------------------------------------------------------------
# Tables


def test_format_table_aligns_columns() -> None:
    rows: list[dict[str, object]] = [
        {"transport": "rest", "concurrency": 1, "p50 ms": 1.5},
        {"transport": "grpc", "concurrency": 16, "p50 ms": 12.345},
    ]
    assert format_table("latency", rows) == "\n".join(
        [
            "latency",
            "=======",
            "transport  concurrency  p50 ms",
            "---------  -----------  ------",
            "rest                 1    1.50",
            "grpc                16   12.35",
        ]
    )


def test_format_table_missing_and_none_values_show_a_dash() -> None:
    rows: list[dict[str, object]] = [{"a": 1, "b": None}, {"a": 22, "c": "x"}]
    text = format_table("t", rows)
    assert text.splitlines()[2:] == [
        " a  b  c",
        "--  -  -",
        " 1  -  -",
        "22  -  x",
    ]


def test_format_table_explicit_columns_and_digits() -> None:
    rows: list[dict[str, object]] = [{"x": 1.0, "y": 2.0, "z": True}]
    text = format_table("t", rows, ["z", "x"], float_digits=0)
    assert text.splitlines()[2:] == ["z    x", "---  -", "yes  1"]


def test_format_table_without_rows() -> None:
    assert format_table("empty", []) == "empty\n=====\n(no rows)"


def test_format_table_has_no_trailing_spaces() -> None:
    rows: list[dict[str, object]] = [{"name": "a", "v": 1}, {"name": "longer", "v": 2}]
    for line in format_table("t", rows).splitlines():
        assert line == line.rstrip()


def test_print_table_writes_table_and_blank_line() -> None:
    out = io.StringIO()
    rows: list[dict[str, object]] = [{"a": 1}]
    print_table("t", rows, file=out)
    assert out.getvalue() == format_table("t", rows) + "\n\n"


# ---------------------------------------------------------------------------------------------
# Results

MACHINE = {"cpu_model": "test cpu", "logical_cores": 2}


def test_write_result_writes_pretty_sorted_json(tmp_path: Path) -> None:
    payload = {"zeta": 1, "alpha": {"b": 2, "a": [1.5, None]}}
    path = write_result("demo", payload, tmp_path, machine=MACHINE)
    assert path == tmp_path / "demo.json"
    text = path.read_text(encoding="utf-8")
    document = json.loads(text)
    assert document == {"benchmark": "demo", "machine": MACHINE, **payload}
    assert text == json.dumps(document, indent=2, sort_keys=True) + "\n"
    assert list(document) == sorted(document)
    assert [p.name for p in tmp_path.iterdir()] == ["demo.json"]


def test_write_result_creates_the_directory_and_overwrites(tmp_path: Path) -> None:
    results_dir = tmp_path / "nested" / "results"
    write_result("demo", {"run": 1}, results_dir, machine=MACHINE)
    path = write_result("demo", {"run": 2}, results_dir, machine=MACHINE)
    assert json.loads(path.read_text(encoding="utf-8"))["run"] == 2


def test_write_result_includes_machine_facts_by_default(tmp_path: Path) -> None:
    path = write_result("demo", {}, tmp_path)
    document = json.loads(path.read_text(encoding="utf-8"))
    assert set(document["machine"]) == set(machine_facts())


def test_write_result_converts_dataclasses_and_paths(tmp_path: Path) -> None:
    result = LatencyResult.from_samples("rest", 1, [0.001], duration_s=1.0)
    payload = {"results": [result], "where": Path("/tmp/x"), "levels": (1, 16)}
    path = write_result("demo", payload, tmp_path, machine=MACHINE)
    document = json.loads(path.read_text(encoding="utf-8"))
    assert document["results"] == [json.loads(json.dumps(result.to_dict()))]
    assert document["where"] == "/tmp/x"
    assert document["levels"] == [1, 16]


@pytest.mark.parametrize("name", ["", "../escape", "a/b", ".hidden", "sp ace"])
def test_write_result_rejects_bad_names(tmp_path: Path, name: str) -> None:
    with pytest.raises(ValueError, match="invalid result name"):
        write_result(name, {}, tmp_path, machine=MACHINE)


def test_write_result_rejects_reserved_keys(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="reserved"):
        write_result("demo", {"machine": {}}, tmp_path, machine=MACHINE)


def test_write_result_refuses_nan_and_leaves_no_file(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="JSON"):
        write_result("demo", {"x": math.nan}, tmp_path, machine=MACHINE)
    assert list(tmp_path.iterdir()) == []


# ---------------------------------------------------------------------------------------------
# A PostgreSQL database per measurement


def _databases(admin: sa.Engine, prefix: str) -> list[str]:
    with admin.connect() as connection:
        return list(
            connection.scalars(
                sa.text("SELECT datname FROM pg_database WHERE datname LIKE :p"),
                {"p": f"{prefix}%"},
            )
        )


def _measure_and_die(admin: sa.Engine, url: str, prefix: str, scope: contextlib.ExitStack) -> None:
    """Use a bench database as a measurement killed halfway would: a connection left open."""
    assert make_url(url).database in _databases(admin, prefix)
    engine = sa.create_engine(url, poolclass=sa.NullPool)
    scope.callback(engine.dispose)
    held = engine.connect()
    scope.callback(held.invalidate)  # the server ended it: nothing to roll back
    tables = "SELECT count(*) FROM pg_tables WHERE schemaname = 'public'"
    assert held.scalar(sa.text(tables)) == 0
    raise RuntimeError("the daemon was killed")


def test_a_bench_database_is_fresh_and_dropped_also_when_its_user_dies() -> None:
    admin_url = os.environ.get(POSTGRES_ENV)
    if not admin_url:
        pytest.skip(POSTGRES_SKIP)
    prefix = f"mcpd_bench_test_{os.getpid()}"
    admin = sa.create_engine(admin_url, poolclass=sa.NullPool)
    with contextlib.ExitStack() as scope:
        # The connection outlives the drop (closed last), as a killed daemon's would.
        with (
            pytest.raises(RuntimeError, match="killed"),
            postgres_database(admin_url, prefix) as url,
        ):
            _measure_and_die(admin, url, prefix, scope)
        assert _databases(admin, prefix) == []


# ---------------------------------------------------------------------------------------------
# Machine facts


def test_machine_facts_keys() -> None:
    facts = machine_facts()
    assert set(facts) == {
        "cpu_model",
        "logical_cores",
        "usable_cores",
        "memory_total_bytes",
        "os",
        "kernel",
        "platform",
        "machine",
        "python_version",
        "python_implementation",
        "mcpd_version",
        "git_commit",
        "git_dirty",
        "timestamp_utc",
    }
    assert isinstance(facts["cpu_model"], str)
    assert facts["cpu_model"]
    assert facts["python_version"] == ".".join(str(v) for v in sys.version_info[:3])
    assert facts["timestamp_utc"].endswith("+00:00")
    json.dumps(facts, allow_nan=False)


def test_machine_facts_on_linux() -> None:
    if not Path("/proc/meminfo").exists():
        pytest.skip("no /proc on this platform")
    facts = machine_facts()
    assert isinstance(facts["memory_total_bytes"], int)
    assert facts["memory_total_bytes"] > 0
    assert isinstance(facts["logical_cores"], int)
    assert facts["logical_cores"] >= 1


# ---------------------------------------------------------------------------------------------
# Load driver


async def test_run_load_count_issues_exactly_count_calls() -> None:
    calls = 0

    async def call() -> None:
        nonlocal calls
        calls += 1

    samples = await run_load(call, concurrency=4, count=10)
    assert calls == 10
    assert len(samples.latencies_s) == 10
    assert samples.errors == 0
    assert all(latency >= 0 for latency in samples.latencies_s)


async def test_run_load_counts_and_classifies_errors() -> None:
    calls = 0

    async def call() -> None:
        nonlocal calls
        calls += 1
        if calls % 3 == 0:
            raise RuntimeError("third call\nsecond line")

    samples = await run_load(call, concurrency=2, count=9)
    assert len(samples.latencies_s) == 6
    assert samples.errors == 3
    assert dict(samples.error_kinds) == {"RuntimeError: third call": 3}

    custom = await run_load(call, concurrency=1, count=3, classify_error=lambda _: "boom")
    assert dict(custom.error_kinds) == {"boom": 1}


async def test_run_load_zero_duration_makes_no_calls() -> None:
    async def call() -> None:
        raise AssertionError("must not be called")

    samples = await run_load(call, concurrency=3, duration_s=0.0)
    assert samples.latencies_s == []
    assert samples.errors == 0


async def test_run_load_validates_arguments() -> None:
    async def call() -> None:
        return None

    with pytest.raises(ValueError, match="exactly one"):
        await run_load(call, concurrency=1)
    with pytest.raises(ValueError, match="exactly one"):
        await run_load(call, concurrency=1, count=1, duration_s=1.0)
    with pytest.raises(ValueError, match="concurrency"):
        await run_load(call, concurrency=0, count=1)


# ---------------------------------------------------------------------------------------------
# Benchmark module and CLI (no daemon)


def test_overhead_rows_compare_rest_with_grpc() -> None:
    rest = LatencyResult.from_samples("rest", 1, [0.003, 0.003], duration_s=1.0)
    grpc_ = LatencyResult.from_samples("grpc", 1, [0.001, 0.001, 0.001, 0.001], duration_s=1.0)
    lonely = LatencyResult.from_samples("rest", 16, [0.003], duration_s=1.0)
    split = LatencyResult.from_samples("rest-split", 1, [0.002, 0.002], duration_s=1.0)
    rows = overhead_rows([rest, split, grpc_, lonely])
    assert [(row["concurrency"], row["rest"]) for row in rows] == [(1, "rest"), (1, "rest-split")]
    assert rows[0]["p50 +ms"] == pytest.approx(2.0)
    assert rows[0]["rest/grpc rps"] == pytest.approx(0.5)
    assert rows[1]["p50 +ms"] == pytest.approx(1.0)


def test_classify_error_falls_back_to_type_and_message() -> None:
    assert classify_error(httpx.ConnectError("refused")) == "ConnectError: refused"


def test_cli_lists_benchmarks(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--list"]) == 0
    out = capsys.readouterr().out
    for name in BENCHMARKS:
        assert name in out


def test_cli_rejects_unknown_benchmarks() -> None:
    with pytest.raises(SystemExit) as info:
        main(["no_such_benchmark"])
    assert info.value.code == 2


def test_cli_parses_options() -> None:
    args = build_parser().parse_args(
        ["capabilities_roundtrip", "--seconds", "5", "--concurrency", "1", "4"]
    )
    assert args.names == ["capabilities_roundtrip"]
    assert args.seconds == 5.0
    assert args.concurrency == [1, 4]
    with pytest.raises(SystemExit):
        build_parser().parse_args(["--seconds", "0"])


def test_bench_config_validates() -> None:
    assert BenchConfig().concurrencies == (1, 16)
    with pytest.raises(ValueError, match="seconds"):
        BenchConfig(seconds=0)
    with pytest.raises(ValueError, match="concurrencies"):
        BenchConfig(concurrencies=())
