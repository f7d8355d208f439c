"""The systems under test and how each is asked what it stored.

- mcpd: a real ``mcpd serve`` (:class:`DaemonProcess`) on SQLite (the embedded default),
  PostgreSQL (a fresh database per run, dropped afterwards) or ClickHouse in process (chdb).
  What it stored is counted from the store itself once the daemon is gone: SQL on the SQLite
  file or the Postgres database, ``SELECT count() FROM spans FINAL`` through chdb in a child
  process (chdb runs one engine per process).
- Arize Phoenix: ``phoenix serve`` from its own virtualenv (``.bench/phoenix-venv`` by default,
  created with ``pip install arize-phoenix`` on first use, or any interpreter that imports
  ``phoenix``), with a temporary ``PHOENIX_WORKING_DIR`` (SQLite, its default) and free ports
  for HTTP (``/v1/traces``) and OTLP/gRPC. Stored spans are counted in its SQLite file, read
  only, per Phoenix project (the resource's ``openinference.project.name``).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path

import httpx
import sqlalchemy as sa

from bench.harness import REPO_ROOT, DaemonStartError, free_ports
from mcpd.testing.daemon import process_group_cpu_seconds

BACKENDS = ("sqlite", "postgres", "clickhouse")
POSTGRES_URL_ENV = "MCPD_TEST_POSTGRES_URL"
PHOENIX_PYTHON_ENV = "BENCH_PHOENIX_PYTHON"
DEFAULT_PHOENIX_VENV = REPO_ROOT / ".bench" / "phoenix-venv"
DEFAULT_PHOENIX_SPEC = "arize-phoenix"

# ---------------------------------------------------------------------------------------------
# mcpd


def storage_env(backend: str, *, postgres_url: str | None, clickhouse_dir: Path) -> dict[str, str]:
    """``MCPD_*`` settings that put the daemon's trace store on ``backend``."""
    match backend:
        case "sqlite":
            return {"MCPD_STORAGE_BACKEND": "sqlite"}
        case "postgres":
            if not postgres_url:
                raise ValueError("postgres needs a database URL")
            return {"MCPD_STORAGE_BACKEND": "postgres", "MCPD_STORAGE_POSTGRES_URL": postgres_url}
        case "clickhouse":
            return {
                "MCPD_STORAGE_BACKEND": "clickhouse",
                "MCPD_STORAGE_CLICKHOUSE_URL": f"chdb://{clickhouse_dir}",
            }
    raise ValueError(f"unknown backend {backend!r}")


_COUNT_SQL = "SELECT count(*) FROM spans WHERE service_name = :service"
_CHDB_COUNT = """
import sys
from pathlib import Path
from mcpd.storage.clickhouse import ChdbExecutor
executor = ChdbExecutor(Path(sys.argv[1]))
try:
    rows = executor.query(
        "SELECT count() FROM spans FINAL WHERE service_name = {service:String}",
        {"service": sys.argv[2]},
    )
    print(rows[0][0])
finally:
    executor.close()
"""


def count_mcpd_spans(
    backend: str,
    service: str,
    *,
    data_dir: Path,
    postgres_url: str | None,
    clickhouse_dir: Path,
) -> int:
    """Spans of ``service`` in a stopped daemon's trace store (one row per trace and span id)."""
    if backend == "sqlite":
        lite = sqlite3.connect(data_dir / "trace.db", timeout=30)
        try:
            row = lite.execute(_COUNT_SQL.replace(":service", "?"), (service,)).fetchone()
        finally:
            lite.close()
        return int(row[0])
    if backend == "postgres":
        assert postgres_url is not None
        engine = sa.create_engine(postgres_url)
        try:
            with engine.connect() as connection:
                value = connection.execute(sa.text(_COUNT_SQL), {"service": service}).scalar_one()
        finally:
            engine.dispose()
        return int(value)
    completed = subprocess.run(
        [sys.executable, "-c", _CHDB_COUNT, str(clickhouse_dir), service],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        cwd=REPO_ROOT,
    )
    if completed.returncode != 0:
        raise RuntimeError(f"chdb count failed: {completed.stderr.strip()[-2000:]}")
    return int(completed.stdout.strip().splitlines()[-1])


