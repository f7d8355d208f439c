"""Group commit for a SQLite store's write transactions: concurrent callers share one.

SQLite lets one writer in at a time, and a writer that finds the lock taken sleeps in steps
(its busy handler) rather than waking when the lock is free: threads that each run a short
transaction spend most of their time asleep in `BEGIN IMMEDIATE`. Here a caller queues its
work and one of the waiting threads, the leader, runs every piece queued by then in ONE
transaction, each piece inside a savepoint of its own, so a piece that raises is rolled back
alone and its caller gets the exception while the others commit. Every caller returns only once
the transaction holding its piece has committed (or failed), so nothing is answered before it
is durable, as with a transaction of its own. A piece sees the writes of the pieces before it,
exactly as if the transactions had run one after another.

PostgreSQL has row locks and does not need this: pieces of one transaction that lock rows in
different orders could deadlock with another process's.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from sqlalchemy import Connection, text
from sqlalchemy.engine import Engine

from mcpd.storage.sql.driver import DriverStatement

__all__ = ["GroupCommit"]

T = TypeVar("T")
# Enough to amortise a commit, few enough that one group does not hold the lock for long.
MAX_GROUP = 64
# A piece's savepoint, run on the driver's cursor: SQLAlchemy's nested transaction costs
# several times as much, inside the write lock.
_SAVEPOINT, _RELEASE, _ROLLBACK_TO = (
    DriverStatement(text(f"{verb} group_piece"))
    for verb in ("SAVEPOINT", "RELEASE SAVEPOINT", "ROLLBACK TO SAVEPOINT")
)


@dataclass(slots=True)
class _Piece(Generic[T]):
    work: Callable[[Connection], T]
    done: bool = False
    value: Any = None
    error: BaseException | None = field(default=None)

    def result(self) -> T:
        if self.error is not None:
            raise self.error
        return self.value  # type: ignore[no-any-return]


class GroupCommit:
    """Runs write work on `engine` in shared transactions (see the module docstring)."""

    def __init__(self, engine: Engine, *, max_group: int = MAX_GROUP) -> None:
        self._engine = engine
        self._max_group = max_group
        self._queued: list[_Piece[Any]] = []
        self._queue_lock = threading.Lock()
        # Held by the leader for the length of its transaction: one writer per process.
        self._leader = threading.Lock()
        self._leading: int | None = None

    def pending(self) -> int:
        """How many pieces of work wait for a transaction."""
        with self._queue_lock:
            return len(self._queued)

    def run(self, work: Callable[[Connection], T]) -> T:
        """Run `work` in a transaction shared with other callers; its answer once committed.
        Work must not call `run` itself: it would wait for the transaction it is part of."""
        if self._leading == threading.get_ident():
            raise RuntimeError("a group commit's work cannot start another write")
        piece: _Piece[T] = _Piece(work)
        with self._queue_lock:
            self._queued.append(piece)
        while not piece.done:
            with self._leader:
                if not piece.done:
                    self._lead()
        return piece.result()

    def _lead(self) -> None:
        with self._queue_lock:
            group = self._queued[: self._max_group]
            del self._queued[: self._max_group]
        self._leading = threading.get_ident()
        try:
            with self._engine.begin() as conn:
                if len(group) == 1:  # alone, it needs no savepoint: its failure rolls back all
                    group[0].value = group[0].work(conn)
                    return
                for piece in group:
                    try:
                        with _savepoint(conn):
                            piece.value = piece.work(conn)
                    except Exception as error:  # the piece's own failure, rolled back alone
                        piece.error = error
        except Exception as error:  # the transaction itself failed: every piece did
            for piece in group:
                piece.error = error
        finally:
            self._leading = None
            for piece in group:
                piece.done = True


@contextmanager
def _savepoint(conn: Connection) -> Iterator[None]:
    """The block's writes in a savepoint: kept when it returns, undone when it raises."""
    _SAVEPOINT.execute(conn, {})
    try:
        yield
    except BaseException:
        _ROLLBACK_TO.execute(conn, {})
        _RELEASE.execute(conn, {})
        raise
    _RELEASE.execute(conn, {})
