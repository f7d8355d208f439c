"""Security at every entrance, generated from the descriptors: every RPC over REST and gRPC.

A real daemon holds keys of every scope in two projects (the keys file) and accepts sign-ups.
"""

from __future__ import annotations

import math
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import httpx
import pytest

from mcpd.auth.tokens import audit_id
from mcpd.model.v1 import enums_pb2
from mcpd.testing.daemon import DaemonProcess
from mcpd.testing.eventually import eventually
from tests.contract.api_surface import methods
from tests.e2e.mcp_client import http_session
from tests.e2e.security_fixture import (
    MULTI_PROJECT_READ,
    call_grpc,
    call_rest,
    key_secret,
    rpcs,
    write_keys_file,
    wrong_scope,
)
from tests.e2e.seed import seed_every_table

pytestmark = pytest.mark.e2e

RPCS = rpcs(methods())
OPEN = [rpc for rpc in RPCS if rpc.access.open]
SESSION = [rpc for rpc in RPCS if rpc.access.session]
SCOPED = [rpc for rpc in RPCS if not rpc.access.open and not rpc.access.session]
PASSWORD = "correct horse battery staple"


BETA_MARKER = "beta-only-row-7c1d"
# Short, so a test sees a window's counted refusals written without waiting a minute.
AUDIT_WINDOW_S = 2.0


@pytest.fixture(scope="module")
def daemon(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DaemonProcess]:
    keys = write_keys_file(tmp_path_factory.mktemp("keys") / "keys.toml")
    data_dir = tmp_path_factory.mktemp("data")
    env = {
        "MCPD_SECURITY_KEYS_FILE": str(keys),
        "MCPD_SECURITY_SIGNUP": "true",
        "MCPD_DATA_DIR": str(data_dir),
        "MCPD_SECURITY_AUDIT_AGGREGATE_WINDOW_S": str(AUDIT_WINDOW_S),
    }
    # Project beta has a row in every table before the daemon starts.
    subprocess.run([_mcpd(), "migrate"], env={**os.environ, **env}, check=True, timeout=60)
    assert seed_every_table(data_dir, project="beta", marker=BETA_MARKER) > 20
    with DaemonProcess(extra_env=env) as process:
        yield process


def _mcpd() -> str:
    return str(Path(sys.executable).parent / "mcpd")


@pytest.fixture(scope="module")
def session_token(daemon: DaemonProcess) -> str:
    answer = httpx.post(
        f"{daemon.http_url}/v1/api/account/signup",
        json={"email": "  Walker@Example.COM ", "password": PASSWORD},
    )
    assert answer.status_code == 200, answer.text
    token: str = answer.json()["token"]
    return token


def _fails(failures: list[str]) -> None:
    assert not failures, f"{len(failures)} RPCs misbehave:\n" + "\n".join(failures)


async def test_every_rpc_needs_credentials_except_the_open_ones(daemon: DaemonProcess) -> None:
    failures = []
    async with (
        httpx.AsyncClient(base_url=daemon.http_url) as http,
        grpc.aio.insecure_channel(daemon.grpc_addr) as channel,
    ):
        for rpc in RPCS:
            rest = await call_rest(http, rpc, None)
            code = await call_grpc(channel, rpc, None)
            refused = (rest.status_code == 401, code == grpc.StatusCode.UNAUTHENTICATED)
            if refused != ((False, False) if rpc.access.open else (True, True)):
                failures.append(f"{rpc.grpc_path}: REST {rest.status_code}, gRPC {code.name}")
    _fails(failures)
    assert {rpc.method.name for rpc in OPEN} == {"GetHealth", "Signup", "Login"}


async def test_every_rpc_refuses_the_wrong_scope_and_audits_the_refusal(
    daemon: DaemonProcess,
) -> None:
    failures = []
    async with (
        httpx.AsyncClient(base_url=daemon.http_url) as http,
        grpc.aio.insecure_channel(daemon.grpc_addr) as channel,
    ):
        for rpc in SCOPED + SESSION:
            # Session-only methods refuse every API key, whatever its scope.
            token = key_secret(
                "beta", "admin" if rpc.access.session else wrong_scope(rpc.needed_scope)
            )
            rest = await call_rest(http, rpc, token)
            code = await call_grpc(channel, rpc, token)
            if rest.status_code != 403 or code != grpc.StatusCode.PERMISSION_DENIED:
                failures.append(f"{rpc.grpc_path}: REST {rest.status_code}, gRPC {code.name}")
        audit = await _audit(http, "beta")
    _fails(failures)
    refused = {event["action"] for event in audit if event["result"] == "refused"}
    for rpc in SCOPED + SESSION:
        action = rpc.access.audit_action or _snake(rpc.method.name)
        assert action in refused, f"no refused audit row for {action}"


