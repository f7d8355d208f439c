"""Start-up: how long until mcpd answers, from the command a user types.

``python -m bench startup [--count N]`` (N runs of each row, default 5), or
``python -m bench.startup [--runs N]``. Each row starts a real process on free loopback ports and
times it from the moment it is spawned:

- ``make run``, first start: a fresh data directory (storage created and migrated), until
  ``GET /healthz`` answers 200 ``ok``;
- ``make run``, restart: the same data directory again (what a user's second start costs);
- ``mcpd serve`` (the console script, without make), restart;
- a second ``mcpd serve`` on a data directory another daemon holds: until it has exited (it
  must fail at once, naming the holder);
- ``mcpd mcp``, embedded (no daemon) and beside a running daemon: until the official MCP
  client's ``initialize`` has been answered over stdio, and until a first ``tools/list``.

The probe polls every 10 ms; a request that reaches the gateway while it starts waits for it
rather than failing, so the figure is when an answer arrives. Reported per row: min, median
and max of the runs, in seconds.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import httpx

from bench.config import BenchConfig, Benchmark
from bench.harness import REPO_ROOT, free_ports, print_table, write_result
from mcpd.testing.daemon import mcpd_executable

NAME = "startup"
DESCRIPTION = "make run / mcpd serve to a healthy /healthz, mcpd mcp to an MCP answer"
DEFAULT_RUNS = 5
POLL_S = 0.01
TIMEOUT_S = 120.0


def _environment(data_dir: Path, ports: Sequence[int]) -> dict[str, str]:
    env = {
        key: value for key, value in os.environ.items() if not key.startswith(("MCPD_", "OTEL_"))
    }
    env.update(
        {
            "MCPD_DATA_DIR": str(data_dir),
            "MCPD_HTTP_ADDR": f"127.0.0.1:{ports[0]}",
            "MCPD_GRPC_ADDR": f"127.0.0.1:{ports[1]}",
            "MCPD_OTLP_GRPC_ADDR": f"127.0.0.1:{ports[2]}",
            "MCPD_SESSIONS_SOURCES": "",
        }
    )
    return env


class _Daemon:
    """A started command serving HTTP, and how long it took to answer /healthz."""

    def __init__(self, command: Sequence[str], env: Mapping[str, str], http_port: int) -> None:
        self._command = list(command)
        self._env = dict(env)
        self._url = f"http://127.0.0.1:{http_port}/healthz"
        self._process: subprocess.Popen[bytes] | None = None
        self.seconds = 0.0

    def __enter__(self) -> _Daemon:
        began = time.monotonic()
        self._process = subprocess.Popen(
            self._command,
            env=self._env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        with httpx.Client(trust_env=False, timeout=TIMEOUT_S) as client:
            while True:
                if self._process.poll() is not None:
                    raise RuntimeError(f"{self._command} exited with {self._process.returncode}")
                try:
                    if client.get(self._url).status_code == 200:
                        break
                except httpx.TransportError:
                    pass
                if time.monotonic() - began > TIMEOUT_S:
                    raise RuntimeError(f"{self._command} not healthy within {TIMEOUT_S:g} s")
                time.sleep(POLL_S)
        self.seconds = time.monotonic() - began
        return self

    def __exit__(self, *exc: object) -> None:
        assert self._process is not None
        group = self._process.pid
        os.killpg(group, signal.SIGTERM)
        self._process.wait(30)
        # make may exit before the daemon it started has stopped (and let go of its data
        # directory): wait for the whole group.
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                os.killpg(group, 0)
            except ProcessLookupError:
                return
            time.sleep(POLL_S)
        os.killpg(group, signal.SIGKILL)


def _make_run() -> list[str]:
    make = shutil.which("make")
    if make is None:
        raise RuntimeError("make is required")
    return [make, "-s", "-C", str(REPO_ROOT), "run"]


def _serve_times(runs: int, work: Path) -> dict[str, list[float]]:
    rows: dict[str, list[float]] = {"make run, first start": [], "make run, restart": []}
    rows["mcpd serve, restart"] = []
    rows["second mcpd serve on a held data directory, to its exit"] = []
    mcpd = [str(mcpd_executable()), "serve"]
    for run in range(runs):
        data = work / f"data-{run}"
        ports = free_ports(3)
        env = _environment(data, ports)
        with _Daemon(_make_run(), env, ports[0]) as first:
            rows["make run, first start"].append(first.seconds)
        with _Daemon(_make_run(), env, ports[0]) as again:
            rows["make run, restart"].append(again.seconds)
        with _Daemon(mcpd, env, ports[0]) as direct:
            rows["mcpd serve, restart"].append(direct.seconds)
            other = _environment(data, free_ports(3))
            began = time.monotonic()
            refused = subprocess.run(mcpd, env=other, capture_output=True, timeout=TIMEOUT_S)
            rows["second mcpd serve on a held data directory, to its exit"].append(
                time.monotonic() - began
            )
            if refused.returncode != 1 or b"DATA_DIR_LOCKED" not in refused.stderr:
                raise RuntimeError(f"the second daemon did not refuse: {refused.stderr!r}")
    return rows


async def _mcp_ready(env: Mapping[str, str]) -> tuple[float, float]:
    """Seconds until `mcpd mcp` answered initialize, and a first tools/list."""
    from mcp.client import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client

    server = StdioServerParameters(command=str(mcpd_executable()), args=["mcp"], env=dict(env))
    began = time.monotonic()
    with tempfile.TemporaryFile("w") as errlog:
        async with (
            stdio_client(server, errlog=errlog) as (read, write),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            initialized = time.monotonic() - began
            await session.list_tools()
            listed = time.monotonic() - began
    return initialized, listed


def _mcp_times(runs: int, work: Path) -> dict[str, list[float]]:
    rows: dict[str, list[float]] = {}
    for mode in ("embedded", "beside a daemon"):
        rows[f"mcpd mcp {mode}, initialize answered"] = []
        rows[f"mcpd mcp {mode}, tools listed"] = []
    for run in range(runs):
        ports = free_ports(3)
        env = _environment(work / f"mcp-{run}", ports)
        env["MCPD_QUERY_ADDR"] = env["MCPD_GRPC_ADDR"]
        # The data directory exists (a user's has), and nothing listens: embedded.
        with _Daemon([str(mcpd_executable()), "serve"], env, ports[0]):
            pass
        timings = [("embedded", asyncio.run(_mcp_ready(env)))]
        with _Daemon([str(mcpd_executable()), "serve"], env, ports[0]):
            # A daemon that has just started is still building its own MCP endpoint in the
            # background; `mcpd mcp` is timed beside a settled one, as an agent meets it.
            _until_mcp_answers(ports[0])
            timings.append(("beside a daemon", asyncio.run(_mcp_ready(env))))
        for mode, (initialized, listed) in timings:
            rows[f"mcpd mcp {mode}, initialize answered"].append(initialized)
            rows[f"mcpd mcp {mode}, tools listed"].append(listed)
    return rows


def _until_mcp_answers(http_port: int) -> None:
    ping = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
    headers = {"accept": "application/json, text/event-stream"}
    url = f"http://127.0.0.1:{http_port}/mcp"
    with httpx.Client(trust_env=False, timeout=TIMEOUT_S) as client:
        client.post(url, json=ping, headers=headers).raise_for_status()


def _summary(samples: Mapping[str, list[float]]) -> list[dict[str, Any]]:
    return [
        {
            "row": row,
            "runs": len(values),
            "min_s": min(values),
            "median_s": statistics.median(values),
            "max_s": max(values),
            "samples_s": values,
        }
        for row, values in samples.items()
    ]


def run(config: BenchConfig, *, runs: int | None = None) -> dict[str, Any]:
    """Measure every row `runs` times (default: `config.count`, else DEFAULT_RUNS)."""
    runs = runs or config.count or DEFAULT_RUNS
    # Installed first, so the first `make run` measures start-up, not an install.
    subprocess.run([*_make_run()[:-1], "install"], check=True, capture_output=True)
    work = Path(tempfile.mkdtemp(prefix="mcpd-bench-startup-"))
    try:
        rows = _summary({**_serve_times(runs, work), **_mcp_times(runs, work)})
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print_table(
        f"start-up, {runs} runs each (seconds)",
        [{k: v for k, v in row.items() if k != "samples_s"} for row in rows],
        ["row", "runs", "min_s", "median_s", "max_s"],
    )
    document = {
        "description": DESCRIPTION,
        "config": {"runs": runs, "poll_s": POLL_S},
        "rows": rows,
    }
    path = write_result(NAME, document, config.results_dir)
    print(f"wrote {path}", flush=True)
    return document


BENCHMARK = Benchmark(NAME, DESCRIPTION, run)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.startup", description=DESCRIPTION)
    parser.add_argument("--runs", type=int, default=DEFAULT_RUNS)
    parser.add_argument("--results-dir", type=Path, default=BenchConfig().results_dir)
    args = parser.parse_args(argv)
    run(BenchConfig(results_dir=args.results_dir), runs=args.runs)
    return 0


if __name__ == "__main__":
    sys.exit(main())
