"""JSON-RPC refusals of the MCP transport: answered before any JSON-RPC message was read."""

from __future__ import annotations

import json

from starlette.responses import Response

__all__ = ["transport_refusal"]


def transport_refusal(status: int, message: str, headers: dict[str, str] | None = None) -> Response:
    """An HTTP `status` carrying a JSON-RPC error with no id (there is no request to answer)."""
    body = {"jsonrpc": "2.0", "id": None, "error": {"code": -32600, "message": message}}
    return Response(
        json.dumps(body), status_code=status, media_type="application/json", headers=headers
    )
