"""Fixtures for end-to-end tests: real `mcpd` processes, real clients."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest
import sqlalchemy as sa
from sqlalchemy.engine import make_url

from mcpd.testing.daemon import DaemonProcess
from tests.e2e.security_fixture import write_keys_file

POSTGRES_URL = os.environ.get("MCPD_TEST_POSTGRES_URL")
BACKENDS = ["sqlite", "postgres", "clickhouse"]
# The ingest tests run the product's server processes (two: what a two-core machine gets), so
# requests are ingested by whichever process the kernel hands them to, not only by the primary
# that runs the tail-sampling sweep. Other tests start daemons with one.
PROCESSES = 2


@contextmanager
def fresh_postgres_database() -> Iterator[str]:
    """A fresh PostgreSQL database, dropped afterwards; its URL."""
    if not POSTGRES_URL:
        pytest.skip("MCPD_TEST_POSTGRES_URL is not set: PostgreSQL end-to-end tests skipped")
    admin = sa.create_engine(POSTGRES_URL, isolation_level="AUTOCOMMIT")
    name = f"mcpd_e2e_{uuid.uuid4().hex[:12]}"
    with admin.connect() as connection:
        connection.execute(sa.text(f'CREATE DATABASE "{name}"'))
    try:
        yield make_url(POSTGRES_URL).set(database=name).render_as_string(hide_password=False)
    finally:
        with admin.connect() as connection:
            connection.execute(sa.text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()


@pytest.fixture
def postgres_database() -> Iterator[str]:
    """A fresh PostgreSQL database for one test, dropped afterwards; its URL."""
    with fresh_postgres_database() as url:
        yield url


@pytest.fixture(scope="module")
def module_postgres_database() -> Iterator[str]:
    """A fresh PostgreSQL database for the daemon a module's tests share; its URL."""
    with fresh_postgres_database() as url:
        yield url


def storage_env(backend: str, tmp_path: Path, request: pytest.FixtureRequest) -> dict[str, str]:
    """MCPD_* variables that put a daemon's trace store on `backend` (the database lives as
    long as the fixture that asks: a test, or a module)."""
    match backend:
        case "sqlite":
            return {"MCPD_STORAGE_BACKEND": "sqlite"}
        case "postgres":
            shared = request.scope == "module"
            url = request.getfixturevalue(
                "module_postgres_database" if shared else "postgres_database"
            )
            return {"MCPD_STORAGE_BACKEND": "postgres", "MCPD_STORAGE_POSTGRES_URL": url}
        case "clickhouse":
            # The real ClickHouse engine, in process, through chdb.
            return {
                "MCPD_STORAGE_BACKEND": "clickhouse",
                "MCPD_STORAGE_CLICKHOUSE_URL": f"chdb://{tmp_path / 'clickhouse'}",
            }
    raise ValueError(backend)


ORCHESTRATOR_LEASE_TTL_MS = 9000


@pytest.fixture(
    scope="module", params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]
)
def orchestrator_daemon(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[DaemonProcess]:
    """A daemon on SQLite and on PostgreSQL with keys of every scope in two projects and a
    lease length of ORCHESTRATOR_LEASE_TTL_MS, shared by a module's tests."""
    tmp = tmp_path_factory.mktemp("orchestrator")
    env = {
        **storage_env(request.param, tmp, request),
        "MCPD_SECURITY_KEYS_FILE": str(write_keys_file(tmp / "keys.toml")),
        "MCPD_ORCHESTRATOR_LEASE_TTL_MS": str(ORCHESTRATOR_LEASE_TTL_MS),
        # Runs' derived outcome notes within a second of their end.
        "MCPD_INTELLIGENCE_PASS_INTERVAL_S": "1",
    }
    with DaemonProcess(extra_env=env) as process:
        yield process


@pytest.fixture
def orchestrator_api(orchestrator_daemon: DaemonProcess) -> Iterator[httpx.Client]:
    """A REST client on the orchestrator daemon's `/v1/api`."""
    with httpx.Client(base_url=f"{orchestrator_daemon.http_url}/v1/api", timeout=20) as client:
        yield client
