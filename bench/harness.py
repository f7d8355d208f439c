"""Shared harness for the benchmarks in ``bench/``.

What lives here:

- :func:`machine_facts`: the machine a figure was measured on (written next to every figure).
- :func:`percentile` and :class:`LatencyResult`: exact latency statistics (no histograms, no
  numpy: every sample is kept and sorted).
- :func:`run_load`: a closed-loop load driver (``concurrency`` asyncio workers calling one
  coroutine for a duration or a fixed count, timing each call).
- :func:`format_table` / :func:`print_table`: aligned text tables for the terminal.
- :func:`write_result`: ``bench/results/<name>.json``, pretty and with sorted keys.
- :func:`postgres_database`: a fresh PostgreSQL database for one measurement, dropped after it.
- The daemon under test is :class:`mcpd.testing.daemon.DaemonProcess`, re-exported here.

Benchmarks report figures; nothing here asserts on speed.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import datetime as dt
import importlib.metadata
import json
import math
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from collections import Counter
from collections.abc import Awaitable, Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, TextIO

import sqlalchemy as sa

from mcpd.testing.daemon import (
    DaemonProcess,
    DaemonStartError,
    free_port,
    free_ports,
)

__all__ = ["DaemonProcess", "DaemonStartError", "free_port", "free_ports"]

REPO_ROOT = Path(__file__).resolve().parent.parent
RESULTS_DIR = Path(__file__).resolve().parent / "results"


def repo_relative(path: Path) -> str:
    """`path` as results files record it: relative to the repository, never a machine's path."""
    resolved = path.resolve()
    if resolved.is_relative_to(REPO_ROOT):
        return str(resolved.relative_to(REPO_ROOT))
    return resolved.name


# ---------------------------------------------------------------------------------------------
# Machine facts


