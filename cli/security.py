"""Wires authentication into a process: configured keys, the service credential, the auth
interceptor, local mode."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass

from cli.role_names import GRPC_ROLES
from mcpd.auth.access import access_rules
from mcpd.auth.audit import AggregatingAuditSink, StoreAuditSink
from mcpd.auth.authenticator import Authenticator
from mcpd.auth.interceptor import AuthInterceptor
from mcpd.auth.keys_file import ConfiguredKey, load_keys_file
from mcpd.auth.metadata import is_loopback_host
from mcpd.auth.service_identity import (
    CREDENTIAL_FILE,
    ServiceCredential,
    load_or_create_service_credential,
)
from mcpd.runtime.clock import Clock
from mcpd.runtime.config import SecuritySettings, Settings
from mcpd.runtime.errors import FailedPrecondition
from mcpd.storage.interfaces import ControlStore


@dataclass(frozen=True)
class Security:
    """What a gRPC process needs to enforce access, and what to tell the operator.

    `close` once the servers using the interceptor have stopped: it writes the refusals the
    audit sink is still counting.
    """

    interceptor: AuthInterceptor
    audit: AggregatingAuditSink
    local_mode: bool
    configured_keys: int

    async def close(self) -> None:
        """Stop the audit sink's flushing and write what it holds."""
        await self.audit.close()


# Where a process serving the gateway beside gRPC roles reaches its own services: a loopback
# port nobody else dials.
PRIVATE_ADDRESS = "127.0.0.1:0"


def listening_addresses(settings: Settings, roles: Sequence[str]) -> list[str]:
    """Every `host:port` a process serving `roles` binds: HTTP when it serves the gateway, gRPC
    when it serves a gRPC role, OTLP/gRPC when it serves ingest, and the private port its own
    gateway calls its services on when it serves both (always loopback). Every server process
    of `mcpd serve` binds the same. The local-mode rule (`build_security`) is decided over all
    of them, so no entrance escapes it."""
    grpc_roles = any(role in GRPC_ROLES for role in roles)
    addresses: list[str] = []
    if "gateway" in roles:
        addresses.append(settings.http_addr)
    if grpc_roles:
        addresses.append(settings.grpc_addr)
    if "ingest" in roles:
        addresses.append(settings.otlp_grpc_addr)
    if grpc_roles and "gateway" in roles:
        addresses.append(PRIVATE_ADDRESS)
    return addresses


def service_credential(settings: Settings) -> ServiceCredential:
    """The deployment's service credential: `security.service_credential_file` (mounted from a
    Secret), or `service.credential` in the data directory, created on first use. Blocking."""
    path = settings.security.service_credential_file or settings.data_dir / CREDENTIAL_FILE
    return load_or_create_service_credential(path)


async def build_security(
    settings: SecuritySettings,
    control: ControlStore,
    clock: Clock,
    listening: Sequence[str],
    *,
    service: ServiceCredential | None = None,
) -> Security:
    """The auth interceptor for a process listening on `listening` (host:port addresses: see
    `listening_addresses`), its audit sink flushing counted refusals until `Security.close`.
    Calls presenting `service` (the service credential) are admitted as the calling service
    where the RPC's access rule accepts services; without it, no service call is.

    Local mode (no authentication) is only ever granted on loopback: a process bound to any
    other address with no keys and no accounts refuses to start (KEYS_REQUIRED, naming the
    address), so a typo in an address never publishes an open daemon.
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
        service_digest=service.digest if service is not None else None,
    )
    local_mode = not configured and not await asyncio.to_thread(control.has_credentials)
    if local_mode and not loopback_only:
        exposed = ", ".join(a for a in listening if not is_loopback(a))
        raise FailedPrecondition(
            f"refusing to listen on {exposed} without credentials: declare keys in "
            "security.keys_file (MCPD_SECURITY_KEYS_FILE), or listen on a loopback address",
            reason="KEYS_REQUIRED",
        )
    audit = AggregatingAuditSink(
        StoreAuditSink(control), clock=clock, window_s=settings.audit_aggregate_window_s
    )
    interceptor = AuthInterceptor(authenticator, audit, rules=access_rules(), clock=clock)
    audit.start()
    return Security(interceptor, audit, local_mode, len(configured))


def is_loopback(address: str) -> bool:
    """Whether `host:port` names a loopback interface."""
    return is_loopback_host(address.rpartition(":")[0])


def describe(security: Security, local_project: str) -> str:
    """One line for the start-up banner."""
    if security.local_mode:
        return (
            "  auth       OFF: local mode (loopback, no keys, no accounts); requests act as "
            f"'anonymous' in project '{local_project}' until a key or an account exists"
        )
    return f"  auth       on ({security.configured_keys} configured keys, plus account keys)"
