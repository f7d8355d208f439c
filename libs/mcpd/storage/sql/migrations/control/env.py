"""Alembic environment of the control store; the logic is in mcpd.storage.sql._alembic_env."""

from mcpd.storage.sql._alembic_env import run_env

run_env()
