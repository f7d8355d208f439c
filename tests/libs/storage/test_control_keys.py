"""Control store API keys and `has_credentials`, on SQLite and PostgreSQL."""

from __future__ import annotations

import dataclasses
from datetime import datetime, timedelta

import pytest
from sqlalchemy import update

from mcpd.runtime.errors import AlreadyExists, InvalidArgument, NotFound
from mcpd.storage.records import StoredAccount, StoredKey
from mcpd.storage.sql.control_store import SqlControlStore
from mcpd.storage.sql.schema import control
from tests.libs.storage.helpers import T0, record_statements

ADA = "ada@example.com"
BOB = "bob@example.com"


def key(
    key_id: str,
    *,
    email: str | None = ADA,
    project: str = "ada-1",
    created_at: datetime = T0,
    revoked_at: datetime | None = None,
) -> StoredKey:
    return StoredKey(
        id=key_id,
        project=project,
        account_email=email,
        scope="read",
        name=f"{key_id} name",
        prefix=f"mcpd_{key_id}",
        digest=f"digest-of-{key_id}",
        created_at=created_at,
        revoked_at=revoked_at,
    )


@pytest.fixture
def store(control_store: SqlControlStore) -> SqlControlStore:
    """The control store with two accounts, Ada (project ada-1) and Bob (bob-1)."""
    for email, project in ((ADA, "ada-1"), (BOB, "bob-1")):
        control_store.create_account(
            StoredAccount(email=email, project=project, password_hash="h", created_at=T0), email
        )
    return control_store


def test_key_round_trip(store: SqlControlStore) -> None:
    unnamed = dataclasses.replace(key("k1"), name=None)
    store.create_key(unnamed)

    assert store.find_key("digest-of-k1") == unnamed
    assert store.find_key("digest-of-nothing") is None


def test_duplicate_digest_or_id_is_refused(store: SqlControlStore) -> None:
    store.create_key(key("k1"))

    with pytest.raises(AlreadyExists) as digest_taken:
        store.create_key(dataclasses.replace(key("k2"), digest="digest-of-k1"))
    with pytest.raises(AlreadyExists) as id_taken:
        store.create_key(dataclasses.replace(key("k1"), digest="another"))

    assert (digest_taken.value.field, digest_taken.value.reason) == ("digest", "DIGEST_TAKEN")
    assert "digest-of-k1" not in digest_taken.value.message
    assert (id_taken.value.field, id_taken.value.reason) == ("id", "KEY_ID_TAKEN")
    assert [k.id for k in store.list_keys(ADA)] == ["k1"]
    assert store.find_key("another") is None


def test_key_needs_its_account_and_the_accounts_project(store: SqlControlStore) -> None:
    with pytest.raises(NotFound) as missing:
        store.create_key(key("k1", email="nobody@example.com"))
    with pytest.raises(InvalidArgument) as mismatch:
        store.create_key(key("k2", project="bob-1"))

    assert (missing.value.field, missing.value.reason) == ("account_email", "ACCOUNT_NOT_FOUND")
    assert (mismatch.value.field, mismatch.value.reason) == ("project", "PROJECT_MISMATCH")
    assert store.find_key("digest-of-k1") is None
    assert store.find_key("digest-of-k2") is None


def test_key_without_account_needs_its_project(store: SqlControlStore) -> None:
    with pytest.raises(NotFound) as missing:
        store.create_key(key("k1", email=None, project="nowhere"))
    assert (missing.value.field, missing.value.reason) == ("project", "PROJECT_NOT_FOUND")

    store.create_key(key("k2", email=None, project="bob-1"))

    found = store.find_key("digest-of-k2")
    assert found is not None
    assert found.account_email is None
    assert store.list_keys(BOB) == []


def test_list_keys_newest_first_unrevoked_own_only(store: SqlControlStore) -> None:
    later = T0 + timedelta(minutes=5)
    store.create_key(key("a-old", created_at=T0))
    store.create_key(key("a-new", created_at=later))
    # Two keys created in the same microsecond: the id breaks the tie, descending.
    store.create_key(key("a-tie-1", created_at=T0 + timedelta(minutes=1)))
    store.create_key(key("a-tie-2", created_at=T0 + timedelta(minutes=1)))
    store.create_key(key("a-revoked", created_at=later, revoked_at=later))
    store.create_key(key("b-1", email=BOB, project="bob-1"))

    assert [k.id for k in store.list_keys(ADA)] == ["a-new", "a-tie-2", "a-tie-1", "a-old"]
    assert [k.id for k in store.list_keys(BOB)] == ["b-1"]
    assert store.list_keys("nobody@example.com") == []


def test_revoke_key(store: SqlControlStore) -> None:
    store.create_key(key("k1"))
    store.create_key(key("k2"))
    now = T0 + timedelta(hours=2, microseconds=7)

    revoked = store.revoke_key(ADA, "k1", now)

    assert revoked == dataclasses.replace(key("k1"), revoked_at=now)
    # Found by digest still, revoked: authentication tells a revoked key from an unknown one.
    assert store.find_key("digest-of-k1") == revoked
    assert [k.id for k in store.list_keys(ADA)] == ["k2"]


def test_revoking_twice_is_not_found(store: SqlControlStore) -> None:
    store.create_key(key("k1"))
    first = T0 + timedelta(hours=1)
    store.revoke_key(ADA, "k1", first)

    with pytest.raises(NotFound) as raised:
        store.revoke_key(ADA, "k1", first + timedelta(hours=1))

    assert (raised.value.field, raised.value.reason) == ("id", "KEY_NOT_FOUND")
    found = store.find_key("digest-of-k1")
    assert found is not None
    assert found.revoked_at == first  # the first revocation stands


def test_revoking_an_unknown_or_anothers_key_is_not_found(store: SqlControlStore) -> None:
    store.create_key(key("b-1", email=BOB, project="bob-1"))
    store.create_key(key("ops", email=None, project="ada-1"))

    for key_id in ("b-1", "ops", "missing"):
        with pytest.raises(NotFound) as raised:
            store.revoke_key(ADA, key_id, T0)
        assert (raised.value.field, raised.value.reason) == ("id", "KEY_NOT_FOUND")

    assert [k.id for k in store.list_keys(BOB)] == ["b-1"]
    ops = store.find_key("digest-of-ops")
    assert ops is not None
    assert ops.revoked_at is None


def test_has_credentials_transitions(control_store: SqlControlStore) -> None:
    store = control_store
    assert store.has_credentials() is False

    store.ensure_project("ops", "Ops")
    assert store.has_credentials() is False  # a project is not a credential

    store.create_key(key("old", email=None, project="ops", revoked_at=T0))
    assert store.has_credentials() is False  # nor is a revoked key

    store.create_key(key("live", email=None, project="ops"))
    assert store.has_credentials() is True

    with store.engine.begin() as conn:
        conn.execute(update(control.api_keys).values(revoked_at=1))
    assert store.has_credentials() is False  # revoked keys only: back to no credentials

    store.create_account(
        StoredAccount(email=ADA, project="ada-1", password_hash="h", created_at=T0), ADA
    )
    assert store.has_credentials() is True  # an account is one, with or without keys
    store.create_key(key("k1"))
    store.revoke_key(ADA, "k1", T0)
    assert store.has_credentials() is True


def test_has_credentials_is_one_query(control_store: SqlControlStore) -> None:
    statements = record_statements(control_store.engine)

    control_store.has_credentials()

    queries = [s for s in statements if s.lstrip().upper().startswith("SELECT")]
    assert len(queries) == 1
    assert queries[0].upper().count("EXISTS") == 2
