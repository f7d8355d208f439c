"""The public surface of mcpd.auth, pinned: changing it is a decision, not an accident."""

from __future__ import annotations

import mcpd.auth

EXPECTED = [
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


def test_all_is_pinned() -> None:
    assert mcpd.auth.__all__ == EXPECTED


def test_every_exported_name_resolves_to_an_auth_module() -> None:
    for name in mcpd.auth.__all__:
        value = getattr(mcpd.auth, name)
        if isinstance(value, (str, frozenset)):
            continue  # constants carry no module
        assert value.__module__.startswith("mcpd.auth."), name


def test_unknown_names_are_attribute_errors() -> None:
    assert not hasattr(mcpd.auth, "not_a_name")
