"""Templates of a workflow definition: `${path}` references inside any JSON value.

A string that is exactly `"${path}"` renders to the value at `path`, keeping its JSON type; a
string with `${path}` inside other text renders as a string, each value inserted as itself when
a string and as compact JSON otherwise; `$${` is a literal `${`. A path that resolves to nothing
renders as `null` (a whole-string template) or as the empty string (inside text).

A path is a root (`input`, `state`, `steps.<id>.output|status|error`, `item`, `index`,
`iteration`) followed by `.name` and `[n]` segments. Parsing is separate from rendering so that
a definition's paths are checked once, when it is stored, and a cause chain can walk them.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = [
    "ROOTS",
    "STEP_FIELDS",
    "Missing",
    "TemplateError",
    "TemplatePath",
    "parse_path",
    "paths_in",
    "render",
    "resolve",
]

# The roots a path may start with; `steps` is followed by a node id and one of STEP_FIELDS.
ROOTS = frozenset({"input", "state", "steps", "item", "index", "iteration"})
STEP_FIELDS = frozenset({"output", "status", "error"})

_NAME = re.compile(r"[A-Za-z0-9_-]+")
_INDEX = re.compile(r"\[(\d+)\]")
_REFERENCE = re.compile(r"\$\$\{|\$\{([^}]*)\}|\$\{")


class TemplateError(ValueError):
    """A template that is not well formed: the message says what, `path` is what was written."""

    def __init__(self, message: str, path: str) -> None:
        super().__init__(message)
        self.path = path


@dataclass(frozen=True, slots=True)
class TemplatePath:
    """One parsed `${path}`: as written (without `${` and `}`), its root and its segments
    (names as `str`, indexes as `int`). For `steps` the segments start with the node id and the
    step field."""

    text: str
    root: str
    segments: tuple[str | int, ...]

    @property
    def step_id(self) -> str | None:
        """The node a `steps.` path reads, else None."""
        if self.root != "steps":
            return None
        first = self.segments[0]
        assert isinstance(first, str)
        return first


class _Missing:
    """What a path that resolves to nothing yields (distinct from JSON null)."""

    _instance: _Missing | None = None

    def __new__(cls) -> _Missing:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "Missing"


Missing = _Missing()


def parse_path(text: str) -> TemplatePath:
    """Parse the inside of one `${...}`; raises TemplateError naming what is wrong."""
    position = 0
    match = _NAME.match(text)
    if match is None:
        raise TemplateError(f"${{{text}}} does not start with a root name", text)
    root = match.group()
    if root not in ROOTS:
        raise TemplateError(
            f"${{{text}}} has an unknown root {root!r}; known: {', '.join(sorted(ROOTS))}", text
        )
    position = match.end()
    segments: list[str | int] = []
    while position < len(text):
        if text[position] == ".":
            name = _NAME.match(text, position + 1)
            if name is None:
                raise TemplateError(f"${{{text}}} has an empty name after '.'", text)
            segments.append(name.group())
            position = name.end()
        elif (index := _INDEX.match(text, position)) is not None:
            segments.append(int(index.group(1)))
            position = index.end()
        else:
            raise TemplateError(
                f"${{{text}}} is not a path: expected '.name' or '[n]' at {text[position:]!r}",
                text,
            )
    if root == "steps":
        if len(segments) < 2 or not isinstance(segments[0], str):
            raise TemplateError(f"${{{text}}} must read steps.<id>.output, .status or .error", text)
        if segments[1] not in STEP_FIELDS:
            raise TemplateError(
                f"${{{text}}} reads steps.{segments[0]}.{segments[1]}; "
                "a step has output, status and error",
                text,
            )
    return TemplatePath(text, root, tuple(segments))


def _pieces(text: str) -> Iterator[str | TemplatePath]:
    """The literal text and parsed references of one template string, in order."""
    position = 0
    literal: list[str] = []
    for match in _REFERENCE.finditer(text):
        literal.append(text[position : match.start()])
        token = match.group()
        if token == "$${":
            literal.append("${")
        elif match.group(1) is None:
            raise TemplateError(f"{text!r} opens '${{' without a closing '}}'", text)
        else:
            text_before = "".join(literal)
            if text_before:
                yield text_before
            literal = []
            yield parse_path(match.group(1))
        position = match.end()
    literal.append(text[position:])
    rest = "".join(literal)
    if rest:
        yield rest


def paths_in(template: Any) -> Iterator[TemplatePath]:
    """Every path a template (any JSON value) references, in document order."""
    if isinstance(template, str):
        for piece in _pieces(template):
            if isinstance(piece, TemplatePath):
                yield piece
    elif isinstance(template, Mapping):
        for value in template.values():
            yield from paths_in(value)
    elif isinstance(template, list):
        for value in template:
            yield from paths_in(value)


def resolve(path: TemplatePath, scope: Mapping[str, Any]) -> Any:
    """The value at `path` in `scope` (keyed by root; `steps` maps node ids to
    {output, status, error}), or `Missing`."""
    if path.root not in scope:
        return Missing
    value: Any = scope[path.root]
    for segment in path.segments:
        if isinstance(segment, int):
            if not isinstance(value, Sequence) or isinstance(value, str):
                return Missing
            if segment >= len(value):
                return Missing
            value = value[segment]
        else:
            if not isinstance(value, Mapping) or segment not in value:
                return Missing
            value = value[segment]
    return value


def render(template: Any, scope: Mapping[str, Any]) -> Any:
    """Render a template (see the module docstring) against `scope` (`resolve`)."""
    if isinstance(template, str):
        return _render_text(template, scope)
    if isinstance(template, Mapping):
        return {key: render(value, scope) for key, value in template.items()}
    if isinstance(template, list):
        return [render(value, scope) for value in template]
    return template


def _render_text(text: str, scope: Mapping[str, Any]) -> Any:
    pieces = list(_pieces(text))
    if len(pieces) == 1 and isinstance(pieces[0], TemplatePath):
        value = resolve(pieces[0], scope)
        return None if value is Missing else value
    out: list[str] = []
    for piece in pieces:
        if isinstance(piece, str):
            out.append(piece)
            continue
        value = resolve(piece, scope)
        if value is Missing:
            continue
        out.append(value if isinstance(value, str) else _compact(value))
    return "".join(out)


def _compact(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)
