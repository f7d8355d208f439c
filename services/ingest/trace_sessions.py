"""Sessions from ingested traces: spans that carry `correlation.session_id` become a session of
the session read model (harness `mcpd`), searchable with the MCP tools like transcripts.

`TraceSessions.notice` is told about every stored batch (`IngestPipeline(on_stored=...)`) and
remembers the (project, session id)s its spans carry; a background task rebuilds each noticed
session every `interval_s`, off the event loop, but one session at most once every `min_gap_s`:
a rebuild reads the whole session back, so a session that keeps receiving spans would otherwise
be read again every second (measured under sustained OTLP load with 400 busy sessions: a sixth
of all ingest CPU). A session's first spans are searchable within `interval_s`, later ones
within `min_gap_s`. Passes also keep to a budget: after a pass that took t seconds the next
waits at least t * (1 - max_share) / max_share, so rebuilding takes at most `max_share` of the
time however many sessions are busy (measured with 800 busy sessions under sustained OTLP load,
before the budget: 16% of the daemon's samples, ingest 10% slower than with no rebuilding at
all); under such load sessions lag further behind, never ingest. A rebuild reads the session's
spans back (`TraceStore.session_spans`, the newest `max_spans` of them), maps them to a
`ParsedSession` (`parse_trace_session`), assembles it with the transcript importer's `assemble`
and writes it with `SessionStore.write_session`, which replaces the session atomically (an
identical re-write changes nothing). Rebuilding from the store, not from the batch, makes a
session the same whatever the arrival order, re-sends or batch boundaries.

The mapping:

* **Session**: harness `mcpd`, session_key = the session id, source = the service name of the
  session's spans (the earliest root span that carries one, else the earliest span, else
  `mcpd`). A session already stored under another of its service names keeps that source (the
  session's MCP id derives from source and key, so it must not move). Title: the first user
  input (assemble's preview, at most 120 characters).
* **Turns**: one per trace, ordered by the root span's start (a trace whose root has not
  arrived: its earliest span's start), then trace id. A trace that maps to no event makes no
  turn.
* **Events** of a trace, the root's first, its end last, the rest in time order (the instant
  each one happened, then span start, then span id):
  - the root's input: `user_input` (starts the turn). A message list gives the text of its last
    `user` message (an agent's input often repeats the conversation so far);
  - each model span (model_generation, model_step, model_inference) with output and no model
    descendant with output: `assistant_response` at its end, model = the span's model;
  - each tool span (tool_call, client_tool_call, provider_tool_call, mcp_tool_call):
    `tool_call` at its start (tool_name = entity_name, else the span name; arguments = input,
    the same text, file paths and self-tool flag as transcript tool calls), and, once it
    ended, `tool_response` at its end (text = output; a failed tool's error when it has no
    output);
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
  `choices` and content-block lists give their text contents (joined by newlines); any other
  JSON value is compact JSON with sorted keys. Payloads were redacted at ingest.
* **Ids** come from span ids (`<trace>/<span>/<part>`), stable across rebuilds. A turn's id
  derives from its first event, so it changes once if an earlier event of the trace arrives
  late (typically the root, sent when the trace ends), and an event moves turns if its span
  moves traces: ids are stable once a trace is complete.
* Each event's payload names its trace and span (`trace_id`, `span_id`), and an error's detail.

Limits: held (tail-sampled) spans reach sessions only after a later batch of the same session
is stored (`TailSampler` releases them without telling this); noticed sessions not rebuilt
before a crash wait for their next batch; a session larger than `max_spans` shows its newest
spans (its oldest turn may then be partial); replicas rebuilding one session concurrently may
write a slightly older state until its next batch.

Everything but `notice`, `pending`, `start` and `close` blocks: run it in a worker thread.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
from collections import OrderedDict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, Protocol

from mcpd.runtime.clock import Clock
from mcpd.sessions.model import (
    TRACE_HARNESS,
    AssembledSession,
    EventType,
    ParsedEvent,
    ParsedSession,
    SessionRecord,
)
from mcpd.signals.batch import SignalBatch
from mcpd.signals.projection import MODEL_KINDS, TOOL_KINDS
from mcpd.signals.rows import SpanRow
from services.ingest.transcripts.assemble import assemble
from services.ingest.transcripts.parsers._common import block_text, tool_call_event
from services.ingest.transcripts.text import canonical_json
from services.ingest.transcripts.tool_args import parse_arguments

__all__ = [
    "HARNESS",
    "MAX_SESSION_SPANS",
    "TraceSessions",
    "parse_trace_session",
    "session_sources",
    "sessions_of",
    "span_text",
]

log = logging.getLogger("mcpd.ingest.trace_sessions")

HARNESS = TRACE_HARNESS
# The source of a session whose spans name no service.
DEFAULT_SOURCE = "mcpd"
# The most spans one rebuild reads (the newest ones).
MAX_SESSION_SPANS = 5_000
# Sessions whose source (and last rebuild) this process remembers.
SOURCE_MEMORY = 100_000
# The least time between two rebuilds of one session (see the module docstring).
MIN_REBUILD_GAP_S = 5.0
# The most of the time rebuild passes may take (see the module docstring).
MAX_REBUILD_SHARE = 0.1
_ENDED_STATUSES = frozenset({"error", "cancelled"})


class CanReadSessionSpans(Protocol):
    """What a rebuild needs of the trace store."""

    def session_spans(self, project: str, session_id: str, *, limit: int) -> list[SpanRow]:
        """The newest `limit` spans of one session, oldest first."""
        ...


class CanWriteTraceSessions(Protocol):
    """What a rebuild needs of the session store."""

    def write_session(self, project: str, assembled: AssembledSession) -> None:
        """Insert or replace one session atomically."""
        ...

    def session_of_key(self, project: str, source: str, session_key: str) -> SessionRecord | None:
        """The session stored for (source, key), if any."""
        ...


# --- the mapping (pure) ------------------------------------------------------------------------


def parse_trace_session(session_id: str, spans: Sequence[SpanRow]) -> ParsedSession:
    """The session that `spans` (all of one project and session id) make; see the module
    docstring. Events come out in session order, with line numbers counting from 1."""
    traces: dict[str, dict[str, SpanRow]] = {}
    for span in spans:
        # A span read twice (it cannot be, but cheaply) counts once: the later one wins.
        traces.setdefault(span["trace_id"], {})[span["span_id"]] = span
    turns = sorted(
        (_Trace(trace_id, list(by_id.values())) for trace_id, by_id in traces.items()),
        key=lambda trace: (trace.start, trace.trace_id),
    )
    events: list[ParsedEvent] = []
    for trace in turns:
        trace_events = trace.events()
        if trace_events:
            trace_events[0].starts_turn = True
            events.extend(trace_events)
    for line, event in enumerate(events, start=1):
        event.line = line
    return ParsedSession(harness=HARNESS, session_key=session_id, events=events)


def session_sources(spans: Sequence[SpanRow]) -> list[str]:
    """The session's possible sources, best first: service names of root spans (earliest
    first), then of the other spans, then `mcpd`; each once."""
    ordered = sorted(spans, key=lambda span: (not span.get("is_root"), *_start_order(span)))
    names = [span.get("service_name") for span in ordered]
    return list(dict.fromkeys([name for name in names if name] + [DEFAULT_SOURCE]))


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
    return block_text(content)


@dataclass
class _Trace:
    """One trace's spans and the events they make."""

    trace_id: str
    spans: list[SpanRow]
    root: SpanRow | None = field(init=False)
    start: int = field(init=False)

    def __post_init__(self) -> None:
        self.spans.sort(key=_start_order)
        self.root = next((span for span in self.spans if span.get("is_root")), None)
        self.start = (self.root or self.spans[0])["start_time"]

    def events(self) -> list[ParsedEvent]:
        middle: list[tuple[tuple[int, int, str, int], ParsedEvent]] = []
        silenced = self._silenced_models()
        for span in self.spans:
            if span is self.root:
                continue
            kind = span.get("kind")
            if kind in MODEL_KINDS:
                text = span_text(span.get("output"))
                if text and span["span_id"] not in silenced:
                    event = self._event(
                        span, "output", EventType.ASSISTANT_RESPONSE, text, _end(span)
                    )
                    event.model = span.get("model")
                    middle.append((_order(span, _end(span), 0), event))
            if kind in TOOL_KINDS:
                middle.extend(self._tool(span))
            elif span.get("status") == "error":
                text = f"{span.get('name') or 'span'} failed: {_error_text(span)}"
                event = self._event(span, "error", EventType.RUNTIME, text, _end(span))
                middle.append((_order(span, _end(span), 2), event))
        middle.sort(key=lambda item: item[0])
        events = [event for _, event in middle]
        if self.root is None:
            return events
        return self._root_events(self.root, events)

    def _root_events(self, root: SpanRow, middle: list[ParsedEvent]) -> list[ParsedEvent]:
        events: list[ParsedEvent] = []
        prompt = span_text(root.get("input"), prompt=True)
        if prompt:
            events.append(
                self._event(root, "input", EventType.USER_INPUT, prompt, root["start_time"])
            )
        events.extend(middle)
        ended = root.get("end_time") is not None or bool(root.get("is_event"))
        answer = span_text(root.get("output"))
        status = root.get("status")
        responses = [e for e in events if e.type is EventType.ASSISTANT_RESPONSE]
        if status in _ENDED_STATUSES:
            when = _end(root)
            if answer:
                events.append(self._final(root, answer, when))
            text = f"{root.get('name') or 'run'} {'failed' if status == 'error' else 'cancelled'}"
            if status == "error":
                text += f": {_error_text(root)}"
            stop = self._event(root, "end", EventType.RUNTIME, text, when)
            stop.terminal = True
            events.append(stop)
            return events
        if answer and responses and responses[-1].text == answer and ended:
            final: ParsedEvent | None = responses[-1]
        elif answer:
            final = self._final(root, answer, _end(root))
            events.append(final)
        else:
            final = responses[-1] if responses and ended else None
        if ended:
            if final is None:
                final = self._event(
                    root, "end", EventType.RUNTIME, f"{root.get('name') or 'run'} ended", _end(root)
                )
                events.append(final)
            final.terminal = final.completes_turn = True
        return events

    def _final(self, root: SpanRow, text: str, when: int) -> ParsedEvent:
        event = self._event(root, "output", EventType.ASSISTANT_RESPONSE, text, when)
        event.model = root.get("model")
        return event

    def _tool(self, span: SpanRow) -> list[tuple[tuple[int, int, str, int], ParsedEvent]]:
        name = span.get("entity_name") or span.get("name") or "tool"
        call = tool_call_event(
            key=self._key(span, "call"),
            line=0,
            name=name,
            arguments=parse_arguments(span.get("input")),
            call_id=span["span_id"],
            timestamp=_time(span["start_time"]),
            payload=self._provenance(span),
        )
        found = [(_order(span, span["start_time"], 1), call)]
        if span.get("end_time") is None and not span.get("is_event"):
            return found  # still running: no response yet
        text = span_text(span.get("output"))
        failed = span.get("status") == "error"
        if failed and not text:
            text = f"error: {_error_text(span)}"
        response = self._event(span, "result", EventType.TOOL_RESPONSE, text, _end(span))
        response.tool_name = name
        response.call_id = span["span_id"]
        if failed and response.payload is not None:
            response.payload["status"] = "error"
        found.append((_order(span, _end(span), 3), response))
        return found

    def _silenced_models(self) -> set[str]:
        """The model spans with a model descendant that has output: that descendant speaks
        for them (a generation's answer is its last step's, a step's its inference's)."""
        by_id = {span["span_id"]: span for span in self.spans}
        silenced: set[str] = set()
        for span in self.spans:
            if span.get("kind") not in MODEL_KINDS or not span_text(span.get("output")):
                continue
            parent, seen = span.get("parent_span_id"), {span["span_id"]}
            while parent is not None and parent in by_id and parent not in seen:
                seen.add(parent)
                if by_id[parent].get("kind") in MODEL_KINDS:
                    silenced.add(parent)
                parent = by_id[parent].get("parent_span_id")
        return silenced

    def _event(
        self, span: SpanRow, part: str, kind: EventType, text: str, when: int
    ) -> ParsedEvent:
        return ParsedEvent(
            key=self._key(span, part),
            line=0,
            type=kind,
            text=text,
            timestamp=_time(when),
            payload=self._provenance(span),
        )

    def _key(self, span: SpanRow, part: str) -> str:
        return f"{self.trace_id}/{span['span_id']}/{part}"

    def _provenance(self, span: SpanRow) -> dict[str, Any]:
        payload: dict[str, Any] = {"trace_id": self.trace_id, "span_id": span["span_id"]}
        if span.get("error"):
            payload["error"] = span.get("error")
        return payload


