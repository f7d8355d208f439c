"""Check mcpd's deployment files without a cluster: render every Kustomize target, validate it.

What passing proves:

- every YAML file under deploy/kubernetes parses, and no Secret value is committed (no Secret
  with data, no secretGenerator, the `secret.example.env` files referenced by no kustomization);
- Kustomize (real kustomize, through `kubectl kustomize`) renders base/ and every overlay;
- every rendered object is valid against the Kubernetes JSON schemas of kubernetes-validate,
  strictly (unknown fields are errors), for each pinned Kubernetes version. The operators' custom
  resources, which kubernetes-validate has no schema for (CloudNativePG `Cluster`, Altinity
  `ClickHouseInstallation` and `ClickHouseKeeperInstallation`), are validated against the
  reduced schemas of crd_schemas.py, written from the CRDs' documented fields, and the pod,
  volume claim and service templates they embed against the Kubernetes schemas;
- mcpd's own rules: hardened pods, native gRPC probes on 50051 naming each role's service, every
  reference resolving (ConfigMaps, Secrets, volumes, Services, PodDisruptionBudgets, autoscalers,
  operator-made Services and Secrets), `$(VAR)` expansion order, migrations ordered before the
  roles, and the configuration each container receives accepted by mcpd's own loader
  (`mcpd.runtime.config.load_settings`);
- API keys: every container serving gRPC on a non-loopback address (the gRPC roles, the
  all-in-one pod) names a keys file (`security.keys_file`), which mcpd requires there; every keys
  file named is mounted read-only from the operator-provided Secret mcpd-keys (or another
  documented one), readable by mcpd's group only, and its documented example
  (base/keys.example.toml) is accepted by mcpd's own `load_keys_file`;
- the service credential: every container serving gRPC, and no other, names a service credential
  file (`security.service_credential_file`) mounted the same way from the operator-provided Secret
  mcpd-service-credential, whose documented example (base/service.example.credential) mcpd's
  own loader accepts;
- deploy/Dockerfile agrees with its ignore file and with pyproject.toml.

Run it with `python -m scripts.deploy_checks` (or `make deploy-check`). Exit status 0 when
everything passes, 1 on any failure, 2 when no renderer is found.

The modules:

- paths, constants: where the files are; versions, ports, roles (from cli.roles), known Secrets;
- rendering: finding kustomize (or kubectl) and rendering each target;
- raw_files: the YAML as committed, before Kustomize;
- crd_schemas, schemas: JSON schema validation, Kubernetes' and the operators' resources';
- manifests: reading rendered objects (workloads, pod specs, roles, ports);
- rules, references, configuration, api_keys: mcpd's own rules;
- dockerfile: the image build;
- report: the checks of a target, the summary table, the command line.
"""

from __future__ import annotations

from scripts.deploy_checks.api_keys import (
    check_api_keys,
    check_service_credential,
    serves_grpc,
)
from scripts.deploy_checks.configuration import (
    Environment,
    MountedFile,
    check_mcpd_configuration,
    container_environment,
    container_settings,
    mounted_file,
)
from scripts.deploy_checks.constants import (
    ALL_IN_ONE,
    EXTERNAL_SECRETS,
    GRPC_PORT,
    GRPC_ROLES,
    HTTP_PORT,
    KEYS_SECRET,
    KUBERNETES_VERSIONS,
    OTLP_GRPC_PORT,
    PEER_ADDRESSES,
    ROLE_SERVICES,
    ROLES,
    SERVICE_CREDENTIAL_SECRET,
    primary_service,
)
from scripts.deploy_checks.crd_schemas import (
    CUSTOM_RESOURCE_SCHEMAS,
)
from scripts.deploy_checks.dockerfile import (
    check_dockerfile,
    check_dockerfile_text,
    dockerfile_instructions,
    wheel_source_roots,
)
from scripts.deploy_checks.manifests import (
    Manifest,
    deployments_by_role,
    describe,
    main_container,
    pod_spec,
    role_of,
    workloads,
)
from scripts.deploy_checks.paths import (
    DOCKERFILE,
    DOCKERIGNORE,
    KUBERNETES,
    PYPROJECT,
    ROOT,
    relative,
)
from scripts.deploy_checks.raw_files import (
    check_raw_files,
    example_secret_data,
    external_secret,
    read_env_file,
)
from scripts.deploy_checks.references import (
    check_references,
)
from scripts.deploy_checks.rendering import (
    INSTALL_COMMAND,
    MIN_KUSTOMIZE,
    RENDERER_ENV,
    RENDERER_REQUIREMENT,
    Renderer,
    RendererMissingError,
    RenderError,
    find_renderer,
    render,
    targets,
    version_tuple,
)
from scripts.deploy_checks.report import (
    Result,
    check_objects,
    check_target,
    format_table,
    main,
    run_checks,
)
from scripts.deploy_checks.rules import (
    check_hardening,
    check_namespace,
    check_peer_addresses,
    check_probes,
    check_secrets,
    check_topology,
)
from scripts.deploy_checks.schemas import (
    custom_resource_note,
    validate_schemas,
)

__all__ = [
    "ALL_IN_ONE",
    "CUSTOM_RESOURCE_SCHEMAS",
    "DOCKERFILE",
    "DOCKERIGNORE",
    "EXTERNAL_SECRETS",
    "GRPC_PORT",
    "GRPC_ROLES",
    "HTTP_PORT",
    "INSTALL_COMMAND",
    "KEYS_SECRET",
    "KUBERNETES",
    "KUBERNETES_VERSIONS",
    "MIN_KUSTOMIZE",
    "OTLP_GRPC_PORT",
    "PEER_ADDRESSES",
    "PYPROJECT",
    "RENDERER_ENV",
    "RENDERER_REQUIREMENT",
    "ROLES",
    "ROLE_SERVICES",
    "ROOT",
    "SERVICE_CREDENTIAL_SECRET",
    "Environment",
    "Manifest",
    "MountedFile",
    "RenderError",
    "Renderer",
    "RendererMissingError",
    "Result",
    "check_api_keys",
    "check_dockerfile",
    "check_dockerfile_text",
    "check_hardening",
    "check_mcpd_configuration",
    "check_namespace",
    "check_objects",
    "check_peer_addresses",
    "check_probes",
    "check_raw_files",
    "check_references",
    "check_secrets",
    "check_service_credential",
    "check_target",
    "check_topology",
    "container_environment",
    "container_settings",
    "custom_resource_note",
    "deployments_by_role",
    "describe",
    "dockerfile_instructions",
    "example_secret_data",
    "external_secret",
    "find_renderer",
    "format_table",
    "main",
    "main_container",
    "mounted_file",
    "pod_spec",
    "primary_service",
    "read_env_file",
    "relative",
    "render",
    "role_of",
    "run_checks",
    "serves_grpc",
    "targets",
    "validate_schemas",
    "version_tuple",
    "wheel_source_roots",
    "workloads",
]
