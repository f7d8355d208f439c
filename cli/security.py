"""Wires authentication into a process: configured keys, the auth interceptor, local mode."""

from __future__ import annotations

import asyncio
import ipaddress
from collections.abc import Sequence
from dataclasses import dataclass

from mcpd.auth.access import access_rules
from mcpd.auth.authenticator import Authenticator
from mcpd.auth.interceptor import AuthInterceptor, StoreAuditSink
from mcpd.auth.keys_file import ConfiguredKey, load_keys_file
from mcpd.runtime.clock import Clock
from mcpd.runtime.config import SecuritySettings
from mcpd.runtime.errors import FailedPrecondition
from mcpd.storage.interfaces import ControlStore


@dataclass(frozen=True)
class Security:
    """What a gRPC process needs to enforce access, and what to tell the operator."""

    interceptor: AuthInterceptor
    local_mode: bool
    configured_keys: int


async def build_security(
    settings: SecuritySettings, control: ControlStore, clock: Clock, listening: Sequence[str]
) -> Security:
    """The auth interceptor for a process listening on `listening` (host:port addresses).

    Local mode (no authentication) is only ever granted on loopback: a process bound to any
    other address with no keys and no accounts refuses to start, so a typo in an address never
    publishes an open daemon.
    """
    configured: list[ConfiguredKey] = (
        load_keys_file(settings.keys_file) if settings.keys_file is not None else []
    )
    loopback_only = all(is_loopback(address) for address in listening)
    await asyncio.to_thread(control.ensure_project, settings.local_project, settings.local_project)
    authenticator = Authenticator(
        control,
        configured,
        clock=clock,
        local_project=settings.local_project,
        allow_local_mode=loopback_only,
    )
    local_mode = not configured and not await asyncio.to_thread(control.has_credentials)
    if local_mode and not loopback_only:
        exposed = ", ".join(a for a in listening if not is_loopback(a))
        raise FailedPrecondition(
            f"refusing to listen on {exposed} without credentials: declare keys in "
            "security.keys_file (MCPD_SECURITY_KEYS_FILE), or listen on a loopback address",
            reason="KEYS_REQUIRED",
        )
    interceptor = AuthInterceptor(
        authenticator, StoreAuditSink(control), rules=access_rules(), clock=clock
    )
    return Security(interceptor, local_mode, len(configured))


def is_loopback(address: str) -> bool:
    """Whether `host:port` names a loopback interface."""
    host = address.rpartition(":")[0].strip("[]")
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def describe(security: Security, local_project: str) -> str:
    """One line for the start-up banner."""
    if security.local_mode:
        return (
            "  auth       OFF: local mode (loopback, no keys, no accounts); requests act as "
            f"'anonymous' in project '{local_project}' until a key or an account exists"
        )
    return f"  auth       on ({security.configured_keys} configured keys, plus account keys)"
