"""The tools' in-band errors (spec: Error Envelope) and the mapping of exceptions onto them.

A `ToolError` is an answer, not a failure: the runner turns it into the error envelope. Store
exceptions are classified here, in one place, so every tool reports backend trouble alike.
"""

from __future__ import annotations

import logging
import sqlite3
from typing import Any, Final

import sqlalchemy.exc

from mcpd.runtime import errors as mcpd_errors

INVALID_REQUEST: Final = "invalid_request"
INVALID_ID: Final = "invalid_id"
NOT_FOUND: Final = "not_found"
UNSUPPORTED_EVENT_TYPE: Final = "unsupported_event_type"
CANCELLED: Final = "cancelled"
DEADLINE_EXCEEDED: Final = "deadline_exceeded"
BUSY: Final = "busy"
RESOURCE_EXHAUSTED: Final = "resource_exhausted"
BACKEND_FAILURE: Final = "backend_failure"
INTERNAL_ERROR: Final = "internal_error"

ERROR_CODES: Final = (
    INVALID_REQUEST,
    INVALID_ID,
    NOT_FOUND,
    UNSUPPORTED_EVENT_TYPE,
    CANCELLED,
    DEADLINE_EXCEEDED,
    BUSY,
    RESOURCE_EXHAUSTED,
    BACKEND_FAILURE,
    INTERNAL_ERROR,
)

# How long a client should wait before retrying a search that raced a read-model update: long
# enough for one ingest transaction to commit, short enough not to stall an agent.
REFRESH_RETRY_AFTER_MS: Final = 250

_log = logging.getLogger(__name__)


class ToolError(Exception):
    """A rejected request or failed lookup, reported as `error.{code, message, details}`."""

    def __init__(self, code: str, message: str, **details: Any) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.details: dict[str, Any] = details


def invalid(field: str, message: str, **details: Any) -> ToolError:
    """An `invalid_request` naming the argument at fault."""
    return ToolError(INVALID_REQUEST, message, field=field, **details)


def read_model_refresh() -> ToolError:
    """The rows behind a result vanished mid-request: an ingest update is being published."""
    return ToolError(
        INTERNAL_ERROR,
        "the search read model is being refreshed; retry shortly",
        reason="read_model_refresh",
        retryable=True,
        retry_after_ms=REFRESH_RETRY_AFTER_MS,
    )


def from_exception(tool: str, exc: Exception) -> ToolError:
    """The error a store or handler exception is reported as (never its internals)."""
    if isinstance(exc, ToolError):
        return exc
    if isinstance(exc, mcpd_errors.ResourceExhausted):
        return ToolError(RESOURCE_EXHAUSTED, "a storage limit was reached", retryable=False)
    if isinstance(exc, mcpd_errors.NotFound):
        return ToolError(NOT_FOUND, exc.message)
    if isinstance(exc, mcpd_errors.InvalidArgument):
        return ToolError(
            INVALID_REQUEST, exc.message, **({"field": exc.field} if exc.field else {})
        )
    if isinstance(exc, TimeoutError):
        return ToolError(DEADLINE_EXCEEDED, "the request deadline passed")
    if isinstance(
        exc,
        mcpd_errors.Unavailable | sqlalchemy.exc.SQLAlchemyError | sqlite3.Error | OSError,
    ):
        # Logged with its traceback here; the caller sees only that storage failed.
        _log.warning("%s: storage failure: %s", tool, exc, exc_info=exc)
        return ToolError(BACKEND_FAILURE, "the session store failed", retryable=True)
    _log.error("%s: internal error", tool, exc_info=exc)
    return ToolError(INTERNAL_ERROR, f"{tool} failed unexpectedly ({type(exc).__name__})")
