"""The local-mode rule covers every address a `mcpd serve` server process binds: HTTP, gRPC,
OTLP/gRPC and the private port its gateway calls its own services on."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from cli.role_names import ROLES
from cli.security import build_security, is_loopback, listening_addresses
from mcpd.runtime.clock import ManualClock
from mcpd.runtime.config import SecuritySettings, Settings
from mcpd.runtime.errors import FailedPrecondition
from mcpd.storage import Stores, open_stores
from mcpd.testing.templates import SqliteTemplates

LOOPBACK = {
    "http_addr": "127.0.0.1:8080",
    "grpc_addr": "127.0.0.1:50051",
    "otlp_grpc_addr": "127.0.0.1:4317",
}
EXPOSED = "0.0.0.0:0"


@pytest.fixture
def stores(tmp_path: Path, sqlite_templates: SqliteTemplates) -> Iterator[Stores]:
    data_dir = sqlite_templates.data_dir(tmp_path)
    with open_stores("sqlite", data_dir=data_dir, postgres_url=None, clickhouse_url=None) as opened:
        yield opened


def _settings(tmp_path: Path, **addresses: str) -> Settings:
    chosen = {**LOOPBACK, **addresses}
    return Settings(
        data_dir=tmp_path,
        http_addr=chosen["http_addr"],
        grpc_addr=chosen["grpc_addr"],
        otlp_grpc_addr=chosen["otlp_grpc_addr"],
    )


def test_every_role_lists_the_addresses_it_binds(tmp_path: Path) -> None:
    settings = _settings(tmp_path)
    everything = listening_addresses(settings, ROLES)
    assert everything == [
        "127.0.0.1:8080",
        "127.0.0.1:50051",
        "127.0.0.1:4317",
        "127.0.0.1:0",
    ]
    assert listening_addresses(settings, ["gateway"]) == ["127.0.0.1:8080"]
    assert listening_addresses(settings, ["query"]) == ["127.0.0.1:50051"]
    # A lone ingest role serves OTLP/gRPC on its standard port too.
    assert listening_addresses(settings, ["ingest"]) == ["127.0.0.1:50051", "127.0.0.1:4317"]


@pytest.mark.parametrize("grpc_addr", ["0.0.0.0:50051", "[::]:50051", "mcpd:50051"])
def test_the_private_port_is_loopback_whatever_grpc_binds(tmp_path: Path, grpc_addr: str) -> None:
    addresses = listening_addresses(_settings(tmp_path, grpc_addr=grpc_addr), ROLES)
    assert addresses[1] == grpc_addr
    assert addresses[-1] == "127.0.0.1:0"
    assert is_loopback(addresses[-1])


@pytest.mark.parametrize("key", sorted(LOOPBACK))
async def test_any_address_off_loopback_without_credentials_refuses_to_start(
    tmp_path: Path, stores: Stores, key: str
) -> None:
    listening = listening_addresses(_settings(tmp_path, **{key: EXPOSED}), ROLES)
    with pytest.raises(FailedPrecondition) as refused:
        await build_security(SecuritySettings(), stores.control, ManualClock(), listening)
    assert refused.value.reason == "KEYS_REQUIRED"
    assert f"refusing to listen on {EXPOSED} without credentials" in refused.value.message


@pytest.mark.parametrize("key", sorted(LOOPBACK))
async def test_any_address_off_loopback_starts_with_a_keys_file(
    tmp_path: Path, stores: Stores, key: str
) -> None:
    keys = tmp_path / "keys.toml"
    keys.write_text(
        '[[keys]]\nname = "ops"\nscope = "admin"\nproject = "default"\n'
        'secret = "mcpd_k_test_listening_0123456789abcdef"\n'
    )
    listening = listening_addresses(_settings(tmp_path, **{key: EXPOSED}), ROLES)
    security = await build_security(
        SecuritySettings(keys_file=keys), stores.control, ManualClock(), listening
    )
    assert not security.local_mode
    assert security.configured_keys == 1


async def test_loopback_everywhere_is_local_mode(tmp_path: Path, stores: Stores) -> None:
    listening = listening_addresses(_settings(tmp_path), ROLES)
    security = await build_security(SecuritySettings(), stores.control, ManualClock(), listening)
    assert security.local_mode
