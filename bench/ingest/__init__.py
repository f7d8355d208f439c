"""``bench/ingest``: sustained ingest throughput, acknowledged vs durable, mcpd vs Arize Phoenix."""
