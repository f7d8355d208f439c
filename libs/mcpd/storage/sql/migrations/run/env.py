"""Alembic environment of the run store; the logic is in mcpd.storage.sql._alembic_env."""

from mcpd.storage.sql._alembic_env import run_env

run_env()
