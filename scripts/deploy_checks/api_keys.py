"""API keys and the service credential.

mcpd refuses to serve gRPC on a non-loopback address without credentials, so every container that
serves gRPC there is given a keys file (`security.keys_file`). Every container that serves gRPC is
given the service credential (`security.service_credential_file`), the one its services present
to each other, from one Secret, so calls between pods are accepted; no other container gets it.
Each of these files comes from a documented Secret, mounted read-only, readable by mcpd and by no
other user, with documented content that mcpd's own loader accepts."""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path

from cli.role_names import ROLES
from cli.security import is_loopback, listening_addresses
from mcpd.auth.keys_file import load_keys_file
from mcpd.auth.service_identity import load_or_create_service_credential
from mcpd.runtime.errors import McpdError
from scripts.deploy_checks.configuration import MountedFile, container_settings, mounted_file
from scripts.deploy_checks.constants import (
    ALL_IN_ONE,
    EXTERNAL_SECRETS,
    GRPC_ROLES,
    KEYS_SECRET,
    SERVICE_CREDENTIAL_SECRET,
)
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
                problems = _secret_file_problems(
                    workload, container, str(keys_file), load_keys_file
                )
                errors += [f"{label}: keys file {keys_file}: {problem}" for problem in problems]
    return errors


def check_service_credential(objects: Sequence[Manifest]) -> list[str]:
    """Every container serving gRPC names a service credential file, mounted from a documented
    Secret (as keys are: read-only, readable by mcpd only, its documented content accepted by
    `mcpd.auth.service_identity.load_or_create_service_credential`); no other container does."""
    errors: list[str] = []
    for workload in workloads(objects):
        for container in all_containers(workload):
            label = f"{describe(workload)}: container {container.get('name')}"
            settings, _ = container_settings(workload, container, objects)
            if settings is None:
                continue
            path = settings.security.service_credential_file
            serving = serves_grpc(workload, container)
            if serving and path is None:
                errors.append(
                    f"{label}: serves gRPC without a service credential file, so calls from the "
                    "other roles' pods are refused: set MCPD_SECURITY_SERVICE_CREDENTIAL_FILE to "
                    f"a file mounted from the Secret {SERVICE_CREDENTIAL_SECRET}"
                )
            elif not serving and path is not None:
                errors.append(
                    f"{label}: serves no gRPC, so it needs no service credential: remove "
                    "MCPD_SECURITY_SERVICE_CREDENTIAL_FILE and its mount"
                )
            elif path is not None:
                problems = _secret_file_problems(
                    workload, container, str(path), load_or_create_service_credential
                )
                errors += [f"{label}: service credential {path}: {p}" for p in problems]
    return errors


def _secret_file_problems(
    workload: Manifest, container: Manifest, path: str, load: Callable[[Path], object]
) -> list[str]:
    """What is wrong with the file at `path` of `container`: not mounted from a documented
    Secret, mounted loosely, or documented with content `load` (mcpd's loader) refuses."""
    mounted = mounted_file(workload, container, path)
    if mounted is None:
        return ["is not mounted (mount the Secret's key as a file at that path)"]
    if mounted.kind != "secret":
        return [f"comes from {mounted.kind} {mounted.name}: secrets belong in a Secret"]
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
        example.chmod(0o600)  # as private as the mounted file: no loader warns about it
        try:
            load(example)
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
