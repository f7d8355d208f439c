"""`mcpd import` as a user runs it: files and directories, the summary, per-line errors, bad
arguments, and handing the files to the daemon that owns the data directory."""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from mcpd.sessions.model import EventType
from mcpd.sessions.store import SearchQuery
from mcpd.storage import open_stores
from mcpd.testing.daemon import DaemonProcess
from tests.e2e.mcp_client import envelope_of, http_session

pytestmark = pytest.mark.e2e

MCPD = str(Path(sys.executable).parent / "mcpd")
FIXTURES = Path(__file__).parents[1] / "fixtures" / "transcripts"
CODEX_SESSION_ID = "019c5f6a-49bd-7920-ac67-1dd8e33b0e95"


def _run(*args: str, data_dir: Path) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("MCPD_")}
    return subprocess.run(
        [MCPD, "import", *args],
        env={**clean, "MCPD_DATA_DIR": str(data_dir)},
        capture_output=True,
        text=True,
        timeout=120,
    )


def _search(data_dir: Path, text: str) -> list[str]:
    """Event texts matching `text` in the local project, read from the stores directly."""
    with open_stores("sqlite", data_dir=data_dir, postgres_url=None, clickhouse_url=None) as stores:
        result = stores.sessions.search(
            SearchQuery(
                project="default",
                text=text,
                event_types=[t.value for t in EventType if t is not EventType.UNKNOWN],
                limit=10,
            )
        )
    return [hit.event.text for hit in result.hits]


def test_import_files_and_directories_then_summarize(tmp_path: Path) -> None:
    transcripts = tmp_path / "transcripts"
    shutil.copytree(FIXTURES / "codex", transcripts / "a")
    shutil.copy(FIXTURES / "codex" / "session.jsonl", transcripts / "copy.txt")
    result = _run(
        "codex", str(transcripts / "a"), str(transcripts / "copy.txt"), data_dir=tmp_path / "d"
    )
    assert result.returncode == 0, result.stderr
    summary = result.stdout
    # Not a terminal: no progress line, just the summary.
    assert "\r" not in result.stderr
    assert "imported 2/2 files (codex, source codex, project default)" in summary
    # Both files carry the same Codex session id: one session.
    assert ": 1 sessions," in summary
    assert " 0 errors " in summary
    assert any("inspect the project" in text for text in _search(tmp_path / "d", "inspect"))


def test_every_fixture_imports_without_errors(tmp_path: Path) -> None:
    harness_of = {
        "codex": "codex",
        "claude-code": "claude-code",
        "claude-cowork": "claude-code",
        "qwen-code": "qwen-code",
        "cursor": "cursor",
        "kimi-cli": "kimi-cli",
        "pi": "pi-coding-agent",
        "prime-agent": "prime-agent",
    }
    for folder, harness in harness_of.items():
        result = _run(harness, str(FIXTURES / folder), data_dir=tmp_path / "d")
        assert result.returncode == 0, (folder, result.stdout, result.stderr)
        assert " 0 errors " in result.stdout, (folder, result.stdout)
        assert ": 1 sessions," in result.stdout, (folder, result.stdout)


def test_per_line_errors_are_listed_and_do_not_fail_the_import(tmp_path: Path) -> None:
    path = tmp_path / "rollout.jsonl"
    text = (FIXTURES / "codex" / "session.jsonl").read_text()
    path.write_text("{oops\n" + text + "[1, 2]\n" + '{"unterminated": ')
    result = _run("codex", str(path), "--source", "laptop", data_dir=tmp_path / "d")
    assert result.returncode == 0, result.stderr
    assert "source laptop" in result.stdout
    assert " 2 errors " in result.stdout
    assert f"{path}:1: " in result.stdout
    assert f"{path}:{len(text.splitlines()) + 2}: " in result.stdout


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["windsurf", "x.jsonl"], "unknown harness 'windsurf'; valid: claude-code, codex"),
        (["codex", "/no/such/file.jsonl"], "no such file or directory: /no/such/file.jsonl"),
        (["codex"], "the following arguments are required: PATH"),
        (["codex", "x", "--source", " "], "--source must not be blank"),
    ],
)
def test_bad_arguments_exit_2(tmp_path: Path, args: list[str], message: str) -> None:
    (tmp_path / "x").write_text("")
    result = subprocess.run(
        [MCPD, "import", *args],
        env={**os.environ, "MCPD_DATA_DIR": str(tmp_path / "d")},
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,
    )
    assert result.returncode == 2
    assert message in result.stderr


