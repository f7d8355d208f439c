"""Sessions from ingested traces: every trace whose spans carry a session id becomes a turn of a
session of the read model (harness `mcpd`), searchable with the MCP tools like transcripts.

**Where sessions are written.** `TraceSessions` follows the trace store's writes of spans
(`mcpd.sessions.traces`): whichever process writes a batch, or releases tail-sampled spans,
updates the sessions of that write's traces from the write itself, in the same transaction on
SQLite and PostgreSQL, so an acknowledged span is in its session once the write commits, a
kill -9 never separates the two, and no message between processes is needed. Writers of one
session are serialised by a lock on the session (PostgreSQL; SQLite's one writer already is).
ClickHouse has no transactions: there the session is written after the spans, in the same
call (see `mcpd.storage.clickhouse.sessions.traces` for what that guarantees). A failure in
the session part is logged and leaves the session as it was (the spans are still written); the
next write of the same trace repairs it (below). The search index follows as its backend says
(`mcpd.storage.sql.sessions.tantivy_search` on SQLite); `notice_sessions`, what an ingest worker
tells its parent it stored, only has this process's index catch up sooner.

**Membership.** A trace belongs to the session id of its trace row: the root's, else the
earliest span's that carries one (`mcpd.signals.projection`), so a trace whose root alone
carries the session id brings all its spans, whichever batch they came in and in whatever
order. A trace whose session id changes (a child's, then the root's) moves to the new session.

**Incremental.** Each trace is one turn; per trace the store keeps a state (`TraceTurn`): the
turn's place and the facts of each span seen (id, parent, kind, root flag, times, status,
whether a model span has output) and, for the root, what its end events say. A write of spans
recomputes the turns of its own traces from those facts, the turn's stored events (each span's
events depend on that span alone) and the new spans; the session row is summed up from its
turns. A trace that is new to the write (no state, all its spans in it) is mapped and
assembled before the write's transaction (`prepare`), so the transaction only places and
writes it. Spans are read back from the trace store for one trace only when its state cannot
account for them: the trace joins a session with spans already stored (its root, carrying the
session id, arrives after its children), its stored spans are not those the state knows (spans
deleted, a failed session update), its root changes, or a model span it silenced must speak
again. A session stored before trace states were kept is rebuilt whole once, on its next
write. The result is the same whatever the arrival order, batch boundaries and re-sends.

The mapping:

* **Session**: harness `mcpd`, session_key = the session id, source = chosen when the session is
  first written: the service name of the earliest root among the write's traces that names one,
  else of the earliest span, else `mcpd`. It never changes afterwards (the session's MCP id
  derives from source and key). Title: the first turn's user input (at most 120 characters).
* **Turns**: one per trace, ordered by the root span's start (a trace whose root has not
  arrived: its earliest span's start), then trace id; ordinals are renumbered only when a trace
  sorts before existing ones. A trace that maps to no event makes no turn.
* **Events** of a trace, the root's first, its end last, the rest in time order (the instant
  each one happened, then span start, then span id):
  - the root's input: `user_input` (starts the turn). A message list gives the text of its last
    `user` message (an agent's input often repeats the conversation so far);
  - each model span (model_generation, model_step, model_inference) with output and no model
    descendant with output: `assistant_response` at its end, model = the span's model;
  - each tool span (tool_call, client_tool_call, provider_tool_call, mcp_tool_call):
    `tool_call` at its start (tool_name = entity_name, else the span name; arguments = input,
    its keys sorted so no store's key order shows; the same text, file paths and self-tool
    flag as transcript tool calls), and, once it ended, `tool_response` at its end (text =
    output; a failed tool's error when it has no output);
  - every other failed span (status `error`): a `runtime` event "<name> failed: <error>" (the
    vocabulary has no error type; a failed tool reports through its `tool_response`);
  - the end of the root, once it ended: status `error` or `cancelled` ends the turn
    uncompleted with a terminal `runtime` event (its output, if any, is a plain
    `assistant_response` before it). Otherwise its output is the final `assistant_response`
    (terminal, completes the turn); when the last model response already says exactly that,
    that response becomes the final one instead of a duplicate. A root without output makes
    the last model response final, and without any a terminal `runtime` "<name> ended".
  A root that is itself a model or tool span is mapped as a root only.
* **Text**: strings as they are; message lists, `{"messages": [...]}`, a message, OpenAI
  `choices` and content-block lists give their text contents (joined by newlines). A message's
  `content` and its `parts` (the OpenTelemetry GenAI shape) are both read: text parts as they
  are, a tool-call part as `name(arguments)` (how a tool_call event reads), a tool-call
  response part as its response's text; other parts (media, reasoning) add nothing. Tool calls
  inside a message stay text of that message: the tool's own span makes the tool_call event,
  so reading them as events too would count every call twice. Any other JSON value is compact
  JSON with sorted keys. Payloads were redacted at ingest.
* **Ids** come from span ids (`<trace>/<span>/<part>`); a turn's id from its trace, so ids
  never change as a trace's spans arrive. An event's `seq` is its turn's ordinal times
  `SEQ_STRIDE` plus its ordinal: changing a turn leaves the other turns' events alone, and a
  turn that moves keeps its events' rows (the store sets their seq in place).
* Each event's payload names its trace and span (`trace_id`, `span_id`), and an error's detail.

Costs and limits: a write reads the turns of each session it touches (one narrow row per
trace), so very long sessions cost more per write; a trace joining its session with many
spans stored is read back once, inside the write. A trace whose spans all lose their session
id by later re-sends keeps its turn; a trace deleted from the trace store (`delete_trace`,
retention) keeps its turn until a span of it is written again.
"""

from __future__ import annotations

