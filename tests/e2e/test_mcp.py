"""MCP end to end: a real `mcpd serve`, the official MCP client over Streamable HTTP at /mcp and
over stdio (`mcpd mcp`, launched as a subprocess), in local mode and with keys."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import httpx
import mcp_types as types
import pytest

from mcpd.testing.daemon import DaemonProcess, mcpd_executable
from mcpd.testing.eventually import eventually_async
from tests.e2e.mcp_client import (
    FIXTURES,
    QUIET,
    TOOLS,
    error_of_result,
    http_session,
    stdio_session,
)
from tests.e2e.security_fixture import key_secret, write_keys_file

pytestmark = pytest.mark.e2e

CODEX_ROLLOUT = "rollout-2026-02-15T03-50-40-019c5f6a-49bd-7920-ac67-1dd8e33b0e95.jsonl"


@pytest.fixture(scope="module")
def local_daemon() -> Iterator[DaemonProcess]:
    """Loopback, no keys: local mode, every request is the anonymous default project."""
    with DaemonProcess(extra_env=QUIET) as daemon:
        yield daemon


@pytest.fixture(scope="module")
def keyed_daemon(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DaemonProcess]:
    keys = write_keys_file(tmp_path_factory.mktemp("keys") / "keys.toml")
    with DaemonProcess(extra_env={**QUIET, "MCPD_SECURITY_KEYS_FILE": str(keys)}) as daemon:
        yield daemon


async def test_lists_the_four_tools_with_strict_input_schemas(local_daemon: DaemonProcess) -> None:
    async with http_session(local_daemon) as session:
        listed = await session.list_tools()
    assert [tool.name for tool in listed.tools] == TOOLS
    for tool in listed.tools:
        assert tool.input_schema["additionalProperties"] is False
        assert tool.output_schema is not None


async def test_search_on_an_empty_read_model_succeeds_with_no_results(
    local_daemon: DaemonProcess,
) -> None:
    async with http_session(local_daemon) as session:
        result = await session.call_tool("search_sessions", {"query": "tantivy"})
    assert result.is_error is False
    envelope = result.structured_content
    assert envelope["schema_version"] == "moraine.mcp.search_sessions.v1"
    assert envelope["tool"] == "search_sessions"
    assert envelope["request"]["query"] == "tantivy"
    assert envelope["data"]["results"] == []
    assert envelope["warnings"] == [] or isinstance(envelope["warnings"], list)
    assert isinstance(envelope["performance"]["elapsed_ms"], int)
    text = result.content[0]
    assert isinstance(text, types.TextContent)
    assert json.loads(text.text) == envelope


async def test_open_of_a_malformed_id_is_invalid_id_in_band(local_daemon: DaemonProcess) -> None:
    async with http_session(local_daemon) as session:
        result = await session.call_tool("open", {"id": "definitely not an id"})
    assert error_of_result(result)["code"] == "invalid_id"


async def test_file_attention_over_http_fails_closed_without_a_launch_directory(
    local_daemon: DaemonProcess,
) -> None:
    async with http_session(local_daemon) as session:
        project = await session.call_tool("file_attention", {"path": "src/app.py"})
        everywhere = await session.call_tool(
            "file_attention", {"path": "src/app.py", "scope": "all"}
        )
    assert error_of_result(project)["details"]["reason"] == "launch_project_unknown"
    assert everywhere.is_error is False


async def test_an_unknown_argument_is_refused_in_band(local_daemon: DaemonProcess) -> None:
    async with http_session(local_daemon) as session:
        result = await session.call_tool("search_sessions", {"query": "q", "colour": "red"})
    error = error_of_result(result)
    assert error["code"] == "invalid_request"
    assert error["details"]["field"] == "colour"


async def test_credentials_are_checked_by_the_query_service(keyed_daemon: DaemonProcess) -> None:
    reader = key_secret("alpha", "read")
    async with http_session(keyed_daemon) as session:
        anonymous = await session.call_tool("search_sessions", {"query": "q"})
    async with http_session(keyed_daemon, {"Authorization": "Bearer " + reader}) as session:
        allowed = await session.call_tool("search_sessions", {"query": "q"})
    wrong_scope = {"Authorization": "Bearer " + key_secret("alpha", "ingest")}
    async with http_session(keyed_daemon, wrong_scope) as session:
        refused = await session.call_tool("search_sessions", {"query": "q"})
    assert error_of_result(anonymous)["details"]["reason"] == "unauthenticated"
    assert allowed.is_error is False
    assert allowed.structured_content["data"]["results"] == []
    assert error_of_result(refused)["details"]["reason"] == "permission_denied"


async def test_stdio_forwards_to_the_running_daemon(
    keyed_daemon: DaemonProcess, tmp_path: Path
) -> None:
    env = {
        **QUIET,
        "MCPD_QUERY_ADDR": keyed_daemon.grpc_addr,
        # Another data directory: were it embedded, it would not see the daemon's audit log.
        "MCPD_DATA_DIR": str(tmp_path / "elsewhere"),
        "MCPD_API_KEY": key_secret("alpha", "read"),
    }
    async with stdio_session(env, [], tmp_path / "stderr.log") as session:
        listed = await session.list_tools()
        searched = await session.call_tool("search_sessions", {"query": "q"})
        opened = await session.call_tool("open", {"id": "nope"})
        # The launch directory travels with the call, so scope=project is decidable.
        attention = await session.call_tool("file_attention", {"path": "src/app.py"})
    assert [tool.name for tool in listed.tools] == TOOLS
    assert searched.structured_content["data"]["results"] == []
    assert error_of_result(opened)["code"] == "invalid_id"
    assert attention.is_error is False, attention.structured_content
    assert "using the daemon" in (tmp_path / "stderr.log").read_text()
    # The daemon audited the open: the call went through its auth layer.
    admin = {"authorization": "Bearer " + key_secret("alpha", "admin")}
    async with httpx.AsyncClient(base_url=keyed_daemon.http_url) as http:
        audit = (await http.get("/v1/api/audit", headers=admin)).json()["events"]
    assert any(event["action"] == "open" for event in audit)


async def test_stdio_runs_embedded_when_no_daemon_answers(tmp_path: Path) -> None:
    env = {
        **QUIET,
        "MCPD_DATA_DIR": str(tmp_path / "data"),
        # Nothing listens on port 1.
        "MCPD_QUERY_ADDR": "127.0.0.1:1",
    }
    async with stdio_session(env, [], tmp_path / "stderr.log") as session:
        searched = await session.call_tool("search_sessions", {"query": "q"})
        opened = await session.call_tool("open", {"id": "nope"})
    assert searched.is_error is False
    assert searched.structured_content["data"]["results"] == []
    assert error_of_result(opened)["code"] == "invalid_id"
    assert "in process" in (tmp_path / "stderr.log").read_text()
    assert (tmp_path / "data" / "mcp-cursor.key").stat().st_mode & 0o777 == 0o600


def test_stdio_in_daemon_mode_fails_when_no_daemon_answers(tmp_path: Path) -> None:
    env = {
        "PATH": os.environ.get("PATH", ""),
        **QUIET,
        "MCPD_DATA_DIR": str(tmp_path),
        "MCPD_QUERY_ADDR": "127.0.0.1:1",
    }
    done = subprocess.run(
        [str(mcpd_executable()), "mcp", "--mode", "daemon"],
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 1
    assert "no mcpd query service answers at 127.0.0.1:1" in done.stderr
    assert done.stdout == ""


async def test_a_daemon_starts_beside_an_embedded_stdio_server_and_its_writes_show(
    tmp_path: Path,
) -> None:
    data_dir = tmp_path / "data"
    stdio_env = {**QUIET, "MCPD_DATA_DIR": str(data_dir), "MCPD_QUERY_ADDR": "127.0.0.1:1"}
    home = tmp_path / "home"
    day = home / ".codex" / "sessions" / "2026" / "02" / "15"
    day.mkdir(parents=True)
    shutil.copy(FIXTURES / "codex" / "session.jsonl", day / CODEX_ROLLOUT)
    daemon_env = {
        "MCPD_DATA_DIR": str(data_dir),
        "HOME": str(home),
        "MCPD_SESSIONS_SOURCES": "codex",
        "MCPD_SESSIONS_RESCAN_INTERVAL_S": "0.5",
    }
    async with stdio_session(stdio_env, ["--mode", "embedded"], tmp_path / "stderr.log") as session:
        before = await session.call_tool("search_sessions", {"query": "inspect"})
        assert before.structured_content["data"]["results"] == []
        # The embedded reader holds neither the ingest lock nor the index's writer.
        async with DaemonProcess(extra_env=daemon_env) as daemon:
            assert "tailing codex" in daemon.stderr_text()

            async def imported() -> types.CallToolResult:
                found = await session.call_tool("search_sessions", {"query": "inspect"})
                assert found.structured_content["data"]["results"], "the import is not visible"
                return found

            found = await eventually_async(imported, timeout=30, interval=0.2)
    assert found.is_error is False


async def test_every_mcp_open_is_audited_allowed_or_refused(keyed_daemon: DaemonProcess) -> None:
    target = "event:evt_audited0000000000000000000"
    reader = {"Authorization": "Bearer " + key_secret("alpha", "read")}
    async with http_session(keyed_daemon, reader) as session:
        allowed = await session.call_tool("open", {"id": target})
    wrong_scope = {"Authorization": "Bearer " + key_secret("alpha", "ingest")}
    async with http_session(keyed_daemon, wrong_scope) as session:
        refused = await session.call_tool("open", {"id": target})
    assert error_of_result(allowed)["code"] == "not_found"  # authorized, then looked up
    assert error_of_result(refused)["details"]["reason"] == "permission_denied"
    admin = {"authorization": "Bearer " + key_secret("alpha", "admin")}
    async with httpx.AsyncClient(base_url=keyed_daemon.http_url) as http:
        events = (await http.get("/v1/api/audit", headers=admin)).json()["events"]
    opens = [(e["result"], e["project"]) for e in events if e["action"] == "open"]
    assert ("allowed", "alpha") in opens
    assert ("refused", "alpha") in opens
