"""Group commit on a real SQLite file: concurrent callers share a transaction and each gets its
own answer; a piece that fails is rolled back alone and its caller gets the error; nothing is
answered before its transaction commits; work cannot start another write."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from sqlalchemy import Column, Connection, Engine, Integer, MetaData, Table, event, insert, select

from mcpd.storage.sql.engine import Synchronous, create_sqlite_engine
from mcpd.storage.sql.group_commit import GroupCommit
from mcpd.testing.eventually import eventually

metadata = MetaData()
numbers = Table("numbers", metadata, Column("n", Integer, primary_key=True))


@pytest.fixture
def engine(tmp_path: Path) -> Iterator[Engine]:
    made = create_sqlite_engine(tmp_path / "group.db", synchronous=Synchronous.NORMAL)
    metadata.create_all(made)
    yield made
    made.dispose()


def _begins(engine: Engine) -> list[str]:
    """The write transactions begun on `engine` from now on."""
    seen: list[str] = []

    @event.listens_for(engine, "before_cursor_execute")
    def count(_conn: object, _cursor: object, statement: str, *_args: object) -> None:
        if statement.startswith("BEGIN IMMEDIATE"):
            seen.append(statement)

    return seen


def _pending(group: GroupCommit, count: int) -> None:
    assert group.pending() == count


def _stored(engine: Engine) -> list[int]:
    with engine.connect() as conn:
        return sorted(row.n for row in conn.execute(select(numbers.c.n)))


def _put(n: int) -> Callable[[Connection], int]:
    def work(conn: Connection) -> int:
        conn.execute(insert(numbers).values(n=n))
        return n * 10

    return work


def test_callers_waiting_behind_a_transaction_share_the_next_one(engine: Engine) -> None:
    group = GroupCommit(engine)
    begins = _begins(engine)
    inside, go = threading.Event(), threading.Event()

    def first(conn: Connection) -> str:
        conn.execute(insert(numbers).values(n=0))
        inside.set()
        go.wait(10)
        return "first"

    with ThreadPoolExecutor(5) as pool:
        leading = pool.submit(group.run, first)
        assert inside.wait(10)
        followers = [pool.submit(group.run, _put(n)) for n in range(1, 5)]
        eventually(lambda: _pending(group, 4), timeout=10, interval=0.01)
        assert not any(future.done() for future in followers)
        go.set()
        assert leading.result(10) == "first"
        assert [future.result(10) for future in followers] == [10, 20, 30, 40]

    assert len(begins) == 2  # the first caller's transaction, then one for the four others
    assert _stored(engine) == [0, 1, 2, 3, 4]
    assert group.pending() == 0


def test_a_failing_piece_is_rolled_back_alone_and_its_caller_gets_the_error(
    engine: Engine,
) -> None:
    group = GroupCommit(engine)
    inside, go = threading.Event(), threading.Event()

    def hold(conn: Connection) -> None:
        inside.set()
        go.wait(10)

    def broken(conn: Connection) -> None:
        conn.execute(insert(numbers).values(n=99))
        raise ValueError("no")

    with ThreadPoolExecutor(4) as pool:
        held = pool.submit(group.run, hold)
        assert inside.wait(10)
        before = pool.submit(group.run, _put(1))
        eventually(lambda: _pending(group, 1), timeout=10, interval=0.01)
        failing = pool.submit(group.run, broken)
        eventually(lambda: _pending(group, 2), timeout=10, interval=0.01)
        after = pool.submit(group.run, _put(2))
        eventually(lambda: _pending(group, 3), timeout=10, interval=0.01)
        go.set()
        held.result(10)
        with pytest.raises(ValueError, match="no"):
            failing.result(10)
        assert (before.result(10), after.result(10)) == (10, 20)

    assert _stored(engine) == [1, 2]


def test_a_lone_piece_that_fails_writes_nothing(engine: Engine) -> None:
    group = GroupCommit(engine)

    def broken(conn: Connection) -> None:
        conn.execute(insert(numbers).values(n=7))
        raise KeyError("gone")

    with pytest.raises(KeyError, match="gone"):
        group.run(broken)
    assert group.run(_put(8)) == 80
    assert _stored(engine) == [8]


def test_work_cannot_start_another_write(engine: Engine) -> None:
    group = GroupCommit(engine)

    def nested(conn: Connection) -> int:
        conn.execute(insert(numbers).values(n=1))
        return group.run(_put(2))

    with pytest.raises(RuntimeError, match="cannot start another write"):
        group.run(nested)
    assert _stored(engine) == []
