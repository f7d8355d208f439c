"""Who is calling: a bearer token (or its absence) becomes a Principal, or Unauthenticated.

A token is tried as an operator-configured key, then as a key an account created, then as an
account session token. The internal service credential (`service_credential`) is checked apart,
by `authenticate_service`: it is presented in its own metadata and becomes the calling service.
Only digests are compared; no secret is ever stored or logged.

Without a token the answer depends on local mode: while no configured key, no account and no
unrevoked key exist, the caller is the anonymous principal of the local project; once any exists,
every request needs credentials. The switch is one way within a process: after credentials have
been seen, revoking them all does not reopen the daemon (restart it for that, on purpose). Local
mode serves loopback callers only: a gateway states the address of the client it relays, and a
client from any other address needs credentials, whatever addresses the gateway listens on.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol

from mcpd.auth.access import ALL_SCOPES, parse_scope
from mcpd.auth.keys_file import ConfiguredKey
from mcpd.auth.metadata import is_loopback_host
from mcpd.auth.principal import ANONYMOUS, Principal, PrincipalKind
from mcpd.auth.service_identity import SERVICE_PRINCIPAL_PREFIX
from mcpd.auth.tokens import audit_id, digest, digests_equal
from mcpd.runtime.clock import Clock
from mcpd.runtime.errors import Internal, Unauthenticated

if TYPE_CHECKING:
    # Annotations only: importing mcpd.storage at run time would load every database driver.
    from mcpd.storage.records import StoredKey, StoredSession


class CredentialStore(Protocol):
    """What authentication reads from the control store (blocking calls, run in a thread)."""

    def find_key(self, digest: str) -> StoredKey | None:
        """The key with this secret digest, revoked or not."""
        ...

    def find_session(self, token_digest: str) -> StoredSession | None:
        """The session with this token digest, expired or not."""
        ...

    def has_credentials(self) -> bool:
        """Whether any account or unrevoked key exists."""
        ...


class Authenticator:
    """Turns the bearer token of a request into its Principal.

    `configured` are the keys of the operator's keys file; `local_project` is the project of the
    anonymous principal in local mode. `allow_local_mode=False` (a process listening beyond
    loopback) never lets a request without credentials in, whatever the store holds.
    `service_digest` is the SHA-256 digest of the deployment's service credential; None accepts
    no service credential at all.
    """

    def __init__(
        self,
        store: CredentialStore,
        configured: Sequence[ConfiguredKey],
        *,
        clock: Clock,
        local_project: str,
        allow_local_mode: bool = True,
        service_digest: str | None = None,
    ) -> None:
        self._store = store
        self._service_digest = service_digest
        self._configured = tuple(configured)
        self._clock = clock
        self._anonymous = Principal(
            kind=PrincipalKind.ANONYMOUS,
            audit_id=ANONYMOUS,
            scopes=ALL_SCOPES,
            projects=frozenset({local_project}),
        )
        # Configured keys end local mode for good; stored credentials do once seen.
        self._credentials_seen = bool(self._configured)
        self._allow_local_mode = allow_local_mode

    async def local_mode(self) -> bool:
        """Whether requests without credentials are let in (no keys or accounts exist yet).

        While it is true the store is asked on every call: the first sign-up or key must close
        the daemon at once, on every replica, without a restart.
        """
        if self._credentials_seen or not self._allow_local_mode:
            return False
        if await asyncio.to_thread(self._store.has_credentials):
            self._credentials_seen = True
            return False
        return True

    async def authenticate(self, token: str | None, *, source: str = "") -> Principal:
        """The principal for `token` (None or empty: no credentials presented) of a caller at
        `source` (the client address a gateway stated; empty for a direct caller, whom the
        loopback-only listening rule already confines).

        Raises Unauthenticated with reason CREDENTIALS_REQUIRED, UNKNOWN_CREDENTIALS,
        KEY_REVOKED or SESSION_EXPIRED.
        """
        if not token:
            if (not source or is_loopback_host(source)) and await self.local_mode():
                return self._anonymous
            raise Unauthenticated(
                "credentials required: send 'authorization: Bearer <key>'",
                reason="CREDENTIALS_REQUIRED",
            )
        # A token that is presented is checked even in local mode: accepting an unknown key
        # would hide a misconfigured client until the day keys are turned on.
        token_digest = digest(token)
        principal = self._configured_key(token, token_digest)
        if principal is not None:
            return principal
        stored = await asyncio.to_thread(self._store.find_key, token_digest)
        if stored is not None:
            return _key_principal(token, stored)
        session = await asyncio.to_thread(self._store.find_session, token_digest)
        if session is not None:
            return self._session_principal(token, session)
        raise Unauthenticated("unknown credentials", reason="UNKNOWN_CREDENTIALS")

    def authenticate_service(self, service: str, credential: str) -> Principal:
        """The principal of service `service` presenting `credential` (both from the
        `x-mcpd-service-credential` metadata); Unauthenticated (UNKNOWN_CREDENTIALS) unless it
        is this deployment's service credential."""
        known = self._service_digest is not None and digests_equal(
            digest(credential), self._service_digest
        )
        if not known:
            raise Unauthenticated("unknown service credential", reason="UNKNOWN_CREDENTIALS")
        return Principal(
            kind=PrincipalKind.SERVICE,
            audit_id=SERVICE_PRINCIPAL_PREFIX + service,
            scopes=frozenset(),
            projects=frozenset(),
        )

    def _configured_key(self, token: str, token_digest: str) -> Principal | None:
        match: ConfiguredKey | None = None
        # Every key is compared, without stopping at the first match, so how long this takes
        # says nothing about where in the file a key sits.
        for key in self._configured:
            if digests_equal(key.digest, token_digest):
                match = key
        if match is None:
            return None
        return Principal(
            kind=PrincipalKind.KEY,
            audit_id=audit_id(token),
            scopes=frozenset({match.scope}),
            projects=match.projects,
        )

    def _session_principal(self, token: str, session: StoredSession) -> Principal:
        if session.expires_at <= self._clock.now():
            raise Unauthenticated("the session has expired: log in again", reason="SESSION_EXPIRED")
        return Principal(
            kind=PrincipalKind.SESSION,
            audit_id=audit_id(token),
            # Spec AccountSession: every scope, on the account's own project and nothing else.
            scopes=ALL_SCOPES,
            projects=frozenset({session.project}),
            account_email=session.email,
        )


def _key_principal(token: str, key: StoredKey) -> Principal:
    if key.revoked_at is not None:
        raise Unauthenticated("the key has been revoked", reason="KEY_REVOKED")
    try:
        scope = parse_scope(key.scope)
    except ValueError:
        # A row this build cannot read must not grant anything; it is a bug or a downgrade.
        raise Internal(f"stored key {key.id} has an unknown scope") from None
    return Principal(
        kind=PrincipalKind.KEY,
        audit_id=audit_id(token),
        scopes=frozenset({scope}),
        projects=frozenset({key.project}),
        account_email=key.account_email,
        key_id=key.id,
    )
