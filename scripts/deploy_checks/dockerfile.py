"""deploy/Dockerfile agrees with its ignore file and with pyproject.toml."""

from __future__ import annotations

import json
import re
import tomllib
from dataclasses import dataclass
from pathlib import Path

from scripts.deploy_checks.constants import GRPC_PORT, HTTP_PORT, OTLP_GRPC_PORT
from scripts.deploy_checks.paths import DOCKERFILE, DOCKERIGNORE, PYPROJECT, relative


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
