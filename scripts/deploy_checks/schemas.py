"""Validating rendered objects: Kubernetes' JSON schemas (kubernetes-validate, strict), the
reduced schemas of the custom resources, and the Kubernetes objects those resources embed."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import jsonschema
import kubernetes_validate

from scripts.deploy_checks.constants import KUBERNETES_VERSIONS
from scripts.deploy_checks.crd_schemas import CUSTOM_RESOURCE_SCHEMAS, EMBEDDED_TEMPLATES
from scripts.deploy_checks.manifests import Manifest, describe


def custom_resource_note() -> str:
    kinds = ", ".join(f"{kind} ({api})" for api, kind in CUSTOM_RESOURCE_SCHEMAS)
    return (
        f"kubernetes-validate has no schema for {kinds}: they are validated against the reduced "
        "schemas of scripts/deploy_checks/crd_schemas.py, and the templates they embed against "
        "Kubernetes'"
    )


def _short(message: str, limit: int = 300) -> str:
    return message if len(message) <= limit else message[: limit - 3] + "..."


def _kubernetes_schema_errors(
    obj: Mapping[str, Any], versions: Sequence[str], label: str
) -> list[str]:
    errors: list[str] = []
    for version in versions:
        try:
            kubernetes_validate.validate(dict(obj), version, strict=True)
        except kubernetes_validate.ValidationError as exc:
            where = ".".join(str(part) for part in exc.path) or "<root>"
            errors.append(
                f"{label}: invalid for Kubernetes {version}: {where}: {_short(exc.message)}"
            )
        except kubernetes_validate.SchemaNotFoundError as exc:
            errors.append(f"{label}: {exc.message}")
            break
    return errors


def validate_schemas(
    objects: Sequence[Manifest], versions: Sequence[str] = KUBERNETES_VERSIONS
) -> list[str]:
    """Every object against its schema: Kubernetes' (strict) or one of CUSTOM_RESOURCE_SCHEMAS."""
    errors: list[str] = []
    for obj in objects:
        label = describe(obj)
        schema = CUSTOM_RESOURCE_SCHEMAS.get((obj.get("apiVersion", ""), obj.get("kind", "")))
        if schema is None:
            errors += _kubernetes_schema_errors(obj, versions, label)
            continue
        validator = jsonschema.Draft202012Validator(schema)
        for error in sorted(validator.iter_errors(obj), key=lambda e: [str(p) for p in e.path]):
            where = ".".join(str(part) for part in error.path) or "<root>"
            errors.append(f"{label}: {where}: {_short(error.message)}")
        errors += _embedded_template_errors(obj, versions, label)
    return errors


def _embedded_template_errors(obj: Manifest, versions: Sequence[str], label: str) -> list[str]:
    errors: list[str] = []
    spec = obj.get("spec") or {}
    if obj.get("kind") == "Cluster":
        resources = spec.get("resources")
        if isinstance(resources, dict):
            pod = {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": "resources"},
                "spec": {"containers": [{"name": "postgres", "resources": resources}]},
            }
            errors += _kubernetes_schema_errors(pod, versions, f"{label}: spec.resources")
        return errors
    templates = spec.get("templates") or {}
    for section, (api_version, kind) in EMBEDDED_TEMPLATES.items():
        for template in templates.get(section) or []:
            if not isinstance(template, dict) or not isinstance(template.get("spec"), dict):
                continue
            wrapped = {
                "apiVersion": api_version,
                "kind": kind,
                "metadata": {"name": "template"},
                "spec": template["spec"],
            }
            where = f"{label}: spec.templates.{section}[{template.get('name')}]"
            errors += _kubernetes_schema_errors(wrapped, versions, where)
    return errors
