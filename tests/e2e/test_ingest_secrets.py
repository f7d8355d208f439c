"""No secret at rest: a secret sent in every payload field is absent from every storage file.

One native batch plants realistic credentials (AWS key id and secret key, a GitHub token, an
OpenAI project key, a JWT, a bearer header, a database URL with its password, a PEM private
key) in every payload field of every signal (`mcpd.redaction.PAYLOAD_FIELDS`), together with a
user id and a feedback author (identities, stored only as keyed digests) and values that the
project's own rules from `ingest.projects_file` hash, partially mask or drop. The daemon is then
stopped and its stores are read behind its back: every file byte by byte, and every row of
every table through the database itself. Each secret must be absent everywhere, and the mask
tokens, digests and partial values that replaced them must be present (so the scan provably
reads the rows, and the test can fail), in the stores and over REST.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import secrets
import shutil
import string
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from mcpd.testing.daemon import DaemonProcess
from tests.e2e.conftest import BACKENDS, storage_env
from tests.e2e.ingest_payloads import (
    clickhouse_path,
    new_span_id,
    new_trace_id,
    stored_tables,
)

pytestmark = pytest.mark.e2e

T0 = "2026-11-29T10:00:00Z"
T1 = "2026-11-29T10:00:02Z"

PROJECTS_FILE = """
[[projects]]
id = "default"
redaction = { rules = [
  { name = "email", pattern = '[\\w.]+@example\\.com', mode = "hash" },
  { name = "pw", keys = ["password"], mode = "drop" },
  { name = "card", pattern = '\\b\\d{16}\\b', mode = "partial", keep_prefix = 4, keep_suffix = 4 },
] }
"""

# The signal tables, and in which of them every planted secret's replacement must be found.
SIGNAL_TABLES = ("spans", "logs", "metrics", "scores", "feedback", "aspect_notes")


def _alnum(length: int) -> str:
    alphabet = string.ascii_letters + string.digits
    return "".join(secrets.choice(alphabet) for _ in range(length))


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


@dataclass(frozen=True)
class Planted:
    """Fresh secrets for one test run, and what redaction must turn them into."""

    aws_key_id: str
    aws_secret: str
    github: str
    openai: str
    jwt: str
    bearer: str
    db_password: str
    pem_lines: tuple[str, ...]
    password: str
    email: str
    card: str
    user_id: str
    author_id: str

    @classmethod
    def fresh(cls) -> Planted:
        claims = json.dumps({"sub": f"user-{_alnum(12)}", "iat": 1764410400}).encode()
        header = _b64url(b'{"alg":"HS256","typ":"JWT"}')
        jwt = f"{header}.{_b64url(claims)}.{_b64url(secrets.token_bytes(32))}"
        return cls(
            aws_key_id="AKIA"
            + "".join(secrets.choice("ABCDEFGHJKLMNPQRSTUVWXYZ234567") for _ in range(16)),
            aws_secret=_alnum(40),
            github="ghp_" + _alnum(36),
            openai="sk-proj-" + _alnum(48),
            jwt=jwt,
            bearer=_alnum(40),
            db_password=_alnum(24),
            pem_lines=tuple(_alnum(64) for _ in range(4)),
            password="pw-" + _alnum(20),
            email=f"alice.{_alnum(10).lower()}@example.com",
            card="4" + "".join(secrets.choice(string.digits) for _ in range(15)),
            user_id=f"user-{_alnum(16)}",
            author_id=f"reviewer-{_alnum(16)}",
        )

    @property
    def pem(self) -> str:
        body = "\n".join(self.pem_lines)
        return f"-----BEGIN RSA PRIVATE KEY-----\n{body}\n-----END RSA PRIVATE KEY-----"

    def needles(self) -> dict[str, str]:
        """What must appear nowhere at rest, by name: each secret, or its secret part (the
        password of the URL, the token of the header, the body of the key block)."""
        _header, claims, signature = self.jwt.split(".")
        found = {
            "aws_access_key": self.aws_key_id,
            "aws_secret_key": self.aws_secret,
            "github_token": self.github,
            "openai_api_key": self.openai,
            "jwt": self.jwt,
            "jwt claims": claims,
            "jwt signature": signature,
            "bearer_token": self.bearer,
            "connection_password": self.db_password,
            "dropped password": self.password,
            "email": self.email,
            "card": self.card,
            "user_id": self.user_id,
            "author_id": self.author_id,
        }
        found.update({f"private_key line {n}": line for n, line in enumerate(self.pem_lines)})
        return found

    def _fragments(self, key: bytes | None) -> list[tuple[str, str]]:
        """(sent, stored) for each secret as it appears in free text."""
        email_stored = digest(key, self.email) if key else ""
        return [
            (f"key id {self.aws_key_id}", "key id [REDACTED:aws_access_key]"),
            (
                f"aws_secret_access_key={self.aws_secret}",
                "aws_secret_access_key=[REDACTED:aws_secret_key]",
            ),
            (f"gh {self.github}", "gh [REDACTED:github_token]"),
            (f"openai {self.openai}", "openai [REDACTED:openai_api_key]"),
            (f"session {self.jwt}", "session [REDACTED:jwt]"),
            (
                f"Authorization: Bearer {self.bearer}",
                "Authorization: Bearer [REDACTED:bearer_token]",
            ),
            (
                f"dsn postgres://orders:{self.db_password}@db.internal:5432/orders",
                "dsn postgres://orders:[REDACTED:connection_password]@db.internal:5432/orders",
            ),
            (f"mail {self.email}", f"mail {email_stored}"),
            (f"card {self.card}", f"card {self.partial_card}"),
            (self.pem, "[REDACTED:private_key]"),
        ]

    @property
    def text(self) -> str:
        """Free text holding every secret."""
        return "\n".join(sent for sent, _ in self._fragments(None))

    def stored_text(self, key: bytes) -> str:
        """`text` as redaction must store it."""
        return "\n".join(stored for _, stored in self._fragments(key))

    @property
    def partial_card(self) -> str:
        return self.card[:4] + "*" * 8 + self.card[-4:]

    def document(self) -> dict[str, Any]:
        """A JSON payload with secrets at every depth, under secret-named keys and plain ones."""
        return {
            "prompt": self.text,
            "nested": {"steps": [self.text, {"note": self.text}], "deeper": {"note": self.text}},
            "headers": {"authorization": f"Bearer {self.bearer}", "x-request": "r-1"},
            "password": self.password,
            "contact": self.email,
            "card": self.card,
            "count": 3,
        }

    def stored_document(self, key: bytes) -> dict[str, Any]:
        """`document` as redaction must store it: built-in masks, the project's hash and
        partial rules applied, and the `password` key gone (the project's drop rule beats the
        built-in secret-key mask)."""
        text = self.stored_text(key)
        return {
            "prompt": text,
            "nested": {"steps": [text, {"note": text}], "deeper": {"note": text}},
            "headers": {"authorization": "[REDACTED:secret_field]", "x-request": "r-1"},
            "contact": digest(key, self.email),
            "card": self.partial_card,
            "count": 3,
        }


def digest(key: bytes, value: str) -> str:
    """The keyed digest redaction stores for `value` (HMAC-SHA256 under the server's key)."""
    return "hmac-sha256:" + hmac.new(key, value.encode(), hashlib.sha256).hexdigest()


def batch(planted: Planted, trace_id: str, span_id: str) -> dict[str, Any]:
    """One native IngestBatch with a secret in every payload field of every signal."""
    text, document = planted.text, planted.document()
    correlation = {"project": "", "service_name": "leaky-bot", "user_id": planted.user_id}
    return {
        "spans": [
            {
                "trace_id": trace_id,
                "span_id": span_id,
                "name": "deploy",
                "kind": "agent_run",
                "status": "error",
                "start_time": T0,
                "end_time": T1,
                "input": document,
                "output": text,
                "attributes": document,
                "metadata": document,
                "error": {
                    "message": text,
                    "kind": "DeployError",
                    "stack": text,
                    "details": document,
                },
                "links": [
                    {
                        "trace_id": new_trace_id(),
                        "span_id": new_span_id(),
                        "kind": "follows_from",
                        "attributes": document,
                    }
                ],
                "model_parameters": {
                    "temperature": 0.2,
                    "stop_sequences": [text, planted.github],
                    "has_response_format": False,
                },
                "correlation": correlation,
            }
        ],
        "logs": [
            {
                "log_id": f"log-{trace_id}",
                "trace_id": trace_id,
                "span_id": span_id,
                "timestamp": T1,
                "level": "error",
                "message": text,
                "fields": document,
                "correlation": correlation,
            }
        ],
        "metrics": [
            {
                "metric_id": f"metric-{trace_id}",
                "name": "deploys",
                "kind": "counter",
                "value": 1,
                "timestamp": T1,
                # Label values under ordinary keys: the cardinality filter refuses only
                # unbounded keys (user_id, ...), so these pass it and meet the redactor.
                "labels": {
                    "region": text,
                    "password": planted.password,
                    "contact": planted.email,
                    "card": planted.card,
                    "tier": "gold",
                },
                "trace_id": trace_id,
                "correlation": correlation,
            }
        ],
        "scores": [
            {
                "score_id": f"score-{trace_id}",
                "trace_id": trace_id,
                "scorer_id": "safety",
                "source": "live",
                "value": 0.0,
                "label": text,
                "reason": text,
                "metadata": document,
                "timestamp": T1,
                "correlation": correlation,
            }
        ],
        "feedback": [
            {
                "feedback_id": f"feedback-{trace_id}",
                "trace_id": trace_id,
                "kind": "correction",
                "value": text,
                "comment": text,
                "author_id": planted.author_id,
                "metadata": document,
                "timestamp": T1,
                "correlation": correlation,
            }
        ],
        "aspect_notes": [
            {
                "note_id": f"note-{trace_id}",
                "trace_id": trace_id,
                "aspect": "goal",
                "text": text,
                "definition_version": 1,
                "created_at": T1,
                "correlation": correlation,
            }
        ],
    }


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    name: str = request.param
    return name


def _snapshot(root: Path) -> dict[Path, bytes]:
    """The bytes of every file under `root` now (a file removed meanwhile is skipped)."""
    contents = {}
    for path in sorted(root.rglob("*")):
        try:
            if path.is_file():
                contents[path] = path.read_bytes()
        except FileNotFoundError:
            continue
    return contents


def _leaks(files: dict[Path, bytes], needles: dict[str, str]) -> list[str]:
    """`name in file` for every needle found in the bytes of a file."""
    return [
        f"{name} in {path}"
        for path, content in files.items()
        for name, value in needles.items()
        if value.encode() in content
    ]


def _holding(files: dict[Path, bytes], token: str) -> list[str]:
    return [path.name for path, content in files.items() if token.encode() in content]


@pytest.fixture
def daemon(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest
) -> Iterator[tuple[DaemonProcess, dict[str, str]]]:
    projects = tmp_path / "projects.toml"
    projects.write_text(PROJECTS_FILE)
    env = storage_env(backend, tmp_path, request)
    process = DaemonProcess(
        extra_env={**env, "MCPD_INGEST_PROJECTS_FILE": str(projects)}, keep_files=True
    )
    try:
        process.start()
        yield process, env
    finally:
        process.stop()
        if process.workdir is not None:
            shutil.rmtree(process.workdir, ignore_errors=True)


def test_a_secret_in_every_payload_field_is_absent_from_every_store(
    daemon: tuple[DaemonProcess, dict[str, str]], backend: str
) -> None:
    process, env = daemon
    planted = Planted.fresh()
    needles = planted.needles()
    trace_id, span_id = new_trace_id(), new_span_id()
    with httpx.Client(base_url=process.http_url, timeout=30) as http:
        sent = http.post("/v1/api/ingest", json=batch(planted, trace_id, span_id))
        assert sent.status_code == 200, sent.text
        assert sent.json() == {"accepted": 6, "rejected": 0, "duplicate": 0, "errors": []}
        detail = http.get(
            f"/v1/api/traces/{trace_id}", params={"include": ["logs", "scores", "feedback"]}
        )
        assert detail.status_code == 200, detail.text
        # While the daemon runs, SQLite's newest pages are in the -wal file: scan it now.
        running_files = _snapshot(process.data_dir)
        running_leaks = _leaks(running_files, needles)
    process.stop()
    assert process.returncode == 0, process.stderr_tail

    key = (process.data_dir / "redaction.key").read_bytes()
    assert len(key) == 32
    stored_text = planted.stored_text(key)
    stored_document = planted.stored_document(key)
    hashed_user = digest(key, planted.user_id)

    # Over REST: every payload field comes back redacted exactly as the rules say.
    body = detail.json()
    assert all(value not in detail.text for value in needles.values())
    (span,) = body["spans"]
    assert span["input"] == stored_document
    assert span["output"] == stored_text
    assert span["attributes"] == stored_document
    assert span["metadata"] == stored_document
    error = span["error"]
    assert (error["message"], error["stack"], error["kind"]) == (
        stored_text,
        stored_text,
        "DeployError",
    )
    assert error["details"] == stored_document
    assert span["links"][0]["attributes"] == stored_document
    assert span["model_parameters"]["stop_sequences"] == [
        stored_text,
        "[REDACTED:github_token]",
    ]
    assert span["correlation"]["user_id"] == hashed_user
    assert body["trace"]["correlation"]["user_id"] == hashed_user
    (log,) = body["logs"]
    assert (log["message"], log["fields"]) == (stored_text, stored_document)
    (score,) = body["scores"]
    assert (score["label"], score["reason"]) == (stored_text, stored_text)
    assert score["metadata"] == stored_document
    (feedback,) = body["feedback"]
    assert (feedback["value"], feedback["comment"]) == (stored_text, stored_text)
    assert feedback["metadata"] == stored_document
    assert feedback["author_id"] == digest(key, planted.author_id)

    # Every file the daemon left: data directory (databases, -wal/-shm while running, search
    # index, key files) and its own stdout/stderr logs.
    assert process.workdir is not None
    files = _snapshot(process.workdir)
    assert any(path.name == "control.db" for path in files) or backend == "postgres"
    assert running_leaks == []
    assert _leaks(files, needles) == []
    if backend == "sqlite":
        # The byte scan reads the files the rows are in: their replacements are there.
        for token in ("[REDACTED:github_token]", "[REDACTED:private_key]", hashed_user):
            assert _holding(running_files, token), token
            assert "trace.db" in _holding(files, token), token

    if backend == "clickhouse":
        # MergeTree parts are compressed (data.bin, *.bin, marks), so a byte scan cannot prove
        # a secret absent from them: LZ4 happens to keep a value's first occurrence as a
        # literal, but a repeat is a back-reference and another codec keeps nothing readable.
        # The table dump below, through the engine, is what proves absence there. The scan
        # still covers every uncompressed file (metadata, checksums, partition and index
        # files, the engine's tmp files) and catches what LZ4 left readable.
        ch_files = _snapshot(clickhouse_path(env))
        assert ch_files
        assert _leaks(ch_files, needles) == []

    # Every row of every table, read through the database.
    tables = stored_tables(env, process.data_dir)
    everything = "\n".join(tables.values())
    leaked = [
        f"{name} in {table}"
        for table, rows in tables.items()
        for name, value in needles.items()
        if value in rows
    ]
    assert leaked == []
    by_signal = {
        signal: [rows for table, rows in tables.items() if table.split(":")[-1] == signal]
        for signal in SIGNAL_TABLES
    }
    for signal, found in by_signal.items():
        assert len(found) == 1, (signal, list(tables))
        rows = found[0]
        # Each signal's row holds the replacements: the scan reads them, redaction ran.
        for token in (
            "[REDACTED:aws_access_key]",
            "[REDACTED:aws_secret_key]",
            "[REDACTED:github_token]",
            "[REDACTED:openai_api_key]",
            "[REDACTED:jwt]",
            "[REDACTED:bearer_token]",
            "[REDACTED:connection_password]",
            "[REDACTED:private_key]",
            digest(key, planted.email),
            planted.partial_card,
            hashed_user,
        ):
            assert token in rows, (signal, token)
    assert digest(key, planted.author_id) in by_signal["feedback"][0]
    # The metric's labels: the dropped one is gone, the others are redacted in place.
    metric_rows = by_signal["metrics"][0]
    assert '"password"' not in metric_rows
    assert '"tier"' in metric_rows
    assert "[REDACTED:secret_field]" in everything
