"""The suite's plugin: a test that starts a child process without the e2e marker fails, so no
daemon can slip into make test-fast; marked tests, and the tools any test may run, are let be.

Each case runs a small test file in this process (pytester's inline run), with the plugin loaded
as pyproject.toml loads it."""

from __future__ import annotations

import pytest

pytest_plugins = ("pytester",)

SUITE = """
import subprocess
import sys

import pytest


def test_unmarked_python_child():
    subprocess.run([sys.executable, "-c", "pass"], check=True)


async def test_unmarked_asyncio_child():
    import asyncio

    await asyncio.create_subprocess_exec("true")


def test_unmarked_git():
    subprocess.run(["git", "--version"], check=True, capture_output=True)


@pytest.mark.e2e
def test_marked_child():
    subprocess.run(["true"], check=True)


@pytest.mark.e2e
class TestMarkedClass:
    def test_child(self):
        subprocess.run(["true"], check=True)
"""


INI = """
[pytest]
asyncio_mode = auto
asyncio_default_fixture_loop_scope = function
markers =
    e2e: starts processes
"""


@pytest.fixture
def outcomes(pytester: pytest.Pytester) -> dict[str, str]:
    """Each test of SUITE and how it ended."""
    pytester.makeini(INI)
    pytester.makepyfile(test_suite=SUITE)
    result = pytester.inline_run("-p", "mcpd.testing.pytest_plugin")
    return {
        report.nodeid.rpartition("::")[2]: report.outcome
        for report in result.getreports("pytest_runtest_logreport")
        if report.when == "call"
    }


def test_an_unmarked_test_that_starts_a_child_fails(outcomes: dict[str, str]) -> None:
    assert outcomes["test_unmarked_python_child"] == "failed"
    assert outcomes["test_unmarked_asyncio_child"] == "failed"


def test_marked_tests_and_git_may_start_children(outcomes: dict[str, str]) -> None:
    assert outcomes["test_unmarked_git"] == "passed"
    assert outcomes["test_marked_child"] == "passed"
    assert outcomes["test_child"] == "passed"


def test_the_failure_names_the_test_the_program_and_the_marker(pytester: pytest.Pytester) -> None:
    pytester.makeini(INI)
    pytester.makepyfile(
        test_one="import subprocess, sys\n\n"
        "def test_child():\n"
        "    subprocess.run([sys.executable, '-c', 'pass'])\n"
    )
    result = pytester.runpytest_inprocess("-p", "mcpd.testing.pytest_plugin")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        ["*UnmarkedChildProcess: test_one.py::test_child starts a child process (python*"]
    )
    result.stdout.fnmatch_lines(["*not marked e2e*"])
