"""Prime Agent session files: Pi-family JSONL (see `pi.py`) with extra entries.

Extra entries: `service_tier_change` (system); `agent_status`, `child_usage_attributed`
(usage a subagent ran up, attributed to a message), `session_state`, `git_state` (runtime).
Prime keeps internal notes in the transcript that its own UI hides: `custom` entries,
`custom_message`s with `display: false` and `custom`-role messages. They become `unknown`
events (openable, never searched by default) labelled by their type, and so do entry types
this parser does not know; their free text is not put in `text`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from mcpd.sessions.model import EventType, ParsedSession
from services.ingest.transcripts.parsers.pi import PiReader, obj, string

__all__ = ["PrimeAgentParser"]


class PrimeReader(PiReader):
    """A Pi reader that knows Prime's extra entries and keeps its hidden ones out of search."""

    harness = "prime-agent"

    def entry(self, line: int, record: dict[str, Any]) -> None:
        kind = string(record.get("type"))
        custom = string(record.get("customType"))
        if kind == "service_tier_change":
            tier = string(record.get("serviceTier"))
            self.emit(line, record, EventType.SYSTEM, f"service tier: {tier}")
        elif kind == "agent_status":
            status = obj(record.get("status"))
            state = string(status.get("taskState"))
            payload = {k: status[k] for k in ("taskState", "basedOnMessageCount") if k in status}
            self.runtime(line, record, f"agent status: {state}", payload)
        elif kind == "child_usage_attributed":
            usage = obj(record.get("childUsage"))
            text = f"subagent usage attributed: {usage.get('totalTokens', 0)} tokens"
            fields = ("targetId", "origin", "childUsage", "aggregateUsage")
            self.runtime(line, record, text, {k: record[k] for k in fields if k in record})
        elif kind == "session_state":
            session = obj(record.get("state"))
            self.runtime(line, record, f"session state: {string(session.get('status'))}", session)
        elif kind == "git_state":
            git = obj(record.get("git"))
            where = f"{string(git.get('branch'))} @ {string(git.get('commit'))[:12]}"
            self.runtime(line, record, f"git: {where}", git)
        elif kind == "custom":
            self.unknown(line, record, f"custom {custom}".strip())
        elif kind == "custom_message" and record.get("display") is False:
            self.unknown(line, record, f"hidden custom_message {custom}".strip())
        elif kind == "message" and string(obj(record.get("message")).get("role")) == "custom":
            role_custom = string(obj(record.get("message")).get("customType"))
            self.unknown(line, record, f"custom message {role_custom}".strip())
        else:
            super().entry(line, record)

    def runtime(self, line: int, record: dict[str, Any], text: str, payload: Any) -> None:
        self.emit(line, record, EventType.RUNTIME, text, dict(payload) if payload else None)


class PrimeAgentParser:
    """Reads a Prime Agent session file (root sessions and RLM child transcripts alike)."""

    harness = "prime-agent"

    def parse(self, lines: Sequence[str], *, path: str) -> ParsedSession:
        return PrimeReader(path).read(lines)
