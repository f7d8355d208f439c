"""file_attention paths: the argument's rules, the caller's launch project, and the reduction
of a path to the repo-relative tail that unifies a file across checkouts and worktrees."""

from __future__ import annotations

import os
import posixpath
import re
from dataclasses import dataclass

from services.query.sessions.errors import invalid

_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://")


@dataclass(frozen=True, slots=True)
class LaunchContext:
    """Where the MCP client was launched: the canonical launch directory and, inside a Git
    checkout, its top-level directory and common directory (shared by linked worktrees)."""

    cwd: str
    git_root: str | None = None
    git_common_dir: str | None = None


@dataclass(frozen=True, slots=True)
class ResolvedPath:
    """A path argument reduced to a tail, and the root stripped from it (if one was)."""

    tail: str
    tail_is_absolute: bool
    stripped_root: str | None


def check_path(raw: object) -> str:
    """The path argument, or invalid_request naming the rule it breaks."""
    if not isinstance(raw, str) or not raw.strip():
        raise invalid("path", "path must be a non-empty file path string")
    if raw != raw.strip():
        raise invalid("path", "path must not have leading or trailing whitespace")
    if raw.lower().startswith("file:"):
        raise invalid("path", "path must be a file path, not a file:// URI")
    if _SCHEME.match(raw):
        raise invalid("path", "path must be a local file path, not a URL")
    if raw.endswith(("/", "\\")):
        raise invalid("path", "path must name a file, not a directory (no trailing slash)")
    if any(char in raw for char in "\x00\n\r"):
        raise invalid("path", "path must not contain control characters")
    if raw.startswith("~"):
        raise invalid("path", "path must be absolute or relative to the launch directory (~)")
    if posixpath.normpath(raw) in (".", "..", "/"):
        raise invalid("path", "path must name a file, not a directory")
    return raw


def resolve(path: str, launch: LaunchContext | None, *, probe: bool) -> ResolvedPath:
    """Reduce `path` to a tail: relative paths resolve from the launch directory; absolute ones
    lose the nearest Git boundary (probed on this machine when `probe`), else the launch
    checkout or launch directory containing them. Unprovable roots leave an absolute tail."""
    if not posixpath.isabs(path):
        if launch is None:
            relative = posixpath.normpath(path)
            if relative == ".." or relative.startswith("../"):
                raise invalid("path", "a relative path must stay inside the launch directory")
            return ResolvedPath(relative, False, None)
        path = posixpath.join(launch.cwd, path)
    absolute = posixpath.normpath(path)
    candidates: list[str | None] = []
    if probe:
        boundary = git_boundary(absolute)
        candidates.append(boundary[0] if boundary else None)
    if launch is not None:
        candidates += [launch.git_root, launch.cwd]
    for root in candidates:
        if root and absolute.startswith(root.rstrip("/") + "/"):
            return ResolvedPath(posixpath.relpath(absolute, root), False, root)
    return ResolvedPath(absolute, True, None)


def git_boundary(path: str) -> tuple[str, str] | None:
    """The nearest Git worktree at or above `path` (which need not exist) on this machine:
    `(top-level directory, common directory)`, or None outside Git."""
    directory = path
    while not os.path.isdir(directory):
        parent = os.path.dirname(directory)
        if parent == directory:
            return None
        directory = parent
    while True:
        marker = os.path.join(directory, ".git")
        if os.path.isdir(marker):
            return directory, os.path.realpath(marker)
        if os.path.isfile(marker):
            common = _linked_common_dir(directory, marker)
            if common is not None:
                return directory, common
        parent = os.path.dirname(directory)
        if parent == directory:
            return None
        directory = parent


def discover_launch_context(cwd: str) -> LaunchContext:
    """The launch context of a directory on this machine (for a client-side MCP server)."""
    canonical = os.path.realpath(cwd)
    boundary = git_boundary(canonical)
    if boundary is None:
        return LaunchContext(canonical)
    return LaunchContext(canonical, boundary[0], boundary[1])


def _linked_common_dir(directory: str, marker: str) -> str | None:
    # A linked worktree's `.git` is a file `gitdir: <dir>`; that dir's `commondir` names the
    # repository shared by every worktree, which is what unifies them.
    try:
        with open(marker, encoding="utf-8") as handle:
            line = handle.readline().strip()
    except OSError:
        return None
    if not line.startswith("gitdir:"):
        return None
    gitdir = os.path.normpath(os.path.join(directory, line.removeprefix("gitdir:").strip()))
    try:
        with open(os.path.join(gitdir, "commondir"), encoding="utf-8") as handle:
            common = os.path.join(gitdir, handle.readline().strip())
    except OSError:
        common = gitdir
    return os.path.realpath(common)
