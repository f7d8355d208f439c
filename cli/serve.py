"""`mcpd serve`: every role under a supervisor (`cli.supervisor`), or one role in this process.

`mcpd serve --service ROLE` is what the Kubernetes manifests run: a gRPC role
(`cli.role_server`), or the gateway alone (`cli.gateway_server`) reaching each role at
`MCPD_<ROLE>_ADDR`. Either serves until SIGTERM or SIGINT, then stops every component in
reverse order.
"""

from __future__ import annotations

import logging
import sys
from contextlib import AsyncExitStack

from cli.banner import banner
from cli.gateway_server import channels_for, start_gateway
from cli.role_server import run_until_stopped, serve_roles
from cli.signals import stop_on_signals
from mcpd.runtime.config import Settings

__all__ = ["serve_one"]

log = logging.getLogger("mcpd.serve")


async def serve_one(settings: Settings, role: str) -> int:
    """Serve `role` alone until SIGTERM or SIGINT; the exit status."""
    stop = stop_on_signals()
    async with AsyncExitStack() as stack:
        if role == "gateway":
            channel_for = channels_for(stack, settings, {})
            http = await start_gateway(stack, settings, channel_for, settings.http_addr)
            lines = banner(settings, roles=[role], http=http, grpc=None)
        else:
            served = await serve_roles(stack, settings, [role])
            lines = banner(settings, roles=[role], http=None, grpc=served.grpc, extra=served.banner)
        print("\n".join(lines), file=sys.stderr, flush=True)
        await run_until_stopped(stop)
        log.info("stopping", extra={"roles": [role]})
    log.info("stopped")
    return 0
