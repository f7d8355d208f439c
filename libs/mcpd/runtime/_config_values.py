"""Parsing, checking and rendering of individual setting values, for `mcpd.runtime.config`.

Every error names the key and where its value came from (the file, the environment variable, the
override), because "invalid configuration" without a place to look is no help at 3 a.m.
"""

from __future__ import annotations

import dataclasses
import os
import types
import typing
from collections.abc import Mapping
from enum import StrEnum
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from mcpd.runtime.errors import InvalidArgument
from mcpd.runtime.logging import redact_url


@dataclasses.dataclass(frozen=True, slots=True)
class Kind:
    """The type a setting holds: `base` is Path, str, bool, int, float or a StrEnum; maybe
    optional."""

    base: type
    optional: bool = False

    def describe(self) -> str:
        """How the expected value reads in an error message."""
        if issubclass(self.base, StrEnum):
            text = "one of " + ", ".join(repr(m.value) for m in self.base)
        else:
            text = {
                Path: "a path",
                str: "a string",
                bool: "true or false",
                int: "an integer",
                float: "a number",
            }[self.base]
        return text + (" (or empty)" if self.optional else "")


def field_types(cls: type) -> dict[str, Any]:
    """The resolved annotation of every dataclass field of `cls`, in declaration order."""
    hints = typing.get_type_hints(cls)
    return {f.name: hints[f.name] for f in dataclasses.fields(cls)}


def kind_of(annotation: Any) -> Kind:
    """The `Kind` of a field annotation such as `int`, `Path` or `str | None`."""
    if isinstance(annotation, types.UnionType) or typing.get_origin(annotation) is typing.Union:
        others = [a for a in typing.get_args(annotation) if a is not type(None)]
        if len(others) != 1:
            raise TypeError(f"unsupported setting type {annotation!r}")
        return Kind(kind_of(others[0]).base, optional=True)
    if annotation in (Path, str, bool, int, float) or (
        isinstance(annotation, type) and issubclass(annotation, StrEnum)
    ):
        return Kind(annotation)
    raise TypeError(f"unsupported setting type {annotation!r}")


def error(key: str, source: str, message: str, reason: str) -> InvalidArgument:
    return InvalidArgument(
        f"invalid setting {key} from {source}: {message}",
        field=key,
        reason=reason,
        metadata={"source": source},
    )


def _wrong(value: object, kind: Kind, key: str, source: str) -> InvalidArgument:
    shown = repr(value) if isinstance(value, str | int | float) else type(value).__name__
    return error(key, source, f"expected {kind.describe()}, got {shown}", "INVALID_CONFIG_VALUE")


def expand(path: Path, home: Path, base: Path) -> Path:
    """`path` with a leading `~` expanded to `home`, made absolute against `base`."""
    if path.parts and path.parts[0] == "~":
        path = home.joinpath(*path.parts[1:])
    return path if path.is_absolute() else base / path


def _enum(value: str, kind: Kind, key: str, source: str) -> StrEnum:
    enum = typing.cast(type[StrEnum], kind.base)
    try:
        return enum(value.strip().lower())
    except ValueError:
        raise _wrong(value, kind, key, source) from None


def from_file(value: object, kind: Kind, key: str, source: str, home: Path, base: Path) -> object:
    """A typed value (from TOML or a programmatic override), checked against `kind`.

    Relative paths resolve against `base`: the file's directory for the file, so a config file
    means the same thing whatever the working directory of the process reading it.
    """
    if value is None and kind.optional:
        return None
    base_type = kind.base
    if issubclass(base_type, StrEnum):
        if isinstance(value, str):
            return _enum(value, kind, key, source)
    elif base_type is Path:
        if isinstance(value, str | os.PathLike):
            return expand(Path(value), home, base)
    elif base_type is str:
        if isinstance(value, str):
            return value if value or not kind.optional else None
    elif base_type is bool:
        if isinstance(value, bool):
            return value
    elif base_type is int:
        # bool is an int subclass; `true` is never a sensible byte count.
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    elif base_type is float and isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    raise _wrong(value, kind, key, source)


_BOOLEANS = {"true": True, "1": True, "yes": True, "false": False, "0": False, "no": False}


