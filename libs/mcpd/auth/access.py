"""Who may call each RPC, read from the `(mcpd.options.v1.access)` option of its proto.

The rules come from the generated descriptors of every `*_service_pb2` module under `mcpd`, so
a new RPC is protected the day its proto lands: an RPC without an access option, or with one
that grants nothing coherent, stops the process at start-up instead of answering unguarded.

Audit is decided the same way. Fields that carry stored payload (prompts, completions, tool
output, log text) are marked `(mcpd.model.v1.payload)` in the protos; an RPC whose response
reaches a marked field, at any depth, must either audit its allowed calls (`audit_action`) or
say why not (`unaudited_because`), or the process does not start. A `google.api.HttpBody`
response is rendered data the walk cannot see into, so it counts as payload.

The internal service credential is accepted by an RPC only when its option says so: `internal`
(only mcpd's services call it: no client credential, and no REST route) or `service` (a scoped,
public RPC that services also call in the background). Any other combination stops the process
at start-up too.

The OpenTelemetry collector services (OTLP `Export` for traces, logs and metrics) are not mcpd
protos and carry no option; their one rule, scope ingest, is declared here (`OTLP_RULES`).
"""

from __future__ import annotations

import functools
import importlib
import pkgutil
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import TypeAlias

from google.api import annotations_pb2
from google.protobuf.descriptor import Descriptor, MethodDescriptor, ServiceDescriptor
from opentelemetry.proto.collector.logs.v1 import logs_service_pb2
from opentelemetry.proto.collector.metrics.v1 import metrics_service_pb2
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2

import mcpd
from mcpd.model.v1 import enums_pb2, payload_pb2
from mcpd.options.v1 import access_pb2

# The enum's value type, under the spec's name.
KeyScope: TypeAlias = enums_pb2.KeyScope.ValueType

# The spec's lowercase names (keys file, stored keys, error messages) and the enum values.
_SCOPE_NAMES: Mapping[str, KeyScope] = MappingProxyType(
    {
        "ingest": enums_pb2.KEY_SCOPE_INGEST,
        "read": enums_pb2.KEY_SCOPE_READ,
        "write": enums_pb2.KEY_SCOPE_WRITE,
        "admin": enums_pb2.KEY_SCOPE_ADMIN,
        "execute": enums_pb2.KEY_SCOPE_EXECUTE,
        "worker": enums_pb2.KEY_SCOPE_WORKER,
    }
)
ALL_SCOPES: frozenset[KeyScope] = frozenset(_SCOPE_NAMES.values())

# Spec KeyScope: admin is "also accepted where execute or worker is needed" - and nowhere else.
_ADMIN_ALSO_GRANTS = frozenset({enums_pb2.KEY_SCOPE_EXECUTE, enums_pb2.KEY_SCOPE_WORKER})

_SERVICE_MODULE_SUFFIX = "_service_pb2"
_VERSION = re.compile(r"v[0-9]+")
# Responses whose bytes were rendered from stored rows before they left the service.
_OPAQUE_MESSAGES = frozenset({"google.api.HttpBody"})


@dataclass(frozen=True, slots=True)
class AccessRule:
    """The access option of one RPC.

    `method` is the proto full name (`mcpd.query.v1.QueryService.GetTrace`). Exactly one of
    `open`, `session`, a `scope` or `internal` says who may call; `service` lets the service
    credential call a scoped method too; `audit_action` is non-empty when allowed calls are
    audited too (refused calls always are); `unaudited_because` is the declared reason a method
    whose response carries payload is not.
    """

    method: str
    scope: KeyScope
    open: bool = False
    session: bool = False
    audit_action: str = ""
    unaudited_because: str = ""
    internal: bool = False
    service: bool = False

    @property
    def accepts_service(self) -> bool:
        """Whether the internal service credential may call the method."""
        return self.internal or self.service

    @property
    def endpoint_id(self) -> str:
        """The action audit rows record: `audit_action`, else the RPC name in snake_case."""
        return self.audit_action or snake_case(self.method.rpartition(".")[2])

    @property
    def reads_only(self) -> bool:
        """Whether the method only reads: a read key may call it."""
        return self.scope == enums_pb2.KEY_SCOPE_READ

    @property
    def audited(self) -> bool:
        """Whether allowed calls write an audit row."""
        return bool(self.audit_action)


