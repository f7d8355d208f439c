"""The OTLP/HTTP paths in the gateway's OpenAPI document (bodies are opentelemetry-proto's)."""

from __future__ import annotations

from typing import Any

from gateway.otlp._signals import SIGNALS, Signal

_SPEC = "https://opentelemetry.io/docs/specs/otlp/#otlphttp"


def _content(description: str) -> dict[str, Any]:
    return {
        "application/x-protobuf": {
            "schema": {"type": "string", "contentMediaType": "application/x-protobuf"}
        },
        "application/json": {"schema": {"type": "object", "description": description}},
    }


def _operation(signal: Signal) -> dict[str, Any]:
    request = signal.request_class.DESCRIPTOR.full_name
    response = signal.response_class.DESCRIPTOR.full_name
    return {
        "operationId": f"Otlp_Export{signal.name.capitalize()}",
        "tags": ["OTLP"],
        "summary": f"Export {signal.name} (OTLP/HTTP)",
        "description": (
            f"An OTLP/HTTP export ({_SPEC}): the body is a `{request}`, binary protobuf or "
            "OTLP/JSON (hex trace and span ids, integer enums), optionally with "
            "`Content-Encoding: gzip`; at most 20 MiB inflated, unless the gateway is "
            "configured otherwise. The response, and the "
            "`google.rpc.Status` of a failure, come in the request's Content-Type."
        ),
        "requestBody": {"required": True, "content": _content(request)},
        "responses": {
            "200": {
                "description": f"A `{response}`; `partial_success` counts what was rejected.",
                "content": _content(response),
            },
            "4XX": {
                "description": "A `google.rpc.Status`. 413: too large; 415: not protobuf, JSON "
                "or gzip; 429: slow down (see Retry-After).",
                "content": _content("google.rpc.Status"),
            },
            "5XX": {
                "description": "A `google.rpc.Status`. 503 and 504 are worth retrying.",
                "content": _content("google.rpc.Status"),
            },
        },
    }


OPENAPI_PATHS: dict[str, dict[str, Any]] = {
    signal.path: {"post": _operation(signal)} for signal in SIGNALS
}
"""OpenAPI path items for `build_openapi(extra_paths=...)`."""
