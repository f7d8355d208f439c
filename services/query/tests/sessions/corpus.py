"""The sessions most tests search, open and list."""

from __future__ import annotations

from datetime import timedelta

from mcpd.sessions.model import AssembledSession, EventType
from mcpd.sessions.store import SessionStore
from services.query.tests.sessions.builders import (
    OTHER_PROJECT,
    T0,
    E,
    answer,
    build,
    call,
    output,
    user,
)
from services.query.tests.sessions.conftest import seed

MIGRATION_USER = (
    "The ClickHouse schema migration is failing after adding the event ordinal column. "
    "Please find the issue and fix it."
)
MIGRATION_OUTPUT = (
    "cargo test --workspace --locked failed in moraine-clickhouse-client\n\n"
    "failures:\n  migrations_apply_in_order\n"
)
MIGRATION_ANSWER = (
    "Updated the migration ordering and verified the ClickHouse schema applies cleanly. "
    "Validation: cargo test --workspace --locked passed."
)


def migration(key: str = "mig", **kw: object) -> AssembledSession:
    """Two complete turns: a tool-using fix, then a short follow-up."""
    return build(
        key,
        [
            [
                user(MIGRATION_USER),
                call(
                    "exec_command",
                    'exec_command(cmd="cargo test --workspace --locked", '
                    'workdir="/Users/eric/src/moraine")',
                    payload={
                        "arguments": {
                            "cmd": "cargo test --workspace --locked",
                            "workdir": "/Users/eric/src/moraine",
                        }
                    },
                    model="gpt-5",
                ),
                output("exec_command", MIGRATION_OUTPUT, payload={"exit_code": 101}, model="gpt-5"),
                answer(MIGRATION_ANSWER, model="gpt-5"),
            ],
            [
                user("Can you summarize the validation?"),
                answer(
                    "Validation passed with make docs-build and cargo test for the affected crate.",
                    model="gpt-5",
                ),
            ],
        ],
        title="Fix ClickHouse schema migration failure",
        mode="tool_calling",
        slug="clickhouse-migration",
        summary="Fixed migration ordering.",
        **kw,  # type: ignore[arg-type]
    )


def incomplete(key: str = "mon") -> AssembledSession:
    """One incomplete turn: a question and a tool call, no answer."""
    return build(
        key,
        [
            [
                user("Check whether the monitor starts after the latest config change."),
                call("exec_command", "bin/moraine status"),
            ]
        ],
        title="Investigate monitor startup",
        start=T0 + timedelta(hours=1),
        mode="chat",
    )


def pi_sessions() -> tuple[AssembledSession, AssembledSession]:
    """Two sessions of the pi-coding-agent harness from two sources (pi and omp)."""
    pi = build(
        "pi1",
        [[user("schema migration notes from pi"), answer("pi answer about migration")]],
        source="pi",
        harness="pi-coding-agent",
        start=T0 + timedelta(hours=2),
        mode="chat",
    )
    omp = build(
        "omp1",
        [[user("schema migration notes from omp"), answer("omp answer about migration")]],
        source="omp",
        harness="pi-coding-agent",
        start=T0 + timedelta(hours=3),
        mode="chat",
    )
    return pi, omp


def claude_session() -> AssembledSession:
    """A claude-code session with reasoning and its own search tool call."""
    return build(
        "cl1",
        [
            [
                user("why does the schema migration fail in claude"),
                E(EventType.REASONING, "thinking about schema migration ordering"),
                call("mcp__mcpd__search_sessions", 'search_sessions(query="schema migration")'),
                output("mcp__mcpd__search_sessions", "schema migration results json"),
                call("Bash", "Bash(command=\"grep -r 'schema migration' .\")"),
                output("Bash", "schema migration docs found"),
                answer("The schema migration fails because of ordering."),
            ]
        ],
        source="claude",
        harness="claude-code",
        start=T0 + timedelta(hours=4),
        mode="tool_calling",
    )


def other_project() -> AssembledSession:
    """A session in another project with the same words (and the same ids) as `migration`."""
    return migration("migx", project=OTHER_PROJECT)


def seed_world(store: SessionStore) -> None:
    """Every corpus session."""
    seed(store, migration(), incomplete(), *pi_sessions(), claude_session(), other_project())