import dataclasses
import logging
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from mcpd.sessions.model import (
    TRACE_HARNESS,
    EventRecord,
    EventType,
    FileTouch,
    ParsedEvent,
    SessionRecord,
    TurnRecord,
)
from mcpd.sessions.traces import (
    SEQ_STRIDE,
    Followed,
    FollowedWrite,
    PlacedTurn,
    SessionChange,
    TraceTurn,
    TraceTurnStore,
    TraceTurnStores,
)
from mcpd.signals.batch import SignalBatch
from mcpd.signals.projection import MODEL_KINDS, TOOL_KINDS, trace_session_id
from mcpd.signals.rows import SpanRow, TraceRow
from services.ingest.transcripts.assemble import (
    display_label,
    event_record,
    tool_call_models,
    turn_record,
    turn_touches,
)
from services.ingest.transcripts.keys import event_id
from services.ingest.transcripts.keys import session_id as mcp_session_id
from services.ingest.transcripts.keys import turn_id as mcp_turn_id
from services.ingest.transcripts.parsers._common import block_text, tool_call_event
from services.ingest.transcripts.paths import WorktreeResolver
from services.ingest.transcripts.text import canonical_json, preview
from services.ingest.transcripts.tool_args import parse_arguments, tool_call_text

__all__ = [
    "HARNESS",
    "SEQ_STRIDE",
    "TraceSessions",
    "read_span",
    "session_sources",
    "sessions_of",
    "span_text",
    "trace_of_spans",
    "trace_of_state",
]

log = logging.getLogger("mcpd.ingest.trace_sessions")

HARNESS = TRACE_HARNESS
# The source of a session whose spans name no service.
DEFAULT_SOURCE = "mcpd"
_ENDED_STATUSES = frozenset({"error", "cancelled"})
_TEXT_PARTS = frozenset({"text", None})
_TOOL_CALL_PARTS = frozenset({"tool_call", "server_tool_call"})
_TOOL_RESPONSE_PARTS = frozenset({"tool_call_response", "server_tool_call_response"})


# --- text --------------------------------------------------------------------------------------


def span_text(value: Any, *, prompt: bool = False) -> str:
    """The readable text of an input or output value (see "Text" in the module docstring).
    With `prompt`, a message list gives only its last `user` message when it has one."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    messages = _messages(value)
    if messages is not None:
        if prompt:
            users = [m for m in messages if m.get("role") == "user"]
            if users:
                messages = users[-1:]
        text = "\n".join(part for part in (_message_text(m) for m in messages) if part)
        if text:
            return text
    elif isinstance(value, list):
        text = block_text(value)
        if text:
            return text
    elif isinstance(value, dict) and isinstance(value.get("text"), str) and value["text"]:
        return str(value["text"])
    return canonical_json(value)


def parts_text(parts: Any) -> str:
    """The text of a message's `parts` (OpenTelemetry GenAI): text parts' content, a tool call
    as `name(arguments)`, a tool call's response as its text; media and reasoning parts add
    nothing. Joined by newlines."""
    if isinstance(parts, str):
        return parts
    if not isinstance(parts, list):
        return ""
    found = (_part_text(part) for part in parts)
    return "\n".join(text for text in found if text)


def _part_text(part: Any) -> str:
    if isinstance(part, str):
        return part
    if not isinstance(part, dict):
        return ""
    kind = part.get("type")
    if kind in _TEXT_PARTS:
        text = part.get("content", part.get("text"))
        return text if isinstance(text, str) else ""
    if kind in _TOOL_CALL_PARTS:
        name = part.get("name")
        return tool_call_text(name if isinstance(name, str) and name else "tool", _arguments(part))
    if kind in _TOOL_RESPONSE_PARTS:
        return span_text(part.get("response", part.get("result")))
    return ""


def _arguments(part: dict[str, Any]) -> Any:
    return parse_arguments(part.get("arguments"))


def _messages(value: Any) -> list[dict[str, Any]] | None:
    """The chat messages `value` holds, or None when it is not message-shaped."""
    if isinstance(value, dict):
        if isinstance(value.get("messages"), list):
            return _messages(value["messages"])
        if isinstance(value.get("choices"), list):
            found = [
                choice.get("message") or choice.get("delta")
                for choice in value["choices"]
                if isinstance(choice, dict)
            ]
            return [m for m in found if isinstance(m, dict)] or None
        if isinstance(value.get("content"), str | list | dict):
            return [value]  # a message, or an MCP tool result ({"content": [...]})
        if isinstance(value.get("parts"), str | list):
            return [value]
        return None
    if isinstance(value, list) and value and all(_is_message(item) for item in value):
        return list(value)
    return None


def _is_message(item: Any) -> bool:
    return isinstance(item, dict) and "role" in item


def _message_text(message: dict[str, Any]) -> str:
    content = message.get("content")
    if isinstance(content, dict):
        content = [content]
    texts = (block_text(content), parts_text(message.get("parts")))
    return "\n".join(text for text in texts if text)


# --- what one span says ------------------------------------------------------------------------

Order = tuple[int, int, str, int]
"""Where an event sorts within its trace: (instant, span start, span id, part rank)."""

_ROOT = 1
_EVENT = 2
_SPEAKS = 4


@dataclass(frozen=True, slots=True)
class SpanFacts:
    """What the cross-span rules need of one span (kept per trace between writes)."""

    span_id: str
    parent: str | None
    kind: str | None
    start: int
    end: int | None
    status: str | None
    root: bool
    event: bool
    # A model span whose output has text.
    speaks: bool

    @property
    def ended(self) -> bool:
        return self.end is not None or self.event

    @property
    def finish(self) -> int:
        return self.end if self.end is not None else self.start

    def order(self, when: int, rank: int) -> Order:
        return when, self.start, self.span_id, rank

    def to_json(self) -> list[Any]:
        flags = (_ROOT if self.root else 0) | (_EVENT if self.event else 0)
        flags |= _SPEAKS if self.speaks else 0
        return [self.span_id, self.parent, self.kind, self.start, self.end, self.status, flags]

    @classmethod
    def from_json(cls, value: Sequence[Any]) -> SpanFacts:
        span_id, parent, kind, start, end, status, flags = value
        return cls(
            span_id=span_id,
            parent=parent,
            kind=kind,
            start=int(start),
            end=None if end is None else int(end),
            status=status,
            root=bool(flags & _ROOT),
            event=bool(flags & _EVENT),
            speaks=bool(flags & _SPEAKS),
        )


@dataclass(frozen=True, slots=True)
class RootFacts:
    """What the root's end events need beyond its `SpanFacts` (the chosen root only)."""

    span_id: str
    name: str | None
    model: str | None
    # The error's text (for a failed root's end event) and its document (the root events'
    # payloads carry it).
    error: str
    error_detail: Any
    answered: bool

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_json(cls, value: Mapping[str, Any]) -> RootFacts:
        return cls(**value)


