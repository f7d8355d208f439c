"""What the manifests must agree on: Kubernetes versions, ports, mcpd's roles, known Secrets.

The roles and the gRPC services they serve come from `cli.roles`, the table `mcpd serve` itself
uses, so the checker and the program cannot drift apart.
"""

from __future__ import annotations

from cli.roles import GRPC_ROLES, ROLES, SERVICE_ROLES
from scripts.deploy_checks.paths import BASE, KUBERNETES

__all__ = [
    "ALL_IN_ONE",
    "APP",
    "CNPG_APP_SECRET_KEYS",
    "EXTERNAL_SECRETS",
    "GRPC_PORT",
    "GRPC_ROLES",
    "HEALTH_PATH",
    "HTTP_PORT",
    "KEYS_SECRET",
    "KUBERNETES_VERSIONS",
    "NAME_LABEL",
    "OTLP_GRPC_PORT",
    "PEER_ADDRESSES",
    "ROLES",
    "ROLE_SERVICES",
    "SERVICE_CREDENTIAL_SECRET",
    "primary_service",
]

# The oldest Kubernetes the manifests support and a recent one; both validated, strictly.
KUBERNETES_VERSIONS = ("1.30.0", "1.35.0")

GRPC_PORT = 50051
HTTP_PORT = 8080
OTLP_GRPC_PORT = 4317
HEALTH_PATH = "/healthz"


def primary_service(role: str) -> str:
    """The gRPC service a role is named for, `mcpd.<role>.v1.<Role>Service`: the one its readiness
    probe names. Raises LookupError when `cli.roles` does not have the role serve it."""
    service = f"mcpd.{role}.v1.{role.capitalize()}Service"
    if SERVICE_ROLES.get(service) != role:
        raise LookupError(f"cli.roles does not have role {role} serve {service}")
    return service


ROLE_SERVICES: dict[str, str] = {role: primary_service(role) for role in GRPC_ROLES}
ALL_IN_ONE = "all-in-one"
PEER_ADDRESSES = {f"MCPD_{role.upper()}_ADDR": f"{role}:{GRPC_PORT}" for role in GRPC_ROLES}

NAME_LABEL = "app.kubernetes.io/name"
APP = "mcpd"

# The Secret holding the API keys mcpd accepts (security.keys_file), key `keys.toml`.
KEYS_SECRET = "mcpd-keys"
# The Secret holding the credential mcpd's services present to each other
# (security.service_credential_file), key `service.credential`.
SERVICE_CREDENTIAL_SECRET = "mcpd-service-credential"

# Secrets the manifests use but never define. The cluster's operator creates them; each one's
# keys are documented by an example file that no kustomization references (raw_files.
# external_secret reads them): an env file (`*.example.env`) lists the keys of a Secret loaded
# as environment; any other example file is the one key of a Secret mounted as a file, named
# without `.example` (`keys.example.toml` documents the key `keys.toml`).
EXTERNAL_SECRETS = {
    "mcpd-storage": BASE / "secret.example.env",
    "mcpd-clickhouse": KUBERNETES / "components" / "clickhouse" / "secret.example.env",
    # Mounted as a file into every container serving gRPC (api_keys.check_api_keys).
    KEYS_SECRET: BASE / "keys.example.toml",
    # Mounted as a file into every container serving gRPC (api_keys.check_service_credential).
    SERVICE_CREDENTIAL_SECRET: BASE / "service.example.credential",
}
# Keys of the `<cluster>-app` Secret that CloudNativePG creates for a Cluster's owner.
CNPG_APP_SECRET_KEYS = frozenset(
    {"username", "password", "host", "port", "dbname", "uri", "jdbc-uri", "pgpass", "fqdn-uri"}
    | {"fqdn-jdbc-uri", "user"}
)