def parse_scope(name: str) -> KeyScope:
    """The KeyScope for its spec name (`read`, `admin`...); ValueError for any other text."""
    try:
        return _SCOPE_NAMES[name]
    except KeyError:
        raise ValueError(f"unknown key scope {name!r}") from None


def scope_name(scope: KeyScope) -> str:
    """The spec name of a KeyScope value (`KEY_SCOPE_READ` -> `read`)."""
    return enums_pb2.KeyScope.Name(scope).removeprefix("KEY_SCOPE_").lower()


def scope_satisfies(granted: KeyScope, needed: KeyScope) -> bool:
    """Whether a key of scope `granted` may call an RPC that needs `needed`."""
    if needed not in ALL_SCOPES:
        return False  # an unspecified need grants nothing: fail closed
    return granted == needed or (
        granted == enums_pb2.KEY_SCOPE_ADMIN and needed in _ADMIN_ALSO_GRANTS
    )


def snake_case(name: str) -> str:
    """`GetTrace` -> `get_trace`, the spec's endpoint-id spelling of an RPC name."""
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])", "_", name).lower()


def method_path(method: MethodDescriptor) -> str:
    """The gRPC path of a method, `/mcpd.query.v1.QueryService/GetTrace`."""
    return f"/{method.containing_service.full_name}/{method.name}"


def build_rules(services: Iterable[ServiceDescriptor]) -> dict[str, AccessRule]:
    """The rule of every method of `services`, keyed by gRPC path.

    Raises ValueError naming the method when one has no access option or an incoherent one.
    """
    rules: dict[str, AccessRule] = {}
    for service in services:
        for method in service.methods:
            rules[method_path(method)] = _rule(method)
    return rules


def _otlp_rules() -> dict[str, AccessRule]:
    """OTLP Export of traces, logs and metrics: scope ingest, allowed calls not audited.

    Read from the opentelemetry-proto descriptors so a renamed service cannot leave a path
    unguarded.
    """
    services = (
        trace_service_pb2.DESCRIPTOR.services_by_name["TraceService"],
        logs_service_pb2.DESCRIPTOR.services_by_name["LogsService"],
        metrics_service_pb2.DESCRIPTOR.services_by_name["MetricsService"],
    )
    return {
        method_path(method): AccessRule(method=method.full_name, scope=enums_pb2.KEY_SCOPE_INGEST)
        for service in services
        for method in service.methods
    }


OTLP_RULES: Mapping[str, AccessRule] = MappingProxyType(_otlp_rules())


@functools.cache
def access_rules() -> Mapping[str, AccessRule]:
    """The rules of every RPC of every mcpd service and of OTLP Export, keyed by gRPC path
    (read-only, cached)."""
    return MappingProxyType({**build_rules(_mcpd_services()), **OTLP_RULES})


def _rule(method: MethodDescriptor) -> AccessRule:
    options = method.GetOptions()
    if not options.HasExtension(access_pb2.access):
        raise ValueError(f"{method.full_name} declares no (mcpd.options.v1.access) option")
    access = options.Extensions[access_pb2.access]
    has_scope = access.scope != enums_pb2.KEY_SCOPE_UNSPECIFIED
    if access.scope != enums_pb2.KEY_SCOPE_UNSPECIFIED and access.scope not in ALL_SCOPES:
        raise ValueError(f"{method.full_name} declares an unknown scope {access.scope}")
    if sum((access.open, access.session, has_scope, access.internal)) != 1:
        raise ValueError(
            f"{method.full_name}: the access option must set exactly one of open, session, "
            "scope, internal"
        )
    _check_service_access(method, access, has_scope)
    _check_audit_decision(method, access)
    return AccessRule(
        method=method.full_name,
        scope=access.scope,
        open=access.open,
        session=access.session,
        audit_action=access.audit_action,
        unaudited_because=access.unaudited_because,
        internal=access.internal,
        service=access.service,
    )


