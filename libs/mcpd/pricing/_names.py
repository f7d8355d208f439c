"""Model and provider names as producers send them, reduced to the ids a price book lists.

The same model reaches mcpd under many names: `gpt-4o-2024-08-06` (a dated snapshot),
`anthropic/claude-3.5-sonnet` (a router's catalogue), `models/gemini-2.5-pro` (the Gemini API's
resource name), `us.anthropic.claude-sonnet-4-20250514-v1:0` (a Bedrock inference profile),
`claude-3-5-sonnet-v2@20241022` (a Vertex AI version). `model_candidates` turns one name into
the ids to try, most specific first, so a dated snapshot the book prices differently
(`gpt-4o-2024-05-13`) is found before its undated family.
"""

from __future__ import annotations

import re
from typing import Final

__all__ = ["model_candidates", "normalize_model", "normalize_provider"]

# Provider spellings (OpenTelemetry `gen_ai.provider.name`/`gen_ai.system` values, SDK and
# router names) mapped to one name per provider.
_PROVIDERS: Final = {
    "openai": "openai",
    "azure": "azure",
    "azure_openai": "azure",
    "azure.ai.openai": "azure",
    "az.ai.openai": "azure",
    "az.ai.inference": "azure",
    "anthropic": "anthropic",
    "google": "google",
    "gemini": "google",
    "google_genai": "google",
    "google-genai": "google",
    "gcp.gemini": "google",
    "gcp.gen_ai": "google",
    "gcp.vertex_ai": "google",
    "vertex_ai": "google",
    "vertex-ai": "google",
    "vertex": "google",
    "vertexai": "google",
    "bedrock": "bedrock",
    "aws.bedrock": "bedrock",
    "aws_bedrock": "bedrock",
    "amazon_bedrock": "bedrock",
    "bedrock_converse": "bedrock",
    "mistral": "mistral",
    "mistral_ai": "mistral",
    "mistralai": "mistral",
    "deepseek": "deepseek",
    "xai": "xai",
    "x_ai": "xai",
    "x-ai": "xai",
    "groq": "groq",
    "together": "together",
    "together_ai": "together",
    "togetherai": "together",
    "together.ai": "together",
    "fireworks": "fireworks",
    "fireworks_ai": "fireworks",
    "openrouter": "openrouter",
    "meta": "meta",
    "meta-llama": "meta",
}

# `us.anthropic.claude-...` (Bedrock cross-region inference profiles), `anthropic.claude-...`.
_BEDROCK = re.compile(
    r"^(?:(?:us|eu|apac|au|ca|jp|us-gov|global)\.)?"
    r"(?P<vendor>anthropic|meta|mistral|amazon|cohere|ai21|deepseek|openai|qwen|writer)\."
)
_BEDROCK_VERSION = re.compile(r"-v\d+(?::\d+)?$|:\d+$")
# Suffixes after the last `:` that name a variant of the same model at the same price
# (OpenRouter's `:thinking`, `:beta`, `:extended`).
_ROUTER_VARIANT = re.compile(r":(?:thinking|beta|extended|online|nitro|floor|exacto)$")
# Vertex AI versions (`@20241022`, `@001`, `@latest`).
_VERTEX_VERSION = re.compile(r"@[a-z0-9]+$")
# Dated snapshots: `-2024-08-06`, `-20250929`, `-0613` (month and day), `-latest`.
_DATE = re.compile(
    r"-(?:\d{4}-\d{2}-\d{2}|20\d{6}|(?:0[1-9]|1[0-2])(?:0[1-9]|[12]\d|3[01])|latest)$"
)
# Gemini preview snapshots priced like their model: `-preview-05-20`, `-preview-09-2025`.
_PREVIEW = re.compile(r"-preview(?:-\d{2}-\d{2}|-\d{2}-\d{4})?$")
# `claude-3.5-sonnet` and `claude-sonnet-4.5` (router spellings) are `claude-3-5-sonnet`.
_CLAUDE_DOT = re.compile(r"(?<=\d)\.(?=\d)")


def normalize_provider(provider: str | None) -> str | None:
    """One name per provider (`aws.bedrock` and `amazon_bedrock` are `bedrock`); unknown names
    are returned lower-cased; empty is None."""
    if provider is None:
        return None
    name = provider.strip().lower()
    if not name:
        return None
    return _PROVIDERS.get(name, name)


def model_candidates(model: str) -> tuple[str | None, list[str]]:
    """The provider the name itself implies (`groq/...`, `anthropic.claude-...`), if any, and
    the ids to look `model` up under, most specific first.

    A fine-tuned OpenAI model (`ft:...`) is its own only candidate: it is priced above its base
    model, so only a project override naming it can price it.
    """
    name = model.strip().lower()
    if not name:
        return None, []
    if name.startswith("ft:"):
        return None, [name]
    hint: str | None = None
    if "/" in name:
        segments = [segment for segment in name.split("/") if segment]
        if not segments:
            return None, []
        hint = _PROVIDERS.get(segments[0])
        name = segments[-1]
    bedrock = _BEDROCK.match(name)
    if bedrock is not None:
        hint = hint or _PROVIDERS.get(bedrock.group("vendor"), bedrock.group("vendor"))
        name = name[bedrock.end() :]
        name = _BEDROCK_VERSION.sub("", name)
    name = _ROUTER_VARIANT.sub("", name)
    if name.startswith("claude"):
        name = _CLAUDE_DOT.sub("-", name)
    candidates = [name]
    for pattern in (_VERTEX_VERSION, _DATE, _PREVIEW):
        stripped = pattern.sub("", candidates[-1])
        if stripped and stripped != candidates[-1]:
            candidates.append(stripped)
    return hint, list(dict.fromkeys(candidates))


def normalize_model(model: str) -> str:
    """`model` reduced to the least specific id a price book may list it under (lower case, no
    router or cloud prefix, no version or date suffix): `claude-sonnet-4-5` for
    `anthropic.claude-sonnet-4-5-20250929-v1:0`. Empty for an empty name."""
    _, candidates = model_candidates(model)
    return candidates[-1] if candidates else ""
