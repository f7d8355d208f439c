"""kill -9 durability of the SQLite stores: no acknowledged transaction is lost, nothing corrupts.

A child process commits transactions and prints each one's number after its commit returns; the
parent SIGKILLs it mid-stream (most likely inside a transaction), reopens the database the way
the daemon would, and checks every acknowledged transaction is there.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from sqlalchemy import select

from mcpd.storage.sql.engine import Synchronous, create_sqlite_engine, read_connection
from mcpd.storage.sql.schema import control, trace
from tests.libs.storage.durability_child import ROWS_PER_TRANSACTION

CHILD = Path(__file__).with_name("durability_child.py")
ACKS_BEFORE_KILL = 200

# The writer is a child process, killed with SIGKILL.
pytestmark = [pytest.mark.e2e, pytest.mark.skipif(sys.platform == "win32", reason="needs SIGKILL")]


def _run_and_kill(db: Path, kind: str) -> list[int]:
    """Run the child until it has acknowledged enough, SIGKILL it, return every ack it printed."""
    child = subprocess.Popen(
        [sys.executable, str(CHILD), str(db), kind],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert child.stdout is not None
    acks: list[int] = []
    try:
        first = child.stdout.readline()
        assert first == "ready\n", child.stderr.read() if child.stderr else first
        while len(acks) < ACKS_BEFORE_KILL:
            line = child.stdout.readline()
            assert line, f"child exited early: {child.stderr.read() if child.stderr else ''}"
            acks.append(int(line))
        os.kill(child.pid, signal.SIGKILL)
        # Anything printed before the kill was acknowledged too: drain the pipe.
        acks.extend(int(line) for line in child.stdout.read().split())
    finally:
        child.kill()
        child.wait(timeout=30)
        child.stdout.close()
        if child.stderr is not None:
            child.stderr.close()
    assert child.returncode == -signal.SIGKILL
    return acks


def test_trace_store_survives_kill_9(tmp_path: Path) -> None:
    db = tmp_path / "trace.db"
    acks = _run_and_kill(db, "trace")

    engine = create_sqlite_engine(db, synchronous=Synchronous.NORMAL)
    try:
        with read_connection(engine) as conn:
            assert conn.exec_driver_sql("PRAGMA integrity_check").scalar() == "ok"
            ids = set(conn.execute(select(trace.logs.c.log_id)).scalars())
    finally:
        engine.dispose()
    expected = {f"{n}-{i}" for n in acks for i in range(ROWS_PER_TRANSACTION)}
    assert expected <= ids
    # Transactions are atomic: at most the one in flight beyond the acks, and it is whole or absent.
    extra = ids - expected
    assert len(extra) in (0, ROWS_PER_TRANSACTION)


def test_control_store_survives_kill_9(tmp_path: Path) -> None:
    db = tmp_path / "control.db"
    acks = _run_and_kill(db, "control")

    engine = create_sqlite_engine(db, synchronous=Synchronous.FULL)
    try:
        with read_connection(engine) as conn:
            assert conn.exec_driver_sql("PRAGMA integrity_check").scalar() == "ok"
            ids = set(conn.execute(select(control.projects.c.project_id)).scalars())
    finally:
        engine.dispose()
    assert {f"project-{n}" for n in acks} <= ids
    assert len(ids) <= len(acks) + 1
