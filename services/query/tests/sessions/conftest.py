"""Fixtures: a SessionStore (the in-memory edge fake, and the SQL store when it exists), the
tools over it on a manual clock, and a helper to call a tool and get its envelope."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from mcpd.runtime.clock import ManualClock
from mcpd.sessions.model import AssembledSession
from mcpd.sessions.store import SessionStore
from services.query.sessions import OUTPUT_SCHEMAS, SessionTools, ToolResult
from services.query.tests.sessions.memory_store import MemorySessionStore
from services.query.tests.sessions.sql_store import open_sqlite

CURSOR_KEY = b"test-cursor-key-0123456789abcdef"
SOURCES = ("codex", "claude", "pi", "omp")


STORE_KINDS = ["memory", "sqlite"]


@pytest.fixture(params=STORE_KINDS)
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[SessionStore]:
    """Each SessionStore under test: the in-memory edge fake and the real SqlSessionStore on
    SQLite with its tantivy index."""
    if request.param == "memory":
        yield MemorySessionStore()
        return
    opened = open_sqlite(tmp_path, request.getfixturevalue("sqlite_templates"))
    try:
        yield opened
    finally:
        opened.close()


@pytest.fixture
def memory() -> MemorySessionStore:
    """The in-memory store alone, for tests that inject failures or churn."""
    return MemorySessionStore()


@pytest.fixture
def clock() -> ManualClock:
    """A clock that moves only when told to."""
    return ManualClock()


def make_tools(store: SessionStore, clock: ManualClock, **kw: Any) -> SessionTools:
    """SessionTools with the test key and sources."""
    kw.setdefault("max_results", 50)
    return SessionTools(store, clock=clock, cursor_key=CURSOR_KEY, sources=SOURCES, **kw)


@pytest.fixture
def tools(store: SessionStore, clock: ManualClock) -> SessionTools:
    """The tools over the parametrized store."""
    return make_tools(store, clock)


def seed(store: SessionStore, *sessions: AssembledSession) -> None:
    """Write sessions under the project their records name."""
    for assembled in sessions:
        store.write_session(assembled.session.project, assembled)


async def run(tools: SessionTools, tool: str, arguments: Any, project: str) -> ToolResult:
    """Call one tool by name."""
    method: Callable[[str, Any], Awaitable[ToolResult]] = getattr(tools, tool)
    return await method(project, arguments)


async def call(
    tools: SessionTools, tool: str, arguments: Any, project: str = "proj-a"
) -> dict[str, Any]:
    """The envelope of one call, checked against the tool's declared output schema and the
    error flag."""
    result = await run(tools, tool, arguments, project)
    jsonschema.validate(result.envelope, OUTPUT_SCHEMAS[tool])
    assert result.is_error == ("error" in result.envelope)
    return result.envelope


def error_of(envelope: dict[str, Any]) -> tuple[str, str | None]:
    """(code, details.field) of an error envelope."""
    assert "error" in envelope, envelope
    error = envelope["error"]
    return error["code"], error["details"].get("field")
