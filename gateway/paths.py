"""The gateway's own paths, apart from the routes the protos declare."""

from __future__ import annotations

__all__ = ["MCP_PATH", "OPENAPI_PATH"]

MCP_PATH = "/mcp"
OPENAPI_PATH = "/v1/api/openapi.json"
