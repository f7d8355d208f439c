"""Reading rendered objects: mcpd's workloads, their pods, containers, ports and roles."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from scripts.deploy_checks.constants import ALL_IN_ONE, APP, NAME_LABEL

Manifest = dict[str, Any]


def describe(obj: Mapping[str, Any]) -> str:
    metadata = obj.get("metadata") or {}
    return f"{obj.get('kind', '?')}/{metadata.get('name', '?')}"


def by_name(objects: Sequence[Manifest], kind: str) -> dict[str, Manifest]:
    return {o["metadata"]["name"]: o for o in objects if o.get("kind") == kind}


def is_mcpd(obj: Manifest) -> bool:
    return bool((obj.get("metadata") or {}).get("labels", {}).get(NAME_LABEL) == APP)


def workloads(objects: Sequence[Manifest]) -> list[Manifest]:
    """mcpd's Deployments and Jobs."""
    return [o for o in objects if o.get("kind") in {"Deployment", "Job"} and is_mcpd(o)]


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


def selects(selector: Mapping[str, str], labels: Mapping[str, str]) -> bool:
    return bool(selector) and all(labels.get(k) == v for k, v in selector.items())


def pod_labels(workload: Manifest) -> dict[str, str]:
    labels: dict[str, str] = workload["spec"]["template"].get("metadata", {}).get("labels", {})
    return labels


def container_ports(workload: Manifest) -> dict[str | int, int]:
    """Container ports of a pod by name and by number."""
    ports: dict[str | int, int] = {}
    for container in pod_spec(workload)["containers"]:
        for port in container.get("ports") or []:
            number = int(port["containerPort"])
            ports[number] = number
            if port.get("name"):
                ports[str(port["name"])] = number
    return ports


def all_containers(workload: Manifest) -> list[Manifest]:
    spec = pod_spec(workload)
    return [*(spec.get("initContainers") or []), *spec["containers"]]
