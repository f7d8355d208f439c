"""The request body: its encoding (Content-Type), its compression, and the size limit."""

from __future__ import annotations

import enum
import zlib

from starlette.requests import ClientDisconnect, Request

from gateway.otlp._status import RefusalError
from mcpd.runtime.errors import InvalidArgument, ResourceExhausted, quoted

BODY_TOO_LARGE = "BODY_TOO_LARGE"
UNSUPPORTED_MEDIA_TYPE = "UNSUPPORTED_MEDIA_TYPE"
UNSUPPORTED_CONTENT_ENCODING = "UNSUPPORTED_CONTENT_ENCODING"
MALFORMED_GZIP = "MALFORMED_GZIP"
BODY_INCOMPLETE = "BODY_INCOMPLETE"

# gzip's container (header and CRC-32 trailer) around a deflate stream, and nothing else.
_GZIP_WBITS = 16 + zlib.MAX_WBITS
# How much of the body zlib is given at a time (see `gunzip`).
_GZIP_SLICE = 64 * 1024
MAX_GZIP_MEMBERS = 64
"""The most gzip members a body may hold (RFC 1952 allows many; OTLP exporters send one)."""


class Encoding(enum.Enum):
    """How an OTLP message is written in the body: binary protobuf, or OTLP's JSON mapping."""

    PROTOBUF = "protobuf"
    JSON = "json"


_MEDIA_TYPES = {
    "application/x-protobuf": Encoding.PROTOBUF,
    # The registered name of the same encoding; OTLP clients send the x- form.
    "application/protobuf": Encoding.PROTOBUF,
    "application/json": Encoding.JSON,
}


def media_type(request: Request) -> tuple[str, Encoding]:
    """The request's media type (answered back as the response's) and its encoding; 415 if
    it is neither protobuf nor JSON."""
    header = request.headers.get("content-type", "")
    media = header.partition(";")[0].strip().lower()
    encoding = _MEDIA_TYPES.get(media)
    if encoding is None:
        shown = f"Content-Type {quoted(header)}" if header else "no Content-Type"
        raise RefusalError(
            415,
            InvalidArgument(
                f"{shown}: OTLP/HTTP bodies are application/x-protobuf or application/json",
                reason=UNSUPPORTED_MEDIA_TYPE,
            ),
        )
    return media, encoding


def is_gzipped(request: Request) -> bool:
    """Whether the body is gzip-compressed; 415 for any other content coding."""
    header = request.headers.get("content-encoding")
    if header is None:
        return False
    codings = [c.strip().lower() for c in header.split(",")]
    codings = [c for c in codings if c not in ("", "identity")]
    if not codings:
        return False
    if codings in (["gzip"], ["x-gzip"]):
        return True
    raise RefusalError(
        415,
        InvalidArgument(
            f"Content-Encoding {quoted(header)}: OTLP/HTTP bodies may be gzip-compressed, or not",
            reason=UNSUPPORTED_CONTENT_ENCODING,
        ),
        headers={"Accept-Encoding": "gzip, identity"},
    )


async def read_body(request: Request, limit: int) -> bytes:
    """The body as sent; 413 as soon as it exceeds `limit` bytes, without reading the rest."""
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit:
        raise too_large(limit)
    chunks: list[bytes] = []
    size = 0
    try:
        async for chunk in request.stream():
            size += len(chunk)
            if size > limit:
                raise too_large(limit)
            if chunk:
                chunks.append(chunk)
    except ClientDisconnect:
        # Nobody reads the answer; this keeps a client that hung up out of the error log.
        raise RefusalError(
            400, InvalidArgument("the client left before the body ended", reason=BODY_INCOMPLETE)
        ) from None
    # join returns a lone chunk itself, so the usual one-chunk body is not copied.
    return b"".join(chunks)


def gunzip(data: bytes, limit: int, *, max_members: int = MAX_GZIP_MEMBERS) -> bytes:
    """Inflate a gzip body (several members are concatenated, as gzip itself does).

    Linear in the input: the body is fed to zlib in slices of `_GZIP_SLICE` bytes, so the end
    of a member copies at most one slice (slicing the remainder once per member would be
    quadratic in a body of many tiny members). Bounded in output: at most `limit + 1` bytes are
    ever inflated, so a small body that would inflate to gigabytes (a gzip bomb) costs no more
    memory than the limit before it is refused with 413. Bounded in members: past
    `max_members` the body is refused with 400 (OTLP exporters send one).
    """
    view = memoryview(data)
    pieces: list[bytes] = []
    size = offset = members = 0
    while offset < len(view) or members == 0:
        members += 1
        if members > max_members:
            raise RefusalError(
                400,
                InvalidArgument(
                    f"the gzip body has more than {max_members} members", reason=MALFORMED_GZIP
                ),
            )
        inflater = zlib.decompressobj(_GZIP_WBITS)
        while not inflater.eof:
            if offset >= len(view):
                raise RefusalError(
                    400, InvalidArgument("the gzip body is truncated", reason=MALFORMED_GZIP)
                )
            piece = _inflate(inflater, view[offset : offset + _GZIP_SLICE], limit - size + 1)
            offset += min(_GZIP_SLICE, len(view) - offset)
            size += len(piece)
            if size > limit:
                raise too_large(limit, inflated=True)
            pieces.append(piece)
        # What the slice held past this member's end belongs to the next one.
        offset -= len(inflater.unused_data)
    return b"".join(pieces)


def _inflate(inflater: zlib._Decompress, data: memoryview, room: int) -> bytes:
    try:
        return inflater.decompress(data, room)
    except zlib.error as exc:
        raise RefusalError(
            400, InvalidArgument(f"the body is not valid gzip: {exc}", reason=MALFORMED_GZIP)
        ) from exc


def too_large(limit: int, *, inflated: bool = False) -> RefusalError:
    """The 413 refusal (OTLP clients do not retry it)."""
    what = "the inflated request body" if inflated else "the request body"
    error = ResourceExhausted(f"{what} exceeds {limit} bytes", reason=BODY_TOO_LARGE)
    return RefusalError(413, error)
