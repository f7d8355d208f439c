"""mcpd's rules for its pods: hardening, probes, topology, Secrets, peer addresses, namespace."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from scripts.deploy_checks.configuration import container_environment
from scripts.deploy_checks.constants import (
    ALL_IN_ONE,
    GRPC_PORT,
    GRPC_ROLES,
    HEALTH_PATH,
    HTTP_PORT,
    OTLP_GRPC_PORT,
    PEER_ADDRESSES,
    ROLE_SERVICES,
    ROLES,
)
from scripts.deploy_checks.manifests import (
    Manifest,
    all_containers,
    by_name,
    container_ports,
    deployments_by_role,
    describe,
    main_container,
    pod_labels,
    pod_spec,
    selects,
    workloads,
)


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
        for container in all_containers(workload):
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
            ports = container_ports(workload)
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
    services = by_name(objects, "Service")
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
        if not selects(service["spec"].get("selector") or {}, pod_labels(workload)):
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
