"""`intelligence.aspects_file`: the aspects a deployment defines beyond the built-ins, and its
changes to the built-ins.

```toml
[[aspects]]
project = "support"            # default: security.local_project
name = "refund_reason"         # ^[a-z][a-z0-9_]{0,63}$, once per project
label = "Refund reason"        # required for a custom aspect
description = "Why the user asked for their money back"   # required for a custom aspect
instruction = "Write one short, plain sentence saying why the user wanted their money back."
enabled = true                 # default
sort_order = 50                # default 100, after the built-ins (10, 20, 30, 40)

[[aspects]]
project = "support"
name = "sentiment"             # a built-in: the keys given change it, the others keep
enabled = false                # the shipped definition
```

The file is the whole configuration: a built-in it does not mention is the shipped definition,
and a custom aspect it no longer names is kept switched off (`mcpd.aspects.catalogues`). Every
error names the entry and key (`aspects[2].instruction`) and is raised before anything is
written.
"""

from __future__ import annotations

import tomllib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from mcpd.aspects.definitions import (
    BUILT_INS,
    MAX_INSTRUCTION_BYTES,
    MAX_SORT_ORDER,
    NAME,
    AspectDefinition,
)
from mcpd.runtime.config import Settings
from mcpd.runtime.errors import InvalidArgument

__all__ = ["SETTING", "AspectConfig", "load_aspects_file"]

SETTING = "intelligence.aspects_file"
_BUILT_INS = {definition.name: definition for definition in BUILT_INS}
_REQUIRED_OF_CUSTOM = ("label", "description")


@dataclass(frozen=True, slots=True)
class AspectConfig:
    """What the configuration defines: the file's aspects, by project."""

    # Each complete: a built-in's with the file's changes applied.
    defined: Mapping[str, tuple[AspectDefinition, ...]] = field(default_factory=dict)

    @classmethod
    def from_settings(cls, settings: Settings) -> AspectConfig:
        """The configuration of `settings`, its aspects file read and checked. Blocking."""
        path = settings.intelligence.aspects_file
        if path is None:
            return cls()
        defined = load_aspects_file(
            path,
            default_project=settings.security.local_project,
            max_aspects=settings.intelligence.max_aspects,
        )
        return cls(defined)

    def projects(self) -> list[str]:
        """The projects the file names, sorted."""
        return sorted(self.defined)

    def wanted(self, project: str) -> dict[str, AspectDefinition]:
        """The project's aspects as configured, by name: the built-ins, changed where the file
        says, then its custom ones."""
        wanted = dict(_BUILT_INS)
        wanted.update((definition.name, definition) for definition in self.defined.get(project, ()))
        return wanted


def load_aspects_file(
    path: Path, *, default_project: str, max_aspects: int
) -> dict[str, tuple[AspectDefinition, ...]]:
    """The file's aspects by project, in file order, every entry checked; InvalidArgument
    names the entry and key at fault."""
    document = _read(path)
    unknown = sorted(set(document) - {"aspects"})
    if unknown:
        raise _error(path, unknown[0], "unknown setting", "UNKNOWN_CONFIG_KEY")
    entries = document.get("aspects", [])
    if not isinstance(entries, list) or not all(isinstance(entry, dict) for entry in entries):
        raise _error(path, "aspects", "expected an array of tables ([[aspects]])")
    defined: dict[str, dict[str, AspectDefinition]] = {}
    for index, entry in enumerate(entries):
        at = f"aspects[{index}]"
        project, definition = _entry(path, at, entry, default_project)
        mine = defined.setdefault(project, {})
        if definition.name in mine:
            raise _error(path, f"{at}.name", f"{definition.name!r} is defined twice in {project!r}")
        mine[definition.name] = definition
        if len(_BUILT_INS.keys() | mine.keys()) > max_aspects:
            raise _error(
                path,
                f"{at}.name",
                f"{project!r} would have more than intelligence.max_aspects ({max_aspects})"
                f" aspects, the {len(BUILT_INS)} built-ins included",
            )
    return {project: tuple(mine.values()) for project, mine in defined.items()}


