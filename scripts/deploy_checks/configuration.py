"""The configuration each mcpd container receives, resolved the way the kubelet does, and
checked with mcpd's own loader (`mcpd.runtime.config.load_settings`)."""

from __future__ import annotations

import re
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from scripts.deploy_checks.constants import CNPG_APP_SECRET_KEYS, EXTERNAL_SECRETS, ROLES
from scripts.deploy_checks.manifests import (
    Manifest,
    all_containers,
    by_name,
    deployments_by_role,
    describe,
    pod_spec,
    workloads,
)
from scripts.deploy_checks.raw_files import read_env_file


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
    configmaps = by_name(objects, "ConfigMap")
    clusters = by_name(objects, "Cluster")
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
    configmaps = by_name(objects, "ConfigMap")
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
        for container in all_containers(workload):
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
