"""The built-in rules: common secrets masked in text and payloads, nothing else touched."""

from __future__ import annotations

from typing import Any

import pytest

from mcpd.redaction import BUILTIN_RULES, Redactor, is_secret_key, mask
from mcpd.redaction._builtin import Gate, Trigger, gate_for

# Built by concatenation so the test file itself does not look like it leaks secrets.
AWS_KEY = "AKIA" + "IOSFODNN7EXAMPLE"
AWS_SECRET = "wJalrXUtnFEMI/K7MDENG/bPxRfiCY" + "EXAMPLEKEY"
AWS_SESSION = "IQoJb3JpZ2luX2VjE" + "A" * 120
GITHUB_CLASSIC = "ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"
GITHUB_FINE = "github_pat_" + "11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyz"
GITLAB = "glpat-" + "xYz12345678901234567"
SLACK = "xoxb-" + "1234567890-abcdefghijkl"
SLACK_HOOK = "https://hooks.slack.com/services/" + "T00000000/B00000000/XXXXXXXXXXXXXXXXXXXXXXXX"
STRIPE = "sk_live_" + "4eC39HqLyjWDarjtT1zdp7dc"
STRIPE_WEBHOOK = "whsec_" + "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
OPENAI = "sk-proj-" + "Abc123Def456Ghi789Jkl012Mno345"
OPENAI_LEGACY = "sk-" + "abcdefghij0123456789" + "T3BlbkFJ" + "abcdefghij0123456789"
ANTHROPIC = "sk-ant-api03-" + "Zyx987Wvu654Tsr321Qpo098"
DEEPSEEK = "sk-" + "0123456789abcdef0123456789abcdef"
GOOGLE = "AIza" + "SyD-9tSrke72PouQMnMX-a7eZSW0jkFMBWY"
GOOGLE_OAUTH_SECRET = "GOCSPX-" + "abcdefghijklmnopqrstuvwxyz12"
GOOGLE_OAUTH_TOKEN = "ya29." + "a0AfH6SMBxyzxyzxyzxyzxyz"
HUGGINGFACE = "hf_" + "abcdefghijklmnopqrstuvwxyzABCDEFGH"
GROQ = "gsk_" + "a" * 52
XAI = "xai-" + "b" * 80
REPLICATE = "r8_" + "c" * 37
PERPLEXITY = "pplx-" + "d" * 48
NPM = "npm_" + "e" * 36
PYPI = "pypi-" + "AgEIcHlwaS5vcmc" + "f" * 60
AZURE_KEY = (
    "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsu" + "Fq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="
)
AZURE_SAS = "sv=2022-11-02&ss=b&sig=" + "a%2Bb%2Fc1234567890abcdefghij%3D"
AZURE_CLIENT = "abc8Q~" + "abcdefghijklmnopqrstuvwxyz0123456"
JWT = "eyJhbGciOiJIUzI1NiJ9" + ".eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFU"
PEM = "-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEA1c2x\nq8n3\n-----END RSA PRIVATE KEY-----"
GCP_PEM = "-----BEGIN PRIVATE KEY-----\\nMIIEvQIBADANBgkqhkiG9w0B\\n-----END PRIVATE KEY-----\\n"

R = Redactor()