def from_text(text: str, kind: Kind, key: str, source: str, home: Path) -> object:
    """A value parsed from text (an environment variable); empty unsets an optional key."""
    if kind.optional and text == "":
        return None
    base_type = kind.base
    if issubclass(base_type, StrEnum):
        return _enum(text, kind, key, source)
    if base_type is Path:
        return expand(Path(text), home, Path.cwd())
    if base_type is str:
        return text
    if base_type is bool:
        flag = _BOOLEANS.get(text.strip().lower())
        if flag is None:
            raise _wrong(text, kind, key, source)
        return flag
    try:
        return int(text.strip()) if base_type is int else float(text.strip())
    except ValueError:
        raise _wrong(text, kind, key, source) from None


def flatten_overrides(
    overrides: Mapping[str, object], kinds: Mapping[str, Kind]
) -> dict[str, object]:
    """`overrides` as `key` / `section.key` entries; `{"storage": {"backend": ...}}` allowed."""
    sections = {key.partition(".")[0] for key in kinds if "." in key}
    flat: dict[str, object] = {}
    for name, value in overrides.items():
        entries: Mapping[str, object]
        if name in sections and isinstance(value, Mapping):
            entries = {f"{name}.{sub}": sub_value for sub, sub_value in value.items()}
        else:
            entries = {name: value}
        for key, entry in entries.items():
            if key not in kinds:
                raise InvalidArgument(
                    f"unknown setting {key!r} in overrides",
                    field=key,
                    reason="UNKNOWN_CONFIG_KEY",
                    metadata={"source": "overrides"},
                )
            flat[key] = entry
    return flat


def flatten_document(
    document: Mapping[str, object],
    kinds: Mapping[str, Kind],
    sections: Mapping[str, type],
    source: str,
) -> dict[str, object]:
    """A parsed TOML document as `key` / `section.key` entries, refusing unknown keys."""
    flat: dict[str, object] = {}

    def unknown(key: str) -> InvalidArgument:
        return InvalidArgument(
            f"unknown setting {key!r} in {source}",
            field=key,
            reason="UNKNOWN_CONFIG_KEY",
            metadata={"source": source},
        )

    for name, value in document.items():
        if name in sections:
            if not isinstance(value, Mapping):
                raise error(name, source, "expected a table", "INVALID_CONFIG_VALUE")
            for sub, sub_value in value.items():
                key = f"{name}.{sub}"
                if key not in kinds:
                    raise unknown(key)
                flat[key] = sub_value
        elif name in kinds:
            flat[name] = value
        else:
            raise unknown(name)
    return flat


def address_problem(address: str) -> str | None:
    """Why `address` is not `host:port` (IPv6 hosts in brackets), or None when it is."""
    host, sep, port = address.rpartition(":")
    if not sep or not host or not port.isdigit():
        return "expected host:port"
    if any(c.isspace() or c in "/@" for c in host):
        return "expected host:port, without a scheme or path"
    if host.startswith("[") != host.endswith("]") or (":" in host and not host.startswith("[")):
        return "expected host:port, with an IPv6 host in brackets ([::1]:50051)"
    if int(port) > 65535:
        return "port must be 0-65535"
    return None


def url_problem(url: str, schemes: frozenset[str]) -> str | None:
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - parsing the port is the check
    except ValueError as exc:
        return f"not a valid URL ({exc})"
    if parts.scheme not in schemes:
        return f"expected a URL with scheme {' or '.join(sorted(schemes))}"
    if parts.scheme == "chdb":
        if parts.netloc or not parts.path.startswith("/"):
            return "expected chdb:///absolute/path"
    elif not parts.hostname:
        return "expected a host in the URL"
    return None


def toml_value(value: object, *, secret: bool = False) -> str:
    """`value` as a TOML literal; `secret` strings (URLs) have their passwords masked."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, Path | str):
        text = str(value)
        return _toml_string(redact_url(text) if secret else text)
    raise TypeError(f"cannot render {type(value).__name__} as TOML")


def _toml_string(text: str) -> str:
    escapes = {
        '"': '\\"',
        "\\": "\\\\",
        "\b": "\\b",
        "\t": "\\t",
        "\n": "\\n",
        "\f": "\\f",
        "\r": "\\r",
    }
    out = []
    for char in text:
        if char in escapes:
            out.append(escapes[char])
        elif ord(char) < 0x20 or ord(char) == 0x7F:
            out.append(f"\\u{ord(char):04x}")
        else:
            out.append(char)
    return '"' + "".join(out) + '"'
