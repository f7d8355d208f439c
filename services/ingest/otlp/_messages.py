"""A span's input and output: prompts and completions, tool arguments and results.

Sources in precedence order (first present wins, separately for input and output):

1. `gen_ai.input.messages` / `gen_ai.output.messages` (JSON), with `gen_ai.system_instructions`
   prepended to the input as a system message;
2. OpenInference `llm.input_messages.N.message.*` / `llm.output_messages.N.message.*`;
3. OpenLLMetry `gen_ai.prompt.N.*` / `gen_ai.completion.N.*`;
4. the older single attributes `gen_ai.prompt` / `gen_ai.completion`;
5. `gen_ai.tool.call.arguments` / `gen_ai.tool.call.result`;
6. OpenInference `input.value` / `output.value` (parsed when `*.mime_type` is JSON);
7. span events: `gen_ai.{system,user,assistant,tool}.message` -> input, `gen_ai.choice` ->
   output, and `gen_ai.client.inference.operation.details` carrying the message attributes.

JSON text is parsed, so a stored prompt is a document rather than an escaped string.
"""

from __future__ import annotations

from typing import Any

from services.ingest.otlp._values import parse_json

INPUT_MESSAGES = "gen_ai.input.messages"
OUTPUT_MESSAGES = "gen_ai.output.messages"
SYSTEM_INSTRUCTIONS = "gen_ai.system_instructions"

# (indexed prefix, is input); the character after the prefix must be a digit.
INDEXED_PREFIXES = (
    "llm.input_messages.",
    "llm.output_messages.",
    "gen_ai.prompt.",
    "gen_ai.completion.",
)
_INPUT_SINGLES = ("gen_ai.prompt", "gen_ai.tool.call.arguments")
_OUTPUT_SINGLES = ("gen_ai.completion", "gen_ai.tool.call.result")
# Wrapper keys OpenInference puts around each list item.
_WRAPPERS = ("message", "message_content", "tool_call")

# Indexed forms always carry message 0's role or content; testing for these few keys is much
# cheaper than scanning every attribute name for the prefixes.
_INDEXED_SENTINELS = frozenset(
    {
        *(
            f"{prefix}0.message.{field}"
            for prefix in INDEXED_PREFIXES[:2]
            for field in ("role", "content")
        ),
        *(f"{prefix}0.{field}" for prefix in INDEXED_PREFIXES[2:] for field in ("role", "content")),
    }
)
PAYLOAD_KEYS = frozenset(
    {
        INPUT_MESSAGES,
        OUTPUT_MESSAGES,
        *_INPUT_SINGLES,
        *_OUTPUT_SINGLES,
        "input.value",
        "output.value",
        *_INDEXED_SENTINELS,
    }
)

MESSAGE_EVENTS = {
    "gen_ai.system.message": "system",
    "gen_ai.user.message": "user",
    "gen_ai.assistant.message": "assistant",
    "gen_ai.tool.message": "tool",
}
CHOICE_EVENT = "gen_ai.choice"
DETAILS_EVENT = "gen_ai.client.inference.operation.details"
_EVENT_NOISE = ("gen_ai.system", "gen_ai.provider.name")


def payloads(attrs: dict[str, Any]) -> tuple[Any, Any]:
    """(input, output) from span attributes, consuming the attributes used; None when absent."""
    if attrs.keys().isdisjoint(PAYLOAD_KEYS):
        return None, None
    value_in = _messages(attrs, INPUT_MESSAGES)
    if value_in is not None and SYSTEM_INSTRUCTIONS in attrs:
        system = parse_json(attrs.pop(SYSTEM_INSTRUCTIONS))
        if isinstance(value_in, list):
            value_in = [{"role": "system", "parts": system}, *value_in]
    value_out = _messages(attrs, OUTPUT_MESSAGES)
    if value_in is not None and value_out is not None:
        return value_in, value_out

    if not attrs.keys().isdisjoint(_INDEXED_SENTINELS):
        indexed = [key for key in attrs if key.startswith(INDEXED_PREFIXES)]
        if value_in is None:
            value_in = _indexed(attrs, indexed, "llm.input_messages.")
        if value_in is None:
            value_in = _indexed(attrs, indexed, "gen_ai.prompt.")
        if value_out is None:
            value_out = _indexed(attrs, indexed, "llm.output_messages.")
        if value_out is None:
            value_out = _indexed(attrs, indexed, "gen_ai.completion.")
    if value_in is None:
        value_in = _single(attrs, _INPUT_SINGLES)
    if value_out is None:
        value_out = _single(attrs, _OUTPUT_SINGLES)
    if value_in is None:
        value_in = _openinference_value(attrs, "input")
    if value_out is None:
        value_out = _openinference_value(attrs, "output")
    return value_in, value_out


def _messages(attrs: dict[str, Any], key: str) -> Any:
    if key not in attrs:
        return None
    return parse_json(attrs.pop(key))


def _single(attrs: dict[str, Any], keys: tuple[str, ...]) -> Any:
    for key in keys:
        if key in attrs:
            return parse_json(attrs.pop(key))
    return None


def _openinference_value(attrs: dict[str, Any], side: str) -> Any:
    key = f"{side}.value"
    if key not in attrs:
        return None
    value = attrs.pop(key)
    mime_type = attrs.pop(f"{side}.mime_type", None)
    if isinstance(value, str) and mime_type == "application/json":
        return parse_json(value)
    return value


def _indexed(attrs: dict[str, Any], keys: list[str], prefix: str) -> list[Any] | None:
    """Flattened `prefix.N.a.b` attributes rebuilt as a list of nested dicts."""
    start = len(prefix)
    root: dict[str, Any] = {}
    for key in keys:
        if not key.startswith(prefix) or not key[start : start + 1].isdigit():
            continue
        path = key[start:].split(".")
        node = root
        for part in path[:-1]:
            child = node.get(part)
            if not isinstance(child, dict):
                child = node[part] = {}
            node = child
        node[path[-1]] = parse_json(attrs.pop(key))
    if not root:
        return None
    rebuilt = _listify(root)
    return rebuilt if isinstance(rebuilt, list) else [rebuilt]


def _listify(node: Any) -> Any:
    """Dicts keyed 0..n-1 become lists; single-key OpenInference wrappers are unwrapped."""
    if not isinstance(node, dict):
        return node
    items = {key: _listify(value) for key, value in node.items()}
    if len(items) == 1:
        (only,) = items
        if only in _WRAPPERS:
            return items[only]
    if items and all(key.isdigit() for key in items):
        return [items[key] for key in sorted(items, key=int)]
    return items


def event_message(name: str, attrs: dict[str, Any]) -> dict[str, Any]:
    """A GenAI message event as a message: its attributes, with the role its name implies."""
    message = {key: parse_json(value) for key, value in attrs.items() if key not in _EVENT_NOISE}
    role = MESSAGE_EVENTS.get(name)
    if role is not None:
        message.setdefault("role", role)
    return message
