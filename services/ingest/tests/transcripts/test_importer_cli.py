"""`mcpd import` in process: progress on a terminal, the summary, the error cap, exit codes."""

from __future__ import annotations

import argparse
import io
import os
import shutil
from pathlib import Path

import pytest

from cli import import_cmd
from mcpd.runtime.clock import ManualClock
from mcpd.runtime.config import Settings, load_settings
from mcpd.runtime.data_dir import DataDirLock

FIXTURES = Path(__file__).parents[4] / "tests" / "fixtures" / "transcripts"


def _settings(tmp_path: Path) -> Settings:
    return load_settings(env={"HOME": str(tmp_path), "MCPD_DATA_DIR": str(tmp_path / "data")})


def _args(harness: str, *paths: Path, source: str | None = None) -> argparse.Namespace:
    return argparse.Namespace(harness=harness, paths=list(paths), source=source)


def _run(tmp_path: Path, args: argparse.Namespace, *, tty: bool) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = import_cmd.run(_settings(tmp_path), args, out=out, err=err, clock=ManualClock(), tty=tty)
    return code, out.getvalue(), err.getvalue()


def _rollouts(tmp_path: Path, count: int) -> Path:
    folder = tmp_path / "rollouts"
    for index in range(count):
        target = folder / f"{index:02d}" / f"rollout-{index:02d}.jsonl"
        target.parent.mkdir(parents=True)
        text = (FIXTURES / "codex" / "session.jsonl").read_text()
        # A distinct session id per file.
        target.write_text(text.replace("019c5f6a-49bd-7920-ac67-1dd8e33b0e95", f"sess-{index}"))
    return folder


def test_collect_files_takes_files_as_given_and_jsonl_under_directories(tmp_path: Path) -> None:
    (tmp_path / "d" / "deep").mkdir(parents=True)
    for name in ("d/b.jsonl", "d/deep/a.jsonl", "d/notes.txt", "single.log"):
        (tmp_path / name).write_text("")
    files = import_cmd.collect_files([tmp_path / "single.log", tmp_path / "d", tmp_path / "d"])
    assert files == [tmp_path / "single.log", tmp_path / "d/b.jsonl", tmp_path / "d/deep/a.jsonl"]
    with pytest.raises(FileNotFoundError):
        import_cmd.collect_files([tmp_path / "absent"])


def test_a_terminal_shows_progress_then_the_summary(tmp_path: Path) -> None:
    code, out, err = _run(tmp_path, _args("codex", _rollouts(tmp_path, 3)), tty=True)
    assert code == 0
    # The clock does not move: the first file draws, the last one always does.
    assert "importing: files 1/3" in err
    assert "importing: files 3/3" in err
    assert "errors 0" in err
    assert err.endswith("\r\x1b[K")  # the progress line is cleared before the summary
    assert out.startswith("imported 3/3 files (codex, source codex, project default): 3 sessions,")


def test_not_a_terminal_prints_only_the_summary(tmp_path: Path) -> None:
    code, out, err = _run(tmp_path, _args("codex", _rollouts(tmp_path, 2)), tty=False)
    assert code == 0
    assert err == ""
    assert out.count("\n") == 1


def test_errors_are_listed_up_to_the_cap(tmp_path: Path) -> None:
    path = tmp_path / "bad.jsonl"
    text = (FIXTURES / "codex" / "session.jsonl").read_text()
    path.write_text(text + "{bad\n" * (import_cmd.ERROR_CAP + 5))
    code, out, _ = _run(tmp_path, _args("codex", path, source="laptop"), tty=False)
    assert code == 0
    assert f"errors (first {import_cmd.ERROR_CAP} of {import_cmd.ERROR_CAP + 5}):" in out
    assert f"  {path}:{len(text.splitlines()) + 1}: " in out
    assert "source laptop" in out


def test_unknown_harness_and_missing_paths_are_argument_errors(tmp_path: Path) -> None:
    code, _, err = _run(tmp_path, _args("windsurf", tmp_path), tty=False)
    assert code == 2
    assert "valid: claude-code, codex, cursor, kimi-cli, pi-coding-agent" in err
    code, _, err = _run(tmp_path, _args("codex", tmp_path / "absent"), tty=False)
    assert code == 2
    assert "no such file or directory" in err


def test_an_offline_import_in_progress_is_refused(tmp_path: Path) -> None:
    # Another `mcpd import` holds the lock and says of no daemon to hand the files to.
    shutil.copytree(FIXTURES / "codex", tmp_path / "codex")
    with DataDirLock(tmp_path / "data"):
        code, _, err = _run(tmp_path, _args("codex", tmp_path / "codex"), tty=False)
    assert code == 1
    assert f"another mcpd process (pid {os.getpid()})" in err
