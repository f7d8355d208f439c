"""Where the deployment files are, and how a path is shown in the report."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent.parent
DEPLOY = ROOT / "deploy"
KUBERNETES = DEPLOY / "kubernetes"
BASE = KUBERNETES / "base"
OVERLAYS = KUBERNETES / "overlays"
DOCKERFILE = DEPLOY / "Dockerfile"
DOCKERIGNORE = DEPLOY / "Dockerfile.dockerignore"
PYPROJECT = ROOT / "pyproject.toml"


def relative(path: Path) -> str:
    try:
        return str(path.relative_to(KUBERNETES))
    except ValueError:
        try:
            return str(path.relative_to(ROOT))
        except ValueError:
            return str(path)
