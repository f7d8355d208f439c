"""docs/security.md lists the audit decision of every RPC that makes one, and every RPC the
service credential reaches, as declared."""

from __future__ import annotations

from pathlib import Path

from google.protobuf.descriptor import MethodDescriptor

from mcpd.auth.access import access_rules, method_path, scope_name
from tests.contract.api_surface import http_rule, methods

SECURITY_DOC = Path(__file__).parents[2] / "docs" / "security.md"


def _short(method: MethodDescriptor) -> str:
    return f"`{method.containing_service.name}.{method.name}`"


def _route(method: MethodDescriptor) -> str:
    rule = http_rule(method)
    if rule is None:
        return "gRPC only"
    verb = rule.WhichOneof("pattern")
    assert verb is not None
    return f"`{verb.upper()} {getattr(rule, verb)}`"


def audited_table() -> str:
    """The table of RPCs whose allowed calls are audited, by action then RPC."""
    rows = sorted(
        (rule.audit_action, _short(method), _route(method))
        for method in methods()
        if (rule := access_rules()[method_path(method)]).audit_action
    )
    lines = ["| Action | RPC | REST |", "|---|---|---|"]
    lines += [f"| `{action}` | {rpc} | {route} |" for action, rpc, route in rows]
    return "\n".join(lines)


def exempt_table() -> str:
    """The table of RPCs that return payload and declare why allowed calls are not audited."""
    rows = sorted(
        (_short(method), rule.unaudited_because)
        for method in methods()
        if (rule := access_rules()[method_path(method)]).unaudited_because
    )
    lines = ["| RPC | Not audited because |", "|---|---|"]
    lines += [f"| {rpc} | {why} |" for rpc, why in rows]
    return "\n".join(lines)


def service_table() -> str:
    """The table of RPCs that accept the internal service credential, and who else may call."""
    rows = sorted(
        (
            _short(method),
            "nobody" if rule.internal else f"keys of scope `{scope_name(rule.scope)}`",
            _route(method),
        )
        for method in methods()
        if (rule := access_rules()[method_path(method)]).accepts_service
    )
    lines = ["| RPC | Besides services | REST |", "|---|---|---|"]
    lines += [f"| {rpc} | {others} | {route} |" for rpc, others, route in rows]
    return "\n".join(lines)


def test_the_audited_rpcs_are_listed_as_declared() -> None:
    assert audited_table() in SECURITY_DOC.read_text(), (
        "docs/security.md is out of date; its table of audited RPCs is:\n" + audited_table()
    )


def test_the_exempt_rpcs_are_listed_with_their_reasons() -> None:
    assert exempt_table() in SECURITY_DOC.read_text(), (
        "docs/security.md is out of date; its table of exempt RPCs is:\n" + exempt_table()
    )


def test_the_rpcs_the_service_credential_reaches_are_listed() -> None:
    assert service_table() in SECURITY_DOC.read_text(), (
        "docs/security.md is out of date; its table of RPCs the service credential reaches is:\n"
        + service_table()
    )
