"""Tests of mcpd.auth."""
