"""Support for tests and benchmarks that run real mcpd processes."""