HARNESS_OF = {
    "codex": "codex",
    "claude-code": "claude-code",
    "qwen-code": "qwen-code",
    "kimi-cli": "kimi-cli",
}


def _read_model(data_dir: Path) -> tuple[list[tuple[object, ...]], list[tuple[object, ...]]]:
    """Every session and event of a data directory's read model, by id (write counters left
    out: they say how often a row was written, not what it holds)."""
    with contextlib.closing(sqlite3.connect(data_dir / "trace.db")) as db:
        sessions = db.execute(
            "SELECT project, id, source, harness, session_key, path, title, display_label,"
            " started_at, updated_at, completed, turn_count, event_count, summary, cwd,"
            " content_hash FROM sessions ORDER BY id"
        ).fetchall()
        events = db.execute(
            "SELECT id, session_id, turn_id, ordinal, seq, type, text, row_hash"
            " FROM events ORDER BY id"
        ).fetchall()
    return sessions, events


async def test_import_into_a_running_daemon_equals_an_offline_import(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    transcripts = tmp_path / "transcripts"
    for folder in HARNESS_OF:
        shutil.copytree(FIXTURES / folder, transcripts / folder)
    offline = tmp_path / "offline"
    async with DaemonProcess(extra_env={"HOME": str(home)}) as daemon:
        for folder, harness in HARNESS_OF.items():
            handed = await asyncio.to_thread(
                _run, harness, str(transcripts / folder), data_dir=daemon.data_dir
            )
            local = await asyncio.to_thread(
                _run, harness, str(transcripts / folder), data_dir=offline
            )
            assert handed.returncode == 0, handed.stderr
            assert local.returncode == 0, local.stderr
            # The same counts, said the same way (the rate aside).
            assert _counts(handed.stdout) == _counts(local.stdout), (handed.stdout, local.stdout)
            assert ": 1 sessions," in handed.stdout
        # Again: the same sessions, not new ones.
        again = await asyncio.to_thread(
            _run, "codex", str(transcripts / "codex"), data_dir=daemon.data_dir
        )
        assert again.returncode == 0, again.stderr
        # The daemon's own search finds what it was handed.
        async with http_session(daemon) as session:
            found = envelope_of(
                await session.call_tool("search_sessions", {"query": "inspect the project"})
            )
        assert found["data"]["results"], found
        handed_model = _read_model(daemon.data_dir)
    assert handed_model == _read_model(offline)
    assert len(handed_model[0]) == len(HARNESS_OF)


def _counts(summary: str) -> str:
    """The summary's first line up to its timing."""
    return summary.splitlines()[0].split(" in ")[0]


def test_the_projects_redaction_rules_apply_to_imported_transcripts(tmp_path: Path) -> None:
    projects = tmp_path / "projects.toml"
    projects.write_text(
        '[[projects]]\nid = "default"\n'
        "redaction = { rules = ["
        '{ name = "probe", pattern = "inspect the project", mode = "mask" }'
        "] }\n"
    )
    clean = {k: v for k, v in os.environ.items() if not k.startswith("MCPD_")}
    result = subprocess.run(
        [MCPD, "import", "codex", str(FIXTURES / "codex")],
        env={
            **clean,
            "MCPD_DATA_DIR": str(tmp_path / "d"),
            "MCPD_INGEST_PROJECTS_FILE": str(projects),
        },
        capture_output=True,
        text=True,
        timeout=120,
    )

    assert result.returncode == 0, result.stderr
    assert not any("inspect the project" in text for text in _search(tmp_path / "d", "inspect"))
    assert any("[REDACTED:probe]" in text for text in _search(tmp_path / "d", "probe"))
