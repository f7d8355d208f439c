"""The pytest plugin of mcpd's own suite, loaded by ``pyproject.toml`` (``-p``): the check that
keeps daemons out of the fast lane, and the migrated store templates every test tree uses.

``make test-fast`` runs ``-m "not e2e"``: the edit loop, without daemons. What keeps a daemon
out of it is a check in every lane, not only the fast one: a test that is not marked ``e2e``
and starts a process of ours fails on the spot, so a missing marker shows in the first run that
has the test, whichever. A process of ours is a Python interpreter (whatever it runs: ``mcpd
serve``, a store writer to kill, a probe), the ``mcpd`` script, the OpenTelemetry JS exporter
under ``node``, or a fork of the test process. Other programs (``git``, ``kubectl``, ``uname``,
``grpcurl`` against an in-process server) are tools a unit test may use.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Generator, Iterator
from pathlib import Path
from typing import Any

import pytest

from mcpd.testing.templates import ClickHouseTemplate, PostgresTemplates, SqliteTemplates

POSTGRES_ENV = "MCPD_TEST_POSTGRES_URL"
POSTGRES_SKIP = f"{POSTGRES_ENV} is not set: PostgreSQL tests skipped"
E2E_MARKER = "e2e"
OUR_PROGRAMS = frozenset({"mcpd", "node"})
_CHILD_EVENTS = frozenset({"subprocess.Popen", "os.posix_spawn", "os.fork", "os.forkpty"})


class UnmarkedProcessError(RuntimeError):
    """A test without the ``e2e`` marker started a process of ours."""


class _Guard:
    """Which running test may not start children: set around each phase of an unmarked test,
    and read by the audit hook (from whichever thread starts the child)."""

    def __init__(self) -> None:
        self.unmarked_test: str | None = None

    def audit(self, event: str, args: tuple[Any, ...]) -> None:
        if event not in _CHILD_EVENTS or self.unmarked_test is None:
            return
        program = _program(event, args)
        if not _is_ours(program):
            return
        raise UnmarkedProcessError(
            f"{self.unmarked_test} starts a process of ours ({program or event}) but is not "
            f"marked {E2E_MARKER}: mark it (pytest.mark.{E2E_MARKER}) so that make test-fast, "
            "which runs none, leaves it out"
        )


def _is_ours(program: str) -> bool:
    """Whether a child running ``program`` ("" for a fork) is a process of ours."""
    return not program or program in OUR_PROGRAMS or program.startswith("python")


def _program(event: str, args: tuple[Any, ...]) -> str:
    """The file name of the program an audit event starts ("" for a fork)."""
    if event == "subprocess.Popen":
        executable, argv = args[0], args[1]
        if executable is None:
            executable = argv if isinstance(argv, str | bytes | os.PathLike) else argv[0]
        return Path(os.fsdecode(executable)).name.partition(" ")[0]
    if event == "os.posix_spawn":
        return Path(os.fsdecode(args[0])).name
    return ""


_GUARD = _Guard()
sys.addaudithook(_GUARD.audit)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(
    item: pytest.Item, nextitem: pytest.Item | None
) -> Generator[None, object, object]:
    marked = item.get_closest_marker(E2E_MARKER) is not None
    # Restored, not cleared, afterwards: a test may run a pytest session of its own inside.
    outer = _GUARD.unmarked_test
    _GUARD.unmarked_test = None if marked else item.nodeid
    try:
        return (yield)
    finally:
        _GUARD.unmarked_test = outer


@pytest.fixture(scope="session")
def sqlite_templates(tmp_path_factory: pytest.TempPathFactory) -> SqliteTemplates:
    """Migrated SQLite stores to copy (see `mcpd.testing.templates`)."""
    return SqliteTemplates(tmp_path_factory.mktemp("sqlite-templates"))


@pytest.fixture(scope="session")
def postgres_templates() -> Iterator[PostgresTemplates]:
    """Migrated PostgreSQL template databases on the server of MCPD_TEST_POSTGRES_URL (whose
    own database is the admin one); skips the test without it."""
    url = os.environ.get(POSTGRES_ENV)
    if not url:
        pytest.skip(POSTGRES_SKIP)
    templates = PostgresTemplates(url)
    try:
        yield templates
    finally:
        templates.close()


@pytest.fixture(scope="session")
def clickhouse_template(tmp_path_factory: pytest.TempPathFactory) -> ClickHouseTemplate:
    """A migrated chdb data directory to copy."""
    return ClickHouseTemplate(tmp_path_factory.mktemp("clickhouse-template"))
