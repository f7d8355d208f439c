"""`google.api.http` path templates: `/v1/api/runs/{run_id}/steps/{step_key}/cause`.

The subset mcpd's protos use, checked at load: literal segments and single-segment variables
`{field}`, `{a.b}` or `{field=*}`. Multi-segment variables (`**`), patterns inside a variable and
custom verbs (`:cancel`) are refused rather than half-supported.
"""

from __future__ import annotations

import dataclasses
import re

from google.protobuf.descriptor import Descriptor, FieldDescriptor

from mcpd import codec

_LITERAL = re.compile(r"[A-Za-z0-9._~-]+")
_VARIABLE = re.compile(r"\{([a-z_][a-z0-9_]*(?:\.[a-z_][a-z0-9_]*)*)(?:=\*)?\}")


@dataclasses.dataclass(frozen=True, slots=True)
class Variable:
    """A path segment bound to a (possibly nested) request field."""

    field_path: tuple[str, ...]
    fields: tuple[FieldDescriptor, ...]
    """The descriptors along `field_path`; the last one receives the value."""

    @property
    def name(self) -> str:
        """The dotted name, as written in the template and in error messages."""
        return ".".join(self.field_path)


Segment = str | Variable


@dataclasses.dataclass(frozen=True, slots=True)
class PathTemplate:
    """A parsed template: literal strings and `Variable`s, one per path segment."""

    text: str
    segments: tuple[Segment, ...]

    @property
    def variables(self) -> tuple[Variable, ...]:
        """The variable segments, left to right."""
        return tuple(s for s in self.segments if isinstance(s, Variable))

    @property
    def field_paths(self) -> tuple[tuple[str, ...], ...]:
        """The request field paths the path binds."""
        return tuple(v.field_path for v in self.variables)

    @classmethod
    def parse(cls, text: str, request: Descriptor | None) -> PathTemplate:
        """Parse `text` and resolve its variables against the `request` message.

        `request` may be None for a template without variables (an endpoint that is not an RPC).
        """
        if not text.startswith("/") or text == "/":
            raise ValueError(f"path template {text!r} must start with / and name a path")
        segments: list[Segment] = []
        for raw in text[1:].split("/"):
            if _LITERAL.fullmatch(raw):
                segments.append(raw)
                continue
            match = _VARIABLE.fullmatch(raw)
            if match is None:
                raise ValueError(f"path template {text!r}: segment {raw!r} is not supported")
            path = tuple(match.group(1).split("."))
            segments.append(Variable(path, _resolve(request, path, text)))
        names = [v.name for v in segments if isinstance(v, Variable)]
        if len(set(names)) != len(names):
            raise ValueError(f"path template {text!r} binds a field twice")
        return cls(text, tuple(segments))


def _resolve(
    request: Descriptor | None, path: tuple[str, ...], text: str
) -> tuple[FieldDescriptor, ...]:
    fields: list[FieldDescriptor] = []
    message: Descriptor | None = request
    for i, name in enumerate(path):
        field = message.fields_by_name.get(name) if message is not None else None
        if field is None or field.is_repeated:
            raise ValueError(f"path template {text!r}: {'.'.join(path)} is not a singular field")
        fields.append(field)
        last = i == len(path) - 1
        if not last:
            message = field.message_type
        elif not codec.query_bindable(field):
            raise ValueError(f"path template {text!r}: {name} cannot be read from a URL")
    return tuple(fields)
