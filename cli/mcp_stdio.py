"""`mcpd mcp`: the session-search tools over stdio, for agent clients that launch a command.

Two ways to answer, chosen once at start:

- daemon: a query service answers grpc.health.v1 at `query_addr` within `PROBE_TIMEOUT_S`; each
  call goes to it over gRPC with the `--key` (or `MCPD_API_KEY`) as bearer token, exactly like a
  call to `/mcp` on the gateway (same auth, scopes, projects and audit).
- embedded: nothing answers; the process opens the data directory's stores itself and runs the
  tools in process. Same envelopes. It only reads: it never takes the data directory's lock or
  writes the search index, so `mcpd serve` (the index's one writer) can start beside it at any
  time. Nothing is audited and no key is checked: whoever can read the data directory can read
  its sessions.

Either way the process's working directory is the client's launch directory, which
file_attention uses to resolve relative paths and `scope: project`. stdout carries MCP only;
logs go to stderr.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import logging
import os
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack
from typing import Any

import grpc
import grpc.aio
from grpc_health.v1 import health_pb2, health_pb2_grpc
from mcp.server.stdio import stdio_server

from cli.roles import session_sources, session_tools, tool_catalog
from gateway.mcp import QUERY_SERVICE, Caller, ToolAnswer, ToolBackend, UpstreamTools, build_server
from mcpd.runtime.channels import open_channel
from mcpd.runtime.clock import SystemClock
from mcpd.runtime.config import Settings
from mcpd.runtime.data_dir import open_data_dir
from mcpd.storage import open_stores
from services.query import LAUNCH_METADATA
from services.query.sessions import LaunchContext, SessionTools, discover_launch_context

log = logging.getLogger("mcpd.mcp")

PROBE_TIMEOUT_S = 1.0


@dataclasses.dataclass(frozen=True, slots=True)
class StdioOptions:
    """What `mcpd mcp` was asked for: `mode` is auto, daemon or embedded."""

    key: str | None = None
    project: str = ""
    mode: str = "auto"


class DaemonUnavailableError(RuntimeError):
    """`--mode daemon`, and no query service answered."""


class EmbeddedTools:
    """A `ToolBackend` running the tools in this process, in one project."""

    def __init__(self, tools: SessionTools, project: str, launch: LaunchContext) -> None:
        self._tools = tools
        self._project = project
        self._launch = launch

    async def call(self, tool: str, arguments: dict[str, Any], caller: Caller) -> ToolAnswer:
        """Run `tool` in process (the caller's metadata means nothing here)."""
        match tool:
            case "search_sessions":
                result = await self._tools.search_sessions(self._project, arguments)
            case "open":
                result = await self._tools.open(self._project, arguments)
            case "list_sessions":
                result = await self._tools.list_sessions(self._project, arguments)
            case "file_attention":
                result = await self._tools.file_attention(
                    self._project, arguments, launch=self._launch
                )
            case _:
                raise ValueError(f"unknown tool {tool!r}")
        return ToolAnswer(result.envelope, is_error=result.is_error)


async def serve_stdio(settings: Settings, options: StdioOptions) -> None:
    """Serve MCP on stdin/stdout until the client closes stdin."""
    launch = discover_launch_context(os.getcwd())
    async with _backend(settings, options, launch) as (backend, caller):
        catalog = tool_catalog(session_sources(settings))
        server = build_server(catalog, backend, caller_of=lambda request: caller)
        async with stdio_server() as (read_stream, write_stream):
            await server.run(read_stream, write_stream, server.create_initialization_options())


@contextlib.asynccontextmanager
async def _backend(
    settings: Settings, options: StdioOptions, launch: LaunchContext
) -> AsyncIterator[tuple[ToolBackend, Caller]]:
    async with AsyncExitStack() as stack:
        if options.mode != "embedded":
            channel = open_channel(settings.query_addr, settings.grpc)
            stack.push_async_callback(channel.close)
            if await _query_service_answers(channel):
                log.info("mcpd mcp: using the daemon at %s", settings.query_addr)
                backend = UpstreamTools(
                    lambda service: channel, deadline_s=settings.gateway.default_deadline_s
                )
                yield backend, _daemon_caller(options, launch)
                return
            if options.mode == "daemon":
                raise DaemonUnavailableError(
                    f"no mcpd query service answers at {settings.query_addr}"
                )
        # Opening migrates (a fresh data directory gets its empty stores): off the event loop.
        await asyncio.to_thread(open_data_dir, settings.data_dir)
        stores = await asyncio.to_thread(
            open_stores,
            settings.storage.backend,
            data_dir=settings.data_dir,
            postgres_url=settings.storage.postgres_url,
            clickhouse_url=settings.storage.clickhouse_url,
        )
        stack.callback(stores.close)
        tools = session_tools(stores, settings, clock=SystemClock(), probe_filesystem=True)
        # Where this data directory's transcripts land (cli.transcripts): sessions.project,
        # else the local project.
        project = options.project or settings.sessions.project or settings.security.local_project
        log.info(
            "mcpd mcp: no daemon at %s; reading %s in process (project %s)",
            settings.query_addr,
            settings.data_dir,
            project,
        )
        yield EmbeddedTools(tools, project, launch), Caller()


async def _query_service_answers(channel: grpc.aio.Channel) -> bool:
    stub = health_pb2_grpc.HealthStub(channel)
    request = health_pb2.HealthCheckRequest(service=QUERY_SERVICE)
    try:
        reply = await stub.Check(request, timeout=PROBE_TIMEOUT_S)
    except grpc.aio.AioRpcError:
        return False
    serving: bool = reply.status == health_pb2.HealthCheckResponse.SERVING
    return serving


def _daemon_caller(options: StdioOptions, launch: LaunchContext) -> Caller:
    metadata: list[tuple[str, str | bytes]] = []
    if options.key:
        metadata.append(("authorization", f"Bearer {options.key}"))
    context = {
        "cwd": launch.cwd,
        "git_root": launch.git_root,
        "git_common_dir": launch.git_common_dir,
    }
    metadata.append((LAUNCH_METADATA, json.dumps(context).encode("utf-8")))
    return Caller(tuple(metadata), options.project)
