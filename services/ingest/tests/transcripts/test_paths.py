"""Worktree roots, tails and git common dirs of named paths (file_attention)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from services.ingest.transcripts.paths import ResolvedPath, WorktreeResolver, git_common_dir

needs_git = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")


def git(*args: str, cwd: Path) -> None:
    subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@example.com", *args],
        cwd=cwd,
        check=True,
        capture_output=True,
    )


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    (root / "src").mkdir(parents=True)
    (root / "src" / "lib.py").write_text("x = 1\n")
    git("init", "-q", cwd=root)
    git("add", ".", cwd=root)
    git("commit", "-q", "-m", "init", cwd=root)
    return root


@needs_git
def test_paths_in_a_repository_reduce_to_repo_relative_tails(repo: Path) -> None:
    resolver = WorktreeResolver()
    common = os.path.realpath(repo / ".git")
    expected = ResolvedPath("src/lib.py", "src/lib.py", False, str(repo), common)
    assert resolver.resolve("src/lib.py", str(repo)) == expected
    # From a subdirectory cwd, from an absolute path, and for a file that does not exist yet.
    assert resolver.resolve("lib.py", str(repo / "src")).tail == "src/lib.py"
    assert resolver.resolve(str(repo / "src" / "lib.py"), "/elsewhere") == ResolvedPath(
        str(repo / "src" / "lib.py"), "src/lib.py", False, str(repo), common
    )
    assert resolver.resolve("src/new/mod.py", str(repo)).tail == "src/new/mod.py"
    assert resolver.resolve("./src/../README.md", str(repo)).tail == "README.md"


@needs_git
def test_linked_worktrees_share_the_common_dir(repo: Path, tmp_path: Path) -> None:
    linked = tmp_path / "linked"
    git("worktree", "add", "-q", str(linked), cwd=repo)
    resolved = WorktreeResolver().resolve("src/lib.py", str(linked))
    assert resolved == ResolvedPath(
        "src/lib.py", "src/lib.py", False, str(linked), os.path.realpath(repo / ".git")
    )
    assert (linked / ".git").is_file()


def test_a_gitdir_file_without_commondir_is_its_own_common_dir(tmp_path: Path) -> None:
    modules = tmp_path / "super" / ".git" / "modules" / "sub"
    modules.mkdir(parents=True)
    sub = tmp_path / "super" / "sub"
    sub.mkdir()
    (sub / ".git").write_text("gitdir: ../.git/modules/sub\n")
    assert git_common_dir(str(sub / ".git")) == os.path.realpath(modules)
    (sub / ".git").write_text("gitdir: ../missing\n")
    assert git_common_dir(str(sub / ".git")) is None
    (sub / ".git").write_text("garbage\n")
    assert git_common_dir(str(sub / ".git")) is None
    resolved = WorktreeResolver().resolve("a.txt", str(sub))
    assert (resolved.worktree_root, resolved.tail, resolved.git_common_dir) == (
        str(sub),
        "a.txt",
        None,
    )


def test_without_git_the_cwd_is_the_root_when_it_contains_the_path(tmp_path: Path) -> None:
    cwd = tmp_path / "plain"
    cwd.mkdir()
    resolver = WorktreeResolver()
    assert resolver.resolve("docs/a.md", str(cwd)) == ResolvedPath(
        "docs/a.md", "docs/a.md", False, str(cwd), None
    )
    outside = str(tmp_path / "other" / "b.md")
    assert resolver.resolve(outside, str(cwd)) == ResolvedPath(outside, outside, True, None, None)


def test_paths_without_a_usable_cwd() -> None:
    resolver = WorktreeResolver()
    assert resolver.resolve("./a/b.py", None) == ResolvedPath(
        "./a/b.py", "a/b.py", False, None, None
    )
    assert resolver.resolve("a.py", "relative/cwd") == ResolvedPath(
        "a.py", "a.py", False, None, None
    )
    assert resolver.resolve("~/notes.md", "/w") == ResolvedPath(
        "~/notes.md", "~/notes.md", True, None, None
    )
