"""API keys: mcpd refuses to serve gRPC on a non-loopback address without credentials, so every
container that serves gRPC there is given a keys file (`security.keys_file`), and every keys file
a container is given comes from a documented Secret, mounted read-only, readable by mcpd and by
no other user, with documented content that mcpd's own loader accepts."""

from __future__ import annotations

import tempfile
from collections.abc import Sequence
from pathlib import Path

from cli.role_names import ROLES
from cli.security import is_loopback, listening_addresses
from mcpd.auth.keys_file import load_keys_file
from mcpd.runtime.errors import McpdError
from scripts.deploy_checks.configuration import MountedFile, container_settings, mounted_file
from scripts.deploy_checks.constants import ALL_IN_ONE, EXTERNAL_SECRETS, GRPC_ROLES, KEYS_SECRET
from scripts.deploy_checks.manifests import (
    Manifest,
    all_containers,
    describe,
    main_container,
    pod_spec,
    role_of,
    workloads,
)
from scripts.deploy_checks.paths import relative
from scripts.deploy_checks.raw_files import external_secret

# The mode the kubelet gives Secret files when the volume sets none.
DEFAULT_SECRET_MODE = 0o644


def serves_grpc(workload: Manifest, container: Manifest) -> bool:
    """Whether `container` runs a gRPC server: the main container of a gRPC role's Deployment or
    of the all-in-one one (not the gateway, not `mcpd migrate`, not the init containers)."""
    role = role_of(workload)
    serving = role in GRPC_ROLES or role == ALL_IN_ONE
    return serving and container is main_container(workload)


def check_api_keys(objects: Sequence[Manifest]) -> list[str]:
    """Every container serving gRPC on a non-loopback address names a keys file, and every keys
    file named is mounted from a documented Secret, read-only, readable by mcpd only, and its
    documented content is accepted by mcpd (`mcpd.auth.keys_file.load_keys_file`)."""
    errors: list[str] = []
    for workload in workloads(objects):
        for container in all_containers(workload):
            label = f"{describe(workload)}: container {container.get('name')}"
            # When mcpd refuses the configuration check_mcpd_configuration says why.
            settings, _ = container_settings(workload, container, objects)
            if settings is None:
                continue
            keys_file = settings.security.keys_file
            if serves_grpc(workload, container) and keys_file is None:
                role = role_of(workload)
                roles = list(ROLES) if role == ALL_IN_ONE else [str(role)]
                listening = listening_addresses(settings, roles)
                exposed = [address for address in listening if not is_loopback(address)]
                if exposed:
                    errors.append(
                        f"{label}: serves gRPC, listening on {', '.join(exposed)}, without a "
                        "keys file, which mcpd refuses: set MCPD_SECURITY_KEYS_FILE to a file "
                        f"mounted from the Secret {KEYS_SECRET}"
                    )
            if keys_file is not None:
                problems = _keys_file_problems(workload, container, str(keys_file))
                errors += [f"{label}: keys file {keys_file}: {problem}" for problem in problems]
    return errors


def _keys_file_problems(workload: Manifest, container: Manifest, path: str) -> list[str]:
    mounted = mounted_file(workload, container, path)
    if mounted is None:
        return ["is not mounted (mount the Secret's key as a file at that path)"]
    if mounted.kind != "secret":
        return [f"comes from {mounted.kind} {mounted.name}: keys belong in a Secret"]
    problems = _mount_problems(workload, mounted)
    data = external_secret(mounted.name)
    if data is None:
        return [
            *problems,
            f"Secret {mounted.name} is not one of the documented operator-provided Secrets "
            f"({', '.join(sorted(EXTERNAL_SECRETS))})",
        ]
    if mounted.key not in data:
        return [*problems, f"Secret {mounted.name} has no documented key {mounted.key}"]
    with tempfile.TemporaryDirectory() as scratch:
        example = Path(scratch) / mounted.key
        example.write_text(data[mounted.key], encoding="utf-8")
        try:
            load_keys_file(example)
        except McpdError as exc:
            documented = relative(EXTERNAL_SECRETS[mounted.name])
            problems.append(
                f"mcpd refuses the documented example of Secret {mounted.name} ({documented}): "
                f"{exc.message.replace(str(example), mounted.key)}"
            )
    return problems


def _mount_problems(workload: Manifest, mounted: MountedFile) -> list[str]:
    """Secret files belong to root and to the pod's fsGroup: mcpd (a non-root user) reads them
    through the group, and nobody else should."""
    problems: list[str] = []
    if not mounted.read_only:
        problems.append("mount it readOnly")
    mode = DEFAULT_SECRET_MODE if mounted.mode is None else mounted.mode
    if mode & 0o007:
        problems.append(
            f"mode {mode:04o} lets every user read or change it: use defaultMode 0440 (the owner "
            "and the pod's fsGroup)"
        )
    if not mode & 0o040:
        problems.append(f"mode {mode:04o}: mcpd, not root, reads it through the group (0440)")
    if (pod_spec(workload).get("securityContext") or {}).get("fsGroup") is None:
        problems.append("the pod sets no fsGroup: the file would belong to root only")
    return problems
