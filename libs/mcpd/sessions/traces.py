"""Sessions from traces: what the read model keeps per trace, and how a trace store's writes
reach the code that maintains those sessions (`services.ingest.trace_sessions`).

Each trace of a session is one turn. Beside the turn's rows the store keeps a `TraceTurn` per
trace: the session it belongs to, the turn's place (its start, then the trace id) and the
small per-span facts the mapping's cross-span rules need, so a later write of the same trace
recomputes its turn from the stored events, those facts and the new spans alone.

A trace store that is followed (`Followed.follow_writes`) calls its `TraceWriteFollower` with
every write of spans: `prepare` before the write's transaction with the rows it is about to
write, `follow` inside the transaction with the rows written and the touched traces'
projections, and the callable `follow` returns once the write has committed. The follower
works on the session side of that same transaction through a `TraceTurnStore`, which the
session store binds to it (`TraceTurnStores.trace_turns`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import Any, Generic, Protocol, TypeVar, runtime_checkable

from mcpd.sessions.model import EventRecord, FileTouch, SessionRecord, TurnRecord
from mcpd.signals.rows import SpanRow, TraceRow

P = TypeVar("P")


# An event's seq in a trace session: its turn's ordinal times this, plus its ordinal.
SEQ_STRIDE = 1 << 32


@dataclass(frozen=True, slots=True)
class TraceTurn:
    """The stored state of one trace of a trace session (one row per trace)."""

    trace_id: str
    session_id: str
    session_key: str
    source: str
    turn_id: str
    # The turn's place in its session: ordered by (start, trace_id).
    start: int
    # The preview of the turn's user input (the session's title comes from its first turn's).
    prompt: str | None
    # How many file touches the turn's tool calls make (its touches' positions follow those of
    # the turns before it).
    touches: int
    # The mapping's own JSON document: the facts of every span of the trace it has seen.
    facts: Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class PlacedTurn:
    """A stored turn of a trace session, with what placing it and summing up its session need."""

    trace_id: str
    start: int
    prompt: str | None
    touches: int
    turn: TurnRecord


@dataclass(slots=True)
class SessionChange:
    """What one write changes of one trace session, for `TraceTurnStore.apply`."""

    session_id: str
    # The session row as it now is; None when it has no turn left (its row goes).
    session: SessionRecord | None
    # Turns that are new or changed (or only moved to another ordinal), and turns that are gone.
    turns: list[TurnRecord] = field(default_factory=list)
    removed_turns: list[str] = field(default_factory=list)
    # The ids of stored turns whose ordinal moved: their stored events take the seq of the new
    # one (seq = ordinal * SEQ_STRIDE + the event's ordinal), which the store sets in place (a
    # moved turn's events are not listed again).
    moved_turns: list[str] = field(default_factory=list)
    # The complete events of `event_turns` (each turn listed there has exactly these events now;
    # a turn listed without events has none).
    events: list[EventRecord] = field(default_factory=list)
    event_turns: list[str] = field(default_factory=list)
    # Touches at positions from `touches_from` on are replaced by `touches`, in order.
    touches_from: int | None = None
    touches: list[FileTouch] = field(default_factory=list)
    # Trace states to insert or replace.
    states: list[TraceTurn] = field(default_factory=list)
    # Replace every stored row of the session (turns, events, touches) with what is given: a
    # session stored before trace states were kept is rebuilt whole once.
    whole: bool = False


class TraceTurnStore(Protocol):
    """The session read model's side of one trace-store write, inside its transaction where the
    backend has transactions. Every method is scoped to one project."""

    def savepoint(self) -> AbstractContextManager[None]:
        """A scope whose changes are undone, and only those, when it raises (the write goes on
        without them)."""
        ...

    def trace_turns(self, project: str, trace_ids: Sequence[str]) -> dict[str, TraceTurn]:
        """The stored states of these traces, by trace id (a trace without one is absent)."""
        ...

    def lock_sessions(self, project: str, session_keys: Sequence[str]) -> None:
        """Serialise this write with every other writer of these sessions until it ends."""
        ...

    def sessions_by_key(self, project: str, session_keys: Sequence[str]) -> dict[str, str]:
        """The source of each of these sessions that has trace states, by session key."""
        ...

    def stored_sessions(self, project: str, session_ids: Sequence[str]) -> set[str]:
        """The ids among `session_ids` that have a session row."""
        ...

    def placed_turns(self, project: str, session_ids: Sequence[str]) -> dict[str, list[PlacedTurn]]:
        """The stored turns of these sessions that have trace states, by session id, in
        ordinal order."""
        ...

    def turn_events(self, project: str, turn_ids: Sequence[str]) -> list[EventRecord]:
        """The stored events of these turns (any order)."""
        ...

    def touches_from(self, project: str, session_id: str, position: int) -> list[FileTouch]:
        """The session's stored touches at positions from `position` on, in position order."""
        ...

    def trace_spans(self, project: str, trace_ids: Sequence[str]) -> list[SpanRow]:
        """Every stored span of these traces (held spans not included), with the columns
        `mcpd.signals.rows.SESSION_SPAN_COLUMNS`: a read-back, for what the states lack."""
        ...

    def session_traces(self, project: str, session_key: str) -> list[str]:
        """The ids of the stored traces that have a span carrying this session id."""
        ...

    def apply(self, project: str, changes: Sequence[SessionChange]) -> None:
        """Write the changes (one read-model version for them all)."""
        ...

    def after_commit(self) -> None:
        """Bring what follows the read model outside the database (a search index) in step with
        what `apply` wrote, once the write has committed."""
        ...


@runtime_checkable
class TraceTurnStores(Protocol):
    """A session store that keeps trace sessions."""

    def trace_turns(self, transaction: object) -> TraceTurnStore:
        """The session side of one trace-store write: `transaction` is what the trace store
        passed its follower (`FollowedWrite.transaction`)."""
        ...

    def nudge_search_index(self) -> None:
        """Another process changed the read model: catch the search index up soon (where the
        index lives outside the database and this process writes it). Never blocks."""
        ...


@dataclass(frozen=True, slots=True)
class FollowedWrite(Generic[P]):
    """One write of spans as its follower sees it, inside the write's transaction."""

    # The backend's transaction (a SQLAlchemy Connection; None on ClickHouse, which has none).
    transaction: object
    # The span rows written (the latest version of each, the caller's rows), and the
    # projections of the traces the write touched (spans, scores or feedback).
    spans: Sequence[SpanRow]
    traces: Sequence[TraceRow]
    # What the follower's `prepare` made of the rows before the transaction.
    prepared: P


class TraceWriteFollower(Protocol[P]):
    """Keeps a read model in step with a trace store's writes of spans (see the module
    docstring). Must not raise out of `follow`: a failure there would fail the write."""

    def prepare(self, spans: Sequence[SpanRow]) -> P:
        """Work on the rows about to be written that needs no database (it runs before the
        write's transaction, so it holds no lock)."""
        ...

    def follow(self, write: FollowedWrite[P]) -> Callable[[], None]:
        """Bring the read model in step with `write`, inside its transaction; return what to do
        once it has committed."""
        ...


@runtime_checkable
class Followed(Protocol):
    """A trace store whose writes of spans can be followed."""

    def follow_writes(self, follower: TraceWriteFollower[Any]) -> None:
        """Have `follower` told every write of spans from now on (one follower per store)."""
        ...