# (text, the secret in it, the rule expected to mask it)
EXAMPLES: list[tuple[str, str, str]] = [
    (f"export AWS_ACCESS_KEY_ID={AWS_KEY}", AWS_KEY, "aws_access_key"),
    (f"aws_secret_access_key = {AWS_SECRET}", AWS_SECRET, "aws_secret_key"),
    (f'{{"awsSecretAccessKey": "{AWS_SECRET}"}}', AWS_SECRET, "aws_secret_key"),
    (f"AWS_SECRET_KEY: {AWS_SECRET}", AWS_SECRET, "aws_secret_key"),
    (f"aws_session_token={AWS_SESSION}", AWS_SESSION, "aws_session_token"),
    (f"git clone https://{GITHUB_CLASSIC}@github.com/o/r", GITHUB_CLASSIC, "github_token"),
    (f"token: {GITHUB_FINE}", GITHUB_FINE, "github_token"),
    (f"GITLAB={GITLAB}", GITLAB, "gitlab_token"),
    (f"slack {SLACK} posted", SLACK, "slack_token"),
    (f"curl -X POST {SLACK_HOOK}", "XXXXXXXXXXXXXXXXXXXXXXXX", "slack_webhook"),
    (f"stripe.api_key = {STRIPE}", STRIPE, "stripe_key"),
    (f"endpoint secret {STRIPE_WEBHOOK}", STRIPE_WEBHOOK, "stripe_key"),
    (f"client = OpenAI(api_key='{OPENAI}')", OPENAI, "openai_api_key"),
    (f"old key {OPENAI_LEGACY}", OPENAI_LEGACY, "openai_api_key"),
    (f"key {ANTHROPIC} rotated", ANTHROPIC, "anthropic_api_key"),
    (f"deepseek {DEEPSEEK}", DEEPSEEK, "api_key"),
    (f"maps?key={GOOGLE}&q=1", GOOGLE, "google_api_key"),
    (f"client_secret {GOOGLE_OAUTH_SECRET}", GOOGLE_OAUTH_SECRET, "google_oauth_secret"),
    (f"access {GOOGLE_OAUTH_TOKEN}", GOOGLE_OAUTH_TOKEN, "google_oauth_token"),
    (f"HF {HUGGINGFACE}", HUGGINGFACE, "huggingface_token"),
    (f"groq {GROQ}", GROQ, "groq_api_key"),
    (f"xai {XAI}", XAI, "xai_api_key"),
    (f"replicate {REPLICATE}", REPLICATE, "replicate_token"),
    (f"pplx {PERPLEXITY}", PERPLEXITY, "perplexity_api_key"),
    (f"//registry.npmjs.org/:_authToken {NPM}", NPM, "npm_token"),
    (f"password {PYPI}", PYPI, "pypi_token"),
    (
        f"DefaultEndpointsProtocol=https;AccountName=acct;AccountKey={AZURE_KEY};",
        AZURE_KEY,
        "azure_storage_key",
    ),
    (
        f"Endpoint=sb://ns.servicebus.windows.net/;SharedAccessKey={AZURE_KEY}",
        AZURE_KEY,
        "azure_storage_key",
    ),
    (
        f"https://acct.blob.core.windows.net/c/b?{AZURE_SAS}",
        "a%2Bb%2Fc1234567890",
        "azure_sas_signature",
    ),
    (f"AZURE_CLIENT_SECRET {AZURE_CLIENT}", AZURE_CLIENT, "azure_client_secret"),
    (f"cookie session={JWT}; Path=/", JWT, "jwt"),
    (
        "curl -H 'Authorization: Bearer abcdef0123456789abcdef'",
        "abcdef0123456789abcdef",
        "bearer_token",
    ),
    ("auth: bearer abcdef0123456789abcdef", "abcdef0123456789abcdef", "bearer_token"),
    ("Authorization: Basic dXNlcjpwYXNzd29yZA==", "dXNlcjpwYXNzd29yZA==", "authorization_header"),
    ('{"authorization": "Token 9944b09199c62bcf94"}', "9944b09199c62bcf94", "authorization_header"),
    ("x-api-key: 0123456789abcdef0123", "0123456789abcdef0123", "api_key_header"),
    (f"key:\n{PEM}\n", "MIIEpAIBAAKCAQEA1c2x", "private_key"),
    (
        f'{{"type": "service_account", "private_key": "{GCP_PEM}"}}',
        "MIIEvQIBADANBgkqhkiG9w0B",
        "private_key",
    ),
    ("postgresql://app:s3cr3t-pw@db:5432/mcpd", "s3cr3t-pw", "connection_password"),
    ("redis://:hunter2hunter2@cache:6379/0", "hunter2hunter2", "connection_password"),
    (
        "Server=db;Database=app;User Id=sa;Password=Tr0ub4dor&3;",
        "Tr0ub4dor&3",
        "connection_password",
    ),
    ("pwd=abc;uid=sa", "abc", "connection_password"),
    ("GET /login?user=ann&password=hunter2hunter2 200", "hunter2hunter2", "url_credential"),
    ("https://x.io/cb?code=1&access_token=abcdefgh1234", "abcdefgh1234", "url_credential"),
    ('config {"password": "correct horse battery"}', "correct horse battery", "secret_field"),
    ("db_password: 'p@ssw0rd-1'", "p@ssw0rd-1", "secret_field"),
    ('client_secret="abc123def456"', "abc123def456", "secret_field"),
    ('{"refresh_token":"1//0gabcdefg"}', "1//0gabcdefg", "secret_field"),
    ("DB_PASSWORD=hunter2hunter2 make run", "hunter2hunter2", "secret_assignment"),
    ("export SENTRY_AUTH_TOKEN=abcdef123456", "abcdef123456", "secret_assignment"),
    ('SECRET_KEY_BASE="f00dfeedbeef"', "f00dfeedbeef", "secret_assignment"),
]


@pytest.mark.parametrize(("text", "secret", "rule"), EXAMPLES)
def test_common_secrets_are_masked(text: str, secret: str, rule: str) -> None:
    redacted = R.redact_text(text)
    assert secret not in redacted
    assert mask(rule) in redacted


@pytest.mark.parametrize(("text", "secret", "rule"), EXAMPLES)
def test_every_match_carries_a_trigger_of_its_rule(text: str, secret: str, rule: str) -> None:
    # The gate may skip a string only when no rule can match it: every rule that matches an
    # example must be among the rules its triggers name.
    gate = gate_for(BUILTIN_RULES)
    present = gate.rules_in(text)
    matching = {i for i, r in enumerate(BUILTIN_RULES) if r.pattern.search(text)}
    assert matching, "the example matches no rule"
    assert matching <= present
    assert any(BUILTIN_RULES[i].name == rule for i in matching)


