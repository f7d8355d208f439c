"""file_attention: path reduction and rules, argument checks, filters, scan truncation and
Git boundaries probed on this machine."""

from __future__ import annotations

import asyncio
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from mcpd.runtime.clock import ManualClock
from mcpd.sessions.store import SessionStore
from services.query.sessions import (
    LaunchContext,
    SessionTools,
    discover_launch_context,
)
from services.query.tests.sessions.attention_world import (
    BASE,
    COMMON,
    LAUNCH,
    MAIN,
    TAIL,
    attention,
    event_ids,
    world,
)
from services.query.tests.sessions.builders import (
    event_id,
)
from services.query.tests.sessions.conftest import error_of, make_tools, seed


@pytest.mark.parametrize(
    ("path", "launch", "tail", "absolute", "root"),
    [
        (f"{MAIN}/{TAIL}", LAUNCH, TAIL, False, MAIN),
        ("src/lib.rs", LaunchContext(f"{MAIN}/crates/core", MAIN, COMMON), TAIL, False, MAIN),
        (f"./{TAIL}", None, TAIL, False, None),
        (f"/elsewhere/{TAIL}", None, f"/elsewhere/{TAIL}", True, None),
        (f"{MAIN}/{TAIL}", None, f"{MAIN}/{TAIL}", True, None),
    ],
)
async def test_path_reduction(
    store: SessionStore,
    tools: SessionTools,
    path: str,
    launch: LaunchContext | None,
    tail: str,
    absolute: bool,
    root: str | None,
) -> None:
    seed(store, *world())
    got = await attention(tools, {"path": path, "scope": "all"}, launch=launch)
    data = got["data"]
    assert (data["tail"], data["tail_is_absolute"], data["stripped_root"]) == (tail, absolute, root)
    assert data["path"] == path
    assert ("unresolved_root" in [w["code"] for w in got["warnings"]]) is absolute


@pytest.mark.parametrize(
    "path",
    [
        " a.rs",
        "a.rs ",
        "file:///Users/me/a.rs",
        "FILE:a.rs",
        "crates/",
        "crates\\",
        "https://x/a.rs",
        "~/a.rs",
        "",
        "   ",
        "..",
        "../a.rs",
        ".",
        7,
        None,
    ],
)
async def test_path_rules(tools: SessionTools, path: Any) -> None:
    assert error_of(await attention(tools, {"path": path, "scope": "all"})) == (
        "invalid_request",
        "path",
    )


@pytest.mark.parametrize(
    ("arguments", "field"),
    [
        ({"scope": "repo"}, "scope"),
        ({"granularity": "turns"}, "granularity"),
        ({"start_datetime": "2026-04-29T18:00:00.0001Z"}, "start_datetime"),
        ({"end_datetime": "2026-04-29T18:00:00"}, "end_datetime"),
        (
            {"start_datetime": "2026-04-29T19:00:00Z", "end_datetime": "2026-04-29T19:00:00Z"},
            "end_datetime",
        ),
        ({"mutations_only": "yes"}, "mutations_only"),
        ({"tool": ""}, "tool"),
        ({"limit": 51}, "limit"),
        ({"limit": 0}, "limit"),
        ({"paths": ["a"]}, "paths"),
    ],
)
async def test_attention_arguments(
    tools: SessionTools, arguments: dict[str, Any], field: str
) -> None:
    got = await attention(tools, {"path": TAIL, "scope": "all", **arguments})
    assert error_of(got) == ("invalid_request", field)


async def test_filters(store: SessionStore, tools: SessionTools) -> None:
    seed(store, *world())
    tool = await attention(tools, {**BASE, "tool": "READ"})  # case-insensitive
    assert event_ids(tool) == [event_id("main", 1, 3)]
    assert tool["request"]["tool"] == "READ"
    mutations = await attention(tools, {**BASE, "mutations_only": True, "source": "codex"})
    assert event_ids(mutations) == [event_id("other", 1, 2), event_id("main", 1, 2)]
    # Inclusive start, exclusive end, millisecond bounds; unknown times never match a range.
    window = {"start_datetime": "2026-04-29T18:41:57.000Z", "end_datetime": "2026-04-29T18:41:58Z"}
    ranged = await attention(tools, {**BASE, **window})
    assert event_ids(ranged) == [event_id("main", 1, 2)]
    assert ranged["request"]["start_datetime"] == "2026-04-29T18:41:57.000Z"
    offset = {"start_datetime": "2026-04-29T14:41:57.000-04:00"}
    assert event_ids(await attention(tools, {**BASE, **offset}))[-1] == event_id("main", 1, 2)


async def test_scan_cap_is_visible(
    store: SessionStore, clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    from services.query.sessions import attention as module

    seed(store, *world())
    monkeypatch.setattr(module, "SCAN_CAP", 2)
    got = await attention(make_tools(store, clock), {**BASE, "limit": 10})
    assert got["data"]["summary"]["scan_truncated"] is True
    assert got["data"]["truncated"] is True
    assert got["data"]["result_count"] == 2
    assert "scan_truncated" in [w["code"] for w in got["warnings"]]


def _git(*args: str, cwd: Path) -> None:
    subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True)


def _git_checkout(tmp_path: Path) -> tuple[LaunchContext, LaunchContext, Path]:
    """A repository with a linked worktree, and the launch contexts of both (blocking I/O)."""
    repo = tmp_path / "repo"
    (repo / "crates/core/src").mkdir(parents=True)
    _git("init", "-q", cwd=repo)
    identity = ("-c", "user.email=t@t", "-c", "user.name=t")
    _git(*identity, "commit", "-q", "--allow-empty", "-m", "x", cwd=repo)
    _git("worktree", "add", "-q", str(tmp_path / "wt"), cwd=repo)
    launch = discover_launch_context(str(repo / "crates"))
    assert launch.git_root == os.path.realpath(repo)
    assert launch.git_common_dir == os.path.realpath(repo / ".git")
    return launch, discover_launch_context(str(tmp_path / "wt")), tmp_path / "wt"


async def test_git_boundaries_probed_on_this_machine(
    store: SessionStore, clock: ManualClock, tmp_path: Path
) -> None:
    launch, linked, worktree = await asyncio.to_thread(_git_checkout, tmp_path)
    assert linked.git_common_dir == launch.git_common_dir  # worktrees share the common dir
    tools = make_tools(store, clock, probe_filesystem=True)
    # A file that does not exist (yet) in the linked worktree still reduces to its tail.
    got = await attention(tools, {"path": str(worktree / TAIL), "scope": "all"})
    assert got["data"]["tail"] == TAIL
    assert got["data"]["stripped_root"] == str(worktree)
    outside = await attention(tools, {"path": "/nonexistent-root/a.rs", "scope": "all"})
    assert outside["data"]["tail_is_absolute"] is True
