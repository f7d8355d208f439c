"""The built-in redactor: common secrets masked in text and payloads, nothing else touched."""

from __future__ import annotations

from typing import Any

import pytest

from services.ingest.redaction import Redactor, mask

# Built by concatenation so the test file itself does not look like it leaks secrets.
AWS_KEY = "AKIA" + "IOSFODNN7EXAMPLE"
AWS_SECRET = "wJalrXUtnFEMI/K7MDENG/bPxRfiCY" + "EXAMPLEKEY"
GITHUB_CLASSIC = "ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"
GITHUB_FINE = "github_pat_" + "11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyz"
OPENAI = "sk-proj-" + "Abc123Def456Ghi789Jkl012Mno345"
ANTHROPIC = "sk-ant-api03-" + "Zyx987Wvu654Tsr321Qpo098"
JWT = "eyJhbGciOiJIUzI1NiJ9" + ".eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFU"
PEM = "-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEA1c2x\nq8n3\n-----END RSA PRIVATE KEY-----"

R = Redactor()


@pytest.mark.parametrize(
    ("text", "secret", "rule"),
    [
        (f"export AWS_ACCESS_KEY_ID={AWS_KEY}", AWS_KEY, "aws_access_key"),
        (f"aws_secret_access_key = {AWS_SECRET}", AWS_SECRET, "aws_secret_key"),
        (f"git clone https://{GITHUB_CLASSIC}@github.com/o/r", GITHUB_CLASSIC, "github_token"),
        (f"token: {GITHUB_FINE}", GITHUB_FINE, "github_token"),
        (f"client = OpenAI(api_key='{OPENAI}')", OPENAI, "api_key"),
        (f"key {ANTHROPIC} rotated", ANTHROPIC, "api_key"),
        (f"cookie session={JWT}; Path=/", JWT, "jwt"),
        ("curl -H 'Authorization: Bearer abcdef0123456789abcdef'", "abcdef0123456789abcdef", None),
        (f"key:\n{PEM}\n", "MIIEpAIBAAKCAQEA1c2x", "private_key"),
        ("postgresql://app:s3cr3t-pw@db:5432/mcpd", "s3cr3t-pw", "connection_password"),
        ("DB_PASSWORD=hunter2hunter2 make run", "hunter2hunter2", "secret_assignment"),
    ],
)
def test_common_secrets_are_masked(text: str, secret: str, rule: str | None) -> None:
    redacted = R.redact_text(text)
    assert secret not in redacted
    assert "[REDACTED:" in redacted
    if rule is not None:
        assert mask(rule) in redacted


def test_context_around_a_secret_survives() -> None:
    redacted = R.redact_text("psql postgresql://app:s3cr3t@db.internal:5432/mcpd -c 'select 1'")
    assert redacted == (
        f"psql postgresql://app:{mask('connection_password')}@db.internal:5432/mcpd -c 'select 1'"
    )
    assert R.redact_text("Authorization: Bearer abcdef0123456789abcdef") == (
        f"Authorization: Bearer {mask('bearer_token')}"
    )


def test_a_cut_off_private_key_is_masked_to_the_end() -> None:
    redacted = R.redact_text("here:\n-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXk")
    assert redacted == f"here:\n{mask('private_key')}"


@pytest.mark.parametrize(
    "text",
    [
        "pip install scikit-learn && python -m task-runner",
        "password = request.form['password']",
        "API_KEY=$API_KEY ./run.sh",
        "git@github.com:org/repo.git and https://example.com/path?q=1",
        "the bearer of bad news",
        "AKIA is how AWS access keys start",
        "Unicode stays: café, 東京, naïve",
    ],
)
def test_ordinary_text_is_untouched(text: str) -> None:
    assert R.redact_text(text) == text


def test_an_assignment_of_an_already_masked_token_is_masked_once() -> None:
    assert R.redact_text(f"OPENAI_API_KEY={OPENAI}") == f"OPENAI_API_KEY={mask('api_key')}"


def test_payloads_are_redacted_in_every_string_and_by_key() -> None:
    payload: dict[str, Any] = {
        "command": f"curl -u x:{GITHUB_CLASSIC} https://api.github.com",
        "env": {"password": "correct horse", "Authorization": "Basic dXNlcjpwYXNz", "n": 3},
        "args": [OPENAI, 1, None, True, {"nested": AWS_KEY}],
        "token_count": 12,
        "type": "token_count",
    }
    redacted = R.redact_payload(payload)
    text = repr(redacted)
    for secret in (GITHUB_CLASSIC, "correct horse", "dXNlcjpwYXNz", OPENAI, AWS_KEY):
        assert secret not in text
    assert redacted["env"]["password"] == mask("secret_field")
    assert redacted["env"]["n"] == 3
    assert redacted["args"][1:4] == [1, None, True]
    assert redacted["token_count"] == 12
    assert redacted["type"] == "token_count"
    # The input is not modified.
    assert payload["env"]["password"] == "correct horse"


def test_redaction_is_deterministic() -> None:
    text = f"{AWS_KEY} {JWT} {PEM}"
    assert R.redact_text(text) == R.redact_text(text)
    assert R.redact_text(R.redact_text(text)) == R.redact_text(text)
