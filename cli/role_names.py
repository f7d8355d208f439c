"""The names of mcpd's roles, apart from what they need to run (`cli.roles`, which imports every
service): `mcpd` parses its arguments, and spawns the gateway's process, before that import."""

from __future__ import annotations

GRPC_ROLES = ("ingest", "query", "orchestrator", "evaluation", "intelligence")
ROLES = (*GRPC_ROLES, "gateway")
