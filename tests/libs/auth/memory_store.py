"""In-memory stand-ins for the control-store methods authentication uses, and audit sinks.

The edge of the unit: the SQL control store is tested against real databases elsewhere. These
keep only what `Authenticator` and `StoreAuditSink` call, with the same semantics.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from datetime import datetime, timedelta

from mcpd.auth.tokens import digest, key_prefix, new_api_key, new_session_token
from mcpd.model.v1 import account_pb2
from mcpd.storage.records import StoredKey, StoredSession


class MemoryControlStore:
    """find_key, find_session, has_credentials and append_audit over dicts.

    Counts calls so tests can check what authentication asked the store.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.keys: dict[str, StoredKey] = {}
        self.sessions: dict[str, StoredSession] = {}
        self.accounts: set[str] = set()
        self.audit: list[account_pb2.AuditEvent] = []
        self.has_credentials_calls = 0
        self.fail_audit = False

    # Helpers that play the account service's part.

    def add_key(self, *, project: str, scope: str, now: datetime, key_id: str = "k1") -> str:
        """Store a key for `project` with `scope`; return its secret."""
        secret = new_api_key()
        self.keys[digest(secret)] = StoredKey(
            id=key_id,
            project=project,
            account_email="alice@example.com",
            scope=scope,
            name=None,
            prefix=key_prefix(secret),
            digest=digest(secret),
            created_at=now,
        )
        return secret

    def revoke(self, secret: str, now: datetime) -> None:
        key = self.keys[digest(secret)]
        self.keys[key.digest] = StoredKey(
            id=key.id,
            project=key.project,
            account_email=key.account_email,
            scope=key.scope,
            name=key.name,
            prefix=key.prefix,
            digest=key.digest,
            created_at=key.created_at,
            revoked_at=now,
        )

    def add_session(self, *, email: str, project: str, now: datetime, ttl: timedelta) -> str:
        """Store a session expiring `ttl` after `now`; return its token."""
        token = new_session_token()
        self.accounts.add(email)
        self.sessions[digest(token)] = StoredSession(
            token_digest=digest(token),
            email=email,
            project=project,
            created_at=now,
            expires_at=now + ttl,
        )
        return token

    # The ControlStore methods.

    def find_key(self, digest: str) -> StoredKey | None:
        return self.keys.get(digest)

    def find_session(self, token_digest: str) -> StoredSession | None:
        return self.sessions.get(token_digest)

    def has_credentials(self) -> bool:
        self.has_credentials_calls += 1
        return bool(self.accounts) or any(k.revoked_at is None for k in self.keys.values())

    def append_audit(self, events: Sequence[account_pb2.AuditEvent]) -> None:
        if self.fail_audit:
            raise OSError("disk full")
        with self._lock:
            self.audit.extend(events)
