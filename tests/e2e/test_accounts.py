"""Accounts, sessions and keys through a real daemon; no secret at rest; local mode."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import sqlalchemy as sa

from mcpd.testing.daemon import DaemonProcess, DaemonStartError, free_port

pytestmark = pytest.mark.e2e

PASSWORD = "a long enough passphrase"


def _auth(token: str) -> dict[str, str]:
    return {"authorization": f"Bearer {token}"}


@pytest.fixture
def signup_daemon() -> Iterator[DaemonProcess]:
    with DaemonProcess(extra_env={"MCPD_SECURITY_SIGNUP": "true"}) as daemon:
        yield daemon


def test_account_lifecycle(signup_daemon: DaemonProcess) -> None:
    with httpx.Client(base_url=signup_daemon.http_url) as http:
        assert http.get("/healthz").json()["signup"] is True
        created = http.post(
            "/v1/api/account/signup", json={"email": " Ada@Example.org ", "password": PASSWORD}
        )
        assert created.status_code == 200, created.text
        session = created.json()
        assert session["email"] == "ada@example.org"
        assert session["token"].startswith("mcpd_s_")
        project = session["project"]

        again = http.post(
            "/v1/api/account/signup", json={"email": "ADA@example.org", "password": PASSWORD}
        )
        assert again.status_code == 409
        assert again.json()["error"]["field"] == "email"
        short = http.post("/v1/api/account/signup", json={"email": "b@x.org", "password": "short"})
        assert short.status_code == 400
        assert short.json()["error"]["field"] == "password"

        login = http.post(
            "/v1/api/account/login", json={"email": "ada@EXAMPLE.org", "password": PASSWORD}
        )
        assert login.status_code == 200
        token = login.json()["token"]
        account = http.get("/v1/api/account", headers=_auth(token)).json()
        assert account == {
            "email": "ada@example.org",
            "project": project,
            "created_at": account["created_at"],
        }

        made = http.post(
            "/v1/api/account/keys", json={"scope": "read", "name": "ci"}, headers=_auth(token)
        )
        assert made.status_code == 200, made.text
        secret, key = made.json()["secret"], made.json()["key"]
        assert secret.startswith(key["prefix"])
        assert len(key["prefix"]) < len(secret)
        listed = http.get("/v1/api/account/keys", headers=_auth(token)).json()["keys"]
        assert listed == [key]
        assert secret not in str(listed)
        long_name = http.post(
            "/v1/api/account/keys", json={"scope": "read", "name": "n" * 101}, headers=_auth(token)
        )
        assert long_name.status_code == 400
        assert long_name.json()["error"]["field"] == "name"

        # The key reads its own project, and nothing else.
        assert http.get("/v1/api/capabilities", headers=_auth(secret)).status_code == 200
        other = http.get("/v1/api/capabilities?project=default", headers=_auth(secret))
        assert other.status_code == 403
        assert http.get("/v1/api/audit", headers=_auth(secret)).status_code == 403

        revoked = http.delete(f"/v1/api/account/keys/{key['id']}", headers=_auth(token))
        assert revoked.status_code == 200
        assert http.get("/v1/api/capabilities", headers=_auth(secret)).status_code == 401
        assert http.get("/v1/api/account/keys", headers=_auth(token)).json()["keys"] == []

        # The account's session reaches every scope, on its own project only.
        audit = http.get("/v1/api/audit", headers=_auth(token))
        assert audit.status_code == 200
        assert http.get("/v1/api/audit?project=default", headers=_auth(token)).status_code == 403

        # Once an account exists, local mode is over: no credentials, no access.
        assert http.get("/v1/api/capabilities").status_code == 401
    _assert_no_secret_at_rest(signup_daemon.data_dir, [PASSWORD, token, secret, session["token"]])


def test_login_is_throttled_per_account(signup_daemon: DaemonProcess) -> None:
    with httpx.Client(base_url=signup_daemon.http_url) as http:
        body = {"email": "grace@example.org", "password": PASSWORD}
        assert http.post("/v1/api/account/signup", json=body).status_code == 200
        wrong = {"email": "grace@example.org", "password": "not the password"}
        codes = [http.post("/v1/api/account/login", json=wrong).status_code for _ in range(6)]
        assert codes[:5] == [401] * 5
        assert codes[5] == 429
        # Locked out even with the right password until the window passes.
        assert http.post("/v1/api/account/login", json=body).status_code == 429
        unknown = http.post(
            "/v1/api/account/login", json={"email": "nobody@example.org", "password": PASSWORD}
        )
        assert unknown.status_code in {401, 429}


def test_signup_is_off_unless_configured() -> None:
    with DaemonProcess() as daemon, httpx.Client(base_url=daemon.http_url) as http:
        assert http.get("/healthz").json()["signup"] is False
        refused = http.post(
            "/v1/api/account/signup", json={"email": "a@example.org", "password": PASSWORD}
        )
        assert refused.status_code == 403
        assert refused.json()["error"]["reason"] == "SIGNUP_DISABLED"


def test_local_mode_answers_without_credentials_on_loopback() -> None:
    with DaemonProcess() as daemon, httpx.Client(base_url=daemon.http_url) as http:
        assert http.get("/v1/api/capabilities").status_code == 200
        assert http.get("/v1/api/audit").status_code == 200
    assert "local mode" in daemon.stderr_tail


def test_a_public_address_without_keys_refuses_to_start() -> None:
    port = free_port()
    env = {"MCPD_GRPC_ADDR": f"0.0.0.0:{port}"}
    with (
        pytest.raises(DaemonStartError, match="without credentials"),
        DaemonProcess(extra_env=env, start_timeout_s=30),
    ):
        pass


def test_no_secret_at_rest_on_postgres(postgres_database: str) -> None:
    env = {"MCPD_SECURITY_SIGNUP": "true", "MCPD_STORAGE_POSTGRES_URL": postgres_database}
    with DaemonProcess(extra_env=env) as daemon, httpx.Client(base_url=daemon.http_url) as http:
        body = {"email": "lin@example.org", "password": PASSWORD}
        token = http.post("/v1/api/account/signup", json=body).json()["token"]
        made = http.post("/v1/api/account/keys", json={"scope": "admin"}, headers=_auth(token))
        secret = made.json()["secret"]
        login = http.post("/v1/api/account/login", json=body).json()["token"]
        assert http.get("/v1/api/audit", headers=_auth(secret)).status_code == 200
    engine = sa.create_engine(postgres_database)
    try:
        with engine.connect() as connection:
            tables = sa.inspect(connection).get_table_names()
            assert {"api_keys", "accounts", "account_sessions"} <= set(tables)
            dump = "\n".join(
                str(row)
                for table in tables
                for row in connection.execute(sa.text(f'SELECT * FROM "{table}"'))
            )
    finally:
        engine.dispose()
    assert "lin@example.org" in dump  # the scan does read the rows
    for secret_value in (PASSWORD, token, secret, login):
        assert secret_value not in dump


def _assert_no_secret_at_rest(data_dir: Path, secrets: list[str]) -> None:
    files = [path for path in data_dir.rglob("*") if path.is_file()]
    assert any(path.name == "control.db" for path in files)
    for path in files:
        content = path.read_bytes()
        for secret in secrets:
            assert secret.encode() not in content, f"{path.name} holds a secret in clear"
