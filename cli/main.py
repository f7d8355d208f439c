"""The `mcpd` command line: serve, migrate, import, mcp, config show, version."""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from cli import import_cmd, role_names
from mcpd.runtime.config import Settings, load_settings, render_settings
from mcpd.runtime.data_dir import DataDirLock, DataDirLocked, open_data_dir
from mcpd.runtime.errors import McpdError
from mcpd.runtime.logging import configure_logging
from mcpd.version import SPEC_VERSION, mcpd_version


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="mcpd", description="Record, run, evaluate and search AI agents."
    )
    parser.add_argument("--config", type=Path, help="TOML config file (default $MCPD_CONFIG)")
    commands = parser.add_subparsers(dest="command", required=True)
    serve = commands.add_parser("serve", help="run the daemon (all roles unless --service)")
    serve.add_argument("--service", choices=role_names.ROLES, help="run one role only")
    migrate = commands.add_parser("migrate", help="apply storage migrations and exit")
    migrate.add_argument(
        "--check",
        action="store_true",
        help="change nothing; exit 0 when every store is migrated, 1 when some are behind",
    )
    config = commands.add_parser("config", help="configuration")
    config_commands = config.add_subparsers(dest="config_command", required=True)
    config_commands.add_parser("show", help="print the effective configuration (secrets masked)")
    commands.add_parser("version", help="print the version")
    import_cmd.add_parser(commands)
    mcp = commands.add_parser(
        "mcp",
        help="serve the session-search tools over stdio (MCP), for agent clients",
        description="An MCP server on stdin/stdout. It forwards to a running daemon "
        "(query_addr) and runs embedded, reading the data directory, when none answers.",
    )
    mcp.add_argument("--key", help=f"API key sent to the daemon (default ${API_KEY_ENV})")
    mcp.add_argument("--project", default="", help="project selector (default: the key's)")
    mcp.add_argument(
        "--mode",
        choices=("auto", "daemon", "embedded"),
        default="auto",
        help="auto (default): the daemon if one answers within 1 s, else embedded",
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the `mcpd` console script."""
    args = _parser().parse_args(argv)
    try:
        settings = load_settings(config_path=args.config)
    except McpdError as exc:
        print(f"mcpd: configuration error: {exc.message}", file=sys.stderr)
        return 2
    match args.command:
        case "version":
            print(f"mcpd {mcpd_version()} (spec {SPEC_VERSION})")
        case "config":
            print(render_settings(settings), end="")
        case "migrate":
            return _migrate(settings, check=args.check)
        case "serve":
            return _serve(settings, [args.service] if args.service else list(role_names.ROLES))
        case "import":
            problem = _open_data_dir(settings)
            if problem is not None:
                print(f"mcpd import: {problem}", file=sys.stderr)
                return 1
            return import_cmd.run(settings, args)
        case "mcp":
            return _mcp(settings, key=args.key, project=args.project, mode=args.mode)
    return 0


API_KEY_ENV = "MCPD_API_KEY"


def _mcp(settings: Settings, *, key: str | None, project: str, mode: str) -> int:
    from cli.mcp_stdio import DaemonUnavailableError, StdioOptions, serve_stdio

    # stdout carries MCP messages: every log line goes to stderr.
    _configure_logging(settings)
    # The key is read here, at the edge, like OTEL_EXPORTER_OTLP_ENDPOINT for serve.
    key = key or os.environ.get(API_KEY_ENV) or None
    if key is not None and (not key.isascii() or not key.isprintable() or " " in key):
        print("mcpd mcp: the API key must be printable ASCII without spaces", file=sys.stderr)
        return 2
    options = StdioOptions(key=key, project=project.strip(), mode=mode)
    try:
        asyncio.run(serve_stdio(settings, options))
    except (McpdError, OSError, DaemonUnavailableError) as exc:
        print(f"mcpd mcp: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    return 0


# Libraries that narrate their own start and stop at info: the banner and mcpd's own lines say
# what matters (alembic: every connection and plugin; uvicorn: the app's lifespan; the MCP SDK:
# its session manager).
_CHATTY_LOGGERS = (
    "alembic.runtime.migration",
    "alembic.runtime.plugins",
    "uvicorn.error",
    "mcp.server.streamable_http_manager",
)


def _configure_logging(settings: Settings) -> None:
    configure_logging(settings.log_level, settings.log_format)
    for name in _CHATTY_LOGGERS:
        logging.getLogger(name).setLevel(logging.WARNING)


def _serve(settings: Settings, roles: list[str]) -> int:
    _configure_logging(settings)
    # A gateway alone never opens the data directory.
    lock = None
    if any(role in role_names.GRPC_ROLES for role in roles):
        problem = _open_data_dir(settings)
        if problem is not None:
            print(f"mcpd: cannot start: {problem}", file=sys.stderr)
            return 1
    if "ingest" in roles:
        # First of all, before any import that takes a while: a second daemon on this data
        # directory fails at once, naming the one that holds it.
        lock = DataDirLock(settings.data_dir)
        try:
            lock.acquire()
        except DataDirLocked as exc:
            print(f"mcpd: cannot start: {exc.message} ({exc.reason})", file=sys.stderr)
            return 1
    try:
        if len(roles) > 1:
            from cli.supervisor import supervise

            assert lock is not None, "every role includes ingest"
            return supervise(settings, lock)
        return _serve_one(settings, roles[0])
    finally:
        if lock is not None:
            lock.release()


def _serve_one(settings: Settings, role: str) -> int:
    from cli.serve import serve_one
    from mcpd.runtime.telemetry import configure_telemetry

    # The OpenTelemetry SDK's standard variable; read here, at the edge, and nowhere else.
    shutdown_telemetry = configure_telemetry(
        f"mcpd-{role}", otlp_endpoint=os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT")
    )
    try:
        return asyncio.run(serve_one(settings, role))
    except McpdError as exc:
        # The reason too: what a supervisor's log is searched for (KEYS_REQUIRED).
        print(f"mcpd: cannot start: {exc.message} ({exc.reason})", file=sys.stderr)
        return 1
    except OSError as exc:
        print(f"mcpd: cannot start: {exc}", file=sys.stderr)
        return 1
    finally:
        shutdown_telemetry()


def _open_data_dir(settings: Settings) -> str | None:
    """Make the data directory private (`mcpd.runtime.data_dir`); what went wrong, if it cannot
    be created."""
    try:
        open_data_dir(settings.data_dir)
    except OSError as exc:
        return f"cannot create the data directory {settings.data_dir}: {exc.strerror}"
    return None


def _migrate(settings: Settings, *, check: bool) -> int:
    from mcpd.storage import open_stores

    storage = settings.storage
    # With every store on servers, migrating reads and writes nothing in the data directory.
    embedded_trace = storage.backend == "sqlite" or (
        storage.backend == "clickhouse" and (storage.clickhouse_url or "").startswith("chdb:")
    )
    on_servers = storage.postgres_url is not None and not embedded_trace
    problem = None if on_servers else _open_data_dir(settings)
    if problem is not None:
        print(f"mcpd: {problem}", file=sys.stderr)
        return 1
    try:
        stores = open_stores(
            storage.backend,
            data_dir=settings.data_dir,
            postgres_url=storage.postgres_url,
            clickhouse_url=storage.clickhouse_url,
            migrate=not check,
        )
    except McpdError as exc:
        print(f"mcpd: {exc.message}", file=sys.stderr)
        return 1
    with stores:
        behind = {
            store: pending for store, pending in stores.pending_migrations().items() if pending
        }
    for store, pending in behind.items():
        print(f"{store} store: pending {', '.join(pending)}")
    if not behind:
        print(f"storage is migrated ({storage.backend})")
    return 1 if behind else 0


if __name__ == "__main__":
    sys.exit(main())
