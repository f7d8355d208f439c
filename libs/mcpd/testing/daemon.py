"""A real `mcpd serve` in a subprocess, for end-to-end tests and benchmarks.

It starts the daemon on free loopback ports with a temporary data directory and a clean `MCPD_*`
environment, waits until `/healthz` reports ok, and stops it with SIGTERM (SIGKILL after a
timeout). Nothing here is a fake: it runs the installed `mcpd` console script.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any, Literal, Self

import grpc
import httpx
from grpc_health.v1 import health_pb2, health_pb2_grpc


def _read_text(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None


class DaemonStartError(RuntimeError):
    """``mcpd serve`` exited or did not become healthy in time; the message has its stderr."""


def free_ports(count: int, host: str = "127.0.0.1") -> list[int]:
    """``count`` distinct free TCP ports on ``host``.

    Each port is found by binding port 0; all sockets stay open until every port is chosen
    (so they differ) and are then released for the caller to bind.
    """
    sockets: list[socket.socket] = []
    try:
        for _ in range(count):
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sockets.append(sock)
            sock.bind((host, 0))
        return [int(sock.getsockname()[1]) for sock in sockets]
    finally:
        for sock in sockets:
            sock.close()


def free_port(host: str = "127.0.0.1") -> int:
    """One free TCP port on ``host`` (bound, read, released)."""
    return free_ports(1, host)[0]


def mcpd_executable() -> Path:
    """The ``mcpd`` console script next to the running interpreter."""
    return Path(sys.executable).parent / "mcpd"


# How `mcpd serve` reports a port that is taken, and how often a start is tried on new ports.
_PORT_TAKEN = "address already in use"
_START_ATTEMPTS = 3
_ADDRESS_VARIABLES = frozenset({"MCPD_HTTP_ADDR", "MCPD_GRPC_ADDR", "MCPD_OTLP_GRPC_ADDR"})

_CLK_TCK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def process_group_cpu_seconds(pgid: int) -> float | None:
    """User+system CPU seconds of every live process in group ``pgid`` (and of its reaped
    children), from ``/proc``; ``None`` where ``/proc`` is unavailable."""
    return _cpu_seconds(lambda _pid, _name, fields: fields[2] == str(pgid))


def processes_cpu_seconds(pids: Collection[int] = (), *, named: str = "") -> float | None:
    """User+system CPU seconds of the live processes ``pids`` and of every process whose
    command is ``named`` (and of their reaped children), from ``/proc``; ``None`` where
    ``/proc`` is unavailable."""
    wanted = {str(pid) for pid in pids}
    return _cpu_seconds(lambda pid, name, _fields: pid in wanted or name == named)


def _cpu_seconds(select: Callable[[str, str, list[str]], bool]) -> float | None:
    """The CPU seconds of the processes `select(pid, command, fields)` picks."""
    proc = Path("/proc")
    if not proc.is_dir():
        return None
    ticks = 0
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        stat = _read_text(entry / "stat")
        if not stat:
            continue
        # "pid (command) state ppid pgrp ... utime(14) stime(15) cutime(16) cstime(17)": after
        # the parenthesised command, 0-based indexes 2 (pgrp) and 11..14 of the remainder.
        name = stat[stat.find("(") + 1 : stat.rfind(")")]
        fields = stat[stat.rfind(")") + 2 :].split()
        try:
            if select(entry.name, name, fields):
                ticks += sum(int(field) for field in fields[11:15])
        except (IndexError, ValueError):
            continue
    return ticks / _CLK_TCK


class DaemonProcess:
    """A real ``mcpd serve``, as a sync or async context manager.

    On entry: picks free loopback ports for HTTP, gRPC and OTLP/gRPC, creates a temporary
    ``MCPD_DATA_DIR``, starts the daemon in its own process group with a clean ``MCPD_*``
    environment (plus ``extra_env``), and waits until ``GET /healthz`` answers 200 with
    ``"status": "ok"``. If the daemon exits or misses ``start_timeout_s``,
    :class:`DaemonStartError` carries the tail of its stderr.

    On exit: SIGTERM, wait up to ``stop_timeout_s``, then SIGKILL the process group; stray
    processes left in the group are terminated too. The temporary directory is removed unless
    ``keep_files``.

    ``ready`` says how readiness is probed: ``http`` (``GET /healthz``) for processes that serve
    the gateway, ``grpc`` (grpc.health.v1) for a single gRPC role.

    ``processes`` is the daemon's ``serve.processes``: one by default, which keeps a test
    daemon to two processes (the supervisor and one server); ``None`` leaves the product
    default (one per core), which the benchmarks measure.

    ``command`` replaces ``[<venv>/bin/mcpd, "serve"]`` (useful for testing the harness).
    """

    def __init__(
        self,
        *,
        command: Sequence[str] | None = None,
        host: str = "127.0.0.1",
        extra_env: Mapping[str, str] | None = None,
        start_timeout_s: float = 60.0,
        stop_timeout_s: float = 15.0,
        health_path: str = "/healthz",
        ready: Literal["http", "grpc"] = "http",
        keep_files: bool = False,
        processes: int | None = 1,
    ) -> None:
        self.command = list(command) if command is not None else [str(mcpd_executable()), "serve"]
        self.host = host
        self.extra_env = dict(extra_env or {})
        self.start_timeout_s = start_timeout_s
        self.stop_timeout_s = stop_timeout_s
        self.health_path = health_path
        self.ready = ready
        self.keep_files = keep_files
        self.processes = processes

        self.http_addr = ""
        self.grpc_addr = ""
        self.otlp_grpc_addr = ""
        self.workdir: Path | None = None
        self.health: dict[str, Any] | None = None
        self.startup_s: float | None = None
        self.shutdown_s: float | None = None
        self.shutdown_signal: str | None = None
        self.returncode: int | None = None
        self.stderr_tail = ""
        self._process: subprocess.Popen[bytes] | None = None

    # -- addresses and files ------------------------------------------------------------------

    @property
    def http_url(self) -> str:
        return f"http://{self.http_addr}"

    @property
    def data_dir(self) -> Path:
        return self._workdir() / "data"

    @property
    def stdout_path(self) -> Path:
        return self._workdir() / "stdout.log"

    @property
    def stderr_path(self) -> Path:
        return self._workdir() / "stderr.log"

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process is not None else None

    def _workdir(self) -> Path:
        if self.workdir is None:
            raise RuntimeError("the daemon has not been started")
        return self.workdir

    def stderr_text(self, limit: int = 8000) -> str:
        """The last ``limit`` characters the daemon wrote to stderr."""
        return _tail(self.stderr_path, limit) if self.workdir is not None else ""

    def stdout_text(self, limit: int = 8000) -> str:
        """The last ``limit`` characters the daemon wrote to stdout."""
        return _tail(self.stdout_path, limit) if self.workdir is not None else ""

    def environment(self) -> dict[str, str]:
        """The daemon's environment: ours without ``MCPD_*`` and ``OTEL_*`` (so a shell's settings
        neither redirect the daemon nor make it export its own telemetry), then its addresses and
        data directory, ``processes`` (and no transcript sources unless ``extra_env`` sets
        ``HOME``), then ``extra_env``."""
        env = {
            key: value
            for key, value in os.environ.items()
            if not key.startswith(("MCPD_", "OTEL_"))
        }
        env.update(
            {
                "MCPD_DATA_DIR": str(self.data_dir),
                "MCPD_HTTP_ADDR": self.http_addr,
                "MCPD_GRPC_ADDR": self.grpc_addr,
                "MCPD_OTLP_GRPC_ADDR": self.otlp_grpc_addr,
                "PYTHONUNBUFFERED": "1",
            }
        )
        if self.processes is not None:
            env["MCPD_SERVE_PROCESSES"] = str(self.processes)
        if "HOME" not in self.extra_env:
            # Never tail the agent transcripts of the real home directory; a test that wants
            # tailing points HOME at a home of its own.
            env["MCPD_SESSIONS_SOURCES"] = ""
        env.update(self.extra_env)
        return env

    def cpu_seconds(self) -> float | None:
        """CPU seconds used so far by the daemon's processes (Linux ``/proc``)."""
        if self._process is None or self._process.poll() is not None:
            return None
        return process_group_cpu_seconds(self._process.pid)

    # -- lifecycle ----------------------------------------------------------------------------

    def start(self) -> None:
        if self._process is not None:
            raise RuntimeError("the daemon is already started")
        for attempt in range(1, _START_ATTEMPTS + 1):
            try:
                self._start_on_free_ports()
                return
            except DaemonStartError as error:
                # A free port is released before the daemon binds it, so another process
                # (a parallel test worker) can take it first: then start again on new ports,
                # unless the caller chose the addresses.
                chosen = self.extra_env.keys() & _ADDRESS_VARIABLES
                if attempt == _START_ATTEMPTS or chosen or _PORT_TAKEN not in str(error).lower():
                    raise
                self._forget_failed_start()

    def _forget_failed_start(self) -> None:
        """Back to the state before `start`, after a start that failed and was stopped."""
        self._process = None
        self.workdir = None
        self.returncode = None
        self.shutdown_s = None
        self.shutdown_signal = None
        self.stderr_tail = ""

    def _start_on_free_ports(self) -> None:
        http_port, grpc_port, otlp_port = free_ports(3, self.host)
        self.http_addr = f"{self.host}:{http_port}"
        self.grpc_addr = f"{self.host}:{grpc_port}"
        self.otlp_grpc_addr = f"{self.host}:{otlp_port}"
        self.workdir = Path(tempfile.mkdtemp(prefix="mcpd-daemon-"))
        self.data_dir.mkdir()
        began = time.monotonic()
        try:
            with self.stdout_path.open("wb") as out, self.stderr_path.open("wb") as err:
                self._process = subprocess.Popen(
                    self.command,
                    env=self.environment(),
                    stdin=subprocess.DEVNULL,
                    stdout=out,
                    stderr=err,
                    cwd=self.workdir,
                    start_new_session=True,
                )
            self._wait_healthy(began + self.start_timeout_s)
        except BaseException:
            self.stop()
            raise
        self.startup_s = time.monotonic() - began

    def _wait_healthy(self, deadline: float) -> None:
        assert self._process is not None
        probe = self._probe_grpc if self.ready == "grpc" else self._probe_http
        delay = 0.02
        last = "no answer yet"
        while True:
            code = self._process.poll()
            if code is not None:
                raise DaemonStartError(self._failure(f"exited with code {code}"))
            ready, last = probe()
            if ready:
                return
            if time.monotonic() >= deadline:
                raise DaemonStartError(
                    self._failure(f"not healthy after {self.start_timeout_s:g} s ({last})")
                )
            time.sleep(delay)
            delay = min(delay * 1.5, 0.25)

    def _probe_http(self) -> tuple[bool, str]:
        """GET the health path: ready on 200 with `"status": "ok"`."""
        url = self.http_url + self.health_path
        try:
            response = httpx.get(url, timeout=2.0, trust_env=False)
        except httpx.HTTPError as exc:
            return False, f"{url}: {type(exc).__name__}: {exc}"
        try:
            body = response.json()
        except ValueError:
            body = None
        if response.status_code == 200 and isinstance(body, dict) and body.get("status") == "ok":
            self.health = body
            return True, "ok"
        return False, f"{url}: HTTP {response.status_code}: {response.text[:300]}"

    def _probe_grpc(self) -> tuple[bool, str]:
        """grpc.health.v1 Check of the whole server: ready when SERVING."""
        with grpc.insecure_channel(self.grpc_addr) as channel:
            try:
                reply = health_pb2_grpc.HealthStub(channel).Check(
                    health_pb2.HealthCheckRequest(), timeout=2.0
                )
            except grpc.RpcError as exc:
                return False, f"gRPC health at {self.grpc_addr}: {exc.code()}"
        serving = reply.status == health_pb2.HealthCheckResponse.SERVING
        return serving, f"gRPC health at {self.grpc_addr}: {reply.status}"

    def _failure(self, what: str) -> str:
        stderr = self.stderr_text().strip()
        stdout = self.stdout_text(2000).strip()
        message = [f"`{' '.join(self.command)}` {what}"]
        message.append("--- stderr ---\n" + (stderr or "(empty)"))
        if stdout:
            message.append("--- stdout ---\n" + stdout)
        return "\n".join(message)

    def wait(self, timeout_s: float) -> int:
        """Wait up to ``timeout_s`` for the daemon to exit by itself; its exit status (raises
        ``subprocess.TimeoutExpired`` when it does not)."""
        if self._process is None:
            raise RuntimeError("the daemon has not been started")
        return self._process.wait(timeout_s)

    def stop(self) -> None:
        """Stop the daemon (SIGTERM, then SIGKILL after ``stop_timeout_s``); idempotent."""
        process = self._process
        try:
            if process is not None and self.returncode is None:
                began = time.monotonic()
                if process.poll() is None:
                    self.shutdown_signal = "SIGTERM"
                    _signal_pid(process.pid, signal.SIGTERM)
                    try:
                        process.wait(self.stop_timeout_s)
                    except subprocess.TimeoutExpired:
                        self.shutdown_signal = "SIGKILL"
                        _signal_group(process.pid, signal.SIGKILL)
                        process.wait()
                else:
                    self.shutdown_signal = None
                self.shutdown_s = time.monotonic() - began
                self.returncode = process.returncode
                _reap_group(process.pid, self.stop_timeout_s)
        finally:
            if self.workdir is not None:
                self.stderr_tail = self.stderr_text()
            if self.workdir is not None and not self.keep_files:
                shutil.rmtree(self.workdir, ignore_errors=True)

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    async def __aenter__(self) -> Self:
        await asyncio.to_thread(self.start)
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await asyncio.to_thread(self.stop)


def _tail(path: Path, limit: int) -> str:
    try:
        with path.open("rb") as handle:
            handle.seek(0, os.SEEK_END)
            size = handle.tell()
            handle.seek(max(0, size - limit))
            return handle.read().decode("utf-8", errors="replace")
    except OSError:
        return ""


def _signal_pid(pid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, sig)


def _signal_group(pgid: int, sig: int) -> bool:
    """Signal process group ``pgid``; False when the group no longer exists."""
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        return False
    return True


def _reap_group(pgid: int, timeout_s: float) -> None:
    """After the leader exited: terminate whatever it left behind in its process group."""
    if not _signal_group(pgid, signal.SIGTERM):
        return
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if not _signal_group(pgid, 0):
            return
        time.sleep(0.05)
    _signal_group(pgid, signal.SIGKILL)
