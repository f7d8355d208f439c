"""Every reference between rendered objects resolves, including the Services and Secrets the
operators create and the URLs mcpd is given for them."""

from __future__ import annotations

from collections.abc import Sequence
from urllib.parse import urlsplit

from scripts.deploy_checks.configuration import container_environment
from scripts.deploy_checks.constants import EXTERNAL_SECRETS
from scripts.deploy_checks.manifests import (
    Manifest,
    all_containers,
    by_name,
    container_ports,
    describe,
    pod_labels,
    pod_spec,
    selects,
    workloads,
)
from scripts.deploy_checks.raw_files import external_secret


def check_references(objects: Sequence[Manifest]) -> list[str]:
    """ConfigMap and Secret volumes, claims, Service target ports, PodDisruptionBudgets,
    autoscalers, and the operator-made Services and Secrets mcpd connects to, all resolve."""
    errors: list[str] = []
    configmaps = by_name(objects, "ConfigMap")
    secrets = by_name(objects, "Secret")
    claims = by_name(objects, "PersistentVolumeClaim")
    deployments = by_name(objects, "Deployment")
    all_workloads = [o for o in objects if o.get("kind") in {"Deployment", "Job"}]
    for workload in all_workloads:
        for volume in pod_spec(workload).get("volumes") or []:
            if "configMap" in volume and volume["configMap"]["name"] not in configmaps:
                errors.append(
                    f"{describe(workload)}: ConfigMap {volume['configMap']['name']} is not rendered"
                )
            if "secret" in volume and volume["secret"].get("secretName") not in secrets:
                errors += _external_secret_volume(workload, volume["secret"])
            claim = (volume.get("persistentVolumeClaim") or {}).get("claimName")
            if claim and claim not in claims:
                errors.append(
                    f"{describe(workload)}: PersistentVolumeClaim {claim} is not rendered"
                )
    for service in by_name(objects, "Service").values():
        selector = service["spec"].get("selector") or {}
        selected = [w for w in deployments.values() if selects(selector, pod_labels(w))]
        if not selected:
            errors.append(f"{describe(service)}: selects no Deployment's pods")
        for port in service["spec"].get("ports") or []:
            target = port.get("targetPort", port["port"])
            for workload in selected:
                if target not in container_ports(workload):
                    errors.append(f"{describe(service)}: {describe(workload)} has no port {target}")
    for budget in by_name(objects, "PodDisruptionBudget").values():
        selector = (budget["spec"].get("selector") or {}).get("matchLabels") or {}
        if not any(selects(selector, pod_labels(w)) for w in deployments.values()):
            errors.append(f"{describe(budget)}: selects no Deployment's pods")
    for scaler in by_name(objects, "HorizontalPodAutoscaler").values():
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


def _external_secret_volume(workload: Manifest, source: Manifest) -> list[str]:
    """A Secret volume of a Secret the target does not render: one of the operator-provided
    Secrets, and only keys its example file documents."""
    name = str(source.get("secretName"))
    documented = external_secret(name)
    if documented is None:
        return [
            f"{describe(workload)}: volume Secret {name} is neither rendered nor one of the "
            f"documented operator-provided Secrets ({', '.join(sorted(EXTERNAL_SECRETS))})"
        ]
    return [
        f"{describe(workload)}: volume Secret {name} has no documented key {item['key']}"
        for item in source.get("items") or []
        if item["key"] not in documented
    ]


def _operator_references(objects: Sequence[Manifest]) -> list[str]:
    errors: list[str] = []
    installations = by_name(objects, "ClickHouseInstallation")
    keepers = by_name(objects, "ClickHouseKeeperInstallation")
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
                keys = external_secret(ref["name"])
                if keys is None or ref["key"] not in keys:
                    errors.append(f"{label}: user setting {key} reads an undocumented Secret key")
    # The URLs mcpd is given must name what the operators create.
    clusters = by_name(objects, "Cluster")
    for workload in workloads(objects):
        for container in all_containers(workload):
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
