"""Where a file path a tool call named lives: its worktree root and repo-relative tail.

A path is made absolute against the event's cwd, then the nearest ancestor holding a `.git`
entry ON THIS FILE SYSTEM is its worktree root (the session's files may be gone: then the cwd
is the root when it contains the path). `git_common_dir` unifies linked worktrees: a `.git`
directory is its own common dir; a `.git` file (`gitdir: ...`) points at the worktree's git
dir, whose `commondir` names the shared one. Paths are handled lexically (POSIX).
"""

from __future__ import annotations

import os
import posixpath
from dataclasses import dataclass

__all__ = ["ResolvedPath", "WorktreeResolver", "git_common_dir"]


@dataclass(frozen=True, slots=True)
class ResolvedPath:
    """A named path reduced to a root and a tail (absolute when no root contains it)."""

    raw: str
    tail: str
    tail_is_absolute: bool
    worktree_root: str | None
    git_common_dir: str | None


class WorktreeResolver:
    """Resolves paths, remembering `.git` lookups per directory (use one per assembly: the file
    system may change between imports)."""

    def __init__(self) -> None:
        self._roots: dict[str, tuple[str, str | None] | None] = {}

    def resolve(self, raw: str, cwd: str | None) -> ResolvedPath:
        path = raw.strip()
        if path.startswith("~"):
            return ResolvedPath(raw, path, True, None, None)
        base = posixpath.normpath(cwd) if cwd and posixpath.isabs(cwd) else None
        if posixpath.isabs(path):
            absolute = posixpath.normpath(path)
        elif base is not None:
            absolute = posixpath.normpath(posixpath.join(base, path))
        else:
            return ResolvedPath(raw, posixpath.normpath(path), False, None, None)
        found = self.git_root(posixpath.dirname(absolute))
        if found is not None:
            root, common = found
            return ResolvedPath(raw, posixpath.relpath(absolute, root), False, root, common)
        if base is not None and _contains(base, absolute):
            return ResolvedPath(raw, posixpath.relpath(absolute, base), False, base, None)
        return ResolvedPath(raw, absolute, True, None, None)

    def git_root(self, directory: str) -> tuple[str, str | None] | None:
        """(worktree root, git common dir) of the nearest ancestor of `directory` (itself
        included) that holds a `.git` entry, or None."""
        visited: list[str] = []
        current = posixpath.normpath(directory)
        result: tuple[str, str | None] | None = None
        while True:
            if current in self._roots:
                result = self._roots[current]
                break
            visited.append(current)
            dot_git = posixpath.join(current, ".git")
            if os.path.lexists(dot_git):
                result = (current, git_common_dir(dot_git))
                break
            parent = posixpath.dirname(current)
            if parent == current:
                break
            current = parent
        for directory_seen in visited:
            self._roots[directory_seen] = result
        return result


def _contains(root: str, path: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


def git_common_dir(dot_git: str) -> str | None:
    """The real path of the git directory shared by all worktrees of the repository whose
    `.git` entry is `dot_git`, or None when it cannot be read."""
    try:
        if os.path.isdir(dot_git):
            return os.path.realpath(dot_git)
        with open(dot_git, encoding="utf-8") as handle:
            first = handle.readline().strip()
        if not first.startswith("gitdir:"):
            return None
        gitdir = first.removeprefix("gitdir:").strip()
        gitdir = posixpath.normpath(posixpath.join(posixpath.dirname(dot_git), gitdir))
        if not os.path.isdir(gitdir):
            return None
        commondir_file = posixpath.join(gitdir, "commondir")
        if not os.path.isfile(commondir_file):
            return os.path.realpath(gitdir)
        with open(commondir_file, encoding="utf-8") as handle:
            common = handle.readline().strip()
        return os.path.realpath(posixpath.join(gitdir, common))
    except (OSError, UnicodeDecodeError):
        return None
