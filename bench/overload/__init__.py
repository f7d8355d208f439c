"""Overload: OTLP/HTTP offered beyond what mcpd stores; see `bench.overload.run`."""
