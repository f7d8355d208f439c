"""The suite's plugin: a test that starts a process of ours without the e2e marker fails, so no
daemon can slip into make test-fast; marked tests, and other programs (tools), are let be.

Each case runs a small test file in this process (pytester's inline run), with the plugin loaded
as pyproject.toml loads it."""

from __future__ import annotations

import pytest

pytest_plugins = ("pytester",)

UNMARKED = """
import subprocess
import sys


def test_python_child():
    subprocess.run([sys.executable, "-c", "pass"], check=True)


async def test_asyncio_child():
    import asyncio

    await asyncio.create_subprocess_exec(sys.executable, "-c", "pass")


def test_fork():
    import os

    pid = os.fork()
    if pid == 0:
        os._exit(0)
    os.waitpid(pid, 0)


def test_mcpd():
    subprocess.run(["mcpd", "--version"], check=True)


def test_git():
    subprocess.run(["git", "--version"], check=True, capture_output=True)
"""

MARKED = """
import subprocess
import sys

import pytest


@pytest.mark.e2e
def test_python_child():
    subprocess.run([sys.executable, "-c", "pass"], check=True)


@pytest.mark.e2e
class TestMarkedClass:
    def test_child(self):
        subprocess.run([sys.executable, "-c", "pass"], check=True)
"""

INI = """
[pytest]
asyncio_mode = auto
asyncio_default_fixture_loop_scope = function
markers =
    e2e: starts processes
"""


def outcomes(pytester: pytest.Pytester, suite: str) -> dict[str, str]:
    """Each test of `suite`, run with the plugin, and how it ended."""
    pytester.makeini(INI)
    pytester.makepyfile(test_suite=suite)
    result = pytester.inline_run("-p", "mcpd.testing.pytest_plugin")
    return {
        report.nodeid.rpartition("::")[2]: report.outcome
        for report in result.getreports("pytest_runtest_logreport")
        if report.when == "call"
    }


def test_an_unmarked_test_may_run_tools_but_no_process_of_ours(pytester: pytest.Pytester) -> None:
    # Each refusal comes before the process starts: this test starts none of ours either.
    assert outcomes(pytester, UNMARKED) == {
        "test_python_child": "failed",
        "test_asyncio_child": "failed",
        "test_fork": "failed",
        "test_mcpd": "failed",
        "test_git": "passed",
    }


@pytest.mark.e2e
def test_a_marked_test_or_class_may_start_processes_of_ours(pytester: pytest.Pytester) -> None:
    assert outcomes(pytester, MARKED) == {"test_python_child": "passed", "test_child": "passed"}


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
        ["*UnmarkedProcessError: test_one.py::test_child starts a process of ours (python*"]
    )
    result.stdout.fnmatch_lines(["*not marked e2e*"])
