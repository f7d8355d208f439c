"""Per-project policies from `ingest.projects_file`, written to the control store at start.

The file is TOML:

    [[projects]]
    id = "alpha"
    name = "Alpha"                 # optional, defaults to id
    retention_days = 30            # optional
    sampling = { kind = "deterministic", rate = 0.25 }
    redaction = { rules = [ { name = "card", pattern = "\\b\\d{16}\\b", mode = "partial" } ] }

    [projects.prices."gpt-4o"]     # per-project price overrides, per million tokens
    input = 2.0
    output = 8.0

Every policy is checked before anything is written, with an error naming the entry and field;
the control store is the source of truth afterwards, read by every ingest replica.
"""

from __future__ import annotations

import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from google.protobuf import json_format

from mcpd import codec
from mcpd.model.v1 import account_pb2
from mcpd.runtime.errors import InvalidArgument
from mcpd.storage.interfaces import ControlStore
from services.ingest import check_policies

SETTING = "ingest.projects_file"
_KEYS = frozenset({"id", "name", "retention_days", "sampling", "redaction", "prices"})


@dataclass(frozen=True, slots=True)
class ConfiguredProject:
    """One `[[projects]]` entry: the Project row and its price overrides."""

    project: account_pb2.Project
    prices: Mapping[str, Mapping[str, float]]


def load_projects_file(path: Path) -> list[ConfiguredProject]:
    """The file's projects, every policy checked; InvalidArgument names what is wrong."""
    try:
        with path.open("rb") as handle:
            document = tomllib.load(handle)
    except OSError as error:
        message = f"{SETTING}: cannot read {path}: {error.strerror}"
        raise InvalidArgument(message, field=SETTING) from error
    except tomllib.TOMLDecodeError as error:
        message = f"{SETTING}: {path} is not valid TOML: {error}"
        raise InvalidArgument(message, field=SETTING) from error
    entries = document.get("projects", [])
    if not isinstance(entries, list):
        raise InvalidArgument(f"{SETTING}: `projects` must be an array of tables", field=SETTING)
    return [_entry(position, entry) for position, entry in enumerate(entries)]


def apply_projects(control: ControlStore, projects: list[ConfiguredProject]) -> None:
    """Write every configured project and its price overrides to the control store."""
    for configured in projects:
        control.configure_project(configured.project)
        control.set_price_overrides(configured.project.project_id, configured.prices)


def _entry(position: int, entry: Any) -> ConfiguredProject:
    where = f"{SETTING}: projects[{position}]"
    if not isinstance(entry, dict):
        raise InvalidArgument(f"{where} must be a table", field=SETTING)
    unknown = sorted(set(entry) - _KEYS)
    if unknown:
        raise InvalidArgument(f"{where}: unknown key {unknown[0]!r}", field=SETTING)
    project_id = entry.get("id")
    if not isinstance(project_id, str) or not project_id.strip():
        raise InvalidArgument(f"{where}.id is required", field=SETTING)
    prices = entry.get("prices", {})
    try:
        project = account_pb2.Project()
        json_format.ParseDict(
            {
                key: entry[key]
                for key in ("name", "retention_days", "sampling", "redaction")
                if key in entry
            },
            project,
        )
        # Checked in the form ingest reads back from the control store.
        check_policies(
            codec.encode(project.sampling) if project.HasField("sampling") else None,
            codec.encode(project.redaction) if project.HasField("redaction") else None,
            prices,
        )
    except (InvalidArgument, json_format.ParseError) as error:
        raise InvalidArgument(f"{where} ({project_id}): {error}", field=SETTING) from error
    project.project_id = project_id
    return ConfiguredProject(project, prices)
