"""SessionTools: the four MCP session tools over a SessionStore, as envelopes.

Each call validates its arguments on the event loop (cheap, and an invalid request is answered
even under load), is admitted or refused as `busy`, runs its blocking store reads in one worker
thread, and is timed end to end on the injected clock. Every outcome is an envelope; only
cancellation escapes, for the transport to answer `cancelled` where a response is still valid.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

from mcpd.runtime.clock import Clock
from mcpd.sessions.store import SessionStore
from services.query.sessions import attention, listing, opening, search
from services.query.sessions.admission import DEFAULT_MAX_IN_FLIGHT, DEFAULT_MAX_QUEUED, Admission
from services.query.sessions.args import require_object
from services.query.sessions.common import ToolConfig
from services.query.sessions.cursors import CursorCodec
from services.query.sessions.envelope import Outcome, ToolResult, elapsed_ms, failure, success
from services.query.sessions.errors import from_exception
from services.query.sessions.paths import LaunchContext

R = TypeVar("R")


class SessionTools:
    """search_sessions, open, list_sessions and file_attention for one store.

    `max_results` bounds open/list_sessions/file_attention page sizes; `cursor_key` signs
    continuation cursors (keep it stable across restarts and replicas, or cursors die with the
    process); `sources` are the configured ingest source names the descriptions list.
    `probe_filesystem` lets file_attention look for Git boundaries on this machine, which is
    only meaningful when the server shares the client's filesystem (local mode).
    """

    def __init__(
        self,
        store: SessionStore,
        *,
        clock: Clock,
        max_results: int = 50,
        cursor_key: bytes,
        sources: Sequence[str],
        max_in_flight: int = DEFAULT_MAX_IN_FLIGHT,
        max_queued: int = DEFAULT_MAX_QUEUED,
        probe_filesystem: bool = False,
    ) -> None:
        if max_results < 1:
            raise ValueError("max_results must be at least 1")
        self._store = store
        self._clock = clock
        self._config = ToolConfig(max_results, tuple(sources), CursorCodec(cursor_key))
        self._admission = Admission(max_in_flight=max_in_flight, max_queued=max_queued)
        self._probe = probe_filesystem

    @property
    def admission(self) -> Admission:
        """The admission gate (for health reporting and tests)."""
        return self._admission

    async def search_sessions(self, project: str, arguments: Mapping[str, Any]) -> ToolResult:
        """search_sessions: ranked event handles."""

        def parse(args: Mapping[str, Any]) -> search.SearchRequest:
            return search.parse(args)

        return await self._call(search.TOOL, project, arguments, parse, search.execute)

    async def open(self, project: str, arguments: Mapping[str, Any]) -> ToolResult:
        """open: a session, turn or event, or the next page of one."""

        def parse(args: Mapping[str, Any]) -> opening.OpenRequest:
            return opening.parse(args, project, self._config)

        return await self._call(opening.TOOL, project, arguments, parse, opening.execute)

    async def list_sessions(self, project: str, arguments: Mapping[str, Any]) -> ToolResult:
        """list_sessions: sessions overlapping a time range."""

        def parse(args: Mapping[str, Any]) -> listing.ListRequest:
            return listing.parse(args, project, self._config)

        return await self._call(listing.TOOL, project, arguments, parse, listing.execute)

    async def file_attention(
        self,
        project: str,
        arguments: Mapping[str, Any],
        *,
        launch: LaunchContext | None = None,
    ) -> ToolResult:
        """file_attention: the tool calls that touched a file. `launch` is the client's launch
        project; without it scope=project fails closed."""

        def parse(args: Mapping[str, Any]) -> attention.AttentionRequest:
            return attention.parse(args, self._config, launch, probe=self._probe)

        return await self._call(attention.TOOL, project, arguments, parse, attention.execute)

    async def _call(
        self,
        tool: str,
        project: str,
        arguments: object,
        parse: Callable[[Mapping[str, Any]], R],
        execute: Callable[[SessionStore, str, R, ToolConfig], Outcome],
    ) -> ToolResult:
        started = self._clock.monotonic()
        try:
            request = parse(require_object(arguments))
            outcome = await self._admission.run(
                lambda: execute(self._store, project, request, self._config)
            )
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # every failure becomes an envelope; none escapes as a crash
            error = from_exception(tool, exc)
            return failure(tool, arguments, error, elapsed_ms(started, self._clock.monotonic()))
        return success(tool, outcome, elapsed_ms(started, self._clock.monotonic()))