async def test_every_rpc_passes_authorization_with_the_right_credentials(
    daemon: DaemonProcess, session_token: str
) -> None:
    failures = []
    async with (
        httpx.AsyncClient(base_url=daemon.http_url) as http,
        grpc.aio.insecure_channel(daemon.grpc_addr) as channel,
    ):
        for rpc in SCOPED + SESSION:
            token = session_token if rpc.access.session else key_secret("alpha", rpc.needed_scope)
            rest = await call_rest(http, rpc, token)
            code = await call_grpc(channel, rpc, token)
            # Past authorization an RPC may still be unimplemented, or refuse the empty request.
            if rest.status_code in {401, 403} or code in {
                grpc.StatusCode.UNAUTHENTICATED,
                grpc.StatusCode.PERMISSION_DENIED,
            }:
                failures.append(f"{rpc.grpc_path}: REST {rest.status_code}, gRPC {code.name}")
    _fails(failures)


async def test_admin_is_accepted_where_execute_or_worker_is_needed_and_nowhere_else(
    daemon: DaemonProcess,
) -> None:
    admin = key_secret("alpha", "admin")
    async with grpc.aio.insecure_channel(daemon.grpc_addr) as channel:
        for rpc in SCOPED:
            code = await call_grpc(channel, rpc, admin)
            denied = code == grpc.StatusCode.PERMISSION_DENIED
            assert denied == (rpc.needed_scope not in {"admin", "execute", "worker"}), rpc.grpc_path


async def test_a_key_never_reaches_another_project(daemon: DaemonProcess) -> None:
    failures = []
    async with (
        httpx.AsyncClient(base_url=daemon.http_url) as http,
        grpc.aio.insecure_channel(daemon.grpc_addr) as channel,
    ):
        for rpc in (rpc for rpc in SCOPED if rpc.has_project):
            token = key_secret("alpha", rpc.needed_scope)
            code = await call_grpc(channel, rpc, token, project="beta")
            if code != grpc.StatusCode.PERMISSION_DENIED:
                failures.append(f"{rpc.grpc_path} gRPC project=beta: {code.name}")
            if rpc.verb == "GET":
                rest = await call_rest(http, rpc, token, project="beta")
                if rest.status_code != 403:
                    failures.append(f"{rpc.grpc_path} REST project=beta: {rest.status_code}")
                body = rest.json()
                if rest.status_code == 403 and body["error"].get("field") != "project":
                    failures.append(f"{rpc.grpc_path}: 403 does not name the project field")
    _fails(failures)


async def test_no_read_with_one_projects_key_returns_another_projects_rows(
    daemon: DaemonProcess,
) -> None:
    reads = [rpc for rpc in SCOPED if rpc.verb == "GET"]
    async with (
        httpx.AsyncClient(base_url=daemon.http_url) as http,
        grpc.aio.insecure_channel(daemon.grpc_addr) as channel,
    ):
        for rpc in reads:
            token = key_secret("alpha", rpc.needed_scope)
            rest = await call_rest(http, rpc, token)
            assert BETA_MARKER not in rest.text, rpc.grpc_path
            answer = await call_grpc(channel, rpc, token)
            assert answer != grpc.StatusCode.PERMISSION_DENIED, rpc.grpc_path
        # The session tools read with alpha's key: beta's seeded session never shows.
        reader = {"authorization": f"Bearer {key_secret('alpha', 'read')}"}
        for path, arguments in [
            ("/v1/api/sessions/search", {"query": BETA_MARKER}),
            (
                "/v1/api/sessions/list",
                {"start_datetime": "1970-01-01T00:00:00Z", "end_datetime": "2100-01-01T00:00:00Z"},
            ),
        ]:
            found = await http.post(path, json=arguments, headers=reader)
            assert found.status_code == 200, found.text
            # The canonical request echoes the query; the data must not hold beta's rows.
            assert BETA_MARKER not in str(found.json()["envelope"]["data"]), path
        # ... while beta's own key does see it, so the check above could fail.
        beta_reader = {"authorization": f"Bearer {key_secret('beta', 'read')}"}
        listed = await http.post(
            "/v1/api/sessions/list",
            json={"start_datetime": "1970-01-01T00:00:00Z", "end_datetime": "2100-01-01T00:00:00Z"},
            headers=beta_reader,
        )
        assert BETA_MARKER in str(listed.json()["envelope"]["data"]), listed.text
        # The audit log: alpha's admin sees none of beta's rows.
        alpha_log = await _audit(http, "alpha")
        beta_log = await _audit(http, "beta")
    assert alpha_log
    assert BETA_MARKER not in str(alpha_log)
    assert BETA_MARKER in str(beta_log)


