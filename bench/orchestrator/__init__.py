"""The orchestrator benchmark: steps/s of a 3-step workflow and claim latency, mcpd and DBOS."""