def _read_text(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None


def _cpu_model() -> str:
    cpuinfo = _read_text(Path("/proc/cpuinfo"))
    if cpuinfo:
        for line in cpuinfo.splitlines():
            key, sep, value = line.partition(":")
            if sep and key.strip() in ("model name", "Model", "Hardware", "cpu model"):
                return value.strip()
    return platform.processor() or platform.machine() or "unknown"


def _memory_total_bytes() -> int | None:
    meminfo = _read_text(Path("/proc/meminfo"))
    if meminfo:
        match = re.search(r"^MemTotal:\s+(\d+)\s*kB", meminfo, re.MULTILINE)
        if match:
            return int(match.group(1)) * 1024
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return None


def _usable_cores() -> int | None:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count()


def _mcpd_version() -> str | None:
    try:
        return importlib.metadata.version("mcpd")
    except importlib.metadata.PackageNotFoundError:
        return None


def _git(*args: str) -> str | None:
    git = shutil.which("git")
    if git is None:
        return None
    try:
        completed = subprocess.run(
            # --no-optional-locks: never take .git/index.lock, others may be using the repo.
            [git, "--no-optional-locks", *args],
            cwd=REPO_ROOT,
            capture_output=True,
            text=True,
            timeout=10,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    if completed.returncode != 0:
        return None
    return completed.stdout.strip()


def machine_facts() -> dict[str, Any]:
    """Facts about the machine and checkout a figure was measured on.

    Keys: ``cpu_model``, ``logical_cores``, ``usable_cores`` (CPU affinity), ``memory_total_bytes``,
    ``os``, ``kernel``, ``platform``, ``machine``, ``python_version``,
    ``python_implementation``, ``mcpd_version``, ``git_commit``, ``git_dirty``,
    ``timestamp_utc``. Values that cannot be found are ``None``.
    """
    commit = _git("rev-parse", "HEAD")
    status = _git("status", "--porcelain", "--untracked-files=no") if commit else None
    return {
        "cpu_model": _cpu_model(),
        "logical_cores": os.cpu_count(),
        "usable_cores": _usable_cores(),
        "memory_total_bytes": _memory_total_bytes(),
        "os": platform.system(),
        "kernel": platform.release(),
        "platform": platform.platform(),
        "machine": platform.machine(),
        "python_version": platform.python_version(),
        "python_implementation": platform.python_implementation(),
        "mcpd_version": _mcpd_version(),
        "git_commit": commit,
        "git_dirty": None if status is None else bool(status),
        "timestamp_utc": dt.datetime.now(dt.UTC).replace(microsecond=0).isoformat(),
    }


# ---------------------------------------------------------------------------------------------
# Statistics


def _check_pct(pct: float) -> None:
    if math.isnan(pct) or not 0.0 <= pct <= 100.0:
        raise ValueError(f"percentile must be within [0, 100], got {pct!r}")


def _percentile_sorted(ordered: Sequence[float], pct: float) -> float:
    _check_pct(pct)
    if not ordered:
        raise ValueError("percentile of an empty sequence")
    # Linear interpolation between closest ranks (numpy's default "linear" method, Excel's
    # PERCENTILE.INC, R type 7): rank = (n - 1) * p / 100 on the 0-based sorted samples.
    rank = (len(ordered) - 1) * pct / 100.0
    lower = math.floor(rank)
    fraction = rank - lower
    if fraction == 0.0 or lower + 1 >= len(ordered):
        return float(ordered[min(lower, len(ordered) - 1)])
    low, high = ordered[lower], ordered[lower + 1]
    return float(low + (high - low) * fraction)


def percentile(values: Iterable[float], pct: float) -> float:
    """The ``pct``-th percentile (0..100) of ``values``, exactly, from every sample.

    Linear interpolation between closest ranks: the 0-based rank is ``(n - 1) * pct / 100``,
    so ``pct=0`` is the minimum, ``pct=100`` the maximum and ``pct=50`` the usual median.
    Raises ``ValueError`` for no values or ``pct`` outside ``[0, 100]``.
    """
    return _percentile_sorted(sorted(values), pct)


def percentiles(values: Iterable[float], pcts: Sequence[float]) -> list[float]:
    """Several percentiles of ``values`` with a single sort."""
    ordered = sorted(values)
    return [_percentile_sorted(ordered, pct) for pct in pcts]


@dataclasses.dataclass(frozen=True, slots=True)
class LatencyResult:
    """Latency figures of one measured run.

    Latencies are in milliseconds and cover successful requests only; ``errors`` counts the
    failed ones (``error_kinds`` by kind). ``rps`` is successful requests per second of
    wall-clock ``duration_s``. The ``*_ms`` fields are ``None`` when nothing succeeded.
    """

    label: str
    concurrency: int
    count: int
    errors: int
    duration_s: float
    rps: float
    mean_ms: float | None
    p50_ms: float | None
    p90_ms: float | None
    p99_ms: float | None
    min_ms: float | None
    max_ms: float | None
    error_kinds: Mapping[str, int] = dataclasses.field(default_factory=dict)
    client_cpu_s: float | None = None
    server_cpu_s: float | None = None

    @classmethod
    def from_samples(
        cls,
        label: str,
        concurrency: int,
        latencies_s: Sequence[float],
        *,
        errors: int = 0,
        duration_s: float,
        error_kinds: Mapping[str, int] | None = None,
        client_cpu_s: float | None = None,
        server_cpu_s: float | None = None,
    ) -> LatencyResult:
        """Summarize per-request latencies given in seconds."""
        count = len(latencies_s)
        rps = count / duration_s if duration_s > 0 else 0.0
        stats: list[float | None]
        if count:
            ms = [latency * 1000.0 for latency in latencies_s]
            p50, p90, p99 = percentiles(ms, (50, 90, 99))
            stats = [math.fsum(ms) / count, p50, p90, p99, min(ms), max(ms)]
        else:
            stats = [None] * 6
        mean_ms, p50_ms, p90_ms, p99_ms, min_ms, max_ms = stats
        return cls(
            label=label,
            concurrency=concurrency,
            count=count,
            errors=errors,
            duration_s=duration_s,
            rps=rps,
            mean_ms=mean_ms,
            p50_ms=p50_ms,
            p90_ms=p90_ms,
            p99_ms=p99_ms,
            min_ms=min_ms,
            max_ms=max_ms,
            error_kinds=dict(error_kinds or {}),
            client_cpu_s=client_cpu_s,
            server_cpu_s=server_cpu_s,
        )

    @property
    def client_cpu_pct(self) -> float | None:
        """Benchmark client CPU time as a percentage of one core over the run."""
        return _cpu_pct(self.client_cpu_s, self.duration_s)

    @property
    def server_cpu_pct(self) -> float | None:
        """Daemon CPU time (all its processes) as a percentage of one core over the run."""
        return _cpu_pct(self.server_cpu_s, self.duration_s)

    def to_dict(self) -> dict[str, Any]:
        data = dataclasses.asdict(self)
        data["error_kinds"] = dict(self.error_kinds)
        data["client_cpu_pct"] = self.client_cpu_pct
        data["server_cpu_pct"] = self.server_cpu_pct
        return data

    def table_row(self) -> dict[str, object]:
        return {
            "transport": self.label,
            "concurrency": self.concurrency,
            "requests": self.count,
            "rps": self.rps,
            "p50 ms": self.p50_ms,
            "p90 ms": self.p90_ms,
            "p99 ms": self.p99_ms,
            "mean ms": self.mean_ms,
            "max ms": self.max_ms,
            "errors": self.errors,
            "client cpu%": self.client_cpu_pct,
            "daemon cpu%": self.server_cpu_pct,
        }


def _cpu_pct(cpu_s: float | None, duration_s: float) -> float | None:
    if cpu_s is None or duration_s <= 0:
        return None
    return 100.0 * cpu_s / duration_s


# ---------------------------------------------------------------------------------------------
# Load driver


@dataclasses.dataclass(slots=True)
class LoadSamples:
    """Raw outcome of :func:`run_load`: one latency (seconds) per successful call."""

    latencies_s: list[float]
    errors: int
    error_kinds: Counter[str]
    elapsed_s: float
    client_cpu_s: float


def describe_error(exc: BaseException) -> str:
    """A short, low-cardinality label for an error (type and first line, truncated)."""
    first_line = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    label = type(exc).__name__
    return f"{label}: {first_line[:100]}" if first_line else label


async def run_load(
    call: Callable[[], Awaitable[object]],
    *,
    concurrency: int,
    duration_s: float | None = None,
    count: int | None = None,
    classify_error: Callable[[BaseException], str] = describe_error,
) -> LoadSamples:
    """Closed-loop load: ``concurrency`` workers each await ``call()`` back to back.

    Runs for ``duration_s`` seconds (no new call starts after the deadline; calls in flight
    finish and are counted) or for exactly ``count`` calls in total; give one of the two.
    A call that raises ``Exception`` is an error, classified by ``classify_error``; its latency
    is not recorded. ``elapsed_s`` spans the first call's start to the last call's end.
    """
    if concurrency < 1:
        raise ValueError("concurrency must be at least 1")
    if (duration_s is None) == (count is None):
        raise ValueError("give exactly one of duration_s and count")
    if duration_s is not None and duration_s < 0:
        raise ValueError("duration_s must not be negative")
    if count is not None and count < 0:
        raise ValueError("count must not be negative")

    latencies: list[float] = []
    kinds: Counter[str] = Counter()
    remaining = count
    clock = time.perf_counter
    start = clock()
    deadline = start + duration_s if duration_s is not None else math.inf

    async def worker() -> None:
        nonlocal remaining
        while True:
            if remaining is not None:
                if remaining <= 0:
                    return
                remaining -= 1
            elif clock() >= deadline:
                return
            began = clock()
            try:
                await call()
            except Exception as exc:
                kinds[classify_error(exc)] += 1
                continue
            latencies.append(clock() - began)

    cpu_start = time.process_time()
    async with asyncio.TaskGroup() as group:
        for _ in range(concurrency):
            group.create_task(worker())
    elapsed = clock() - start
    return LoadSamples(
        latencies_s=latencies,
        errors=kinds.total(),
        error_kinds=kinds,
        elapsed_s=elapsed,
        client_cpu_s=time.process_time() - cpu_start,
    )


# ---------------------------------------------------------------------------------------------
# Tables


def _cell(value: object, float_digits: int) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        if math.isnan(value):
            return "-"
        return f"{value:.{float_digits}f}"
    return str(value)


def _is_numeric(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def format_table(
    title: str,
    rows: Sequence[Mapping[str, object]],
    columns: Sequence[str] | None = None,
    *,
    float_digits: int = 2,
) -> str:
    """Render rows as an aligned text table under ``title``.

    Columns are ``columns`` or every key in order of first appearance. Numbers are right
    aligned (floats with ``float_digits`` decimals), other values left aligned; a missing or
    ``None`` value shows as ``-``. The result ends without a newline.
    """
    if columns is None:
        seen: dict[str, None] = {}
        for row in rows:
            seen.update(dict.fromkeys(row))
        columns = list(seen)
    cells = [[_cell(row.get(column), float_digits) for column in columns] for row in rows]
    widths = [
        max([len(column), *(len(line[index]) for line in cells)])
        for index, column in enumerate(columns)
    ]
    numeric = [
        any(_is_numeric(row.get(column)) for row in rows)
        and all(row.get(column) is None or _is_numeric(row.get(column)) for row in rows)
        for column in columns
    ]

    def render(values: Sequence[str]) -> str:
        parts = [
            value.rjust(width) if right else value.ljust(width)
            for value, width, right in zip(values, widths, numeric, strict=True)
        ]
        return "  ".join(parts).rstrip()

    lines = [title, "=" * max(len(title), 1)]
    if columns:
        lines.append(render(list(columns)))
        lines.append(render(["-" * width for width in widths]))
        lines.extend(render(line) for line in cells)
    if not rows:
        lines.append("(no rows)")
    return "\n".join(lines)


def print_table(
    title: str,
    rows: Sequence[Mapping[str, object]],
    columns: Sequence[str] | None = None,
    *,
    float_digits: int = 2,
    file: TextIO | None = None,
) -> None:
    """Print :func:`format_table` followed by a blank line (to stdout by default)."""
    out = sys.stdout if file is None else file
    print(format_table(title, rows, columns, float_digits=float_digits), file=out)
    print(file=out, flush=True)


# ---------------------------------------------------------------------------------------------
# Results

_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]*")


def _json_default(value: object) -> object:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        to_dict = getattr(value, "to_dict", None)
        return to_dict() if callable(to_dict) else dataclasses.asdict(value)
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, Mapping):
        return dict(value)
    if isinstance(value, set | frozenset | tuple):
        return sorted(value) if isinstance(value, set | frozenset) else list(value)
    raise TypeError(f"not JSON serializable: {type(value).__name__}")


def write_result(
    name: str,
    payload: Mapping[str, Any],
    results_dir: Path = RESULTS_DIR,
    *,
    machine: Mapping[str, Any] | None = None,
) -> Path:
    """Write ``<results_dir>/<name>.json`` and return its path.

    The document is ``{"benchmark": name, "machine": machine_facts(), **payload}`` (pass
    ``machine`` to supply the facts), indented with sorted keys and a final newline, written
    atomically. Dataclasses (via ``to_dict`` when present), paths, tuples and sets are
    converted; NaN and infinities are refused so the file is strict JSON.
    """
    if not _NAME.fullmatch(name):
        raise ValueError(f"invalid result name {name!r}")
    clashes = {"benchmark", "machine"} & set(payload)
    if clashes:
        raise ValueError(f"payload must not set reserved keys: {sorted(clashes)}")
    document: dict[str, Any] = {
        "benchmark": name,
        "machine": dict(machine) if machine is not None else machine_facts(),
        **payload,
    }
    text = json.dumps(document, indent=2, sort_keys=True, allow_nan=False, default=_json_default)
    results_dir.mkdir(parents=True, exist_ok=True)
    path = results_dir / f"{name}.json"
    fd, tmp_name = tempfile.mkstemp(prefix=f".{name}.", suffix=".tmp", dir=results_dir)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text + "\n")
        os.replace(tmp_name, path)
    except BaseException:
        Path(tmp_name).unlink(missing_ok=True)
        raise
    return path


@contextlib.contextmanager
def postgres_database(admin_url: str, prefix: str = "mcpd_bench") -> Iterator[str]:
    """A fresh database named `prefix` and a random suffix on the server of `admin_url`, dropped
    afterwards (also when what used it was killed); its URL."""
    url = sa.engine.make_url(admin_url).set(drivername="postgresql+psycopg")
    admin = sa.create_engine(url, isolation_level="AUTOCOMMIT")
    name = f"{prefix}_{uuid.uuid4().hex[:12]}"
    try:
        with admin.connect() as connection:
            connection.execute(sa.text(f'CREATE DATABASE "{name}"'))
        try:
            yield url.set(database=name).render_as_string(hide_password=False)
        finally:
            with admin.connect() as connection:
                connection.execute(sa.text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
    finally:
        admin.dispose()
