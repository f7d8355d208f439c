"""Check mcpd's deployment files without a cluster: render every Kustomize target, validate it.

The command line of `python -m scripts.deploy_checks`: every check of every target, a summary
table, and the exit status (0 when everything passes, 1 on any failure, 2 when no renderer is
found).
"""

from __future__ import annotations

import argparse
import copy
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import kubernetes_validate

from scripts.deploy_checks.api_keys import check_api_keys, check_service_credential
from scripts.deploy_checks.configuration import check_mcpd_configuration
from scripts.deploy_checks.constants import KUBERNETES_VERSIONS
from scripts.deploy_checks.dockerfile import check_dockerfile
from scripts.deploy_checks.manifests import Manifest
from scripts.deploy_checks.paths import DOCKERFILE, KUBERNETES, ROOT, relative
from scripts.deploy_checks.raw_files import check_raw_files
from scripts.deploy_checks.references import check_references
from scripts.deploy_checks.rendering import (
    Renderer,
    RendererMissingError,
    RenderError,
    find_renderer,
    render,
    targets,
)
from scripts.deploy_checks.rules import (
    check_hardening,
    check_namespace,
    check_peer_addresses,
    check_probes,
    check_secrets,
    check_topology,
)
from scripts.deploy_checks.schemas import custom_resource_note, validate_schemas

PROG = "python -m scripts.deploy_checks"


def check_objects(
    objects: Sequence[Manifest], versions: Sequence[str] = KUBERNETES_VERSIONS
) -> list[str]:
    """Every check of one rendered target."""
    return [
        *validate_schemas(objects, versions),
        *check_secrets(objects),
        *check_namespace(objects),
        *check_hardening(objects),
        *check_probes(objects),
        *check_topology(objects),
        *check_references(objects),
        *check_peer_addresses(objects),
        *check_mcpd_configuration(objects),
        *check_api_keys(objects),
        *check_service_credential(objects),
    ]


@dataclass
class Result:
    """One line of the summary table."""

    target: str
    objects: int | None
    errors: list[str]

    @property
    def passed(self) -> bool:
        return not self.errors


def check_target(
    target: Path, renderer: Renderer, versions: Sequence[str] = KUBERNETES_VERSIONS
) -> Result:
    try:
        objects = render(target, renderer)
    except RenderError as exc:
        return Result(relative(target), None, [str(exc)])
    return Result(relative(target), len(objects), check_objects(copy.deepcopy(objects), versions))


def run_checks(renderer: Renderer, versions: Sequence[str] = KUBERNETES_VERSIONS) -> list[Result]:
    files, raw_errors = check_raw_files()
    results = [
        Result(f"raw files of {KUBERNETES.relative_to(ROOT)}", files, raw_errors),
        Result(relative(DOCKERFILE), None, check_dockerfile()),
    ]
    results += [check_target(target, renderer, versions) for target in targets()]
    return results


def format_table(results: Sequence[Result]) -> str:
    width = max(len("target"), *(len(r.target) for r in results))
    lines = [f"{'target':<{width}}  {'objects':>7}  result", f"{'-' * width}  {'-' * 7}  ------"]
    for r in results:
        count = "-" if r.objects is None else str(r.objects)
        verdict = "ok" if r.passed else f"FAIL ({len(r.errors)})"
        lines.append(f"{r.target:<{width}}  {count:>7}  {verdict}")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog=PROG, description=__doc__.splitlines()[0] if __doc__ else None
    )
    parser.add_argument(
        "--kubernetes-version",
        action="append",
        dest="versions",
        metavar="X.Y.Z",
        help="validate against this Kubernetes version (repeatable; default "
        f"{', '.join(KUBERNETES_VERSIONS)})",
    )
    args = parser.parse_args(argv)
    versions: Sequence[str] = args.versions or KUBERNETES_VERSIONS
    try:
        renderer = find_renderer()
    except RendererMissingError as exc:
        print(f"deploy_checks: {exc}", file=sys.stderr)
        return 2
    print(f"renderer: {renderer.describe()}")
    print(
        f"schemas: kubernetes-validate {kubernetes_validate.__version__}, strict, Kubernetes "
        f"{', '.join(versions)}"
    )
    print(f"note: {custom_resource_note()}")
    results = run_checks(renderer, versions)
    for result in results:
        for error in result.errors:
            print(f"FAIL {result.target}: {error}")
    print()
    print(format_table(results))
    failed = [r for r in results if not r.passed]
    print()
    print(f"deploy check: {len(results) - len(failed)} of {len(results)} targets ok")
    return 1 if failed else 0
