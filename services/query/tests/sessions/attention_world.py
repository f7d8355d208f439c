"""The file_attention test world: one file touched from the main checkout, a sibling
worktree, an agent-isolation worktree, an unknown root and another repository."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import jsonschema

from mcpd.sessions.model import AssembledSession
from services.query.sessions import (
    OUTPUT_SCHEMAS,
    LaunchContext,
    SessionTools,
)
from services.query.tests.sessions.builders import (
    T0,
    answer,
    build,
    touch,
    user,
    with_touches,
)
from services.query.tests.sessions.builders import (
    call as tool_call,
)

MAIN = "/Users/me/src/moraine"
SIBLING = "/Users/me/src/moraine-feat"
AGENT = "/Users/me/src/moraine/.claude/worktrees/agent-1"
COMMON = "/Users/me/src/moraine/.git"
OTHER_REPO = "/Users/me/src/other"
TAIL = "crates/core/src/lib.rs"
LAUNCH = LaunchContext(cwd=MAIN, git_root=MAIN, git_common_dir=COMMON)
# The flat timeline over every root.
BASE = {"path": TAIL, "scope": "all", "granularity": "events"}


def edits(key: str, count: int, **kw: Any) -> AssembledSession:
    """A session whose one turn makes `count` Edit calls."""
    calls = [
        tool_call("Edit", f'Edit(file_path="{TAIL}")', payload={"arguments": {"file_path": TAIL}})
    ]
    return build(key, [[user("edit the file"), *calls * count, answer("done")]], **kw)


def world() -> list[AssembledSession]:
    """Touches of TAIL in the main checkout, a sibling worktree, an agent worktree, an unknown
    root, another repository, and one file_attention call of the server itself."""
    main = edits("main", 2, start=T0)
    sibling = edits("sib", 1, start=T0 + timedelta(hours=1), source="claude", harness="claude-code")
    agent = edits("agent", 1, start=T0 + timedelta(hours=2), source="pi", harness="pi-coding-agent")
    lost = edits("lost", 1, start=T0 + timedelta(hours=3), source="omp", harness="pi-coding-agent")
    other = edits("other", 1, start=T0 + timedelta(hours=4))
    return [
        with_touches(
            main,
            [
                touch(main, 1, 2, tail=TAIL, root=MAIN, common=COMMON, tool="Edit"),
                touch(main, 1, 3, tail=TAIL, root=MAIN, common=COMMON, tool="Read", mutation=False),
                touch(main, 1, 4, tail=TAIL, root=MAIN, common=COMMON, tool="file_attention"),
            ],
        ),
        with_touches(sibling, [touch(sibling, 1, 2, tail=TAIL, root=SIBLING, common=COMMON)]),
        with_touches(
            agent, [touch(agent, 1, 2, tail=TAIL, root=AGENT, common=COMMON, joined=False)]
        ),
        with_touches(lost, [touch(lost, 1, 2, tail=TAIL, root=None, raw=f"/tmp/x/{TAIL}")]),
        with_touches(other, [touch(other, 1, 2, tail=TAIL, root=OTHER_REPO, common="/o/.git")]),
    ]


async def attention(tools: SessionTools, arguments: dict[str, Any], **kw: Any) -> dict[str, Any]:
    result = await tools.file_attention("proj-a", arguments, **kw)
    jsonschema.validate(result.envelope, OUTPUT_SCHEMAS["file_attention"])
    return result.envelope


def event_ids(envelope: dict[str, Any]) -> list[str]:
    assert "data" in envelope, envelope
    return [row["id"] for row in envelope["data"]["events"]]
