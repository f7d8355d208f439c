"""The configuration each mcpd container receives, resolved the way the kubelet does, and
checked with mcpd's own loader (`mcpd.runtime.config.load_settings`)."""

from __future__ import annotations

import re
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from scripts.deploy_checks.constants import CNPG_APP_SECRET_KEYS, ROLES
from scripts.deploy_checks.manifests import (
    Manifest,
    all_containers,
    by_name,
    deployments_by_role,
    describe,
    pod_spec,
    workloads,
)
from scripts.deploy_checks.raw_files import external_secret

if TYPE_CHECKING:
    from mcpd.runtime.config import Settings


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
        documented = external_secret(name)
        if documented is not None:
            return documented
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


@dataclass(frozen=True)
class MountedFile:
    """Where a file in a container comes from: one key of a ConfigMap or Secret volume."""

    kind: str  # "configMap" or "secret"
    name: str  # the ConfigMap's or the Secret's name
    key: str
    read_only: bool
    mode: int | None  # the file's mode when the volume sets one (items[].mode, defaultMode)


def mounted_file(workload: Manifest, container: Manifest, path: str) -> MountedFile | None:
    """The ConfigMap or Secret key that provides the file `path` in `container`, if any. The
    deepest mount containing `path` provides it, as in the kubelet; `items` and `subPath` are
    followed."""
    volumes = {v["name"]: v for v in pod_spec(workload).get("volumes") or []}
    mounts = sorted(
        container.get("volumeMounts") or [],
        key=lambda m: len(str(m["mountPath"]).rstrip("/")),
        reverse=True,
    )
    for mount in mounts:
        directory = str(mount["mountPath"]).rstrip("/")
        if path == directory and mount.get("subPath"):
            inside = str(mount["subPath"])
        elif path.startswith(directory + "/"):
            inside = path[len(directory) + 1 :]
            if mount.get("subPath"):
                inside = f"{str(mount['subPath']).rstrip('/')}/{inside}"
        else:
            continue
        volume = volumes.get(mount["name"]) or {}
        if "configMap" in volume:
            kind, source, name = "configMap", volume["configMap"], volume["configMap"].get("name")
        elif "secret" in volume:
            kind, source, name = "secret", volume["secret"], volume["secret"].get("secretName")
        else:
            return None
        mode = source.get("defaultMode")
        items = source.get("items")
        if items:
            item = next((i for i in items if str(i.get("path")) == inside), None)
            if item is None:
                return None
            key = str(item["key"])
            mode = item.get("mode", mode)
        else:
            key = inside
        return MountedFile(kind, str(name), key, mount.get("readOnly") is True, mode)
    return None


def _config_map_file(
    workload: Manifest, container: Manifest, path: str, objects: Sequence[Manifest]
) -> str | None:
    """The content of `path` in `container` when a ConfigMap volume provides it."""
    mounted = mounted_file(workload, container, path)
    if mounted is None or mounted.kind != "configMap":
        return None
    data = (by_name(objects, "ConfigMap").get(mounted.name) or {}).get("data") or {}
    content = data.get(mounted.key)
    return content if isinstance(content, str) else None


def container_settings(
    workload: Manifest, container: Manifest, objects: Sequence[Manifest]
) -> tuple[Settings | None, list[str]]:
    """What mcpd's own loader makes of a container's environment and mounted mcpd.toml: the
    settings (None when mcpd refuses them) and the problems found on the way."""
    try:
        from mcpd.runtime import config as mcpd_config
        from mcpd.runtime.errors import McpdError
    except ImportError as exc:
        return None, [f"cannot import mcpd's configuration loader (mcpd.runtime.config): {exc}"]
    known = {mcpd_config.env_var(key) for key in mcpd_config.KEYS} | {mcpd_config.CONFIG_ENV}
    resolved = container_environment(container, objects)
    problems = list(resolved.problems)
    env = dict(resolved.values)
    for name in sorted(env):
        if name.startswith(mcpd_config.ENV_PREFIX) and name not in known:
            problems.append(f"{name} is not an mcpd setting")
    config_path = env.get(mcpd_config.CONFIG_ENV)
    if not config_path:
        return None, [*problems, f"{mcpd_config.CONFIG_ENV} is not set"]
    content = _config_map_file(workload, container, config_path, objects)
    if content is None:
        return None, [*problems, f"{config_path} is not mounted from a ConfigMap"]
    with tempfile.TemporaryDirectory() as scratch:
        toml = Path(scratch) / "mcpd.toml"
        toml.write_text(content, encoding="utf-8")
        env[mcpd_config.CONFIG_ENV] = str(toml)
        env["HOME"] = scratch
        try:
            return mcpd_config.load_settings(env=env), problems
        except McpdError as exc:
            return None, [*problems, f"mcpd refuses its configuration: {exc.message}"]


def check_mcpd_configuration(objects: Sequence[Manifest]) -> list[str]:
    """The configuration every mcpd container gets (env + mounted mcpd.toml) is accepted by mcpd's
    own loader, names only settings mcpd knows, and uses storage the topology can share."""
    errors: list[str] = []
    role_per_deployment = any(role in ROLES for role in deployments_by_role(objects))
    for workload in workloads(objects):
        for container in all_containers(workload):
            label = f"{describe(workload)}: container {container.get('name')}"
            settings, problems = container_settings(workload, container, objects)
            errors += [f"{label}: {problem}" for problem in problems]
            if settings is None:
                continue
            backend = str(settings.storage.backend)
            if role_per_deployment and backend == "sqlite":
                errors.append(f"{label}: SQLite cannot be shared by the role Deployments")
            if backend in {"postgres", "clickhouse"} and not settings.storage.postgres_url:
                errors.append(f"{label}: storage {backend} needs MCPD_STORAGE_POSTGRES_URL")
            if backend == "clickhouse" and not settings.storage.clickhouse_url:
                errors.append(f"{label}: storage clickhouse needs MCPD_STORAGE_CLICKHOUSE_URL")
    return errors
