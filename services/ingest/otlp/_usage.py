"""Token usage, model parameters and producer-reported cost from span attributes.

Token rule (the spec's): `input_tokens` and `output_tokens` are totals that INCLUDE cache and
reasoning tokens, and the `text` detail is what remains once every other detail of that side is
taken away, never negative. Producers that report input excluding cache tokens (Anthropic's own
API shape) are detected, in this order:

1. a declaration: `mcpd.usage.input_includes_cache` / `mcpd.usage.output_includes_reasoning`
   (bool) say how the producer counted;
2. an impossible count: cache tokens larger than the reported input (or reasoning larger than
   the reported output) can only mean the total excludes them;
3. a reported total: when `input + output` does not equal the reported total but adding the
   cache (and/or reasoning) tokens does, the total tells which side excluded them;
4. otherwise the OpenTelemetry convention, which includes them.
"""

from __future__ import annotations

import json
from typing import Any

from services.ingest.otlp._values import as_bool, as_float, as_int, as_signed_int, as_strings

# Each quantity, and the attributes that report it in precedence order: OpenTelemetry GenAI
# (current, then older names), OpenLLMetry, then OpenInference.
TOKEN_SOURCES: dict[str, tuple[str, ...]] = {
    "input": (
        "gen_ai.usage.input_tokens",
        "gen_ai.usage.prompt_tokens",
        "llm.token_count.prompt",
    ),
    "output": (
        "gen_ai.usage.output_tokens",
        "gen_ai.usage.completion_tokens",
        "llm.token_count.completion",
    ),
    "total": (
        "gen_ai.usage.total_tokens",
        "llm.usage.total_tokens",
        "llm.token_count.total",
    ),
    "cache_read": (
        "gen_ai.usage.cache_read.input_tokens",
        "gen_ai.usage.cache_read_input_tokens",
        "llm.token_count.prompt_details.cache_read",
    ),
    "cache_write": (
        "gen_ai.usage.cache_write.input_tokens",
        "gen_ai.usage.cache_creation.input_tokens",
        "gen_ai.usage.cache_creation_input_tokens",
        "llm.token_count.prompt_details.cache_write",
    ),
    "input_audio": (
        "gen_ai.usage.audio.input_tokens",
        "llm.token_count.prompt_details.audio",
    ),
    "input_image": ("gen_ai.usage.image.input_tokens",),
    "reasoning": (
        "gen_ai.usage.reasoning.output_tokens",
        "gen_ai.usage.reasoning_tokens",
        "llm.token_count.completion_details.reasoning",
    ),
    "output_audio": (
        "gen_ai.usage.audio.output_tokens",
        "llm.token_count.completion_details.audio",
    ),
    "output_image": ("gen_ai.usage.image.output_tokens",),
}
INPUT_INCLUDES_CACHE = "mcpd.usage.input_includes_cache"
OUTPUT_INCLUDES_REASONING = "mcpd.usage.output_includes_reasoning"

USAGE_KEYS = frozenset(
    {key for keys in TOKEN_SOURCES.values() for key in keys}
    | {INPUT_INCLUDES_CACHE, OUTPUT_INCLUDES_REASONING}
)


def _ranked(sources: dict[str, tuple[str, ...]]) -> dict[str, tuple[str, int]]:
    """attribute -> (quantity, rank): lower ranks win when several attributes report one."""
    return {key: (name, rank) for name, keys in sources.items() for rank, key in enumerate(keys)}


_TOKEN_KEYS = _ranked(TOKEN_SOURCES)


def _pop_bool(attrs: dict[str, Any], key: str) -> bool | None:
    value = as_bool(attrs.get(key))
    if value is not None:
        del attrs[key]
    return value


Usage = tuple[int | None, int | None, int | None, dict[str, dict[str, int]] | None]
NO_USAGE: Usage = (None, None, None, None)


