"""DaemonProcess with stand-in commands; the real daemon is started by the end-to-end tests."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from mcpd.testing.daemon import (
    DaemonProcess,
    DaemonStartError,
    free_ports,
    processes_cpu_seconds,
)

FAKE_DAEMON = """
import http.server, json, os, signal, sys, threading

host, port = os.environ["MCPD_HTTP_ADDR"].rsplit(":", 1)
env = {k: v for k, v in os.environ.items() if k.startswith("MCPD_")}

class Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        body = json.dumps({"status": "ok", "env": env, "cwd": os.getcwd()}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass

server = http.server.ThreadingHTTPServer((host, int(port)), Handler)
if sys.argv[1:] == ["ignore-sigterm"]:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
else:
    signal.signal(signal.SIGTERM, lambda *_: threading.Thread(target=server.shutdown).start())
print("fake daemon listening", file=sys.stderr, flush=True)
server.serve_forever()
server.server_close()
"""

# Each stand-in daemon is a child process.
pytestmark = pytest.mark.e2e


def _fake(tmp_path: Path, *args: str) -> list[str]:
    script = tmp_path / "fake_daemon.py"
    script.write_text(FAKE_DAEMON, encoding="utf-8")
    return [sys.executable, str(script), *args]


def test_free_ports_are_distinct_and_bindable() -> None:
    ports = free_ports(3)
    assert len(set(ports)) == 3
    for port in ports:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            sock.bind(("127.0.0.1", port))


def test_daemon_process_lifecycle(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MCPD_HTTP_ADDR", "0.0.0.0:1")
    monkeypatch.setenv("MCPD_STRAY_SETTING", "x")
    daemon = DaemonProcess(command=_fake(tmp_path), extra_env={"MCPD_EXTRA": "1"})
    with daemon:
        assert daemon.pid is not None
        assert daemon.health is not None
        env = daemon.health["env"]
        assert env["MCPD_HTTP_ADDR"] == daemon.http_addr
        assert env["MCPD_GRPC_ADDR"] == daemon.grpc_addr
        assert env["MCPD_OTLP_GRPC_ADDR"] == daemon.otlp_grpc_addr
        assert env["MCPD_DATA_DIR"] == str(daemon.data_dir)
        assert env["MCPD_EXTRA"] == "1"
        assert env["MCPD_SERVE_PROCESSES"] == "1"  # test daemons run one server unless asked
        assert "MCPD_STRAY_SETTING" not in env
        assert len({daemon.http_addr, daemon.grpc_addr, daemon.otlp_grpc_addr}) == 3
        assert daemon.data_dir.is_dir()
        assert daemon.http_url == f"http://{daemon.http_addr}"
        response = httpx.get(daemon.http_url + "/anything", trust_env=False)
        assert response.status_code == 200
        workdir = daemon.workdir
    assert daemon.shutdown_signal == "SIGTERM"
    assert daemon.returncode == 0
    assert "fake daemon listening" in daemon.stderr_tail
    assert workdir is not None
    assert not workdir.exists()
    daemon.stop()  # idempotent


@pytest.mark.parametrize(("workers", "expected"), [(None, None), (3, "3")])
def test_daemon_process_passes_processes_as_asked(
    tmp_path: Path, workers: int | None, expected: str | None
) -> None:
    with DaemonProcess(command=_fake(tmp_path), processes=workers) as daemon:
        assert daemon.health is not None
        assert daemon.health["env"].get("MCPD_SERVE_PROCESSES") == expected


def test_daemon_process_kills_a_daemon_that_ignores_sigterm(tmp_path: Path) -> None:
    daemon = DaemonProcess(command=_fake(tmp_path, "ignore-sigterm"), stop_timeout_s=0.5)
    with daemon:
        pass
    assert daemon.shutdown_signal == "SIGKILL"
    assert daemon.returncode is not None
    assert daemon.returncode < 0


def test_daemon_process_surfaces_stderr_when_the_daemon_exits(tmp_path: Path) -> None:
    command = [sys.executable, "-c", "import sys; sys.stderr.write('boom: no config\\n'); exit(3)"]
    daemon = DaemonProcess(command=command)
    with pytest.raises(DaemonStartError, match="exited with code 3") as info, daemon:
        pytest.fail("must not get here")
    assert "boom: no config" in str(info.value)
    assert daemon.workdir is not None
    assert not daemon.workdir.exists()


# Records each start in the file it is given; fails as a taken port does until `fail` starts.
FLAKY_PORT = """
import pathlib, runpy, sys

starts = pathlib.Path(sys.argv[1])
starts.write_text(starts.read_text() + "x" if starts.exists() else "x")
if len(starts.read_text()) <= int(sys.argv[2]):
    sys.stderr.write("[Errno 98] error while attempting to bind: Address already in use\\n")
    sys.exit(1)
sys.argv = [sys.argv[3]]
runpy.run_path(sys.argv[0], run_name="__main__")
"""


def _flaky(tmp_path: Path, failures: int) -> tuple[list[str], Path]:
    """A command whose first `failures` starts lose a port race; the file counting starts."""
    script = tmp_path / "flaky.py"
    script.write_text(FLAKY_PORT, encoding="utf-8")
    starts = tmp_path / "starts"
    fake = _fake(tmp_path)[1]
    return [sys.executable, str(script), str(starts), str(failures), fake], starts


def test_a_start_that_loses_a_port_race_is_tried_again_on_new_ports(tmp_path: Path) -> None:
    command, starts = _flaky(tmp_path, failures=2)
    with DaemonProcess(command=command) as daemon:
        assert httpx.get(daemon.http_url + "/healthz", trust_env=False).status_code == 200
    assert starts.read_text() == "xxx"
    assert daemon.returncode == 0


def test_a_port_race_is_not_retried_forever_nor_on_chosen_addresses(tmp_path: Path) -> None:
    command, starts = _flaky(tmp_path, failures=10)
    with pytest.raises(DaemonStartError, match="Address already in use"):
        DaemonProcess(command=command).start()
    assert starts.read_text() == "xxx"

    starts.unlink()
    chosen = DaemonProcess(command=command, extra_env={"MCPD_HTTP_ADDR": "127.0.0.1:1"})
    with pytest.raises(DaemonStartError, match="Address already in use"):
        chosen.start()
    assert starts.read_text() == "x"
    assert chosen.returncode == 1


def test_daemon_process_gives_up_after_the_start_timeout(tmp_path: Path) -> None:
    command = [
        sys.executable,
        "-c",
        "import sys, time; print('slow', file=sys.stderr, flush=True); time.sleep(60)",
    ]
    daemon = DaemonProcess(command=command, start_timeout_s=0.3, stop_timeout_s=5)
    with pytest.raises(DaemonStartError, match="not healthy") as info:
        daemon.start()
    assert "slow" in str(info.value)
    assert daemon.returncode is not None


async def test_daemon_process_async_context_manager(tmp_path: Path) -> None:
    has_proc = Path("/proc").is_dir()  # noqa: ASYNC240 (a stat before any concurrency)
    async with DaemonProcess(command=_fake(tmp_path)) as daemon:
        async with httpx.AsyncClient(trust_env=False) as client:
            response = await client.get(daemon.http_url + "/healthz")
        assert response.json()["status"] == "ok"
        assert (daemon.cpu_seconds() is not None) == has_proc
    assert daemon.returncode == 0


# Spends a few tenths of a second of CPU counting, says so, then waits on its input (a shell
# builtin: no child left behind when the shell is killed).
_BURN = "i=0; while [ $i -lt 300000 ]; do i=$((i+1)); done; echo 1; read _"


def test_processes_cpu_seconds_counts_the_processes_given_and_those_named(tmp_path: Path) -> None:
    # A command name of its own: the kernel names a process after the file it executed.
    burner = tmp_path / "mcpd-burner"
    os.symlink("/bin/sh", burner)
    child = subprocess.Popen(
        [str(burner), "-c", _BURN], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert child.stdout is not None
        assert child.stdout.readline().strip() == "1"
        by_pid = processes_cpu_seconds([child.pid])
        by_name = processes_cpu_seconds(named="mcpd-burner")
        assert by_pid is not None
        assert by_name is not None
        assert 0.1 <= by_pid < 5
        assert by_name == pytest.approx(by_pid, abs=0.05)
        assert processes_cpu_seconds(named="no-such-command") == 0
    finally:
        child.kill()
        child.wait()
