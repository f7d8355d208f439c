"""Reads the enumeration and entity tables of spec/data-model.md.

The spec is generated from a machine-readable source, so every enumeration and entity is a
CamelCase heading line followed by prose and a tab-separated table (`Value<TAB>Meaning` or
`Field<TAB>Type<TAB>Description`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

SPEC = Path(__file__).resolve().parents[2] / "spec" / "data-model.md"
_HEADING = re.compile(r"[A-Z][A-Za-z0-9]*")


@dataclass(frozen=True)
class SpecField:
    name: str
    type: str
    required: bool

    @property
    def repeated(self) -> bool:
        return self.type.endswith("[]")

    @property
    def base_type(self) -> str:
        return self.type.removesuffix("[]")


@dataclass(frozen=True)
class SpecModel:
    enums: dict[str, list[str]]
    entities: dict[str, list[SpecField]]


def _heading_above(lines: list[str], index: int) -> str:
    for line in reversed(lines[:index]):
        if _HEADING.fullmatch(line.strip()):
            return line.strip()
    raise ValueError(f"table at line {index + 1} has no heading")


def _rows(lines: list[str], start: int) -> list[list[str]]:
    rows = []
    for line in lines[start:]:
        if "\t" not in line:
            break
        rows.append(line.split("\t"))
    return rows


def load(path: Path = SPEC) -> SpecModel:
    lines = path.read_text(encoding="utf-8").split("\n")
    enums: dict[str, list[str]] = {}
    entities: dict[str, list[SpecField]] = {}
    for index, line in enumerate(lines):
        if line == "Value\tMeaning":
            rows = _rows(lines, index + 1)
            enums[_heading_above(lines, index)] = [value for value, _ in rows]
        elif line == "Field\tType\tDescription":
            fields = []
            for name, typ, _ in _rows(lines, index + 1):
                required = typ.endswith(" required")
                fields.append(SpecField(name, typ.removesuffix(" required"), required))
            entities[_heading_above(lines, index)] = fields
    return SpecModel(enums, entities)
