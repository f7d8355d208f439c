"""`mcpd version` and `mcpd config show` as a user runs them."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

MCPD = str(Path(sys.executable).parent / "mcpd")

pytestmark = pytest.mark.e2e


def _run(*args: str, env: dict[str, str], check: bool = True) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("MCPD_")}
    return subprocess.run(
        [MCPD, *args], env={**clean, **env}, capture_output=True, text=True, check=check, timeout=60
    )


def test_version_names_the_spec_version(tmp_path: Path) -> None:
    out = _run("version", env={"MCPD_DATA_DIR": str(tmp_path)}).stdout
    assert out.startswith("mcpd ")
    assert "(spec v1)" in out


def test_config_show_merges_file_and_environment_and_masks_secrets(tmp_path: Path) -> None:
    config = tmp_path / "mcpd.toml"
    config.write_text(
        'http_addr = "127.0.0.1:9001"\n'
        "[storage]\n"
        'backend = "postgres"\n'
        'postgres_url = "postgresql+psycopg://mcpd:hunter2secret@db:5432/mcpd"\n'
    )
    out = _run(
        "config",
        "show",
        env={"MCPD_DATA_DIR": str(tmp_path), "MCPD_GRPC_ADDR": "127.0.0.1:50999"},
    ).stdout
    assert 'http_addr = "127.0.0.1:9001"' in out  # from the file
    assert 'grpc_addr = "127.0.0.1:50999"' in out  # from the environment
    assert 'query_addr = "127.0.0.1:50999"' in out  # peers default to the gRPC address
    assert 'backend = "postgres"' in out
    assert "hunter2secret" not in out


@pytest.mark.parametrize(
    ("env", "named"),
    [
        ({"MCPD_HTTP_ADDR": "not-an-address"}, "MCPD_HTTP_ADDR"),
        ({"MCPD_STORAGE_BACKEND": "mysql"}, "MCPD_STORAGE_BACKEND"),
    ],
)
def test_bad_configuration_is_refused_naming_the_setting(
    tmp_path: Path, env: dict[str, str], named: str
) -> None:
    result = _run("config", "show", env={"MCPD_DATA_DIR": str(tmp_path), **env}, check=False)
    assert result.returncode == 2
    assert named in result.stderr


def test_migrate_check_reports_pending_migrations_until_migrated(tmp_path: Path) -> None:
    env = {"MCPD_DATA_DIR": str(tmp_path)}
    before = _run("migrate", "--check", env=env, check=False)
    assert before.returncode == 1
    assert "trace store: pending 0001_initial" in before.stdout
    assert "control store: pending" in before.stdout
    assert _run("migrate", env=env).returncode == 0
    after = _run("migrate", "--check", env=env, check=False)
    assert after.returncode == 0, after.stdout + after.stderr
    assert "storage is migrated (sqlite)" in after.stdout