async def test_a_multi_project_key_must_name_its_project(daemon: DaemonProcess) -> None:
    reads = [rpc for rpc in SCOPED if rpc.has_project and rpc.needed_scope == "read"]
    assert reads
    async with grpc.aio.insecure_channel(daemon.grpc_addr) as channel:
        for rpc in reads:
            assert await call_grpc(channel, rpc, MULTI_PROJECT_READ) == (
                grpc.StatusCode.INVALID_ARGUMENT
            ), rpc.grpc_path
            # A well-formed value where the request needs one, so only the selector is on trial.
            ids = {
                "trace_id": "4bf92f3577b34da6a3ce929d0e0e4736",
                "facet": enums_pb2.FACET_ENVIRONMENT,
                "signal": enums_pb2.DELTA_SIGNAL_SPANS,
                "name": "requests",
                "scorer_id": "contains",
                "entity_kind": enums_pb2.ENTITY_KIND_AGENT,
                "entity_name": "support-bot",
            }
            fields = {
                k: v for k, v in ids.items() if k in rpc.input_type().DESCRIPTOR.fields_by_name
            }
            named = await call_grpc(channel, rpc, MULTI_PROJECT_READ, project="beta", **fields)
            assert named not in {
                grpc.StatusCode.INVALID_ARGUMENT,
                grpc.StatusCode.PERMISSION_DENIED,
                grpc.StatusCode.UNAUTHENTICATED,
            }, rpc.grpc_path


async def test_payload_reads_and_deletes_are_audited_allowed_and_refused(
    daemon: DaemonProcess,
) -> None:
    reader, admin = key_secret("alpha", "read"), key_secret("alpha", "admin")
    async with httpx.AsyncClient(base_url=daemon.http_url) as http:
        for path, verb, allowed_with in [
            ("/v1/api/traces/t-audited", "GET", reader),
            ("/v1/api/spans", "GET", reader),
            ("/v1/api/traces/t-audited", "DELETE", admin),
        ]:
            ok = await http.request(verb, path, headers={"authorization": f"Bearer {allowed_with}"})
            assert ok.status_code not in {401, 403}
            wrong = key_secret("alpha", "ingest")
            refused = await http.request(verb, path, headers={"authorization": f"Bearer {wrong}"})
            assert refused.status_code == 403
        events = await _audit(http, "alpha")
    seen = {(e["action"], e["result"], e.get("resource")) for e in events}
    for action, resource in [
        ("get_trace", "t-audited"),
        ("list_spans", None),
        ("delete_trace", "t-audited"),
    ]:
        assert (action, "allowed", resource) in seen, action
        assert (action, "refused", resource) in seen, action
    principals = {e["principal"] for e in events if e["action"] == "get_trace"}
    assert all(len(p) == 16 and reader not in p for p in principals)
    assert [e["timestamp"] for e in events] == sorted(
        (e["timestamp"] for e in events), reverse=True
    )
    # Beta's admin sees beta's log, never alpha's.
    async with httpx.AsyncClient(base_url=daemon.http_url) as http:
        beta = await _audit(http, "beta")
    assert all(event["project"] == "beta" for event in beta)


async def test_deltas_and_mcp_session_search_are_audited_as_payload_reads(
    daemon: DaemonProcess,
) -> None:
    # Both return stored payloads (span input and output; transcript snippets).
    reader = {"authorization": f"Bearer {key_secret('alpha', 'read')}"}
    async with httpx.AsyncClient(base_url=daemon.http_url) as http:
        before = {e["audit_id"] for e in await _audit(http, "alpha")}
        deltas = await http.get("/v1/api/deltas", params={"signal": "spans"}, headers=reader)
        assert deltas.status_code == 200, deltas.text
        async with http_session(daemon, reader) as session:
            found = await session.call_tool("search_sessions", {"query": "anything"})
        assert found.is_error is False
        new = [e for e in await _audit(http, "alpha") if e["audit_id"] not in before]
    principal = audit_id(key_secret("alpha", "read"))
    rows = {
        (e["action"], e["result"], e["principal"], e["project"], e["source"], e["count"])
        for e in new
    }
    # The gateway states the REST and MCP client's address.
    assert ("list_deltas", "allowed", principal, "alpha", "127.0.0.1", 1) in rows
    assert ("search_sessions", "allowed", principal, "alpha", "127.0.0.1", 1) in rows


