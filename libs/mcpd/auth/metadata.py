"""What the auth layer reads from gRPC request metadata: the bearer token, the service
credential and the client address.

The gateway forwards REST requests to the gRPC services with the same `authorization` header and
with `x-forwarded-for` set to the REST client's address, so both entrances are read here alike.
It never forwards `x-mcpd-service-credential`, which only mcpd's services present to each other.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Sequence
from typing import Any, TypeAlias

import grpc.aio

from mcpd.runtime.errors import Unauthenticated

# Request metadata as grpc hands it over: (key, value) pairs, values str or bytes (-bin keys).
Metadata: TypeAlias = Sequence[tuple[str, str | bytes]]
# A string: grpc.aio.ServicerContext is generic only in its type stubs, not at runtime.
_Context: TypeAlias = "grpc.aio.ServicerContext[Any, Any]"

AUTHORIZATION = "authorization"
FORWARDED_FOR = "x-forwarded-for"
ACCESS_CHECK = "x-mcpd-check-access"
"""Metadata asking only whether the call's credential would be admitted (see `interceptor`)."""
SERVICE_CREDENTIAL = "x-mcpd-service-credential"
"""Metadata of a call one mcpd service makes on another: `<service>:<credential>`."""
# A calling service's name: a role name, what the audit log records after `service:`.
_SERVICE_NAME = re.compile(r"[a-z][a-z0-9-]{0,31}")


def is_access_check(metadata: Metadata) -> bool:
    """Whether the call asks only for an access check (`x-mcpd-check-access` is present)."""
    return any(key.lower() == ACCESS_CHECK for key, _ in metadata)


def bearer_token(metadata: Metadata) -> str | None:
    """The token of the `authorization` metadata, None when there is none.

    Raises Unauthenticated (MALFORMED_AUTHORIZATION) unless it is exactly one
    `Bearer <token>` (scheme case-insensitive): guessing at anything else could let a
    credential meant for another system be tried here.
    """
    values = [value for key, value in metadata if key.lower() == AUTHORIZATION]
    if not values:
        return None
    parts = values[0].split(None, 1) if isinstance(values[0], str) else []
    if len(values) > 1 or len(parts) != 2 or parts[0].casefold() != "bearer":
        raise _malformed()
    token = parts[1].strip()
    if any(char.isspace() for char in token):
        raise _malformed()
    return token


def service_credential(metadata: Metadata) -> tuple[str, str] | None:
    """The (service name, credential) of the `x-mcpd-service-credential` metadata, None when
    there is none.

    Raises Unauthenticated (MALFORMED_SERVICE_CREDENTIAL) unless it is exactly one
    `<service>:<credential>` with a lowercase service name.
    """
    values = [value for key, value in metadata if key.lower() == SERVICE_CREDENTIAL]
    if not values:
        return None
    name, _, secret = values[0].partition(":") if isinstance(values[0], str) else ("", "", "")
    if len(values) > 1 or not _SERVICE_NAME.fullmatch(name) or not secret:
        raise Unauthenticated(
            f"the {SERVICE_CREDENTIAL} metadata must be '<service>:<credential>'",
            reason="MALFORMED_SERVICE_CREDENTIAL",
        )
    return name, secret


def _malformed() -> Unauthenticated:
    return Unauthenticated(
        "the authorization metadata must be 'Bearer <token>'", reason="MALFORMED_AUTHORIZATION"
    )


def client_address(context: _Context, *, trust_forwarded_for: bool = True) -> str:
    """The caller's address, for the login throttle: the first `x-forwarded-for` entry when
    present and trusted, else the peer's IP (without the port, which changes per connection).

    Trust assumption: the gRPC port is reachable only through mcpd's gateway or a proxy that
    overwrites `x-forwarded-for`. A client that reaches the port directly can set the header to
    anything, which defeats the per-address counter (the per-account one still holds); pass
    `trust_forwarded_for=False` where the port is exposed directly.
    """
    if trust_forwarded_for:
        forwarded = forwarded_address(tuple(context.invocation_metadata() or ()))
        if forwarded:
            return forwarded
    return _peer_host(context.peer())


def forwarded_address(metadata: Metadata) -> str:
    """The first `x-forwarded-for` entry of the metadata, "" when there is none: the client
    address the gateway states for a request it forwards (see `client_address` for the trust
    this needs)."""
    for key, value in metadata:
        if key.lower() == FORWARDED_FOR and isinstance(value, str):
            first = value.split(",", 1)[0].strip()
            if first:
                return first
    return ""


def _peer_host(peer: str) -> str:
    # grpc peers read "ipv4:10.0.0.1:52114", "ipv6:[::1]:52114" or "unix:/path".
    kind, _, rest = peer.partition(":")
    if kind == "ipv6" and rest.startswith("["):
        return rest[1:].partition("]")[0]
    if kind == "ipv4":
        return rest.rpartition(":")[0] or rest
    return peer


def is_loopback_host(host: str) -> bool:
    """Whether `host` (an IP address, bracketed or not, or `localhost`) is a loopback one."""
    host = host.strip("[]")
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
