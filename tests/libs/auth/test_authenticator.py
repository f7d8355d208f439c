"""Authenticator: local mode, configured keys, stored keys, sessions."""

from __future__ import annotations

from datetime import timedelta

import pytest

from mcpd.auth.access import ALL_SCOPES
from mcpd.auth.authenticator import Authenticator
from mcpd.auth.keys_file import ConfiguredKey
from mcpd.auth.principal import Principal, PrincipalKind
from mcpd.auth.tokens import audit_id, digest, new_api_key
from mcpd.model.v1 import enums_pb2
from mcpd.runtime.clock import ManualClock
from mcpd.runtime.errors import Internal, Unauthenticated
from tests.libs.auth.memory_store import MemoryControlStore

OPERATOR_SECRET = "operator-declared-secret-1"
OPERATOR_KEY = ConfiguredKey(
    name="ops",
    scope=enums_pb2.KEY_SCOPE_ADMIN,
    projects=frozenset({"a", "b"}),
    digest=digest(OPERATOR_SECRET),
)


def _authenticator(
    store: MemoryControlStore, clock: ManualClock, configured: tuple[ConfiguredKey, ...] = ()
) -> Authenticator:
    return Authenticator(store, configured, clock=clock, local_project="default")


async def _refusal(authenticator: Authenticator, token: str | None) -> str:
    with pytest.raises(Unauthenticated) as caught:
        await authenticator.authenticate(token)
    return caught.value.reason


async def test_local_mode_lets_requests_without_credentials_in_as_anonymous() -> None:
    authenticator = _authenticator(MemoryControlStore(), ManualClock())
    assert await authenticator.local_mode()
    for token in (None, ""):
        assert await authenticator.authenticate(token) == Principal(
            kind=PrincipalKind.ANONYMOUS,
            audit_id="anonymous",
            scopes=ALL_SCOPES,
            projects=frozenset({"default"}),
        )


@pytest.mark.parametrize("source", ["127.0.0.1", "::1", "[::1]", "localhost", ""])
async def test_local_mode_serves_loopback_callers(source: str) -> None:
    authenticator = _authenticator(MemoryControlStore(), ManualClock())
    principal = await authenticator.authenticate(None, source=source)
    assert principal.kind is PrincipalKind.ANONYMOUS


@pytest.mark.parametrize("source", ["203.0.113.7", "10.0.0.2", "2001:db8::1", "not-an-address"])
async def test_local_mode_never_serves_a_caller_a_gateway_relays_from_elsewhere(
    source: str,
) -> None:
    # A gateway exposed on the network in front of loopback services in local mode.
    authenticator = _authenticator(MemoryControlStore(), ManualClock())
    with pytest.raises(Unauthenticated) as caught:
        await authenticator.authenticate(None, source=source)
    assert caught.value.reason == "CREDENTIALS_REQUIRED"


async def test_an_unknown_token_is_refused_even_in_local_mode() -> None:
    authenticator = _authenticator(MemoryControlStore(), ManualClock())
    assert await _refusal(authenticator, new_api_key()) == "UNKNOWN_CREDENTIALS"


async def test_local_mode_ends_for_good_once_a_key_exists() -> None:
    store, clock = MemoryControlStore(), ManualClock()
    authenticator = _authenticator(store, clock)
    assert await authenticator.local_mode()
    assert await authenticator.local_mode()
    assert store.has_credentials_calls == 2  # re-checked on every request while local
    secret = store.add_key(project="p", scope="read", now=clock.now())
    assert await _refusal(authenticator, None) == "CREDENTIALS_REQUIRED"
    # Revoking every key does not reopen the daemon, and the store is no longer asked.
    store.revoke(secret, clock.now())
    calls = store.has_credentials_calls
    assert await _refusal(authenticator, None) == "CREDENTIALS_REQUIRED"
    assert not await authenticator.local_mode()
    assert store.has_credentials_calls == calls


async def test_local_mode_can_be_forbidden() -> None:
    store = MemoryControlStore()
    authenticator = Authenticator(
        store, (), clock=ManualClock(), local_project="default", allow_local_mode=False
    )
    assert not await authenticator.local_mode()
    assert await _refusal(authenticator, None) == "CREDENTIALS_REQUIRED"


async def test_configured_keys_end_local_mode() -> None:
    store = MemoryControlStore()
    authenticator = _authenticator(store, ManualClock(), (OPERATOR_KEY,))
    assert not await authenticator.local_mode()
    assert await _refusal(authenticator, None) == "CREDENTIALS_REQUIRED"
    assert store.has_credentials_calls == 0


async def test_configured_key() -> None:
    other = ConfiguredKey("x", enums_pb2.KEY_SCOPE_READ, frozenset({"c"}), digest("another-1"))
    authenticator = _authenticator(MemoryControlStore(), ManualClock(), (other, OPERATOR_KEY))
    assert await authenticator.authenticate(OPERATOR_SECRET) == Principal(
        kind=PrincipalKind.KEY,
        audit_id=audit_id(OPERATOR_SECRET),
        scopes=frozenset({enums_pb2.KEY_SCOPE_ADMIN}),
        projects=frozenset({"a", "b"}),
    )


async def test_stored_key() -> None:
    store, clock = MemoryControlStore(), ManualClock()
    secret = store.add_key(project="p", scope="write", now=clock.now(), key_id="k7")
    principal = await _authenticator(store, clock).authenticate(secret)
    assert principal == Principal(
        kind=PrincipalKind.KEY,
        audit_id=audit_id(secret),
        scopes=frozenset({enums_pb2.KEY_SCOPE_WRITE}),
        projects=frozenset({"p"}),
        account_email="alice@example.com",
        key_id="k7",
    )
    assert principal.audit_id not in secret


async def test_revoked_key() -> None:
    store, clock = MemoryControlStore(), ManualClock()
    secret = store.add_key(project="p", scope="read", now=clock.now())
    store.revoke(secret, clock.now())
    assert await _refusal(_authenticator(store, clock), secret) == "KEY_REVOKED"


async def test_a_stored_key_with_an_unknown_scope_grants_nothing() -> None:
    store, clock = MemoryControlStore(), ManualClock()
    secret = store.add_key(project="p", scope="superuser", now=clock.now())
    with pytest.raises(Internal):
        await _authenticator(store, clock).authenticate(secret)


async def test_session_until_it_expires() -> None:
    store, clock = MemoryControlStore(), ManualClock()
    token = store.add_session(
        email="bob@example.com", project="bobs", now=clock.now(), ttl=timedelta(hours=1)
    )
    authenticator = _authenticator(store, clock)
    assert await authenticator.authenticate(token) == Principal(
        kind=PrincipalKind.SESSION,
        audit_id=audit_id(token),
        scopes=ALL_SCOPES,
        projects=frozenset({"bobs"}),
        account_email="bob@example.com",
    )
    clock.advance(timedelta(minutes=59, seconds=59))
    assert (await authenticator.authenticate(token)).kind is PrincipalKind.SESSION
    clock.advance(1)
    assert await _refusal(authenticator, token) == "SESSION_EXPIRED"


async def test_unknown_token() -> None:
    store, clock = MemoryControlStore(), ManualClock()
    store.add_key(project="p", scope="read", now=clock.now())
    authenticator = _authenticator(store, clock, (OPERATOR_KEY,))
    assert await _refusal(authenticator, new_api_key()) == "UNKNOWN_CREDENTIALS"
    assert await _refusal(authenticator, OPERATOR_SECRET + "x") == "UNKNOWN_CREDENTIALS"