def test_a_flood_of_refusals_writes_a_bounded_number_of_counted_rows(
    daemon: DaemonProcess,
) -> None:
    bad = "mcpd_k_flood_0123456789abcdef0123456789"
    started = time.monotonic()
    with httpx.Client(base_url=daemon.http_url) as http:
        for _ in range(FLOOD):
            refused = http.get(
                "/v1/api/spans",
                params={"project": "alpha"},
                headers={"authorization": f"Bearer {bad}"},
            )
            assert refused.status_code == 401
    windows = math.ceil((time.monotonic() - started) / AUDIT_WINDOW_S) + 1

    # Refused before the request was read: filed under no project, read as the operator.
    def every_refusal_counted() -> list[dict[str, Any]]:
        rows = _audit_rows_of(daemon, audit_id(bad))
        assert sum(row["count"] for row in rows) >= FLOOD, "refusals still uncounted"
        return rows

    # Until the last window has closed and its counted row is written.
    rows = eventually(every_refusal_counted, timeout=30 + AUDIT_WINDOW_S, interval=0.2)
    assert sum(row["count"] for row in rows) == FLOOD
    # One row at once and one counted row per window at most (without: one row per request).
    assert len(rows) <= 2 * windows < FLOOD
    assert {(r["action"], r["source"], r["reason"], r["result"]) for r in rows} == {
        ("list_spans", "127.0.0.1", "UNKNOWN_CREDENTIALS", "refused")
    }


FLOOD = 500


def _audit_rows_of(daemon: DaemonProcess, principal: str) -> list[dict[str, Any]]:
    """The unattributed audit rows of `principal`, read as the operator reads them."""
    rows: list[dict[str, Any]] = []
    cursor = None
    with httpx.Client(base_url=daemon.http_url) as http:
        while True:
            params = {
                "unattributed": "true",
                "limit": "1000",
                **({"cursor": cursor} if cursor else {}),
            }
            page = http.get(
                "/v1/api/audit",
                params=params,
                headers={"authorization": f"Bearer {key_secret('alpha', 'admin')}"},
            )
            assert page.status_code == 200, page.text
            body = page.json()
            rows += [event for event in body["events"] if event["principal"] == principal]
            if not body["page"]["has_more"]:
                return rows
            cursor = body["page"]["next_cursor"]


def test_only_an_operator_reads_the_unattributed_refusals(
    daemon: DaemonProcess, session_token: str
) -> None:
    with httpx.Client(base_url=daemon.http_url) as http:
        created = http.post(
            "/v1/api/account/keys",
            json={"name": "audit", "scope": "admin"},
            headers={"authorization": f"Bearer {session_token}"},
        )
        assert created.status_code == 200, created.text
        account_admin = created.json()["secret"]
        refused = http.get(
            "/v1/api/audit",
            params={"unattributed": "true"},
            headers={"authorization": f"Bearer {account_admin}"},
        )
        assert refused.status_code == 403, refused.text
        assert refused.json()["error"]["reason"] == "OPERATOR_REQUIRED"
        # The same key reads its own project's log.
        own = http.get("/v1/api/audit", headers={"authorization": f"Bearer {account_admin}"})
        assert own.status_code == 200, own.text


async def test_audit_pages_newest_first_without_gaps(daemon: DaemonProcess) -> None:
    async with httpx.AsyncClient(base_url=daemon.http_url) as http:
        everything = await _audit(http, "alpha")
        paged: list[dict[str, Any]] = []
        cursor = None
        while True:
            params = {"limit": "7", **({"cursor": cursor} if cursor else {})}
            page = await http.get(
                "/v1/api/audit",
                params=params,
                headers={"authorization": f"Bearer {key_secret('alpha', 'admin')}"},
            )
            assert page.status_code == 200, page.text
            body = page.json()
            paged += body["events"]
            if not body["page"]["has_more"]:
                break
            cursor = body["page"]["next_cursor"]
    ids = [event["audit_id"] for event in paged]
    assert len(ids) == len(set(ids))
    # Reading the log is not itself audited, so the two walks saw the same rows.
    assert ids[: len(everything)] == [event["audit_id"] for event in everything]


async def _audit(http: httpx.AsyncClient, project: str) -> list[dict[str, Any]]:
    answer = await http.get(
        "/v1/api/audit",
        params={"limit": "1000"},
        headers={"authorization": f"Bearer {key_secret(project, 'admin')}"},
    )
    assert answer.status_code == 200, answer.text
    events: list[dict[str, Any]] = answer.json()["events"]
    return events


def _snake(name: str) -> str:
    return "".join(f"_{c.lower()}" if c.isupper() else c for c in name).lstrip("_")


def test_the_walk_covers_every_rpc() -> None:
    assert len(RPCS) == len(OPEN) + len(SESSION) + len(SCOPED)
    assert len(RPCS) == 76
