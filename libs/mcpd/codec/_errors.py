"""How the codec fails (a caller sent bad JSON, or a message holds what JSON cannot carry) and
how its errors name the place at fault."""

from __future__ import annotations

from mcpd.runtime.errors import InvalidArgument


class CodecError(InvalidArgument):
    """A JSON document (or a URL value) does not decode into the message it was sent for.

    `field` is the dotted path of the offending value (`spans[0].start_time`), and the message
    names it and says what was expected, so a caller can fix the request without reading code.
    """

    default_reason = "INVALID_FIELD"


class EncodeError(ValueError):
    """A message holds a value the spec's JSON cannot represent (NaN, an unknown enum number).

    This is a bug in whoever built the message, never the caller's fault, so it is deliberately
    not an `McpdError`: it surfaces as INTERNAL wherever it escapes.
    """

    def __init__(self, message: str, *, field: str) -> None:
        super().__init__(f"{field}: {message}" if field else message)
        self.field = field


UNKNOWN_FIELD = "UNKNOWN_FIELD"
"""`CodecError.reason` when the document carries a field the message does not have."""


def child_path(parent: str, key: str | int | None) -> str:
    """The `field` of what sits under `key` in the value at `parent`: `spans[0]`, `spans[0].name`.

    A str key is a field name or an object key, an int an array index, None the value itself.
    """
    if key is None:
        return parent
    if isinstance(key, int):
        return f"{parent}[{key}]"
    return f"{parent}.{key}" if parent else key
