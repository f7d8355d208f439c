"""What an authenticated principal may do: the scope rule and the project selector rule.

Both are pure functions of the principal, so the gRPC interceptor and anything else that needs
the same answer (a handler of a request without a `project` field, the MCP server) agree.
"""

from __future__ import annotations

from mcpd.auth.access import AccessRule, scope_name, scope_satisfies
from mcpd.auth.principal import Principal, PrincipalKind
from mcpd.runtime.errors import InvalidArgument, PermissionDenied, Unauthenticated, quoted


def authorize(principal: Principal, rule: AccessRule) -> None:
    """Let `principal` call the RPC of `rule`, or raise.

    - open RPCs: anyone.
    - session RPCs (the account's own endpoints): only a session token. A key gets
      PermissionDenied (SESSION_REQUIRED). The anonymous local principal gets Unauthenticated
      (SESSION_REQUIRED): it has no account, and the cure is to log in, not another key.
    - a calling service (the service credential): only RPCs whose rule accepts services
      (`internal` or `service`); any other gets PermissionDenied (SERVICE_NOT_ACCEPTED).
    - internal RPCs: nobody else, not even the anonymous local principal: PermissionDenied
      (INTERNAL_RPC).
    - every other RPC: a principal holding a scope that satisfies the rule's (admin also
      satisfies execute and worker); otherwise PermissionDenied (SCOPE_REQUIRED, metadata
      `scope` = the spec name of the scope needed). The anonymous local principal holds every
      scope.
    """
    if rule.open:
        return
    if principal.kind is PrincipalKind.SERVICE:
        if rule.accepts_service:
            return
        raise PermissionDenied(
            "the service credential is accepted only by the methods mcpd's services call on "
            "each other",
            reason="SERVICE_NOT_ACCEPTED",
        )
    if rule.internal:
        raise PermissionDenied(
            "this method is internal: only mcpd's own services call it", reason="INTERNAL_RPC"
        )
    if rule.session:
        if principal.kind is PrincipalKind.SESSION:
            return
        if principal.kind is PrincipalKind.ANONYMOUS:
            raise Unauthenticated(
                "this method needs an account session: log in first", reason="SESSION_REQUIRED"
            )
        raise PermissionDenied(
            "this method needs an account session token, not an API key",
            reason="SESSION_REQUIRED",
        )
    if any(scope_satisfies(granted, rule.scope) for granted in principal.scopes):
        return
    needed = scope_name(rule.scope)
    raise PermissionDenied(
        f"this method needs a key with the {needed} scope",
        reason="SCOPE_REQUIRED",
        metadata={"scope": needed},
    )


def resolve_project(principal: Principal, requested: str) -> str:
    """The project a request acts on, by the spec's selector rule.

    Empty `requested`: the principal's project when it reaches exactly one, else
    InvalidArgument (field `project`, PROJECT_REQUIRED). A project the principal does not
    reach: PermissionDenied (field `project`, PROJECT_NOT_GRANTED). Otherwise `requested`.
    A calling service reaches every project, so it always names one.
    """
    if principal.kind is PrincipalKind.SERVICE:
        if requested:
            return requested
        raise InvalidArgument(
            "a service's call names the project it acts on",
            field="project",
            reason="PROJECT_REQUIRED",
        )
    if not requested:
        if len(principal.projects) == 1:
            (only,) = principal.projects
            return only
        raise InvalidArgument(
            "this key reaches several projects: name one in the request",
            field="project",
            reason="PROJECT_REQUIRED",
        )
    if requested not in principal.projects:
        raise PermissionDenied(
            f"this key does not grant access to project {quoted(requested)}",
            field="project",
            reason="PROJECT_NOT_GRANTED",
        )
    return requested
