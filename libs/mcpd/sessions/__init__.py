"""The session read model: agent sessions, turns and events, shared by ingest (which writes
it from transcripts and traces) and query (which serves it to the MCP tools)."""
