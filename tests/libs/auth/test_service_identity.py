"""The service credential file: created once, private, shared by every process, never printed."""

from __future__ import annotations

import logging
import os
import stat
import threading
from pathlib import Path

import pytest

from mcpd.auth.metadata import SERVICE_CREDENTIAL, service_credential
from mcpd.auth.service_identity import (
    MIN_CREDENTIAL_LENGTH,
    ServiceCredential,
    load_or_create_service_credential,
)
from mcpd.auth.tokens import SERVICE_CREDENTIAL_PREFIX, digest
from mcpd.runtime.errors import FailedPrecondition, Unauthenticated


def test_created_with_mode_0600_and_then_reused(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "data" / "service.credential"
    with caplog.at_level(logging.DEBUG):
        credential = load_or_create_service_credential(path)
    assert credential.secret.startswith(SERVICE_CREDENTIAL_PREFIX)
    assert len(credential.secret) == len(SERVICE_CREDENTIAL_PREFIX) + 43
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert path.read_text() == credential.secret + "\n"
    assert load_or_create_service_credential(path) == credential
    assert [p.name for p in path.parent.iterdir()] == ["service.credential"]  # no temporary left
    assert "created the service credential" in caplog.text
    assert credential.secret not in caplog.text


def test_concurrent_creators_agree(tmp_path: Path) -> None:
    path = tmp_path / "service.credential"
    found: list[ServiceCredential] = []
    barrier = threading.Barrier(8)

    def create() -> None:
        barrier.wait()
        found.append(load_or_create_service_credential(path))

    threads = [threading.Thread(target=create) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(set(found)) == 1
    assert found[0].secret == path.read_text().strip()


def test_a_credential_written_by_an_operator_is_read_as_written(tmp_path: Path) -> None:
    # A Kubernetes Secret made with `openssl rand -hex 32`, with its trailing newline.
    path = tmp_path / "service.credential"
    path.write_text("0123456789abcdef" * 4 + "\n")
    assert load_or_create_service_credential(path).secret == "0123456789abcdef" * 4


@pytest.mark.parametrize(
    "content",
    [
        b"too-short",
        b"x" * (MIN_CREDENTIAL_LENGTH - 1),
        b"two words " + b"x" * MIN_CREDENTIAL_LENGTH,
        b"two\nlines" + b"x" * MIN_CREDENTIAL_LENGTH,
        "non-ascii-é".encode() + b"x" * MIN_CREDENTIAL_LENGTH,
        b"",
    ],
)
def test_a_file_that_is_not_a_credential_is_refused_without_quoting_it(
    tmp_path: Path, content: bytes
) -> None:
    path = tmp_path / "service.credential"
    path.write_bytes(content)
    with pytest.raises(FailedPrecondition, match="printable ASCII") as refused:
        load_or_create_service_credential(path)
    assert str(path) in refused.value.message
    if content:
        assert content.decode(errors="replace") not in refused.value.message
    assert path.read_bytes() == content  # never replaced


def test_an_unreadable_path_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "service.credential"
    path.mkdir()
    with pytest.raises(FailedPrecondition, match="cannot read the service credential"):
        load_or_create_service_credential(path)


def test_a_credential_every_user_can_read_is_used_with_a_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "service.credential"
    path.write_text("s" * MIN_CREDENTIAL_LENGTH)
    os.chmod(path, 0o644)
    with caplog.at_level(logging.WARNING, logger="mcpd.auth.service_identity"):
        assert load_or_create_service_credential(path).secret == "s" * MIN_CREDENTIAL_LENGTH
    assert "readable by every user" in caplog.text
    caplog.clear()
    # A Secret mounted 0440 for the pod's group is as intended: no warning.
    os.chmod(path, 0o440)
    with caplog.at_level(logging.WARNING, logger="mcpd.auth.service_identity"):
        load_or_create_service_credential(path)
    assert caplog.text == ""


def test_it_is_kept_as_a_digest_presented_in_its_own_metadata_and_never_printed() -> None:
    credential = ServiceCredential("mcpd_c_" + "k" * 43)
    assert credential.digest == digest(credential.secret)
    assert credential.secret not in repr(credential)
    metadata = credential.metadata("query")
    assert metadata == ((SERVICE_CREDENTIAL, f"query:{credential.secret}"),)
    assert service_credential(metadata) == ("query", credential.secret)
    assert service_credential((("authorization", "Bearer x"),)) is None


@pytest.mark.parametrize(
    "metadata",
    [
        ((SERVICE_CREDENTIAL, "no-colon-at-all"),),
        ((SERVICE_CREDENTIAL, "Query:secret"),),
        ((SERVICE_CREDENTIAL, ":secret"),),
        ((SERVICE_CREDENTIAL, "query:"),),
        ((SERVICE_CREDENTIAL, b"query:secret"),),
        ((SERVICE_CREDENTIAL, "query:a"), (SERVICE_CREDENTIAL, "query:b")),
    ],
)
def test_malformed_service_metadata_is_refused(metadata: tuple[tuple[str, str | bytes]]) -> None:
    with pytest.raises(Unauthenticated) as refused:
        service_credential(metadata)
    assert refused.value.reason == "MALFORMED_SERVICE_CREDENTIAL"
    assert "secret" not in refused.value.message