def _check_service_access(
    method: MethodDescriptor, access: access_pb2.Access, has_scope: bool
) -> None:
    """ValueError unless the service credential reaches the method only as declared: an
    internal method has no REST route, and `service` widens a scope, nothing else."""
    name = method.full_name
    if access.internal and method.GetOptions().HasExtension(annotations_pb2.http):
        raise ValueError(f"{name} is internal, so it cannot have a google.api.http route")
    if access.service and not has_scope:
        raise ValueError(f"{name}: service admits the service credential beside a scope; set one")


def _check_audit_decision(method: MethodDescriptor, access: access_pb2.Access) -> None:
    """ValueError unless a method returning payload decides about audit, and coherently."""
    name = method.full_name
    if access.audit_action and access.unaudited_because:
        raise ValueError(f"{name}: the access option sets both audit_action and unaudited_because")
    if access.open and access.audit_action:
        # The interceptor lets open methods through untouched: the row would never be written.
        raise ValueError(f"{name}: an open method cannot be audited")
    payload = payload_path(method.output_type)
    if payload is None:
        if access.unaudited_because:
            # A stale exemption would hide the day the response stops carrying payload.
            raise ValueError(f"{name} returns no stored payload, so unaudited_because excuses none")
        return
    if not access.audit_action and not access.unaudited_because:
        raise ValueError(
            f"{name} returns stored payload ({payload}): its access option must set audit_action "
            "or unaudited_because"
        )


def payload_path(message: Descriptor) -> str | None:
    """Where `message` first reaches stored payload, as `<message>.<field>.<field>...`
    (`mcpd.model.v1.DeltaResponse.spans.input`); None when it never does."""
    path = _payload_fields(message, set())
    if path is None:
        return None
    return ".".join([message.full_name, *path])


def _payload_fields(message: Descriptor, seen: set[str]) -> list[str] | None:
    """The field names from `message` down to a payload field, depth first; None when there is
    none. `seen` holds the messages already reached, each walked once: they recur (Value holds
    Struct holds Value), and one walk from the root still reaches everything reachable."""
    if message.full_name in _OPAQUE_MESSAGES:
        return []
    seen.add(message.full_name)
    for field in message.fields:
        if field.GetOptions().Extensions[payload_pb2.payload]:
            return [field.name]
        nested = field.message_type  # maps arrive here too, as their entry message
        if nested is None or nested.full_name in seen:
            continue
        below = _payload_fields(nested, seen)
        if below is not None:
            return [field.name, *below]
    return None


def _mcpd_services() -> list[ServiceDescriptor]:
    """Every service of every generated `mcpd.<package>.v1.*_service_pb2` module.

    Walks the directories rather than importing every `mcpd` package: importing `mcpd.storage`
    just to look for protos would pull in database drivers.
    """
    services: list[ServiceDescriptor] = []
    for root in mcpd.__path__:
        for package in sorted(pkgutil.iter_modules([root]), key=lambda m: m.name):
            versions = Path(root, package.name)
            for version in sorted(pkgutil.iter_modules([str(versions)]), key=lambda m: m.name):
                if not version.ispkg or not _VERSION.fullmatch(version.name):
                    continue
                directory = str(versions / version.name)
                for module in sorted(pkgutil.iter_modules([directory]), key=lambda m: m.name):
                    if module.name.endswith(_SERVICE_MODULE_SUFFIX):
                        name = f"mcpd.{package.name}.{version.name}.{module.name}"
                        generated = importlib.import_module(name)
                        services.extend(generated.DESCRIPTOR.services_by_name.values())
    return services
