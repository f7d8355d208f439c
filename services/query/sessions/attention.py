"""file_attention: the captured tool calls that touched a file, unified by repo-relative tail
across the main checkout, sibling worktrees and agent-isolation worktrees."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from mcpd.sessions.model import FileTouch
from mcpd.sessions.store import SessionStore, TouchQuery
from services.query.sessions import common, rollup
from services.query.sessions.args import (
    optional_bool,
    optional_choice,
    optional_datetime,
    optional_integer,
    optional_text,
    reject_unknown,
    value,
)
from services.query.sessions.envelope import Outcome, as_utc, request_timestamp
from services.query.sessions.errors import invalid
from services.query.sessions.ids import is_own_tool
from services.query.sessions.paths import LaunchContext, ResolvedPath, check_path, resolve

TOOL = "file_attention"
FIELDS = (
    "path",
    "scope",
    "granularity",
    "start_datetime",
    "end_datetime",
    "tool",
    "harness",
    "source",
    "mutations_only",
    "limit",
)
SCOPES = ("project", "all")
GRANULARITIES = ("sessions", "events")
DEFAULT_LIMIT = 50
# Touches read per call; summaries cover at most this many, and hitting it is reported as
# scan truncation rather than silently undercounting.
SCAN_CAP = 5000


@dataclass(frozen=True, slots=True)
class AttentionRequest:
    """A validated file_attention request with its path reduced to a tail."""

    path: str
    resolved: ResolvedPath
    scope: str
    granularity: str
    start: datetime | None
    end: datetime | None
    tool: str | None
    harness: str | None
    source: str | None
    mutations_only: bool
    limit: int
    launch: LaunchContext | None

    def canonical(self) -> dict[str, Any]:
        """The canonical request, defaults applied."""
        return {
            "path": self.path,
            "scope": self.scope,
            "granularity": self.granularity,
            "start_datetime": None if self.start is None else request_timestamp(self.start),
            "end_datetime": None if self.end is None else request_timestamp(self.end),
            "tool": self.tool,
            "harness": self.harness,
            "source": self.source,
            "mutations_only": self.mutations_only,
            "limit": self.limit,
        }


def parse(
    arguments: Mapping[str, Any],
    config: common.ToolConfig,
    launch: LaunchContext | None,
    *,
    probe: bool,
) -> AttentionRequest:
    """Validate file_attention arguments and reduce the path."""
    reject_unknown(arguments, FIELDS)
    path = check_path(value(arguments, "path"))
    scope = optional_choice(arguments, "scope", SCOPES, default="project") or "project"
    granularity = optional_choice(arguments, "granularity", GRANULARITIES, default="sessions")
    start = optional_datetime(arguments, "start_datetime", millisecond_precision=True)
    end = optional_datetime(arguments, "end_datetime", millisecond_precision=True)
    if start is not None and end is not None and end <= start:
        raise invalid("end_datetime", "end_datetime must be after start_datetime")
    tool = optional_text(arguments, "tool")
    harness, source = common.harness_and_source(arguments)
    mutations_only = optional_bool(arguments, "mutations_only", default=False)
    limit = optional_integer(
        arguments,
        "limit",
        default=min(DEFAULT_LIMIT, config.max_results),
        minimum=1,
        maximum=config.max_results,
    )
    if scope == "project" and launch is None:
        # Fail closed (spec): without the launch project, project scope cannot be proven.
        raise invalid(
            "scope",
            "scope=project needs the client's launch project, which this call did not carry; "
            "use scope=all",
            reason="launch_project_unknown",
        )
    resolved = resolve(path, launch, probe=probe)
    return AttentionRequest(
        path,
        resolved,
        scope,
        granularity or "sessions",
        start,
        end,
        tool,
        harness,
        source,
        mutations_only,
        limit,
        launch if scope == "project" else None,
    )


def execute(
    store: SessionStore, project: str, request: AttentionRequest, config: common.ToolConfig
) -> Outcome:
    """Scan the touches of the tail and shape rows or rollups (blocking: worker thread)."""
    launch = request.launch
    query = TouchQuery(
        project=project,
        tail=request.resolved.tail,
        limit=SCAN_CAP,
        start=request.start,
        end=request.end,
        # Tool names are matched case-insensitively here, whatever the backend's collation.
        tool=None,
        harness=request.harness,
        source=request.source,
        mutations_only=request.mutations_only,
        git_common_dir=launch.git_common_dir if launch is not None else None,
    )
    scanned, scan_capped = store.touches(query)
    touches = sorted((t for t in scanned if _keep(t, request)), key=rollup.newest_first)
    summary, roots = rollup.summarize(touches, scan_capped)
    rows = rollup.Rows(store, project, request.path, request.resolved)
    if request.granularity == "events":
        shown = [rows.event_row(rank, t) for rank, t in enumerate(touches[: request.limit], 1)]
        hidden = len(touches) > request.limit
        key = "events"
    else:
        groups = rollup.by_session(touches)
        shown = [rows.session_row(rank, g) for rank, g in enumerate(groups[: request.limit], 1)]
        hidden = len(groups) > request.limit
        key = "sessions"
    data: dict[str, Any] = {
        "path": request.path,
        "tail": request.resolved.tail,
        "tail_is_absolute": request.resolved.tail_is_absolute,
        "stripped_root": request.resolved.stripped_root,
        "scope": request.scope,
        "granularity": request.granularity,
        "summary": summary,
        "roots": roots,
        "result_count": len(shown),
        "limit": request.limit,
        "truncated": hidden or scan_capped,
        key: shown,
    }
    warnings = rollup.warnings(summary, request.resolved)
    warnings += common.filter_warnings(request.harness, request.source, config.sources)
    return Outcome(request.canonical(), data, warnings)


def _keep(touch: FileTouch, request: AttentionRequest) -> bool:
    """Re-check what the store filtered, and apply what it is not trusted with."""
    if is_own_tool(touch.tool_name):
        return False  # file_attention's own `path` argument is not a touch of the file
    if request.tool is not None and touch.tool_name.casefold() != request.tool.casefold():
        return False
    if request.mutations_only and not touch.mutation:
        return False
    if request.start is not None or request.end is not None:
        if touch.timestamp is None:
            return False  # an unknown time cannot be shown to be inside the range
        moment = as_utc(touch.timestamp)
        if request.start is not None and moment < request.start:
            return False
        if request.end is not None and moment >= request.end:
            return False
    launch = request.launch
    if launch is not None:
        if launch.git_common_dir is not None:
            return touch.git_common_dir == launch.git_common_dir
        # A non-Git launch directory is the identity: only touches recorded exactly there.
        return touch.git_common_dir is None and touch.worktree_root == launch.cwd
    return True