def token_usage(attrs: dict[str, Any]) -> Usage:
    """(input_tokens, output_tokens, total_tokens, usage_details), consuming what it used."""
    present = USAGE_KEYS.intersection(attrs)
    if not present:
        return NO_USAGE
    # Only the attributes present are looked at: a span carries a handful of the thirty names.
    got: dict[str, int] = {}
    chosen: dict[str, tuple[int, str]] = {}
    for key in present:
        spec = _TOKEN_KEYS.get(key)
        if spec is None:
            continue  # a declaration, read below
        name, rank = spec
        best = chosen.get(name)
        if best is not None and best[0] < rank:
            continue
        count = as_int(attrs[key])
        if count is not None:
            got[name] = count
            chosen[name] = (rank, key)
    for _, key in chosen.values():
        del attrs[key]
    reported_in, reported_out, total = got.get("input"), got.get("output"), got.get("total")
    cache_read, cache_write = got.get("cache_read"), got.get("cache_write")
    reasoning = got.get("reasoning")
    cache = (cache_read or 0) + (cache_write or 0)
    thinking = reasoning or 0

    declared_in = (
        _pop_bool(attrs, INPUT_INCLUDES_CACHE) if INPUT_INCLUDES_CACHE in present else None
    )
    declared_out = (
        _pop_bool(attrs, OUTPUT_INCLUDES_REASONING)
        if OUTPUT_INCLUDES_REASONING in present
        else None
    )
    in_excludes = _excludes(declared_in, reported_in, cache)
    out_excludes = _excludes(declared_out, reported_out, thinking)
    if (
        total is not None
        and reported_in is not None
        and reported_out is not None
        and (cache or thinking)
    ):
        in_excludes, out_excludes = _by_total(
            total, reported_in, reported_out, cache, thinking, in_excludes, out_excludes
        )

    input_tokens = reported_in
    if reported_in is not None and in_excludes:
        input_tokens = reported_in + cache
    output_tokens = reported_out
    if reported_out is not None and out_excludes:
        output_tokens = reported_out + thinking

    input_details = _details(
        {
            "cache_read": cache_read,
            "cache_write": cache_write,
            "audio": got.get("input_audio"),
            "image": got.get("input_image"),
        },
        input_tokens,
    )
    output_details = _details(
        {
            "reasoning": reasoning,
            "audio": got.get("output_audio"),
            "image": got.get("output_image"),
        },
        output_tokens,
    )
    details: dict[str, dict[str, int]] = {}
    if input_details:
        details["input"] = input_details
    if output_details:
        details["output"] = output_details

    if (
        total is not None
        and input_tokens is not None
        and output_tokens is not None
        and total == input_tokens + output_tokens
    ):
        total = None  # the spec stores a total only when it differs from the sum
    return input_tokens, output_tokens, total, details or None


def _excludes(declared_includes: bool | None, reported: int | None, extra: int) -> bool | None:
    """True: the reported total excludes `extra`; False: it includes it; None: undecided."""
    if declared_includes is not None:
        return not declared_includes
    if reported is not None and extra > reported:
        return True
    return None


def _by_total(
    total: int,
    reported_in: int,
    reported_out: int,
    cache: int,
    thinking: int,
    in_excludes: bool | None,
    out_excludes: bool | None,
) -> tuple[bool, bool]:
    """Settle undecided sides by which reading makes input + output equal the reported total."""
    in_options = (False, True) if in_excludes is None else (in_excludes,)
    out_options = (False, True) if out_excludes is None else (out_excludes,)
    for in_ex in in_options:  # inclusive readings first: the convention wins a tie
        for out_ex in out_options:
            input_total = reported_in + (cache if in_ex else 0)
            output_total = reported_out + (thinking if out_ex else 0)
            if input_total + output_total == total:
                return in_ex, out_ex
    return bool(in_excludes), bool(out_excludes)


def _details(parts: dict[str, int | None], side_total: int | None) -> dict[str, int]:
    """The reported details of one side, plus `text`: the remainder of the side's total."""
    details = {name: count for name, count in parts.items() if count is not None}
    if details and side_total is not None:
        details["text"] = max(0, side_total - sum(details.values()))
    return details


# ModelParameters: field -> GenAI request attributes, then the key(s) inside OpenInference's
# `llm.invocation_parameters` JSON.
PARAMETER_SOURCES: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "temperature": (("gen_ai.request.temperature",), ("temperature",)),
    "top_p": (("gen_ai.request.top_p",), ("top_p",)),
    "top_k": (("gen_ai.request.top_k",), ("top_k",)),
    "max_tokens": (
        ("gen_ai.request.max_tokens",),
        ("max_tokens", "max_completion_tokens", "max_output_tokens"),
    ),
    "seed": (("gen_ai.request.seed", "gen_ai.openai.request.seed"), ("seed",)),
    "stop_sequences": (("gen_ai.request.stop_sequences",), ("stop_sequences", "stop")),
}
_CONVERT = {
    "temperature": as_float,
    "top_p": as_float,
    "top_k": as_int,
    "max_tokens": as_int,
    "seed": as_signed_int,
    "stop_sequences": as_strings,
}
INVOCATION_PARAMETERS = "llm.invocation_parameters"
OUTPUT_TYPE = "gen_ai.output.type"
OPENAI_RESPONSE_FORMAT = "gen_ai.openai.request.response_format"
# Keys of llm.invocation_parameters that constrain the output's shape.
_FORMAT_KEYS = ("response_format", "response_schema", "json_schema", "guided_json", "grammar")

