"""The one error hierarchy of mcpd.

Domain code raises these; the gRPC error interceptor turns them into `google.rpc.Status` with one
`google.rpc.ErrorInfo` (domain `mcpd`), the gateway turns that status into the REST error body,
and the MCP server into the spec's error envelope. Nothing else maps errors.

A message quotes what the caller sent with `quoted`, which shows at most `QUOTE_LIMIT`
characters of it, so a refusal never echoes a megabyte back. Every error's message is cut to
`MAX_MESSAGE_LENGTH` (and its field to `QUOTE_LIMIT`) when it is made, whatever it holds; the
start, which names the field at fault, is what is kept.
"""

# The class names are the gRPC status vocabulary (NotFound, InvalidArgument), which reads better
# at raise sites than an Error suffix would.
# ruff: noqa: N818

from __future__ import annotations

from collections.abc import Mapping, Sequence

import grpc
from google.protobuf.message import Message

DOMAIN = "mcpd"
QUOTE_LIMIT = 200
MAX_MESSAGE_LENGTH = 1024


def quoted(value: object, limit: int = QUOTE_LIMIT) -> str:
    """How a message quotes a value the caller sent: its repr, in at most `limit` characters
    (`shortened`)."""
    return shortened(repr(value), limit)


def shortened(text: str, limit: int) -> str:
    """`text` in at most `limit` characters: whole, or its start followed by
    `… (N more characters)`."""
    if len(text) <= limit:
        return text
    # Sized with the whole length, so the marker's count has at most as many digits.
    keep = max(limit - len(_more(len(text))), 0)
    return text[:keep] + _more(len(text) - keep)


def _more(count: int) -> str:
    return f"… ({count} more characters)"


class McpdError(Exception):
    """Root of every error mcpd reports to a caller.

    `reason` is an UPPER_SNAKE identifier a program can branch on; `field` names the request
    field at fault, as a dotted path (`spans[0].start_time`), when one is. `retry_after_s` says
    how long a caller should wait before trying again (a `google.rpc.RetryInfo` on gRPC, a
    `Retry-After` header over HTTP), when waiting is what would help. `details` are messages a
    caller reads beside the ErrorInfo (a StepConflict on a 409 from a worker call): packed into
    the gRPC status, and the body a REST caller gets when the gateway knows their type.
    """

    code: grpc.StatusCode = grpc.StatusCode.UNKNOWN
    default_reason: str = "UNKNOWN"

    def __init__(
        self,
        message: str,
        *,
        reason: str | None = None,
        field: str | None = None,
        metadata: Mapping[str, str] | None = None,
        retry_after_s: float | None = None,
        details: Sequence[Message] = (),
    ) -> None:
        message = shortened(message, MAX_MESSAGE_LENGTH)
        super().__init__(message)
        self.message = message
        self.reason = reason or self.default_reason
        self.field = None if field is None else shortened(field, QUOTE_LIMIT)
        self.metadata = dict(metadata or {})
        self.retry_after_s = retry_after_s
        self.details = tuple(details)


class InvalidArgument(McpdError):
    """The request is malformed: a bad value, a wrong type, an unknown field."""

    code = grpc.StatusCode.INVALID_ARGUMENT
    default_reason = "INVALID_ARGUMENT"


class FailedPrecondition(McpdError):
    """The request is well formed but the system is not in a state to accept it."""

    code = grpc.StatusCode.FAILED_PRECONDITION
    default_reason = "FAILED_PRECONDITION"


class NotFound(McpdError):
    """The named resource does not exist (in the caller's project)."""

    code = grpc.StatusCode.NOT_FOUND
    default_reason = "NOT_FOUND"


class AlreadyExists(McpdError):
    """The resource the request would create exists already."""

    code = grpc.StatusCode.ALREADY_EXISTS
    default_reason = "ALREADY_EXISTS"


class Conflict(McpdError):
    """The request lost a race with another change (optimistic concurrency, a stale lease)."""

    code = grpc.StatusCode.ABORTED
    default_reason = "CONFLICT"


class Unauthenticated(McpdError):
    """No credentials, or credentials mcpd does not recognise."""

    code = grpc.StatusCode.UNAUTHENTICATED
    default_reason = "UNAUTHENTICATED"


class PermissionDenied(McpdError):
    """Credentials are valid but do not grant this request."""

    code = grpc.StatusCode.PERMISSION_DENIED
    default_reason = "PERMISSION_DENIED"


class ResourceExhausted(McpdError):
    """A bound was reached: a queue is full, a quota is spent, a payload is too large."""

    code = grpc.StatusCode.RESOURCE_EXHAUSTED
    default_reason = "RESOURCE_EXHAUSTED"


class Unavailable(McpdError):
    """A dependency (storage, a peer service) cannot be reached right now; retrying may help."""

    code = grpc.StatusCode.UNAVAILABLE
    default_reason = "UNAVAILABLE"


class Unimplemented(McpdError):
    """The RPC exists in the API surface but its capability has not landed yet."""

    code = grpc.StatusCode.UNIMPLEMENTED
    default_reason = "UNIMPLEMENTED"


class Internal(McpdError):
    """A bug or an invariant violated inside mcpd. The message never carries internals."""

    code = grpc.StatusCode.INTERNAL
    default_reason = "INTERNAL"
