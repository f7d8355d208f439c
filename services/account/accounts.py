"""Accounts: sign-up, login, sessions and the account's API keys.

Secrets are shown once and never stored: session tokens and key secrets are kept as SHA-256
digests, passwords as argon2id hashes. Every operation here is on the caller's own account; the
auth interceptor has already established who that is.
"""

from __future__ import annotations

import asyncio
import re
import secrets
from datetime import timedelta

from mcpd.auth import passwords, tokens
from mcpd.auth.principal import Principal
from mcpd.auth.throttle import LoginThrottle
from mcpd.model.v1 import account_pb2, enums_pb2
from mcpd.runtime.clock import Clock, to_timestamp
from mcpd.runtime.errors import InvalidArgument, PermissionDenied, Unauthenticated
from mcpd.runtime.ids import new_id
from mcpd.storage.interfaces import AccountRecords
from mcpd.storage.records import StoredAccount, StoredKey, StoredSession

MAX_KEY_NAME = 100
_SLUG = re.compile(r"[^a-z0-9]+")


class Accounts:
    """The account operations. Store calls block, so they run in worker threads."""

    def __init__(
        self,
        store: AccountRecords,
        clock: Clock,
        throttle: LoginThrottle,
        *,
        signup_enabled: bool,
        session_ttl: timedelta,
    ) -> None:
        self._store = store
        self._clock = clock
        self._throttle = throttle
        self._signup_enabled = signup_enabled
        self._session_ttl = session_ttl

    async def signup(self, email: str, password: str) -> account_pb2.AccountSession:
        """Create an account with a project of its own, and open a session."""
        if not self._signup_enabled:
            raise PermissionDenied(
                "sign-up is turned off on this daemon (security.signup)", reason="SIGNUP_DISABLED"
            )
        email = passwords.normalize_email(email)
        passwords.validate_password(password)
        password_hash = await asyncio.to_thread(passwords.hash_password, password)
        account = StoredAccount(
            email=email,
            project=_project_id(email),
            password_hash=password_hash,
            created_at=self._clock.now(),
        )
        await asyncio.to_thread(self._store.create_account, account, email)
        return await self._open_session(account)

    async def login(self, email: str, password: str, address: str) -> account_pb2.AccountSession:
        """Open a session; refused alike for an unknown email and a wrong password."""
        email = passwords.normalize_email(email)
        self._throttle.check(email, address)
        account = await asyncio.to_thread(self._store.find_account, email)
        if account is None:
            # Same answer, in about the same time, as a wrong password: timing must not tell
            # which emails have accounts.
            await asyncio.to_thread(passwords.verify_nothing, password)
            matches = False
        else:
            matches = await asyncio.to_thread(
                passwords.verify_password, account.password_hash, password
            )
        if account is None or not matches:
            self._throttle.record_failure(email, address)
            raise Unauthenticated("email or password is wrong", reason="BAD_CREDENTIALS")
        self._throttle.record_success(email, address)
        return await self._open_session(account)

    async def get_account(self, principal: Principal) -> account_pb2.Account:
        """The caller's account."""
        account = await self._account_of(principal)
        return account_pb2.Account(
            email=account.email,
            project=account.project,
            created_at=to_timestamp(account.created_at),
        )

    async def list_keys(self, principal: Principal) -> list[account_pb2.AccountKey]:
        """The caller's unrevoked keys, newest first."""
        account = await self._account_of(principal)
        keys = await asyncio.to_thread(self._store.list_keys, account.email)
        return [_account_key(key) for key in keys]

    async def create_key(
        self, principal: Principal, request: account_pb2.CreateAccountKeyRequest
    ) -> account_pb2.CreatedAccountKey:
        """A new key on the caller's project; its secret is in the answer and nowhere else."""
        if request.scope == enums_pb2.KEY_SCOPE_UNSPECIFIED:
            raise InvalidArgument("scope is required", field="scope")
        if request.HasField("name") and len(request.name) > MAX_KEY_NAME:
            raise InvalidArgument(f"name is longer than {MAX_KEY_NAME} characters", field="name")
        account = await self._account_of(principal)
        secret = tokens.new_api_key()
        key = StoredKey(
            id=new_id(),
            project=account.project,
            account_email=account.email,
            scope=enums_pb2.KeyScope.Name(request.scope).removeprefix("KEY_SCOPE_").lower(),
            name=request.name if request.HasField("name") else None,
            prefix=tokens.key_prefix(secret),
            digest=tokens.digest(secret),
            created_at=self._clock.now(),
        )
        await asyncio.to_thread(self._store.create_key, key)
        return account_pb2.CreatedAccountKey(key=_account_key(key), secret=secret)

    async def revoke_key(self, principal: Principal, key_id: str) -> account_pb2.AccountKey:
        """Revoke one of the caller's keys; it stops working at once."""
        account = await self._account_of(principal)
        key = await asyncio.to_thread(
            self._store.revoke_key, account.email, key_id, self._clock.now()
        )
        return _account_key(key)

    async def _open_session(self, account: StoredAccount) -> account_pb2.AccountSession:
        token = tokens.new_session_token()
        now = self._clock.now()
        session = StoredSession(
            token_digest=tokens.digest(token),
            email=account.email,
            project=account.project,
            created_at=now,
            expires_at=now + self._session_ttl,
        )
        await asyncio.to_thread(self._store.create_session, session)
        return account_pb2.AccountSession(
            token=token,
            expires_at=to_timestamp(session.expires_at),
            email=account.email,
            project=account.project,
        )

    async def _account_of(self, principal: Principal) -> StoredAccount:
        if principal.account_email is None:
            raise Unauthenticated("an account session is required", reason="SESSION_REQUIRED")
        account = await asyncio.to_thread(self._store.find_account, principal.account_email)
        if account is None:
            raise Unauthenticated("the session's account no longer exists", reason="NO_ACCOUNT")
        return account


def _project_id(email: str) -> str:
    """A readable, unique project id: the email's local part and a random suffix."""
    local = _SLUG.sub("-", email.partition("@")[0]).strip("-")[:24] or "account"
    return f"{local}-{secrets.token_hex(3)}"


def _account_key(key: StoredKey) -> account_pb2.AccountKey:
    answer = account_pb2.AccountKey(
        id=key.id,
        scope=enums_pb2.KeyScope.Value(f"KEY_SCOPE_{key.scope.upper()}"),
        prefix=key.prefix,
        created_at=to_timestamp(key.created_at),
    )
    if key.name is not None:
        answer.name = key.name
    return answer
