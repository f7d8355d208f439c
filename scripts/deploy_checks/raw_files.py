"""The YAML files as committed, before Kustomize: they parse, and commit no Secret value."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml

from scripts.deploy_checks.constants import EXTERNAL_SECRETS
from scripts.deploy_checks.manifests import Manifest
from scripts.deploy_checks.paths import KUBERNETES, relative


def check_raw_files(root: Path = KUBERNETES) -> tuple[int, list[str]]:
    """Every YAML file under `root` parses into Kubernetes-shaped mappings; no Secret value is
    committed; the example files (`*.example.env`, `keys.example.toml`) are referenced by no
    kustomization. Returns (files, errors)."""
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
    for example in sorted(p for p in root.rglob("*.example.*") if p.is_file()):
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


def example_secret_data(example: Path) -> dict[str, str]:
    """The keys of a Secret as its example file documents them: the KEY=VALUE lines of an env
    file (a Secret loaded as environment), else the file itself as the one key named without
    `.example` (`keys.example.toml` is the key `keys.toml` of a Secret mounted as a file)."""
    if example.suffix == ".env":
        return read_env_file(example)
    return {example.name.replace(".example.", ".", 1): example.read_text(encoding="utf-8")}


def external_secret(name: str) -> dict[str, str] | None:
    """The documented keys (and example values) of the operator-provided Secret `name`
    (EXTERNAL_SECRETS), or None when it is not one, or its example file is missing."""
    example = EXTERNAL_SECRETS.get(name)
    if example is None or not example.is_file():
        return None
    return example_secret_data(example)
