"""Qwen Code chat records (`~/.qwen/projects/*/chats/*.jsonl`), one ChatRecord per line.

Every record has `uuid`, `parentUuid`, `sessionId`, `timestamp`, `type`, `cwd`, optional
`subtype`; `message {role, parts}` holds Gemini-style parts (`text`, `thought: true`,
`functionCall {id, name, args}`, `functionResponse {id, name, response}`, `inlineData`).

- `user`: a prompt; subtypes `notification`/`cron` are injected (system) and
  `mid_turn_user_message` is typed by the person but joins the running turn.
- `assistant`: one event per part (reasoning, text, tool call); `model`, `usageMetadata`.
- `tool_result`: the response; its call id is `toolCallResult.callId`, else the
  `functionResponse.id`, else the record's own uuid.
- `system`: `custom_title` (the title, not an event), `chat_compression` (compaction; the
  replayed `compressedHistory` is not indexed again), `rewind` and others (system),
  `ui_telemetry`/`file_history_snapshot` (runtime; snapshot contents are not indexed).
- Unknown record types are `unknown`. A rewind leaves the abandoned branch in the file: its
  events are kept, in file order. Turns have no end record (see `cursor.close_turns`).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import PurePath
from typing import Any

from mcpd.sessions.model import EventType, ParsedEvent, ParsedSession, ParseError
from services.ingest.transcripts.keys import ContentKeys
from services.ingest.transcripts.parsers._common import (
    UniqueKeys,
    parse_timestamp,
    read_json_lines,
    tool_call_event,
)
from services.ingest.transcripts.parsers.cursor import close_turns, link_responses

__all__ = ["QwenCodeParser"]

_INJECTED = frozenset({"notification", "cron"})
_RUNTIME_SUBTYPES = frozenset({"ui_telemetry", "file_history_snapshot", "attribution_snapshot"})
_FAILED = frozenset({"error", "failed", "cancelled", "canceled"})


def _obj(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _str(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _parts(record: dict[str, Any]) -> list[dict[str, Any]]:
    parts = _obj(record.get("message")).get("parts")
    return [p for p in parts if isinstance(p, dict)] if isinstance(parts, list) else []


def _user_text(parts: list[dict[str, Any]]) -> tuple[str, bool]:
    """The text of a user record and whether it has any typed text (not only attachments)."""
    texts = [_str(p.get("text")) for p in parts if _str(p.get("text")).strip()]
    media = [
        f"[{_str(_obj(p.get(kind)).get('mimeType')) or kind}]"
        for p in parts
        for kind in ("inlineData", "fileData")
        if kind in p
    ]
    return "\n".join(texts + media), bool(texts)


def _response_text(response: Any, metadata: dict[str, Any]) -> str:
    body = _obj(response)
    for value in (body.get("output"), body.get("error"), metadata.get("resultDisplay")):
        if isinstance(value, str) and value:
            return value
    return "" if response is None else json.dumps(response, ensure_ascii=False, sort_keys=True)


class _Reader:
    def __init__(self, path: str) -> None:
        self.path = path
        self.events: list[ParsedEvent] = []
        self.prompts: list[int] = []
        self.session_key: str | None = None
        self.title: str | None = None
        self.cwd: str | None = None
        self.model: str | None = None
        self._ids = UniqueKeys()
        self._content = ContentKeys()
        self._base: str | None = None

    def key(self, record: dict[str, Any], index: int | None = None) -> str:
        if self._base is None:  # once per record: a duplicate record gets the next occurrence
            self._base = _str(record.get("uuid")) or self._content.key(
                json.dumps(record, sort_keys=True, ensure_ascii=False)
            )
        return self._ids.claim(self._base if index is None else f"{self._base}:{index}")

    def add(self, line: int, record: dict[str, Any], kind: EventType, text: str, **kw: Any) -> None:
        key = kw.pop("key", None) or self.key(record)
        self.events.append(
            ParsedEvent(
                key=key,
                line=line,
                type=kind,
                text=text,
                timestamp=parse_timestamp(record.get("timestamp")),
                cwd=_str(record.get("cwd")) or None,
                **kw,
            )
        )

    def record(self, line: int, record: dict[str, Any]) -> None:
        self._base = None
        self.session_key = self.session_key or _str(record.get("sessionId")) or None
        self.cwd = self.cwd or _str(record.get("cwd")) or None
        kind, subtype = _str(record.get("type")), _str(record.get("subtype"))
        parts = _parts(record)
        if kind == "user" and any("functionResponse" in p for p in parts):
            self.tool_result(line, record, parts)
        elif kind == "user":
            text, typed = _user_text(parts)
            if subtype in _INJECTED:
                self.add(line, record, EventType.SYSTEM, text, payload={"subtype": subtype})
            elif text:
                if typed and subtype != "mid_turn_user_message":
                    self.prompts.append(len(self.events))
                payload = {"subtype": subtype} if subtype else None
                self.add(line, record, EventType.USER_INPUT, text, payload=payload)
        elif kind == "assistant":
            self.assistant(line, record, parts)
        elif kind == "tool_result":
            self.tool_result(line, record, parts)
        elif kind == "system":
            self.system(line, record, subtype, _obj(record.get("systemPayload")))
        else:
            self.add(line, record, EventType.UNKNOWN, kind or "record", payload=record)

    def assistant(self, line: int, record: dict[str, Any], parts: list[dict[str, Any]]) -> None:
        self.model = _str(record.get("model")) or self.model
        model = _str(record.get("model")) or None
        for index, part in enumerate(parts):
            key = self.key(record, index)
            call = _obj(part.get("functionCall"))
            if call:
                event = tool_call_event(
                    key=key,
                    line=line,
                    name=_str(call.get("name")),
                    arguments=call.get("args"),
                    call_id=_str(call.get("id")) or None,
                    timestamp=parse_timestamp(record.get("timestamp")),
                    model=model,
                    cwd=_str(record.get("cwd")) or None,
                )
                self.events.append(event)
            elif _str(part.get("text")).strip():
                kind = EventType.REASONING if part.get("thought") else EventType.ASSISTANT_RESPONSE
                self.add(line, record, kind, _str(part.get("text")), key=key, model=model)
            elif "text" not in part and not set(part) <= {"thought", "thoughtSignature"}:
                label = f"assistant part {', '.join(sorted(part)) or 'empty'}"
                self.add(line, record, EventType.UNKNOWN, label, key=key, payload=part)

    def tool_result(self, line: int, record: dict[str, Any], parts: list[dict[str, Any]]) -> None:
        meta = _obj(record.get("toolCallResult"))
        responses = [_obj(p.get("functionResponse")) for p in parts if "functionResponse" in p]
        for index, response in enumerate(responses):
            call_id = (_str(meta.get("callId")) if len(responses) == 1 else "") or _str(
                response.get("id")
            )
            status = _str(meta.get("status"))
            failed = (
                status.lower() in _FAILED
                or meta.get("error") not in (None, False)
                or _obj(response.get("response")).get("error") is not None
            )
            payload = {"status": status, "is_error": failed}
            if meta.get("errorType"):
                payload["error_type"] = meta["errorType"]
            self.add(
                line,
                record,
                EventType.TOOL_RESPONSE,
                _response_text(response.get("response"), meta),
                key=self.key(record, index) if len(responses) > 1 else None,
                call_id=call_id or _str(record.get("uuid")) or None,
                tool_name=_str(response.get("name")) or None,
                payload=payload,
            )

    def system(self, line: int, record: dict[str, Any], subtype: str, body: dict[str, Any]) -> None:
        if subtype == "custom_title":
            self.title = _str(body.get("customTitle")) or self.title
        elif subtype == "chat_compression":
            info = _obj(body.get("info"))
            text = (
                f"chat compressed: {info.get('originalTokenCount')} -> "
                f"{info.get('newTokenCount')} tokens ({_str(info.get('triggerReason'))})"
            )
            payload = {"info": info, "replayed_messages": len(_list(body.get("compressedHistory")))}
            self.add(line, record, EventType.COMPACTION, text, payload=payload)
        elif subtype in _RUNTIME_SUBTYPES:
            paths = [_str(_obj(s).get("path")) for s in _list(body.get("snapshots"))]
            detail = ", ".join(p for p in paths if p) or _str(_obj(body.get("uiEvent")).get("name"))
            text = f"{subtype}: {detail}" if detail else subtype
            self.add(line, record, EventType.RUNTIME, text, payload={"subtype": subtype})
        else:
            detail = _str(body.get("displayText"))
            if subtype == "rewind":
                detail = f"{body.get('truncatedCount', 0)} records rewound"
            payload = {"subtype": subtype, **{k: v for k, v in body.items() if k != "snapshots"}}
            text = f"{subtype}: {detail}" if detail else subtype or "system"
            self.add(line, record, EventType.SYSTEM, text, payload=payload)


class QwenCodeParser:
    """Reads a Qwen Code chat file."""

    harness = "qwen-code"

    def parse(self, lines: Sequence[str], *, path: str) -> ParsedSession:
        reader = _Reader(path)
        errors: list[ParseError] = []
        for item in read_json_lines(lines):
            if isinstance(item, ParseError):
                errors.append(item)
            else:
                reader.record(*item)
        close_turns(reader.events, reader.prompts)
        link_responses(reader.events)
        return ParsedSession(
            harness=self.harness,
            session_key=reader.session_key or PurePath(path).stem,
            events=reader.events,
            errors=errors,
            title=reader.title,
            cwd=reader.cwd,
            model=reader.model,
        )
