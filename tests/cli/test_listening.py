"""The local-mode rule covers every address a `mcpd serve` and its children bind: HTTP, gRPC,
OTLP/gRPC and the ingest workers' ports."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import cast

import pytest

from cli.children import ChildProcess, Message
from cli.ingest_workers import IngestWorkers
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
    everything = listening_addresses(settings, ROLES, ingest_workers=2)
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


@pytest.mark.parametrize(
    ("grpc_addr", "worker"),
    [("0.0.0.0:50051", "127.0.0.1:0"), ("[::]:50051", "[::1]:0"), ("mcpd:50051", "127.0.0.1:0")],
)
def test_worker_ports_are_loopback_whatever_grpc_binds(
    tmp_path: Path, grpc_addr: str, worker: str
) -> None:
    addresses = listening_addresses(
        _settings(tmp_path, grpc_addr=grpc_addr), ROLES, ingest_workers=1
    )
    assert addresses[-1] == worker
    assert is_loopback(worker)


@pytest.mark.parametrize("key", sorted(LOOPBACK))
async def test_any_address_off_loopback_without_credentials_refuses_to_start(
    tmp_path: Path, stores: Stores, key: str
) -> None:
    listening = listening_addresses(_settings(tmp_path, **{key: EXPOSED}), ROLES, ingest_workers=2)
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
    listening = listening_addresses(_settings(tmp_path), ROLES, ingest_workers=2)
    security = await build_security(SecuritySettings(), stores.control, ManualClock(), listening)
    assert security.local_mode


class _Worker:
    """The parent's view of a worker that serves as soon as it is told to start."""

    def __init__(self) -> None:
        self.sent: list[Message] = []
        self._answers: list[Message] = [{"grpc": "127.0.0.1:41234"}]

    async def send(self, message: Message) -> None:
        self.sent.append(message)

    async def receive(self) -> Message | None:
        return self._answers.pop(0) if self._answers else None

    async def stop(self) -> None:
        pass


async def test_workers_bind_loopback_and_decide_over_the_parent_addresses(
    tmp_path: Path, stores: Stores
) -> None:
    settings = _settings(tmp_path, otlp_grpc_addr=EXPOSED, grpc_addr="0.0.0.0:50051")
    parent = listening_addresses(settings, ROLES, ingest_workers=1)
    worker = _Worker()
    workers = IngestWorkers([cast(ChildProcess, worker)])
    await workers.start("0.0.0.0:50051", parent, lambda sessions: None)
    await workers.stop()
    (start,) = worker.sent
    assert start["host"] == "127.0.0.1"
    assert start["listening"] == parent
    # What the worker builds its authentication over (`serve_worker`): its own loopback port
    # is not enough for local mode while one of the parent's addresses is exposed.
    own = f"{start['host']}:0"
    with pytest.raises(FailedPrecondition, match="without credentials"):
        await build_security(
            SecuritySettings(), stores.control, ManualClock(), [*start["listening"], own]
        )