def _read(path: Path) -> dict[str, Any]:
    try:
        with path.open("rb") as handle:
            return tomllib.load(handle)
    except OSError as error:
        message = f"{SETTING}: cannot read {path}: {error.strerror}"
        raise InvalidArgument(message, field=SETTING, reason="INVALID_CONFIG") from error
    except tomllib.TOMLDecodeError as error:
        message = f"{SETTING}: {path} is not valid TOML: {error}"
        raise InvalidArgument(message, field=SETTING, reason="INVALID_CONFIG") from error


def _entry(
    path: Path, at: str, entry: dict[str, Any], default_project: str
) -> tuple[str, AspectDefinition]:
    """One `[[aspects]]` table: its project and the definition it asks for."""
    values: dict[str, Any] = {}
    for key, value in entry.items():
        check = _CHECKS.get(key)
        if check is None:
            raise _error(path, f"{at}.{key}", "unknown setting", "UNKNOWN_CONFIG_KEY")
        try:
            values[key] = check(value)
        except ValueError as problem:
            raise _error(path, f"{at}.{key}", str(problem)) from None
    if "name" not in values:
        raise _error(path, f"{at}.name", "is required")
    project = values.pop("project", default_project)
    name = values["name"]
    shipped = _BUILT_INS.get(name)
    if shipped is None:
        missing = [key for key in _REQUIRED_OF_CUSTOM if key not in values]
        if missing:
            raise _error(path, f"{at}.{missing[0]}", "is required for a custom aspect")
        if values.get("derived"):
            # The daemon writes derived notes from the run itself, and knows how for outcome alone.
            raise _error(path, f"{at}.derived", "a custom aspect cannot be derived")
        return project, AspectDefinition(**{"instruction": None, **values})
    _keep_derived(path, at, shipped, values)
    return project, replace(shipped, **values)


def _keep_derived(path: Path, at: str, shipped: AspectDefinition, values: dict[str, Any]) -> None:
    """Whether a built-in is derived is the daemon's to say: only it writes derived notes."""
    if values.get("derived", shipped.derived) != shipped.derived:
        state = "derived" if shipped.derived else "written by a model, not derived"
        raise _error(path, f"{at}.derived", f"{shipped.name} is {state}; that cannot change")
    if shipped.derived and "instruction" in values:
        raise _error(path, f"{at}.instruction", f"{shipped.name} is derived and has no instruction")


def _text(value: object) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ValueError("expected a non-empty string")
    return value


def _name(value: object) -> str:
    name = _text(value)
    if not NAME.fullmatch(name):
        raise ValueError(
            f"expected lowercase letters, digits and underscores, starting with a letter and at"
            f" most 64 characters (^[a-z][a-z0-9_]{{0,63}}$), got {name!r}"
        )
    return name


def _instruction(value: object) -> str:
    instruction = _text(value)
    size = len(instruction.encode())
    if size > MAX_INSTRUCTION_BYTES:
        raise ValueError(f"must be at most {MAX_INSTRUCTION_BYTES} bytes (UTF-8), got {size}")
    return instruction


def _flag(value: object) -> bool:
    if not isinstance(value, bool):
        raise ValueError("expected true or false")
    return value


def _sort_order(value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_SORT_ORDER:
        raise ValueError(f"expected a whole number from 0 to {MAX_SORT_ORDER}")
    return value


_CHECKS: dict[str, Callable[[object], object]] = {
    "project": _text,
    "name": _name,
    "label": _text,
    "description": _text,
    "instruction": _instruction,
    "derived": _flag,
    "enabled": _flag,
    "sort_order": _sort_order,
}


def _error(
    path: Path, key: str, problem: str, reason: str = "INVALID_CONFIG_VALUE"
) -> InvalidArgument:
    return InvalidArgument(
        f"{SETTING} ({path}): {key}: {problem}",
        field=key,
        reason=reason,
        metadata={"source": str(path)},
    )
