"""The ingest role's transcript tailing, wired for `mcpd serve`."""

from __future__ import annotations

import asyncio
import logging
from contextlib import AsyncExitStack
from pathlib import Path

from mcpd.runtime.clock import Clock
from mcpd.runtime.config import Settings
from mcpd.storage import Stores
from services.ingest import ProjectPolicies
from services.ingest.transcripts import (
    CheckpointFile,
    Importer,
    Tailer,
    WatchMode,
    harnesses,
    resolve_sources,
)

CHECKPOINTS_FILE = Path("sessions") / "checkpoints.json"


async def start_transcript_tailing(
    stack: AsyncExitStack,
    settings: Settings,
    stores: Stores,
    clock: Clock,
    policies: ProjectPolicies,
    *,
    home: Path,
) -> str:
    """Start tailing the `[sessions]` sources (unless disabled), stopped by `stack`; a line for
    the startup banner. Raises InvalidArgument for a bad source configuration."""
    sessions = settings.sessions
    if not sessions.enabled:
        return "  sessions   transcript tailing off"
    # Every storage backend has a session store (SQLite, PostgreSQL, ClickHouse): tailing runs
    # on all of them.
    project = sessions.project or settings.security.local_project
    sources = resolve_sources(sessions, home=home, harnesses=harnesses())
    # Transcripts pass the project's redaction rules, as its signals do (read once, at start).
    redactor = (await asyncio.to_thread(policies.get, project)).redactor
    importer = Importer(stores.sessions, project=project, redactor=redactor)
    tailer = Tailer(
        sources,
        importer,
        CheckpointFile(settings.data_dir / CHECKPOINTS_FILE),
        interval_s=sessions.rescan_interval_s,
        clock=clock,
        watch=True,
    )
    # watchfiles logs every batch of changes at info; the tailer logs what it imported.
    logging.getLogger("watchfiles").setLevel(logging.WARNING)
    await stack.enter_async_context(tailer)
    names = ", ".join(source.name for source in sources) or "no sources"
    how = _WATCH_MODES[tailer.watch_mode]
    return f"  sessions   tailing {names} ({how}; rescan every {sessions.rescan_interval_s:g} s)"


_WATCH_MODES: dict[WatchMode, str] = {
    "events": "file events",
    "polling": "polling for changes",
    "idle": "no source directory yet",
    "off": "file watch unavailable",
}