def test_rules_sharing_an_anchor_position_are_all_found() -> None:
    # `S` of AWSSECRET is both the AWS trigger (after `aws`) and the assignment one (`SECRET`).
    text = f"AWSSECRETKEY={AWS_SECRET}"
    names = {BUILTIN_RULES[i].name for i in gate_for(BUILTIN_RULES).rules_in(text)}
    assert {"aws_secret_key", "secret_assignment"} <= names
    assert AWS_SECRET not in R.redact_text(text)


def test_triggers_are_checked() -> None:
    with pytest.raises(ValueError, match="one character"):
        Trigger("ab", ("x",))
    with pytest.raises(ValueError, match="needs"):
        Trigger("a")
    with pytest.raises(ValueError, match="not empty"):
        Trigger("a", ("",))


def test_a_gate_without_rules_matches_nothing() -> None:
    assert Gate([]).search("anything at all") is None


def test_context_around_a_secret_survives() -> None:
    redacted = R.redact_text("psql postgresql://app:s3cr3t@db.internal:5432/mcpd -c 'select 1'")
    assert redacted == (
        f"psql postgresql://app:{mask('connection_password')}@db.internal:5432/mcpd -c 'select 1'"
    )
    assert R.redact_text("Authorization: Bearer abcdef0123456789abcdef") == (
        f"Authorization: Bearer {mask('bearer_token')}"
    )
    assert R.redact_text('"password": "x1", "user": "ann"') == (
        f'"password": "{mask("secret_field")}", "user": "ann"'
    )


def test_a_cut_off_private_key_is_masked_to_the_end() -> None:
    redacted = R.redact_text("here:\n-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXk")
    assert redacted == f"here:\n{mask('private_key')}"


@pytest.mark.parametrize(
    "text",
    [
        "pip install scikit-learn && python -m task-runner",
        "password = request.form['password']",
        "password=request.form['password']",
        "API_KEY=$API_KEY ./run.sh",
        '"api_key": "${OPENAI_API_KEY}"',
        "MAX_TOKENS=4096 TOKEN_LIMIT=100",
        "PWD=/home/ann/project",
        '{"token": "Hello", "logprob": -0.1}',
        '{"next_token": "abc123", "max_tokens": 1024}',
        "git@github.com:org/repo.git and https://example.com/path?q=1&page=2",
        "https://user@example.com/x and ssh://git@host:22/repo",
        "the bearer of bad news",
        "Authorization: required for this endpoint",
        "AKIA is how AWS access keys start; ASIA is a continent",
        "the basic idea, a secret recipe, a password manager",
        "sk-short and gh_not_a_token and ghp_short",
        "Unicode stays: café, 東京, naïve",
        "",
        "pwd=",
        "a",
    ],
)
def test_ordinary_text_is_untouched(text: str) -> None:
    assert R.redact_text(text) is text


def test_an_assignment_of_an_already_masked_token_is_masked_once() -> None:
    assert R.redact_text(f"OPENAI_API_KEY={OPENAI}") == f"OPENAI_API_KEY={mask('openai_api_key')}"


def test_payloads_are_redacted_in_every_string_and_by_key() -> None:
    payload: dict[str, Any] = {
        "command": f"curl -u x:{GITHUB_CLASSIC} https://api.github.com",
        "env": {"password": "correct horse", "Authorization": "Basic dXNlcjpwYXNz", "n": 3},
        "args": [OPENAI, 1, None, True, {"nested": AWS_KEY}],
        "token_count": 12,
        "type": "token_count",
    }
    redacted = R.redact_json(payload)
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


@pytest.mark.parametrize(
    "key",
    [
        "password",
        "PASSWORD",
        "db_password",
        "dbPassword",
        "client_secret",
        "api_key",
        "apiKey",
        "x-api-key",
        "OPENAI_API_KEY",
        "http.request.header.authorization",
        "Proxy-Authorization",
        "cookie",
        "Set-Cookie",
        "access_token",
        "refreshToken",
        "private_key",
        "aws_secret_access_key",
    ],
)
def test_secret_key_names(key: str) -> None:
    assert is_secret_key(key)


@pytest.mark.parametrize(
    "key",
    ["pwd", "PWD", "token", "next_token", "max_tokens", "keys", "secretary", "passport", "author"],
)
def test_ordinary_key_names(key: str) -> None:
    assert not is_secret_key(key)


def test_secret_keys_mask_only_non_empty_strings() -> None:
    value = {"password": "", "secret": True, "api_key": None, "token": "t0k3n-value"}
    assert R.redact_json(value) is value


def test_redaction_is_deterministic_and_idempotent() -> None:
    text = " ".join(example for example, _, _ in EXAMPLES)
    once = R.redact_text(text)
    assert R.redact_text(text) == once
    assert R.redact_text(once) == once


def test_an_unchanged_payload_is_returned_as_is() -> None:
    payload = {"messages": [{"role": "user", "content": "what is the weather in Paris?"}]}
    assert R.redact_json(payload) is payload


def test_builtin_rules_can_be_replaced() -> None:
    bare = Redactor(builtin_rules=(), secret_keys=False)
    payload = {"password": "x", "text": f"key {AWS_KEY}"}
    assert bare.redact_json(payload) is payload