@dataclass(slots=True)
class SpanRead:
    """One span read for its turn: its facts, the events it makes on its own (as an ordinary
    span), and what it says as the root."""

    facts: SpanFacts
    drafts: list[tuple[Order, ParsedEvent]]
    root: RootFacts
    prompt: ParsedEvent | None
    answer: str


def read_span(trace_id: str, span: SpanRow) -> SpanRead:
    """Everything the mapping takes from one span (pure)."""
    kind = span.get("kind")
    output = span_text(span.get("output"))
    facts = SpanFacts(
        span_id=span["span_id"],
        parent=span.get("parent_span_id"),
        kind=kind,
        start=span["start_time"],
        end=span.get("end_time"),
        status=span.get("status"),
        root=bool(span.get("is_root")),
        event=bool(span.get("is_event")),
        speaks=kind in MODEL_KINDS and bool(output),
    )
    drafts = _drafts(trace_id, span, facts, output)
    prompt_text = span_text(span.get("input"), prompt=True) if facts.root else ""
    prompt = None
    if prompt_text:
        prompt = _event(
            trace_id, span, "input", EventType.USER_INPUT, prompt_text, span["start_time"]
        )
    root = RootFacts(
        span_id=facts.span_id,
        name=span.get("name"),
        model=span.get("model"),
        error=_error_text(span),
        error_detail=span.get("error") or None,
        answered=bool(output) if facts.root else False,
    )
    answer = output if facts.root else ""
    return SpanRead(facts, drafts, root, prompt, answer)


def _drafts(
    trace_id: str, span: SpanRow, facts: SpanFacts, output: str
) -> list[tuple[Order, ParsedEvent]]:
    """The events an ordinary (not the root) span makes on its own, with their order."""
    found: list[tuple[Order, ParsedEvent]] = []
    kind = facts.kind
    if kind in MODEL_KINDS and output:
        event = _event(trace_id, span, "output", EventType.ASSISTANT_RESPONSE, output, facts.finish)
        event.model = span.get("model")
        found.append((facts.order(facts.finish, 0), event))
    if kind in TOOL_KINDS:
        found.extend(_tool(trace_id, span, facts, output))
    elif facts.status == "error":
        text = f"{span.get('name') or 'span'} failed: {_error_text(span)}"
        event = _event(trace_id, span, "error", EventType.RUNTIME, text, facts.finish)
        found.append((facts.order(facts.finish, 2), event))
    return found


def _tool(
    trace_id: str, span: SpanRow, facts: SpanFacts, output: str
) -> list[tuple[Order, ParsedEvent]]:
    name = span.get("entity_name") or span.get("name") or "tool"
    call = tool_call_event(
        key=_key(trace_id, facts.span_id, "call"),
        line=0,
        name=name,
        arguments=_in_key_order(parse_arguments(span.get("input"))),
        call_id=facts.span_id,
        timestamp=_time(facts.start),
        payload=_provenance(trace_id, span),
    )
    found = [(facts.order(facts.start, 1), call)]
    if not facts.ended:
        return found  # still running: no response yet
    failed = facts.status == "error"
    text = output or (f"error: {_error_text(span)}" if failed else "")
    response = _event(trace_id, span, "result", EventType.TOOL_RESPONSE, text, facts.finish)
    response.tool_name = name
    response.call_id = facts.span_id
    if failed and response.payload is not None:
        response.payload["status"] = "error"
    found.append((facts.order(facts.finish, 3), response))
    return found


def _in_key_order(value: Any) -> Any:
    """`value` with every object's keys sorted: stores keep a document's keys in different
    orders (PostgreSQL's JSONB, ClickHouse's JSON text), and a tool call's text and file paths
    follow its arguments' order, so they must not depend on where the span was read from."""
    if isinstance(value, dict):
        return {key: _in_key_order(value[key]) for key in sorted(value)}
    if isinstance(value, list):
        return [_in_key_order(item) for item in value]
    return value


def _event(
    trace_id: str, span: SpanRow, part: str, kind: EventType, text: str, when: int
) -> ParsedEvent:
    return ParsedEvent(
        key=_key(trace_id, span["span_id"], part),
        line=0,
        type=kind,
        text=text,
        timestamp=_time(when),
        payload=_provenance(trace_id, span),
    )


def _key(trace_id: str, span_id: str, part: str) -> str:
    return f"{trace_id}/{span_id}/{part}"


def _provenance(trace_id: str, span: SpanRow) -> dict[str, Any]:
    payload: dict[str, Any] = {"trace_id": trace_id, "span_id": span["span_id"]}
    if span.get("error"):
        payload["error"] = span.get("error")
    return payload


