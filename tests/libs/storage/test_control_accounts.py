"""Control store accounts and sessions, on SQLite and PostgreSQL."""

from __future__ import annotations

import threading
from datetime import timedelta

import pytest
from sqlalchemy import func, select

from mcpd.runtime.errors import AlreadyExists, InvalidArgument, NotFound
from mcpd.storage.records import StoredAccount, StoredSession
from mcpd.storage.sql.control_store import SqlControlStore
from mcpd.storage.sql.schema import control
from tests.libs.storage.helpers import T0

HOUR = timedelta(hours=1)


def account(email: str = "ada@example.com", project: str = "ada-1") -> StoredAccount:
    return StoredAccount(
        email=email, project=project, password_hash="$argon2id$v=19$hash", created_at=T0
    )


def session(digest: str, *, expires_in: timedelta = HOUR) -> StoredSession:
    return StoredSession(
        token_digest=digest,
        email="ada@example.com",
        project="ada-1",
        created_at=T0,
        expires_at=T0 + expires_in,
    )


def count(store: SqlControlStore, table: str) -> int:
    with store.engine.connect() as conn:
        statement = select(func.count()).select_from(control.metadata.tables[table])
        return int(conn.execute(statement).scalar_one())


def test_account_round_trip_creates_its_project(control_store: SqlControlStore) -> None:
    control_store.create_account(account(), "ada@example.com")

    assert control_store.find_account("ada@example.com") == account()
    project = control_store.get_project("ada-1")
    assert project is not None
    assert project.name == "ada@example.com"
    assert project.created_at.ToDatetime().replace(tzinfo=T0.tzinfo) == T0


def test_find_account_is_an_exact_match(control_store: SqlControlStore) -> None:
    control_store.create_account(account(), "Ada")

    assert control_store.find_account("Ada@example.com") is None
    assert control_store.find_account("ada@example.com ") is None
    assert control_store.find_account("nobody@example.com") is None


def test_account_on_an_existing_project_leaves_the_project_alone(
    control_store: SqlControlStore,
) -> None:
    control_store.ensure_project("ada-1", "Original")

    control_store.create_account(account(), "Renamed")

    project = control_store.get_project("ada-1")
    assert project is not None
    assert project.name == "Original"


def test_duplicate_email_is_refused_and_writes_nothing(control_store: SqlControlStore) -> None:
    control_store.create_account(account(), "Ada")

    with pytest.raises(AlreadyExists) as raised:
        control_store.create_account(account(project="ada-2"), "Ada again")

    assert raised.value.field == "email"
    assert raised.value.reason == "EMAIL_TAKEN"
    assert "ada@example.com" not in raised.value.message
    # The project of the refused account was rolled back with it.
    assert control_store.get_project("ada-2") is None
    assert count(control_store, "projects") == 1
    assert control_store.find_account("ada@example.com") == account()


def test_concurrent_signups_with_one_email_create_one_account(
    control_store: SqlControlStore,
) -> None:
    attempts = 4
    barrier = threading.Barrier(attempts)
    outcomes: list[str] = []

    def sign_up(index: int) -> None:
        barrier.wait()
        try:
            control_store.create_account(account(project=f"ada-{index}"), "Ada")
            outcomes.append("created")
        except AlreadyExists:
            outcomes.append("taken")

    threads = [threading.Thread(target=sign_up, args=(index,)) for index in range(attempts)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)

    assert sorted(outcomes) == ["created"] + ["taken"] * (attempts - 1)
    assert count(control_store, "accounts") == 1
    assert count(control_store, "projects") == 1


def test_session_round_trip(control_store: SqlControlStore) -> None:
    control_store.create_account(account(), "Ada")
    control_store.create_session(session("d1"))

    assert control_store.find_session("d1") == session("d1")
    assert control_store.find_session("d2") is None


def test_expired_session_is_still_found(control_store: SqlControlStore) -> None:
    control_store.create_account(account(), "Ada")
    control_store.create_session(session("old", expires_in=-HOUR))

    found = control_store.find_session("old")

    assert found is not None
    assert found.expires_at == T0 - HOUR  # the caller decides it is expired


def test_session_needs_its_account_and_its_project(control_store: SqlControlStore) -> None:
    with pytest.raises(NotFound) as missing:
        control_store.create_session(session("d1"))
    assert (missing.value.field, missing.value.reason) == ("email", "ACCOUNT_NOT_FOUND")

    control_store.create_account(account(), "Ada")
    stray = StoredSession(
        token_digest="d1", email="ada@example.com", project="other", created_at=T0, expires_at=T0
    )
    with pytest.raises(InvalidArgument) as mismatch:
        control_store.create_session(stray)
    assert (mismatch.value.field, mismatch.value.reason) == ("project", "PROJECT_MISMATCH")
    assert count(control_store, "account_sessions") == 0


def test_duplicate_session_digest_is_refused(control_store: SqlControlStore) -> None:
    control_store.create_account(account(), "Ada")
    control_store.create_session(session("d1"))

    with pytest.raises(AlreadyExists) as raised:
        control_store.create_session(session("d1", expires_in=2 * HOUR))

    assert raised.value.field == "token_digest"
    assert "d1" not in raised.value.message
    assert control_store.find_session("d1") == session("d1")


def test_delete_expired_sessions(control_store: SqlControlStore) -> None:
    control_store.create_account(account(), "Ada")
    control_store.create_session(session("gone-1", expires_in=timedelta(minutes=10)))
    control_store.create_session(session("gone-2", expires_in=timedelta(minutes=20)))
    control_store.create_session(session("boundary", expires_in=HOUR))
    control_store.create_session(session("live", expires_in=2 * HOUR))
    now = T0 + HOUR

    assert control_store.delete_expired_sessions(now) == 2

    # Expiring exactly at `now` is not "before now": that one goes on the next sweep.
    assert control_store.find_session("gone-1") is None
    assert control_store.find_session("gone-2") is None
    assert control_store.find_session("boundary") is not None
    assert control_store.find_session("live") is not None
    assert control_store.delete_expired_sessions(now) == 0
    assert control_store.delete_expired_sessions(now + 3 * HOUR) == 2


def test_records_keep_hashes_and_digests_out_of_their_repr() -> None:
    assert "$argon2id" not in repr(account())
    assert "secret-digest" not in repr(session("secret-digest"))