def _start_order(span: SpanRow) -> tuple[int, str]:
    return span["start_time"], span["span_id"]


def _end(span: SpanRow) -> int:
    end = span.get("end_time")
    return end if end is not None else span["start_time"]


def _order(span: SpanRow, when: int, part: int) -> tuple[int, int, str, int]:
    return when, span["start_time"], span["span_id"], part


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


# --- the rebuilding component ------------------------------------------------------------------


def sessions_of(batch: SignalBatch) -> set[tuple[str, str]]:
    """The (project, session id)s the spans of a stored batch belong to."""
    return {
        (span.get("project") or "", session_id)
        for span in batch.spans
        if (session_id := span.get("session_id"))
    }


class TraceSessions:
    """Keeps the sessions of ingested traces in the session read model (module docstring)."""

    def __init__(
        self,
        trace_store: CanReadSessionSpans,
        session_store: CanWriteTraceSessions,
        clock: Clock,
        *,
        interval_s: float = 1.0,
        min_gap_s: float = MIN_REBUILD_GAP_S,
        max_spans: int = MAX_SESSION_SPANS,
        max_share: float = MAX_REBUILD_SHARE,
    ) -> None:
        if not 0.0 < max_share <= 1.0:
            raise ValueError(f"max_share must be in (0, 1], not {max_share}")
        self._traces = trace_store
        self._sessions = session_store
        self._clock = clock
        self._interval_s = interval_s
        self._min_gap_s = min_gap_s
        self._max_spans = max_spans
        self._max_share = max_share
        self._last_pass_s = 0.0
        self._pending: dict[tuple[str, str], None] = {}
        # When each recently rebuilt session was rebuilt (monotonic seconds), oldest first.
        self._built: OrderedDict[tuple[str, str], float] = OrderedDict()
        self._pending_lock = threading.Lock()
        # One rebuild pass at a time: two passes writing one session could reorder its states.
        self._rebuild_lock = threading.Lock()
        self._sources: OrderedDict[tuple[str, str], str] = OrderedDict()
        self._task: asyncio.Task[None] | None = None

    def notice(self, batch: SignalBatch) -> None:
        """Remember the sessions `batch`'s spans belong to (cheap; never raises on a row)."""
        self.notice_sessions(sessions_of(batch))

    def notice_sessions(self, keys: Iterable[tuple[str, str]]) -> None:
        """Remember (project, session id)s that stored spans belong to: what `notice` finds in a
        batch, or what another process that stored it says (an ingest worker)."""
        keys = sorted(set(keys))
        if keys:
            with self._pending_lock:
                for key in keys:
                    self._pending[key] = None

    def pending(self) -> int:
        """How many noticed sessions wait for a rebuild."""
        with self._pending_lock:
            return len(self._pending)

    def flush(self, *, everything: bool = False) -> int:
        """Rebuild every noticed session that is due (not rebuilt in the last `min_gap_s`; with
        `everything`, all of them); return how many were written. A session whose rebuild
        fails is noticed again (retried on the next pass) and logged."""
        now = self._clock.monotonic()
        with self._pending_lock:
            keys = [key for key in self._pending if everything or self._due(key, now)]
            for key in keys:
                del self._pending[key]
        written = 0
        with self._rebuild_lock:
            for project, session_id in keys:
                try:
                    if self.rebuild(project, session_id):
                        written += 1
                    self._rebuilt((project, session_id), now)
                except Exception:
                    log.exception(
                        "trace session rebuild failed; retried on the next pass",
                        extra={"project": project, "session_id": session_id},
                    )
                    with self._pending_lock:
                        self._pending.setdefault((project, session_id), None)
        self._last_pass_s = self._clock.monotonic() - now
        return written

    def next_wait(self) -> float:
        """Seconds the background task waits before its next pass: `interval_s`, or longer
        after a long pass, so passes take at most `max_share` of the time."""
        share = self._max_share
        return max(self._interval_s, self._last_pass_s * (1.0 - share) / share)

    def rebuild(self, project: str, session_id: str) -> bool:
        """Rebuild one session from its stored spans and write it; False when it has no spans
        or none of them makes an event (nothing is written then)."""
        spans = self._traces.session_spans(project, session_id, limit=self._max_spans)
        if not spans:
            return False
        parsed = parse_trace_session(session_id, spans)
        if not parsed.events:
            return False
        source = self._source(project, session_id, spans)
        assembled = assemble(
            parsed,
            source=source,
            project=project,
            path=f"mcpd-session:{session_id}",
            fallback_time=self._clock.now(),
        )
        self._sessions.write_session(project, assembled)
        self._remember(project, session_id, source)
        return True

    def start(self) -> None:
        """Rebuild noticed sessions every `interval_s` on the running loop until `close`."""
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._run(), name="trace-sessions")

    async def close(self) -> None:
        """Stop the task, then rebuild what is still noticed (best effort). Idempotent."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
            try:
                await asyncio.to_thread(self.flush, everything=True)
            except Exception:
                log.exception("trace sessions: last rebuild on shutdown failed")

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(self.next_wait())
            if self.pending():
                try:
                    await asyncio.to_thread(self.flush)
                except Exception:
                    log.exception("trace session rebuild pass failed")

    def _due(self, key: tuple[str, str], now: float) -> bool:
        built = self._built.get(key)
        return built is None or now - built >= self._min_gap_s

    def _rebuilt(self, key: tuple[str, str], when: float) -> None:
        with self._pending_lock:
            self._built[key] = when
            self._built.move_to_end(key)
            while len(self._built) > SOURCE_MEMORY:
                self._built.popitem(last=False)

    def _source(self, project: str, session_id: str, spans: Sequence[SpanRow]) -> str:
        """The best source, unless the session is already stored under another one."""
        known = self._sources.get((project, session_id))
        if known is not None:
            return known
        candidates = session_sources(spans)
        for source in candidates:
            if self._sessions.session_of_key(project, source, session_id) is not None:
                return source
        return candidates[0]

    def _remember(self, project: str, session_id: str, source: str) -> None:
        self._sources[(project, session_id)] = source
        self._sources.move_to_end((project, session_id))
        while len(self._sources) > SOURCE_MEMORY:
            self._sources.popitem(last=False)