def kill_group(pid: int) -> None:
    """SIGKILL every process of the group ``pid`` leads: a crash, no shutdown code runs."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)


# ---------------------------------------------------------------------------------------------
# Phoenix


class PhoenixUnavailableError(RuntimeError):
    """No Python with Phoenix could be found or installed."""


def _imports_phoenix(python: Path) -> str | None:
    """Phoenix's version when ``python`` imports it, else None."""
    if not python.exists():
        return None
    try:
        completed = subprocess.run(
            [str(python), "-c", "import phoenix; print(phoenix.__version__)"],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    if completed.returncode != 0:
        return None
    return completed.stdout.strip().splitlines()[-1] if completed.stdout.strip() else "unknown"


def phoenix_python(
    python: Path | None,
    *,
    venv: Path = DEFAULT_PHOENIX_VENV,
    spec: str = DEFAULT_PHOENIX_SPEC,
    install: bool = True,
) -> tuple[Path, str]:
    """An interpreter that runs Phoenix, and Phoenix's version.

    ``python`` (or ``$BENCH_PHOENIX_PYTHON``) when given; else ``venv``'s, created with
    ``pip install <spec>`` (outside the repository's lock) when it is missing and ``install``.
    """
    from_env = os.environ.get(PHOENIX_PYTHON_ENV)
    chosen = python or (Path(from_env) if from_env else None)
    if chosen is not None:
        version = _imports_phoenix(chosen)
        if version is None:
            raise PhoenixUnavailableError(f"{chosen} cannot import phoenix")
        return chosen, version
    venv_python = venv / "bin" / "python"
    version = _imports_phoenix(venv_python)
    if version is not None:
        return venv_python, version
    if not install:
        raise PhoenixUnavailableError(f"no Phoenix in {venv} and installing is off")
    print(f"installing {spec} into {venv} (first use) ...", flush=True)
    steps = [
        [sys.executable, "-m", "venv", str(venv)],
        [str(venv_python), "-m", "pip", "install", "--quiet", spec],
    ]
    for step in steps:
        completed = subprocess.run(step, capture_output=True, text=True, check=False)
        if completed.returncode != 0:
            raise PhoenixUnavailableError(
                f"`{' '.join(step)}` failed: {completed.stderr.strip()[-2000:]}"
            )
    version = _imports_phoenix(venv_python)
    if version is None:
        raise PhoenixUnavailableError(f"{venv_python} cannot import phoenix after installing")
    return venv_python, version


PROJECT_SPANS_SQL = (
    "SELECT count(*) FROM spans WHERE trace_rowid IN (SELECT id FROM traces WHERE project_rowid "
    "IN (SELECT id FROM projects WHERE name = ?))"
)


class PhoenixServer:
    """``phoenix serve`` in its own process group with a temporary working directory."""

    def __init__(
        self,
        python: Path,
        *,
        host: str = "127.0.0.1",
        start_timeout_s: float = 120.0,
        stop_timeout_s: float = 60.0,
        extra_env: Mapping[str, str] | None = None,
    ) -> None:
        self.python = python
        self.host = host
        self.start_timeout_s = start_timeout_s
        self.stop_timeout_s = stop_timeout_s
        self.extra_env = dict(extra_env or {})
        self.workdir: Path | None = None
        self.http_port = 0
        self.grpc_port = 0
        self.startup_s: float | None = None
        self.shutdown_s: float | None = None
        self.returncode: int | None = None
        self._process: subprocess.Popen[bytes] | None = None

    @property
    def http_url(self) -> str:
        return f"http://{self.host}:{self.http_port}"

    @property
    def grpc_addr(self) -> str:
        return f"{self.host}:{self.grpc_port}"

    @property
    def db_path(self) -> Path:
        assert self.workdir is not None
        return self.workdir / "phoenix.db"

    @property
    def log_path(self) -> Path:
        assert self.workdir is not None
        return self.workdir / "phoenix.log"

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process is not None else None

    def cpu_seconds(self) -> float | None:
        if self._process is None or self._process.poll() is not None:
            return None
        return process_group_cpu_seconds(self._process.pid)

    def log_tail(self, limit: int = 4000) -> str:
        try:
            return self.log_path.read_text(encoding="utf-8", errors="replace")[-limit:]
        except (OSError, AssertionError):
            return ""

    def start(self) -> None:
        self.http_port, self.grpc_port = free_ports(2, self.host)
        self.workdir = Path(tempfile.mkdtemp(prefix="bench-phoenix-"))
        env = {
            key: value
            for key, value in os.environ.items()
            if not key.startswith(("PHOENIX_", "OTEL_", "MCPD_"))
        }
        env.update(
            {
                "PHOENIX_WORKING_DIR": str(self.workdir),
                "PHOENIX_HOST": self.host,
                "PHOENIX_PORT": str(self.http_port),
                "PHOENIX_GRPC_PORT": str(self.grpc_port),
                "PHOENIX_TELEMETRY_ENABLED": "false",
                "PYTHONUNBUFFERED": "1",
            }
        )
        env.update(self.extra_env)
        began = time.monotonic()
        with self.log_path.open("wb") as log:
            self._process = subprocess.Popen(
                [str(self.python), "-m", "phoenix.server.main", "serve"],
                env=env,
                cwd=self.workdir,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        try:
            self._wait_healthy(began + self.start_timeout_s)
        except BaseException:
            self.stop()
            raise
        self.startup_s = time.monotonic() - began

    def _wait_healthy(self, deadline: float) -> None:
        assert self._process is not None
        while True:
            code = self._process.poll()
            if code is not None:
                raise DaemonStartError(f"phoenix serve exited with {code}:\n{self.log_tail()}")
            try:
                response = httpx.get(self.http_url + "/healthz", timeout=2.0, trust_env=False)
                if response.status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            if time.monotonic() >= deadline:
                raise DaemonStartError(
                    f"phoenix serve not healthy after {self.start_timeout_s:g} s:\n"
                    + self.log_tail()
                )
            time.sleep(0.25)

    def count(self, project: str) -> int:
        """Spans Phoenix has stored in ``project`` (0 before the project exists)."""
        connection = sqlite3.connect(f"file:{self.db_path}?mode=ro", uri=True, timeout=30)
        try:
            row = connection.execute(PROJECT_SPANS_SQL, (project,)).fetchone()
        except sqlite3.OperationalError as exc:
            if "no such table" in str(exc):
                return 0
            raise
        finally:
            connection.close()
        return int(row[0])

    def stop(self) -> None:
        """SIGTERM (Phoenix's graceful shutdown), SIGKILL the group after the timeout."""
        process = self._process
        if process is None or self.returncode is not None:
            return
        began = time.monotonic()
        if process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(process.pid, signal.SIGTERM)
            try:
                process.wait(self.stop_timeout_s)
            except subprocess.TimeoutExpired:
                kill_group(process.pid)
                process.wait()
        kill_group(process.pid)
        self.shutdown_s = time.monotonic() - began
        self.returncode = process.returncode

    def remove_files(self) -> None:
        if self.workdir is not None:
            shutil.rmtree(self.workdir, ignore_errors=True)
