"""The HTTP gateway of `mcpd serve` in a child process of its own, supervised by the parent.

`mcpd serve` (every role) keeps storage and the gRPC services in its own process and runs the
gateway (REST, OTLP/HTTP, MCP) as a child (`cli.children`), `mcpd serve --service gateway`, so
the gateway's Python work (JSON decoding, transcoding, OTLP/HTTP relaying) runs on another core
than the services. Over the socket pair:

- parent -> child, once the parent's gRPC server serves: where its roles are found, the ingest
  workers' addresses (`cli.ingest_workers`; empty when there are none) and a token for the
  start-up probe, `{"grpc": "127.0.0.1:50051", "roles": [...], "ingest": [...], "probe":
  "..."}`. The child binds HTTP only then, so it never accepts a request its upstream cannot
  serve;
- child -> parent, once HTTP is bound: `{"http": "127.0.0.1:8080"}` (the real port when the
  configured one is 0). The parent then waits for `GET /healthz` 200 and announces itself;
- parent -> child, once announced: `{"open": true}`. Until then the child holds every request
  but the parent's probe (`StartGate`), so whoever sees the gateway answer also finds the
  banner printed, as when both ran in one process.

The child is spawned before the parent imports its services and opens storage (`cli.main`), so
its start-up (mostly imports, about a second) overlaps the parent's instead of adding to it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from cli.children import ChildProcess, ParentLink, dialable, unsupported_reason
from cli.role_names import GRPC_ROLES
from mcpd.runtime.config import Settings

if TYPE_CHECKING:
    from starlette.types import ASGIApp, Receive, Scope, Send

log = logging.getLogger("mcpd.serve")

# How long the child may take to bind HTTP and answer /healthz (its start-up is mostly imports,
# which a loaded machine can stretch a lot).
START_TIMEOUT_S = 60.0
_PROBE_INTERVAL_S = 0.02
# The header that lets the parent's start-up probe through the child's StartGate.
PROBE_HEADER = "x-mcpd-start-probe"


async def spawn_beside(
    settings: Settings, roles: Sequence[str], config_path: Path | None
) -> GatewayChild | None:
    """The gateway's child process when `roles` (of one `mcpd serve`) hold the gateway and gRPC
    roles, `gateway.separate_process` is on, and a child can run here; else None (the gateway,
    if any, runs in this process)."""
    if "gateway" not in roles or not any(role in GRPC_ROLES for role in roles):
        return None
    if not settings.gateway.separate_process:
        return None
    reason = unsupported_reason()
    if reason is not None:
        log.info("the gateway runs in this process", extra={"reason": reason})
        return None
    child = GatewayChild(ChildProcess("gateway", settings, config_path))
    await child.process.spawn()
    return child


class GatewayChild:
    """The parent's side of the gateway child: starts it, opens it, stops it."""

    def __init__(self, process: ChildProcess) -> None:
        self.process = process

    @property
    def pid(self) -> int:
        return self.process.pid

    async def start(
        self, grpc_address: str, roles: Sequence[str], ingest: Sequence[str] = ()
    ) -> str:
        """Tell the child where `roles` (and the ingest workers) are served, wait until it is
        healthy; its HTTP address.

        Raises OSError when the child exits first or is not healthy within START_TIMEOUT_S.
        """
        deadline = time.monotonic() + START_TIMEOUT_S
        token = secrets.token_urlsafe(16)
        message = {
            "grpc": dialable(grpc_address),
            "roles": list(roles),
            "ingest": list(ingest),
            "probe": token,
        }
        try:
            await self.process.send(message)
            answer = await asyncio.wait_for(self.process.receive(), START_TIMEOUT_S)
        except (ConnectionError, TimeoutError):
            answer = None
        if answer is None:
            raise await self.process.gone("did not start")
        http_address = str(answer["http"])
        await self._until_healthy(http_address, token, deadline)
        return http_address

    async def open(self) -> None:
        """Let the child serve every request (once this process has announced itself)."""
        with contextlib.suppress(ConnectionError):  # it died: `wait` reports that
            await self.process.send({"open": True})

    async def _until_healthy(self, http_address: str, token: str, deadline: float) -> None:
        import httpx  # the parent imports it anyway (MCP); the child never needs it here

        url = f"http://{dialable(http_address)}/healthz"
        last = "no answer"
        headers = {PROBE_HEADER: token}
        async with httpx.AsyncClient(trust_env=False, timeout=2.0, headers=headers) as client:
            while True:
                if self.process.returncode is not None:
                    raise OSError(self.process.failure("exited while starting"))
                try:
                    response = await client.get(url)
                    if response.status_code == 200:
                        return
                    last = f"HTTP {response.status_code}: {response.text[:200]}"
                except httpx.HTTPError as exc:
                    last = f"{type(exc).__name__}: {exc}"
                if time.monotonic() >= deadline:
                    raise OSError(self.process.failure(f"was not healthy at {url} ({last})"))
                await asyncio.sleep(_PROBE_INTERVAL_S)

    def describe_exit(self) -> str:
        """How the child ended, for a message (empty while it runs)."""
        return self.process.describe_exit()

    async def wait(self) -> int:
        """The child's exit status, once it exits (negative: killed by that signal)."""
        return await self.process.wait()

    async def stop(self) -> None:
        """SIGTERM, then SIGKILL after a grace period; idempotent."""
        await self.process.stop()


@dataclass(frozen=True)
class Upstream:
    """Where the parent serves its gRPC roles and the ingest workers, and the token of its
    start-up probe."""

    grpc: str
    roles: tuple[str, ...]
    ingest: tuple[str, ...]
    probe: str


async def upstream(link: ParentLink, stop: asyncio.Event) -> Upstream | None:
    """What the parent says once its gRPC server serves; None when told to stop first, or when
    the parent is gone."""
    message = await link.first(stop)
    if message is None:
        return None
    return Upstream(
        grpc=str(message["grpc"]),
        roles=tuple(message["roles"]),
        ingest=tuple(message.get("ingest", ())),
        probe=str(message["probe"]),
    )


class StartGate:
    """ASGI middleware of the child: holds requests until the parent has announced itself,
    letting through only the parent's start-up probe (the request carrying its token)."""

    def __init__(self, app: ASGIApp, token: str) -> None:
        self._app = app
        self._probe = (PROBE_HEADER.encode(), token.encode())
        self._open = asyncio.Event()

    def open(self) -> None:
        self._open.set()

    def on_message(self, message: dict[str, object]) -> None:
        """The parent's messages after the first: `{"open": true}` opens the gate."""
        if message.get("open"):
            self.open()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if (
            not self._open.is_set()
            and scope["type"] != "lifespan"
            and self._probe not in scope.get("headers", ())
        ):
            await self._open.wait()
        await self._app(scope, receive, send)
