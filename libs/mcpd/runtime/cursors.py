"""Opaque cursors and page sizes: the one place that writes and reads them.

A cursor is base64url of a small JSON document: the kind of list it pages (`traces`, `spans`,
..., or `delta:<signal>` for a poll), a fingerprint of the request's filters, and the position
(the sort key of the last row returned). A cursor sent back with other filters, or to another
list, is refused with INVALID_ARGUMENT (field `cursor`) instead of answering a page of a
different result set. Cursors carry no project: the project always comes from the caller's
grant, so a cursor cannot reach across projects whatever it holds.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from google.protobuf.message import Message

from mcpd.runtime.errors import InvalidArgument

__all__ = [
    "DEFAULT_PAGE",
    "MAX_PAGE",
    "Paging",
    "decode",
    "encode",
    "fingerprint",
    "limit_of",
    "next_cursor",
    "page_of",
    "paging",
]

T = TypeVar("T")

DEFAULT_PAGE = 50
MAX_PAGE = 1000

_VERSION = 1
_PAGING_FIELDS = ("cursor", "limit")


@dataclass(frozen=True)
class Paging:
    """The page size and the position a cursor resumes after (None on the first page)."""

    limit: int
    after: list[Any] | None


def limit_of(request: Any, default: int = DEFAULT_PAGE) -> int:
    """The page size of a request with an optional `limit`: `default` when absent, else
    1..MAX_PAGE."""
    if not request.HasField("limit"):
        return default
    if not 1 <= request.limit <= MAX_PAGE:
        raise InvalidArgument(f"limit must be between 1 and {MAX_PAGE}", field="limit")
    return int(request.limit)


def paging(request: Any, kind: str, shape: Sequence[type | tuple[type, ...]]) -> Paging:
    """The page size and the cursor's position (`decode`), checked against this request's
    filters; the request has optional `cursor` and `limit` fields."""
    limit = limit_of(request)
    if not request.HasField("cursor"):
        return Paging(limit, None)
    return Paging(limit, decode(request.cursor, kind, fingerprint(request), shape))


def page_of(
    request: Any,
    kind: str,
    found: Sequence[T],
    limit: int,
    position: Callable[[T], Sequence[Any]],
    page: Any,
) -> Sequence[T]:
    """The rows of one page of `found`, read with `limit + 1`: the first `limit`. `page` (the
    answer's Page message) says whether more follow and, when they do, the cursor after the
    last row shown (`position` is a row's sort key)."""
    shown = found[:limit]
    page.has_more = len(found) > limit
    if page.has_more:
        page.next_cursor = next_cursor(request, kind, position(shown[-1]))
    return shown


def next_cursor(request: Any, kind: str, position: Sequence[Any]) -> str:
    """The cursor of the page after the one ending at `position` (its last row's sort key)."""
    return encode(kind, fingerprint(request), position)


def fingerprint(request: Message) -> str:
    """A digest of the request's filters: every field but the cursor, the page size and the
    project (which the caller's grant decides)."""
    filters = type(request)()
    filters.CopyFrom(request)
    for name in (*_PAGING_FIELDS, "project"):
        if name in filters.DESCRIPTOR.fields_by_name:
            filters.ClearField(name)
    return hashlib.sha256(filters.SerializeToString(deterministic=True)).hexdigest()[:16]


def encode(kind: str, filters: str, position: Sequence[Any]) -> str:
    """The cursor for `position` in the list `kind` under `filters` (a `fingerprint`)."""
    document = {"v": _VERSION, "k": kind, "f": filters, "p": list(position)}
    raw = json.dumps(document, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
    return base64.urlsafe_b64encode(raw).decode("ascii").rstrip("=")


def decode(
    text: str, kind: str, filters: str, shape: Sequence[type | tuple[type, ...]]
) -> list[Any]:
    """The position in a cursor `encode` wrote for this `kind` and `filters`.

    `shape` gives the accepted type(s) of each position element, so a damaged cursor is
    refused here rather than reaching a query."""
    document = _document(text)
    if document.get("v") != _VERSION or document.get("k") != kind:
        raise _invalid("it belongs to another list; start again without a cursor")
    if document.get("f") != filters:
        raise _invalid("the filters changed since it was issued; start again without a cursor")
    position = document.get("p")
    if not isinstance(position, list) or len(position) != len(shape):
        raise _invalid("it is damaged")
    for value, accepted in zip(position, shape, strict=True):
        if isinstance(value, bool) or not isinstance(value, accepted):
            raise _invalid("it is damaged")
    return position


def _document(text: str) -> dict[str, Any]:
    try:
        raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
        document = json.loads(raw.decode("utf-8"))
    except (binascii.Error, ValueError, UnicodeDecodeError):
        raise _invalid("it is not a cursor this server issued") from None
    if not isinstance(document, dict):
        raise _invalid("it is not a cursor this server issued")
    return document


def _invalid(why: str) -> InvalidArgument:
    return InvalidArgument(f"cursor cannot be used: {why}", field="cursor")
