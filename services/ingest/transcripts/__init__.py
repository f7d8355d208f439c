"""Agent transcripts (Codex, Claude Code, ...) read into the session read model."""