PARAMETER_KEYS = frozenset(
    {key for attrs, _ in PARAMETER_SOURCES.values() for key in attrs}
    | {INVOCATION_PARAMETERS, OUTPUT_TYPE, OPENAI_RESPONSE_FORMAT}
)


_PARAMETER_KEYS = _ranked({field: attrs for field, (attrs, _) in PARAMETER_SOURCES.items()})


def model_parameters(attrs: dict[str, Any]) -> dict[str, Any] | None:
    """ModelParameters as a dict of the fields the producer recorded, or None.

    `llm.invocation_parameters` is read but kept in attributes: it carries settings the spec has
    no field for (penalties, tool choice).
    """
    present = PARAMETER_KEYS.intersection(attrs)
    if not present:
        return None
    parameters: dict[str, Any] = {}
    chosen: dict[str, tuple[int, str]] = {}
    for key in present:
        spec = _PARAMETER_KEYS.get(key)
        if spec is None:
            continue
        field, rank = spec
        best = chosen.get(field)
        if best is not None and best[0] < rank:
            continue
        value = _CONVERT[field](attrs[key])
        if value is not None:
            parameters[field] = value
            chosen[field] = (rank, key)
    for _, key in chosen.values():
        del attrs[key]
    invocation: Any = None
    if INVOCATION_PARAMETERS in present:
        invocation = attrs[INVOCATION_PARAMETERS]
        if isinstance(invocation, str):
            try:
                invocation = json.loads(invocation)
            except ValueError:
                invocation = None
    if not isinstance(invocation, dict):
        invocation = {}
    elif len(parameters) < len(PARAMETER_SOURCES):
        for field, (_, invocation_keys) in PARAMETER_SOURCES.items():
            if field in parameters:
                continue
            for key in invocation_keys:
                if key in invocation:
                    value = _CONVERT[field](invocation[key])
                    if value is not None:
                        parameters[field] = value
                        break
    has_format = _has_response_format(attrs, invocation)
    if not parameters and has_format is None:
        return None
    parameters["has_response_format"] = bool(has_format)
    return parameters


def _has_response_format(attrs: dict[str, Any], invocation: dict[str, Any]) -> bool | None:
    """Whether the output was constrained to a shape; None when nothing says either way."""
    output_type = attrs.get(OUTPUT_TYPE)
    if isinstance(output_type, str):
        return output_type.lower() == "json"
    response_format = attrs.get(OPENAI_RESPONSE_FORMAT)
    if isinstance(response_format, str):
        return response_format.lower() not in ("", "text")
    for key in _FORMAT_KEYS:
        value = invocation.get(key)
        if value is None:
            continue
        if isinstance(value, dict) and value.get("type") == "text":
            return False
        return value not in ("", "text", {}, [])
    if invocation.get("response_mime_type") == "application/json":
        return True
    return None


# Cost: column -> attributes in precedence order. All USD unless `mcpd.cost.currency` says.
COST_SOURCES: dict[str, tuple[str, ...]] = {
    "input_cost": ("mcpd.cost.input", "llm.cost.prompt"),
    "output_cost": ("mcpd.cost.output", "llm.cost.completion"),
    "total_cost": ("mcpd.cost.total", "llm.cost.total", "gen_ai.usage.cost"),
}
COST_CURRENCY = "mcpd.cost.currency"
COST_KEYS = frozenset({key for keys in COST_SOURCES.values() for key in keys} | {COST_CURRENCY})
NO_COST: dict[str, Any] = {
    "cost_currency": None,
    "input_cost": None,
    "output_cost": None,
    "total_cost": None,
    "cost_price_book": None,
    "cost_is_estimated": None,
}


def reported_cost(attrs: dict[str, Any]) -> dict[str, Any]:
    """The cost columns: the producer's figures (is_estimated False), or all None to be priced."""
    if attrs.keys().isdisjoint(COST_KEYS):
        return NO_COST
    costs: dict[str, float | None] = {}
    for column, keys in COST_SOURCES.items():
        costs[column] = None
        for key in keys:
            if key in attrs:
                amount = as_float(attrs[key])
                if amount is not None:
                    del attrs[key]
                    costs[column] = amount
                    break
    if all(amount is None for amount in costs.values()):
        return NO_COST
    if costs["total_cost"] is None:
        costs["total_cost"] = (costs["input_cost"] or 0.0) + (costs["output_cost"] or 0.0)
    currency = attrs.pop(COST_CURRENCY, None)
    return {
        "cost_currency": currency.upper() if isinstance(currency, str) and currency else "USD",
        **costs,
        "cost_price_book": None,
        "cost_is_estimated": False,
    }
