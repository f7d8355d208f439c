"""Authentication and authorization: keys, sessions, passwords, scopes, projects, audit.

The names below are the public surface (pinned by `tests/libs/auth/test_exports.py`). The gRPC
enforcement point is `AuthInterceptor`; everything it decides is also available as plain
functions (`authorize`, `resolve_project`) for the other entrances.

Names resolve lazily (PEP 562), so `mcpd.auth.tokens` can be used without loading grpc or argon2.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from mcpd.auth.access import (
        ALL_SCOPES,
        AccessRule,
        access_rules,
        build_rules,
        parse_scope,
        scope_name,
        scope_satisfies,
    )
    from mcpd.auth.audit import AggregatingAuditSink, AuditSink, StoreAuditSink
    from mcpd.auth.authenticator import Authenticator, CredentialStore
    from mcpd.auth.interceptor import AuthInterceptor
    from mcpd.auth.keys_file import ConfiguredKey, load_keys_file
    from mcpd.auth.metadata import bearer_token, client_address, service_credential
    from mcpd.auth.passwords import (
        hash_password,
        needs_rehash,
        normalize_email,
        validate_password,
        verify_nothing,
        verify_password,
    )
    from mcpd.auth.policy import authorize, resolve_project
    from mcpd.auth.principal import (
        ANONYMOUS,
        Principal,
        PrincipalKind,
        bind_principal,
        current_principal,
        unbind_principal,
    )
    from mcpd.auth.service_identity import ServiceCredential, load_or_create_service_credential
    from mcpd.auth.throttle import LoginThrottle
    from mcpd.auth.tokens import (
        audit_id,
        digest,
        digests_equal,
        key_prefix,
        new_api_key,
        new_service_credential,
        new_session_token,
    )

# Which module defines each public name.
_MODULES = {
    "ALL_SCOPES": "mcpd.auth.access",
    "ANONYMOUS": "mcpd.auth.principal",
    "AccessRule": "mcpd.auth.access",
    "AggregatingAuditSink": "mcpd.auth.audit",
    "AuditSink": "mcpd.auth.audit",
    "AuthInterceptor": "mcpd.auth.interceptor",
    "Authenticator": "mcpd.auth.authenticator",
    "ConfiguredKey": "mcpd.auth.keys_file",
    "CredentialStore": "mcpd.auth.authenticator",
    "LoginThrottle": "mcpd.auth.throttle",
    "Principal": "mcpd.auth.principal",
    "PrincipalKind": "mcpd.auth.principal",
    "ServiceCredential": "mcpd.auth.service_identity",
    "StoreAuditSink": "mcpd.auth.audit",
    "access_rules": "mcpd.auth.access",
    "audit_id": "mcpd.auth.tokens",
    "authorize": "mcpd.auth.policy",
    "bearer_token": "mcpd.auth.metadata",
    "bind_principal": "mcpd.auth.principal",
    "build_rules": "mcpd.auth.access",
    "client_address": "mcpd.auth.metadata",
    "current_principal": "mcpd.auth.principal",
    "digest": "mcpd.auth.tokens",
    "digests_equal": "mcpd.auth.tokens",
    "hash_password": "mcpd.auth.passwords",
    "key_prefix": "mcpd.auth.tokens",
    "load_keys_file": "mcpd.auth.keys_file",
    "load_or_create_service_credential": "mcpd.auth.service_identity",
    "needs_rehash": "mcpd.auth.passwords",
    "new_api_key": "mcpd.auth.tokens",
    "new_service_credential": "mcpd.auth.tokens",
    "new_session_token": "mcpd.auth.tokens",
    "normalize_email": "mcpd.auth.passwords",
    "parse_scope": "mcpd.auth.access",
    "resolve_project": "mcpd.auth.policy",
    "scope_name": "mcpd.auth.access",
    "scope_satisfies": "mcpd.auth.access",
    "service_credential": "mcpd.auth.metadata",
    "unbind_principal": "mcpd.auth.principal",
    "validate_password": "mcpd.auth.passwords",
    "verify_nothing": "mcpd.auth.passwords",
    "verify_password": "mcpd.auth.passwords",
}

__all__ = [
    "ALL_SCOPES",
    "ANONYMOUS",
    "AccessRule",
    "AggregatingAuditSink",
    "AuditSink",
    "AuthInterceptor",
    "Authenticator",
    "ConfiguredKey",
    "CredentialStore",
    "LoginThrottle",
    "Principal",
    "PrincipalKind",
    "ServiceCredential",
    "StoreAuditSink",
    "access_rules",
    "audit_id",
    "authorize",
    "bearer_token",
    "bind_principal",
    "build_rules",
    "client_address",
    "current_principal",
    "digest",
    "digests_equal",
    "hash_password",
    "key_prefix",
    "load_keys_file",
    "load_or_create_service_credential",
    "needs_rehash",
    "new_api_key",
    "new_service_credential",
    "new_session_token",
    "normalize_email",
    "parse_scope",
    "resolve_project",
    "scope_name",
    "scope_satisfies",
    "service_credential",
    "unbind_principal",
    "validate_password",
    "verify_nothing",
    "verify_password",
]

if not TYPE_CHECKING:  # hidden from type checkers, which would otherwise accept any name

    def __getattr__(name: str) -> object:
        module = _MODULES.get(name)
        if module is None:
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        globals()[name] = value  # cache: __getattr__ runs once per name
        return value

    def __dir__() -> list[str]:
        return sorted({*globals(), *__all__})