def _time(nanos: int) -> datetime:
    seconds, rest = divmod(nanos, 1_000_000_000)
    return datetime.fromtimestamp(seconds, UTC) + timedelta(microseconds=rest // 1000)


def _error_text(span: SpanRow) -> str:
    error = span.get("error")
    if isinstance(error, dict):
        message = error.get("message")
        kind = error.get("kind")
        if isinstance(message, str) and message:
            return f"{kind}: {message}" if isinstance(kind, str) and kind else message
        return canonical_json(error)
    return "error"


# --- what one trace says -----------------------------------------------------------------------


class NeedSpans(Exception):  # noqa: N818 - a signal, not an error
    """The trace's state cannot answer a rule: its spans must be read back."""


@dataclass(slots=True)
class TraceTurnInput:
    """What one trace's events are computed from: every span's facts, the chosen root's facts
    and what it says, and the ordinary spans' own events."""

    trace_id: str
    facts: dict[str, SpanFacts]
    root: RootFacts | None = None
    prompt: ParsedEvent | None = None
    answer: str = ""
    drafts: list[tuple[Order, ParsedEvent]] = field(default_factory=list)

    @property
    def start(self) -> int:
        """Where the turn sorts: the root's start, else the earliest span's."""
        if self.root is not None:
            return self.facts[self.root.span_id].start
        return min(facts.start for facts in self.facts.values())

    def facts_json(self) -> dict[str, Any]:
        """The state's `facts` document: every span's facts (by span id), the root's."""
        document: dict[str, Any] = {
            "spans": [self.facts[span_id].to_json() for span_id in sorted(self.facts)]
        }
        if self.root is not None:
            document["root"] = self.root.to_json()
        return document

    def events(self) -> list[ParsedEvent]:
        """The trace's events in order (see the module docstring), flags set afresh."""
        silenced = _silenced_models(self.facts)
        middle = [
            (order, event)
            for order, event in self.drafts
            if not (event.type is EventType.ASSISTANT_RESPONSE and order[2] in silenced)
        ]
        middle.sort(key=lambda item: item[0])
        events = [event for _, event in middle]
        if self.prompt is not None:
            events.insert(0, self.prompt)
        for event in events:
            event.starts_turn = event.terminal = event.completes_turn = False
        if self.root is not None:
            self._end(self.root, events)
        return events

    def _end(self, root: RootFacts, events: list[ParsedEvent]) -> None:
        facts = self.facts[root.span_id]
        answer = self.answer
        responses = [e for e in events if e.type is EventType.ASSISTANT_RESPONSE]
        if facts.status in _ENDED_STATUSES:
            if answer:
                events.append(self._final(root, answer))
            text = f"{root.name or 'run'} {'failed' if facts.status == 'error' else 'cancelled'}"
            if facts.status == "error":
                text += f": {root.error}"
            stop = self._root_event(root, "end", EventType.RUNTIME, text)
            stop.terminal = True
            events.append(stop)
            return
        if answer and responses and responses[-1].text == answer and facts.ended:
            final: ParsedEvent | None = responses[-1]
        elif answer:
            final = self._final(root, answer)
            events.append(final)
        else:
            final = responses[-1] if responses and facts.ended else None
        if facts.ended:
            if final is None:
                final = self._root_event(
                    root, "end", EventType.RUNTIME, f"{root.name or 'run'} ended"
                )
                events.append(final)
            final.terminal = final.completes_turn = True

    def _final(self, root: RootFacts, text: str) -> ParsedEvent:
        event = self._root_event(root, "output", EventType.ASSISTANT_RESPONSE, text)
        event.model = root.model
        return event

    def _root_event(self, root: RootFacts, part: str, kind: EventType, text: str) -> ParsedEvent:
        facts = self.facts[root.span_id]
        payload: dict[str, Any] = {"trace_id": self.trace_id, "span_id": root.span_id}
        if root.error_detail is not None:
            payload["error"] = root.error_detail
        return ParsedEvent(
            key=_key(self.trace_id, root.span_id, part),
            line=0,
            type=kind,
            text=text,
            timestamp=_time(facts.finish),
            payload=payload,
        )


def _silenced_models(facts: Mapping[str, SpanFacts]) -> set[str]:
    """The model spans with a model descendant that has output: that descendant speaks for
    them (a generation's answer is its last step's, a step's its inference's)."""
    silenced: set[str] = set()
    for span in facts.values():
        if not span.speaks:
            continue
        parent, seen = span.parent, {span.span_id}
        while parent is not None and parent in facts and parent not in seen:
            seen.add(parent)
            if facts[parent].kind in MODEL_KINDS:
                silenced.add(parent)
            parent = facts[parent].parent
    return silenced


def _chosen_root(facts: Mapping[str, SpanFacts]) -> str | None:
    roots = [span for span in facts.values() if span.root]
    if not roots:
        return None
    return min(roots, key=lambda span: (span.start, span.span_id)).span_id


def trace_of_spans(trace_id: str, spans: Iterable[SpanRow]) -> TraceTurnInput:
    """A trace's turn input from its spans alone (a span listed twice: the last one counts)."""
    by_id = {span["span_id"]: span for span in spans}
    return _from_reads(trace_id, {span_id: read_span(trace_id, s) for span_id, s in by_id.items()})


def _from_reads(trace_id: str, reads: Mapping[str, SpanRead]) -> TraceTurnInput:
    facts = {span_id: read.facts for span_id, read in reads.items()}
    turn = TraceTurnInput(trace_id, facts)
    root_id = _chosen_root(facts)
    for span_id, read in reads.items():
        if span_id == root_id:
            turn.root, turn.prompt, turn.answer = read.root, read.prompt, read.answer
        else:
            turn.drafts.extend(read.drafts)
    return turn


# Which part of its span a stored event is: an ordinary span's, and the root's.
_PARTS = {
    EventType.ASSISTANT_RESPONSE: "output",
    EventType.TOOL_CALL: "call",
    EventType.TOOL_RESPONSE: "result",
    EventType.RUNTIME: "error",
}
_ROOT_PARTS = {
    EventType.USER_INPUT: "input",
    EventType.ASSISTANT_RESPONSE: "output",
    EventType.RUNTIME: "end",
}
# The payload fields a span's events all carry.
_PROVENANCE: tuple[str, ...] = ("trace_id", "span_id", "error")
# Each ordinary part's rank in the order, and whether it happens at the span's start.
_PLACES = {"output": (0, False), "call": (1, True), "error": (2, False), "result": (3, False)}


def trace_of_state(
    trace_id: str,
    facts: Mapping[str, Any],
    stored: Sequence[EventRecord],
    new: Mapping[str, SpanRead],
) -> TraceTurnInput:
    """A trace's turn input from its stored state (`facts`, the document `facts_json` made) and
    events, overlaid with the reads of its new spans; raises NeedSpans when they cannot answer a
    rule (see "Incremental" in the module docstring)."""
    known = {
        span.span_id: span for span in (SpanFacts.from_json(v) for v in facts.get("spans", ()))
    }
    old_root = RootFacts.from_json(facts["root"]) if "root" in facts else None
    turn = TraceTurnInput(trace_id, {**known, **{i: read.facts for i, read in new.items()}})
    root_id = _chosen_root(turn.facts)
    old_root_id = old_root.span_id if old_root is not None else None
    if old_root_id not in (None, root_id) and old_root_id not in new:
        raise NeedSpans  # the old root became an ordinary span: what it says as one is unknown
    parts = _stored_parts(stored, old_root_id)
    if root_id is not None and root_id in new:
        read = new[root_id]
        turn.root, turn.prompt, turn.answer = read.root, read.prompt, read.answer
    elif root_id is not None:
        if root_id != old_root_id or old_root is None:
            raise NeedSpans  # a stored span became the root
        said = parts.get(root_id, {})
        turn.root = old_root
        turn.prompt = _draft(said["input"], trace_id, "input") if "input" in said else None
        turn.answer = _stored_answer(old_root, said, stored)
    silenced = _silenced_models(turn.facts)
    for span_id, span in turn.facts.items():
        if span_id == root_id:
            continue
        if span_id in new:
            turn.drafts.extend(new[span_id].drafts)
            continue
        said = parts.get(span_id, {})
        if span.speaks and span_id not in silenced and "output" not in said:
            raise NeedSpans  # a model span silenced before speaks again
        for part, record in said.items():
            rank, at_start = _PLACES[part]
            order = span.order(span.start if at_start else span.finish, rank)
            turn.drafts.append((order, _draft(record, trace_id, part)))
    return turn


def _stored_parts(
    stored: Sequence[EventRecord], root_id: str | None
) -> dict[str, dict[str, EventRecord]]:
    """The stored events by span id and part."""
    found: dict[str, dict[str, EventRecord]] = defaultdict(dict)
    for event in stored:
        span_id = str((event.payload or {}).get("span_id", ""))
        part = (_ROOT_PARTS if span_id == root_id else _PARTS).get(event.type)
        if part is not None:
            found[span_id][part] = event
    return found


def _stored_answer(
    root: RootFacts, said: Mapping[str, EventRecord], stored: Sequence[EventRecord]
) -> str:
    """The stored root's output text: its own event's, or, when its output was the last model
    response's (which then became final instead), that response's."""
    if not root.answered:
        return ""
    if "output" in said:
        return said["output"].text
    merged = next(
        (e for e in stored if e.terminal and e.type is EventType.ASSISTANT_RESPONSE), None
    )
    if merged is None:
        raise NeedSpans
    return merged.text


def _draft(record: EventRecord, trace_id: str, part: str) -> ParsedEvent:
    """A stored event as the parsed event its span made (flags are set again by the rules)."""
    payload = dict(record.payload or {})
    key = _key(trace_id, str(payload.get("span_id", "")), part)
    if record.type is EventType.TOOL_CALL:
        provenance = {name: payload[name] for name in _PROVENANCE if name in payload}
        return tool_call_event(
            key=key,
            line=0,
            name=record.tool_name or "tool",
            arguments=_in_key_order(payload.get("arguments")),
            call_id=record.call_id,
            timestamp=record.timestamp,
            payload=provenance,
        )
    return ParsedEvent(
        key=key,
        line=0,
        type=record.type,
        text=record.text,
        timestamp=record.timestamp,
        tool_name=record.tool_name,
        call_id=record.call_id,
        model=record.model,
        payload=payload or None,
    )


def session_sources(spans: Sequence[SpanRow]) -> list[str]:
    """The session's possible sources, best first: service names of root spans (earliest
    first), then of the other spans, then `mcpd`; each once."""
    ordered = sorted(spans, key=lambda span: (not span.get("is_root"), *_start_order(span)))
    names = [span.get("service_name") for span in ordered]
    return list(dict.fromkeys([name for name in names if name] + [DEFAULT_SOURCE]))


def _start_order(span: SpanRow) -> tuple[int, str]:
    return span["start_time"], span["span_id"]


# --- a turn's rows -----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class SessionName:
    """Who a trace session is: its project, key and source (its MCP id derives from them)."""

    project: str
    key: str
    source: str

    @property
    def id(self) -> str:
        return mcp_session_id(self.source, self.key)

    @property
    def path(self) -> str:
        return f"mcpd-session:{self.key}"

    def turn_id(self, trace_id: str) -> str:
        return mcp_turn_id(self.id, f"trace:{trace_id}")


@dataclass(frozen=True, slots=True)
class AssembledTurn:
    """One trace's turn as rows, placed at `turn.ordinal`."""

    turn: TurnRecord
    events: list[EventRecord]
    touches: list[FileTouch]
    # The preview of its user input; None without one.
    prompt: str | None

    def placed(self, ordinal: int) -> AssembledTurn:
        """The same turn at `ordinal` (its events' seq follow)."""
        if ordinal == self.turn.ordinal:
            return self
        base = ordinal * SEQ_STRIDE
        return AssembledTurn(
            turn=dataclasses.replace(self.turn, ordinal=ordinal),
            events=[dataclasses.replace(e, seq=base + e.ordinal) for e in self.events],
            touches=self.touches,
            prompt=self.prompt,
        )


def assemble_turn(
    name: SessionName, trace_id: str, events: list[ParsedEvent], ordinal: int
) -> AssembledTurn:
    """The rows of one trace's events (at least one) as turn `ordinal` of its session, made as
    the transcript importer makes a turn's."""
    sid, tid = name.id, name.turn_id(trace_id)
    base = ordinal * SEQ_STRIDE
    call_models = tool_call_models(events)
    resolver = WorktreeResolver()
    records: list[EventRecord] = []
    touches: list[FileTouch] = []
    events[0].starts_turn = True
    for position, event in enumerate(events, start=1):
        assert event.timestamp is not None  # every trace event has its span's time
        event.line = position
        record = event_record(
            event,
            event_id(sid, event.key),
            session_id=sid,
            turn_id=tid,
            ordinal=position,
            seq=base + position,
            timestamp=event.timestamp,
            call_models=call_models,
        )
        records.append(record)
        touches.extend(turn_touches(event, record, None, resolver))
    prompt = next((e.text for e in events if e.type is EventType.USER_INPUT), None)
    return AssembledTurn(
        turn=turn_record(tid, sid, ordinal, events, records),
        events=records,
        touches=touches,
        prompt=None if prompt is None else preview(prompt),
    )


def session_record(
    name: SessionName, turns: Sequence[tuple[str | None, TurnRecord]]
) -> SessionRecord:
    """The session row of these turns (each with its prompt preview), in ordinal order."""
    title = next((prompt for prompt, _ in turns if prompt is not None), None) or None
    started = min(turn.started_at for _, turn in turns)
    updated = max(turn.updated_at for _, turn in turns)
    tools = any(EventType.TOOL_CALL.value in turn.event_types for _, turn in turns)
    return SessionRecord(
        id=name.id,
        project=name.project,
        source=name.source,
        harness=HARNESS,
        session_key=name.key,
        path=name.path,
        title=title,
        display_label=display_label(
            title=title,
            prompt_preview=title,
            summary=None,
            slug=None,
            harness=HARNESS,
            updated_at=updated,
            turn_count=len(turns),
        ),
        started_at=started,
        updated_at=updated,
        completed=turns[-1][1].completed,
        turn_count=len(turns),
        event_count=sum(turn.event_count for _, turn in turns),
        mode="tool_calling" if tools else "chat",
    )


# --- following the trace store's writes --------------------------------------------------------


@dataclass(frozen=True, slots=True)
class PreparedTrace:
    """A trace of a write read before its transaction as though nothing of it were stored: its
    span rows, its turn input and events, and their rows in the session its spans name, under
    the source a new session would take (None without events). Taken inside the transaction
    when the trace has no state and these rows are all its spans, the name permitting."""

    spans: dict[str, SpanRow]
    turn: TraceTurnInput
    events: list[ParsedEvent]
    name: SessionName
    assembled: AssembledTurn | None

    def covers(self, spans: Mapping[str, SpanRow], count: int) -> bool:
        """Whether these rows are the trace's `count` spans and the very ones read."""
        return len(spans) == count == len(self.spans) and all(
            self.spans.get(span_id) is span for span_id, span in spans.items()
        )


@dataclass(frozen=True, slots=True)
class Prepared:
    """What a write's spans gave before its transaction: each span's read, by (project, trace,
    span), with the row it was read from (a row the write replaced is read again), and the
    write's traces with a session id, by (project, trace)."""

    reads: dict[tuple[str, str, str], tuple[SpanRow, SpanRead]]
    traces: dict[tuple[str, str], PreparedTrace]


@dataclass(slots=True)
class _Traces:
    """One project's part of a write: its span rows by trace and span, its projections."""

    rows: dict[str, dict[str, SpanRow]] = field(default_factory=lambda: defaultdict(dict))
    traces: dict[str, TraceRow] = field(default_factory=dict)


def sessions_of(batch: SignalBatch) -> set[tuple[str, str]]:
    """The (project, session id)s the spans of a stored batch carry."""
    return {
        (span.get("project") or "", session_id)
        for span in batch.spans
        if (session_id := span.get("session_id"))
    }


class TraceSessions:
    """Keeps the sessions of ingested traces in the session read model: the follower of a trace
    store's writes of spans (see the module docstring)."""

    def __init__(self, trace_store: object, session_store: object) -> None:
        """Follow `trace_store`'s writes (every backend's trace store can be followed) and keep
        the sessions in `session_store` (every backend's session store keeps trace sessions):
        typed as they are handed over by the composition root, checked here."""
        if not isinstance(trace_store, Followed):
            raise TypeError(f"{type(trace_store).__name__} cannot be followed")
        if not isinstance(session_store, TraceTurnStores):
            raise TypeError(f"{type(session_store).__name__} keeps no trace sessions")
        self._sessions = session_store
        trace_store.follow_writes(self)

    def prepare(self, spans: Sequence[SpanRow]) -> Prepared:
        """The mapping's work on the traces the write gives a session id, before its
        transaction: their spans read, their turns made as though they were new (spans of
        other traces are read in the transaction, if their trace belongs to a session)."""
        traces: dict[tuple[str, str], dict[str, SpanRow]] = defaultdict(dict)
        for span in spans:
            traces[(span.get("project") or "", span["trace_id"])][span["span_id"]] = span
        reads: dict[tuple[str, str, str], tuple[SpanRow, SpanRead]] = {}
        joining: dict[tuple[str, str], list[tuple[str, str]]] = defaultdict(list)
        for trace, rows in traces.items():
            key = trace_session_id(rows.values())
            if key is None:
                continue
            joining[(trace[0], key)].append(trace)
            for span_id, row in rows.items():
                reads[(*trace, span_id)] = (row, read_span(trace[1], row))
        prepared: dict[tuple[str, str], PreparedTrace] = {}
        for (project, key), members in joining.items():
            source = session_sources([s for t in members for s in traces[t].values()])[0]
            name = SessionName(project, key, source)
            for trace in members:
                rows = traces[trace]
                turn = _from_reads(trace[1], {i: reads[(*trace, i)][1] for i in rows})
                events = turn.events()
                assembled = assemble_turn(name, trace[1], events, 0) if events else None
                prepared[trace] = PreparedTrace(rows, turn, events, name, assembled)
        return Prepared(reads, prepared)

    def follow(self, write: FollowedWrite[Prepared]) -> Callable[[], None]:
        """Update the sessions of the write's traces inside its transaction; a failure is logged
        and leaves them as they were (the write itself goes on)."""
        store = self._sessions.trace_turns(write.transaction)
        try:
            with store.savepoint():
                for project, traces in _by_project(write).items():
                    _ProjectWrite(store, project, traces, write.prepared).run()
        except Exception:
            log.exception("trace sessions not updated; the next write of their traces repairs them")
            return _nothing
        return store.after_commit

    def notice_sessions(self, keys: Iterable[tuple[str, str]]) -> None:
        """Another process stored spans of these (project, session id)s, and their sessions in
        the same transaction: have this process's search index catch up, if it writes it."""
        if any(True for _ in keys):
            self._sessions.nudge_search_index()


def _nothing() -> None:
    """Nothing to do after the commit."""


def _by_project(write: FollowedWrite[Prepared]) -> dict[str, _Traces]:
    found: dict[str, _Traces] = defaultdict(_Traces)
    for span in write.spans:
        found[span.get("project") or ""].rows[span["trace_id"]][span["span_id"]] = span
    for trace in write.traces:
        found[trace["project"]].traces[trace["trace_id"]] = trace
    return found


class _ProjectWrite:
    """One project's sessions brought in step with one write."""

    def __init__(
        self, store: TraceTurnStore, project: str, traces: _Traces, prepared: Prepared
    ) -> None:
        self._store = store
        self._project = project
        self._traces = traces
        self._prepared = prepared
        # The traces whose turn input was made before the transaction (`prepare`).
        self.ready: dict[str, PreparedTrace] = {}

    def run(self) -> None:
        members = {
            trace_id: str(row["session_id"])
            for trace_id, row in self._traces.traces.items()
            if row.get("session_id")
        }
        if not members:
            return
        store, project = self._store, self._project
        states = store.trace_turns(project, sorted(members))
        keys = sorted(set(members.values()) | {state.session_key for state in states.values()})
        store.lock_sessions(project, keys)
        names, whole = self._names(keys, members)
        for key in sorted(whole):
            for trace_id in self._session_traces(key):
                members.setdefault(trace_id, key)
        stored = _by_turn(
            store.turn_events(project, [s.turn_id for t, s in states.items() if t in members])
        )
        inputs = self._inputs(members, states, stored, whole)
        placed = store.placed_turns(project, [names[key].id for key in keys if key not in whole])
        changes = [
            _SessionWrite(
                store,
                names[key],
                placed.get(names[key].id, []),
                {t: inputs[t] for t, k in members.items() if k == key and t in inputs},
                [t for t, s in states.items() if s.session_key == key and members[t] != key],
                {t: (states[t], stored.get(states[t].turn_id, [])) for t in states},
                self.ready,
                whole=key in whole,
            ).change()
            for key in keys
        ]
        store.apply(project, [change for change in changes if change is not None])

    def _names(
        self, keys: Sequence[str], members: Mapping[str, str]
    ) -> tuple[dict[str, SessionName], set[str]]:
        """Each session's name, and the keys of sessions stored before trace states were kept
        (rebuilt whole). A session new to the states takes the best source of the write's
        traces that join it, unless it is stored already under one of them."""
        store, project = self._store, self._project
        known = store.sessions_by_key(project, keys)
        names = {key: SessionName(project, key, source) for key, source in known.items()}
        joining: dict[str, list[str]] = defaultdict(list)
        for trace_id, key in members.items():
            if key not in names:
                joining[key].append(trace_id)
        candidates = {key: self._sources(traces) for key, traces in joining.items()}
        ids = [
            mcp_session_id(source, key) for key, sources in candidates.items() for source in sources
        ]
        stored = store.stored_sessions(project, ids) if ids else set()
        whole: set[str] = set()
        for key, sources in candidates.items():
            # Stored under one of its sources before trace states were kept: it keeps that one.
            legacy = [source for source in sources if mcp_session_id(source, key) in stored]
            names[key] = SessionName(project, key, (legacy or sources)[0])
            if legacy:
                whole.add(key)
        return names, whole

    def _sources(self, traces: Sequence[str]) -> list[str]:
        """The possible sources of a session the traces join, best first."""
        rows = [span for t in traces for span in self._traces.rows.get(t, {}).values()]
        return session_sources(rows or [_head(self._traces.traces[t]) for t in traces])

    def _session_traces(self, key: str) -> list[str]:
        """The stored traces a span of which carries the key of a session rebuilt whole (read
        back, each keeps to the session its own spans give it)."""
        return [
            t
            for t in self._store.session_traces(self._project, key)
            if t not in self._traces.traces
        ]

    def _inputs(
        self,
        members: Mapping[str, str],
        states: Mapping[str, TraceTurn],
        stored: Mapping[str, list[EventRecord]],
        whole: set[str],
    ) -> dict[str, TraceTurnInput]:
        """Every member trace's turn input: from its state and this write's spans, or, where
        they cannot make it, from its spans read back."""
        inputs: dict[str, TraceTurnInput] = {}
        again: list[str] = []
        for trace_id, key in members.items():
            state = states.get(trace_id)
            projection = self._traces.traces.get(trace_id)
            if key in whole or projection is None:
                again.append(trace_id)
                continue
            rows = self._traces.rows.get(trace_id, {})
            ready = self._prepared.traces.get((self._project, trace_id))
            if state is None and ready is not None and ready.covers(rows, projection["span_count"]):
                inputs[trace_id] = ready.turn
                self.ready[trace_id] = ready
                continue
            new = {span_id: self._read(trace_id, span) for span_id, span in rows.items()}
            try:
                turn = trace_of_state(
                    trace_id,
                    state.facts if state is not None else {},
                    stored.get(state.turn_id, []) if state is not None else [],
                    new,
                )
            except NeedSpans:
                again.append(trace_id)
                continue
            if len(turn.facts) != projection.get("span_count"):
                again.append(trace_id)  # stored spans the state does not account for
                continue
            inputs[trace_id] = turn
        if again:
            spans: dict[str, list[SpanRow]] = defaultdict(list)
            for span in self._store.trace_spans(self._project, sorted(again)):
                spans[span["trace_id"]].append(span)
            for trace_id in again:
                found = spans[trace_id]
                if found and trace_session_id(found) == members[trace_id]:
                    inputs[trace_id] = trace_of_spans(trace_id, found)
        return inputs

    def _read(self, trace_id: str, span: SpanRow) -> SpanRead:
        prepared = self._prepared.reads.get((self._project, trace_id, span["span_id"]))
        if prepared is not None and prepared[0] is span:
            return prepared[1]
        return read_span(trace_id, span)


def _head(trace: TraceRow) -> SpanRow:
    """What a trace row says of its head span, for choosing a source."""
    head: SpanRow = {
        "span_id": trace.get("root_span_id") or "",
        "is_root": trace.get("root_span_id") is not None,
        "start_time": trace["start_time"],
        "service_name": trace.get("service_name"),
    }
    return head


def _by_turn(events: Iterable[EventRecord]) -> dict[str, list[EventRecord]]:
    found: dict[str, list[EventRecord]] = defaultdict(list)
    for event in events:
        found[event.turn_id].append(event)
    for listed in found.values():
        listed.sort(key=lambda event: event.ordinal)
    return found


@dataclass(slots=True)
class _Entry:
    """A turn of the session as this write leaves it: a stored one, or one recomputed now."""

    start: int
    trace_id: str
    placed: PlacedTurn | None = None
    # A recomputed turn's events, then (once placed) its rows.
    events: list[ParsedEvent] | None = None
    assembled: AssembledTurn | None = None
    ordinal: int = 0

    @property
    def touches(self) -> int:
        if self.assembled is not None:
            return len(self.assembled.touches)
        assert self.placed is not None
        return self.placed.touches

    @property
    def prompt(self) -> str | None:
        if self.assembled is not None:
            return self.assembled.prompt
        assert self.placed is not None
        return self.placed.prompt

    @property
    def turn(self) -> TurnRecord:
        if self.assembled is not None:
            return self.assembled.turn
        assert self.placed is not None
        return dataclasses.replace(self.placed.turn, ordinal=self.ordinal)


class _SessionWrite:
    """One session's change in one write: its touched traces' turns recomputed and placed."""

    def __init__(
        self,
        store: TraceTurnStore,
        name: SessionName,
        placed: list[PlacedTurn],
        touched: Mapping[str, TraceTurnInput],
        leaving: Sequence[str],
        stored: Mapping[str, tuple[TraceTurn, list[EventRecord]]],
        ready: Mapping[str, PreparedTrace],
        *,
        whole: bool,
    ) -> None:
        self._ready = ready
        self._store = store
        self._name = name
        self._placed = placed
        self._old = {turn.trace_id: turn for turn in placed}
        self._touched = touched
        self._leaving = leaving
        self._stored = stored
        self._whole = whole

    def change(self) -> SessionChange | None:
        """What this write changes of the session; None when nothing."""
        entries = self._entries()
        change = SessionChange(session_id=self._name.id, session=None, whole=self._whole)
        changed = self._whole
        moved: list[_Entry] = []
        for ordinal, entry in enumerate(entries, start=1):
            entry.ordinal = ordinal
            if entry.events is None:
                assert entry.placed is not None
                if entry.placed.turn.ordinal != ordinal:
                    moved.append(entry)
                continue
            if entry.assembled is not None:
                assembled = entry.assembled.placed(ordinal)
            else:
                assembled = assemble_turn(self._name, entry.trace_id, entry.events, ordinal)
            entry.assembled = assembled
            old = self._old.get(entry.trace_id)
            if old is not None and old.turn.ordinal != ordinal:
                change.moved_turns.append(old.turn.id)
            change.turns.append(assembled.turn)
            change.events.extend(assembled.events)
            change.event_turns.append(assembled.turn.id)
            changed = changed or self._differs(entry.trace_id, assembled)
        if moved:
            self._renumber(change, moved)
            changed = True
        kept = {entry.trace_id for entry in entries}
        gone = [
            self._old[t].turn.id
            for t in [*self._leaving, *self._touched]
            if t in self._old and t not in kept
        ]
        change.removed_turns.extend(gone)
        change.event_turns.extend(gone)
        changed = changed or bool(gone)
        assembled_of = {e.trace_id: e.assembled for e in entries if e.assembled is not None}
        for trace_id, turn in self._touched.items():
            state = self._state(trace_id, turn, assembled_of.get(trace_id))
            if trace_id not in self._stored or self._stored[trace_id][0] != state:
                change.states.append(state)
                changed = True
        if not changed:
            return None
        self._touches(change, entries, set(gone))
        if entries:
            change.session = session_record(
                self._name, [(entry.prompt, entry.turn) for entry in entries]
            )
        return change

    def _entries(self) -> list[_Entry]:
        """The session's turns in order: the stored ones this write leaves alone, and those of
        its touched traces that make events."""
        entries = [
            _Entry(turn.start, turn.trace_id, placed=turn)
            for turn in self._placed
            if turn.trace_id not in self._touched and turn.trace_id not in self._leaving
        ]
        for trace_id, turn in self._touched.items():
            ready = self._ready.get(trace_id)
            events = ready.events if ready is not None else turn.events()
            if events:
                entry = _Entry(turn.start, trace_id, events=events)
                if ready is not None and ready.name == self._name:
                    entry.assembled = ready.assembled
                entries.append(entry)
        entries.sort(key=lambda entry: (entry.start, entry.trace_id))
        return entries

    def _differs(self, trace_id: str, assembled: AssembledTurn) -> bool:
        old = self._old.get(trace_id)
        if old is None or old.turn != assembled.turn:
            return True
        _, events = self._stored.get(trace_id, (None, []))
        return events != assembled.events

    def _renumber(self, change: SessionChange, moved: Sequence[_Entry]) -> None:
        """Move stored turns to their new ordinals (a trace sorted before them): their rows
        change, their events' seq the store sets in place."""
        for entry in moved:
            change.turns.append(entry.turn)
            change.moved_turns.append(entry.turn.id)

    def _touches(self, change: SessionChange, entries: Sequence[_Entry], gone: set[str]) -> None:
        """Touches hold one position each, in session order: from the first turn whose touches
        changed or moved on, they are written again (with those of the turns after it)."""
        old_start: dict[str, int] = {}
        total = 0
        for turn in self._placed:
            old_start[turn.trace_id] = total
            total += turn.touches
        cuts = [old_start[t.trace_id] for t in self._placed if t.turn.id in gone and t.touches]
        position, first = 0, len(entries)
        for index, entry in enumerate(entries):
            if entry.assembled is not None or old_start.get(entry.trace_id) != position:
                first = index
                cuts.append(position)
                break
            position += entry.touches
        rest = entries[first:]
        if not cuts or (min(cuts) >= total and not any(entry.touches for entry in rest)):
            return
        stored = self._stored_touches(rest, old_start)
        change.touches_from = min(cuts)
        for entry in rest:
            if entry.assembled is not None:
                change.touches.extend(entry.assembled.touches)
            else:
                turn_id = entry.turn.id
                change.touches.extend(stored.get(turn_id, []))

    def _stored_touches(
        self, entries: Sequence[_Entry], old_start: Mapping[str, int]
    ) -> dict[str | None, list[FileTouch]]:
        """The stored touches of the stored turns among `entries`, by turn id."""
        starts = [
            old_start[entry.trace_id]
            for entry in entries
            if entry.assembled is None and entry.touches
        ]
        found: dict[str | None, list[FileTouch]] = defaultdict(list)
        if starts:
            for touch in self._store.touches_from(self._name.project, self._name.id, min(starts)):
                found[touch.turn_id].append(touch)
        return found

    def _state(
        self, trace_id: str, turn: TraceTurnInput, assembled: AssembledTurn | None
    ) -> TraceTurn:
        return TraceTurn(
            trace_id=trace_id,
            session_id=self._name.id,
            session_key=self._name.key,
            source=self._name.source,
            turn_id=self._name.turn_id(trace_id),
            start=turn.start,
            prompt=assembled.prompt if assembled is not None else None,
            touches=len(assembled.touches) if assembled is not None else 0,
            facts=turn.facts_json(),
        )
