"""``python -m bench [NAME ...] [--seconds N]``: list and run the benchmarks.

With no NAME every benchmark runs. Each prints its tables and writes
``bench/results/<name>.json``. Exit status 1 when any benchmark failed, 2 on usage errors.
"""

from __future__ import annotations

import argparse
import sys
import traceback
from collections.abc import Sequence
from pathlib import Path

from bench.config import BenchConfig, Benchmark
from bench.harness import RESULTS_DIR, DaemonStartError
from bench.query import run as query
from bench.registry import BENCHMARKS as REGISTERED

BENCHMARKS: dict[str, Benchmark] = {**REGISTERED, query.NAME: query.BENCHMARK}


def _positive_float(text: str) -> float:
    value = float(text)
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be positive: {text}")
    return value


def _non_negative_float(text: str) -> float:
    value = float(text)
    if not value >= 0:
        raise argparse.ArgumentTypeError(f"must not be negative: {text}")
    return value


def _positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1: {text}")
    return value


def build_parser() -> argparse.ArgumentParser:
    listing = "\n".join(f"  {name:<24} {b.description}" for name, b in BENCHMARKS.items())
    parser = argparse.ArgumentParser(
        prog="python -m bench",
        description="Run mcpd benchmarks: they print figures and write bench/results/*.json.",
        epilog=f"benchmarks:\n{listing}",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("names", nargs="*", metavar="NAME", help="benchmarks to run (default: all)")
    parser.add_argument("--list", action="store_true", help="list the benchmarks and exit")
    defaults = BenchConfig()
    parser.add_argument(
        "--seconds",
        type=_positive_float,
        default=defaults.seconds,
        help=f"duration of each measured run (default {defaults.seconds:g})",
    )
    parser.add_argument(
        "--count",
        type=_positive_int,
        default=None,
        help="requests per measured run instead of a duration",
    )
    parser.add_argument(
        "--warmup",
        type=_non_negative_float,
        default=defaults.warmup_seconds,
        help=f"warm-up seconds before each run (default {defaults.warmup_seconds:g})",
    )
    parser.add_argument(
        "--concurrency",
        type=_positive_int,
        nargs="+",
        default=list(defaults.concurrencies),
        help="concurrency levels (default: "
        + " ".join(str(c) for c in defaults.concurrencies)
        + ")",
    )
    parser.add_argument(
        "--start-timeout",
        type=_positive_float,
        default=defaults.start_timeout_s,
        help=f"seconds to wait for mcpd serve to be healthy (default {defaults.start_timeout_s:g})",
    )
    parser.add_argument(
        "--events",
        type=_positive_int,
        default=None,
        help="corpus size of benchmarks that generate one (sessions: events, default "
        "1000000; query: spans, default 1000000)",
    )
    parser.add_argument(
        "--results-dir",
        type=Path,
        default=RESULTS_DIR,
        help="where to write <name>.json (default bench/results)",
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.list:
        for name, benchmark in BENCHMARKS.items():
            print(f"{name:<24} {benchmark.description}")
        return 0
    names: list[str] = list(dict.fromkeys(args.names)) or list(BENCHMARKS)
    unknown = [name for name in names if name not in BENCHMARKS]
    if unknown:
        parser.error(f"unknown benchmark(s): {', '.join(unknown)} (see --list)")
    config = BenchConfig(
        seconds=args.seconds,
        count=args.count,
        warmup_seconds=args.warmup,
        concurrencies=tuple(dict.fromkeys(args.concurrency)),
        start_timeout_s=args.start_timeout,
        results_dir=args.results_dir,
        events=args.events,
    )
    failed: list[str] = []
    for name in names:
        print(f"### {name}", flush=True)
        try:
            BENCHMARKS[name].run(config)
        except DaemonStartError as exc:
            print(f"{name}: mcpd serve did not start: {exc}", file=sys.stderr, flush=True)
            failed.append(name)
        except Exception:
            traceback.print_exc()
            failed.append(name)
    if failed:
        print(f"failed: {', '.join(failed)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
