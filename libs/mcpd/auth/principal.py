"""Who is calling: the principal that authentication establishes for one request."""

from __future__ import annotations

import contextvars
import enum
from dataclasses import dataclass

from mcpd.model.v1 import enums_pb2

ANONYMOUS = "anonymous"


class PrincipalKind(enum.Enum):
    """How the caller proved who it is."""

    # Local mode: loopback, no keys and no accounts exist, so nobody is asked.
    ANONYMOUS = "anonymous"
    # An API key: one an account created, or one the operator declared in the keys file.
    KEY = "key"
    # An account session token: every scope, on the account's own project only.
    SESSION = "session"
    # The internal service credential: one mcpd service calling another. No scope; the RPCs
    # whose access rule accepts services, on whichever project the call names.
    SERVICE = "service"


@dataclass(frozen=True, slots=True)
class Principal:
    """The caller of one request.

    `audit_id` is what the audit log records: a short hex digest of the presented key or token,
    never the secret, `anonymous`, or `service:<name>` for a calling service. `projects` are the
    projects the caller reaches (a service reaches every one, and names it); a request that
    names no project gets the only one when there is exactly one.
    """

    kind: PrincipalKind
    audit_id: str
    scopes: frozenset[enums_pb2.KeyScope.ValueType]
    projects: frozenset[str]
    account_email: str | None = None
    key_id: str | None = None

    @property
    def is_operator(self) -> bool:
        """Whether the caller runs the deployment: a key declared in the keys file (no account
        made it), or anyone in local mode."""
        if self.kind is PrincipalKind.ANONYMOUS:
            return True
        return self.kind is PrincipalKind.KEY and self.key_id is None


_CURRENT: contextvars.ContextVar[Principal | None] = contextvars.ContextVar(
    "mcpd_principal", default=None
)


def current_principal() -> Principal:
    """The principal of the request being handled. Only valid inside an authorized handler."""
    principal = _CURRENT.get()
    if principal is None:
        raise LookupError("no principal: the handler did not run behind the auth interceptor")
    return principal


def bind_principal(principal: Principal) -> contextvars.Token[Principal | None]:
    """Make `principal` current for the running task; reset with `unbind_principal(token)`."""
    return _CURRENT.set(principal)


def unbind_principal(token: contextvars.Token[Principal | None]) -> None:
    """Undo `bind_principal`."""
    _CURRENT.reset(token)
