"""load_settings and render_settings: layering, names, errors that point at the cause."""

from __future__ import annotations

import dataclasses
import tomllib
from pathlib import Path

import pytest

from mcpd.runtime.config import (
    EvaluationSettings,
    GrpcSettings,
    IntelligenceSettings,
    LogFormat,
    SessionsSettings,
    Settings,
    StorageBackend,
    env_var,
    load_settings,
    render_settings,
)
from mcpd.runtime.errors import InvalidArgument, NotFound


@pytest.fixture
def home(tmp_path: Path) -> Path:
    path = tmp_path / "home"
    path.mkdir()
    return path


def _env(home: Path, **variables: str) -> dict[str, str]:
    return {"HOME": str(home), **variables}


def _write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def test_defaults(home: Path) -> None:
    settings = load_settings(env=_env(home))
    assert settings.data_dir == home / ".local/share/mcpd"
    assert (settings.http_addr, settings.grpc_addr, settings.otlp_grpc_addr) == (
        "127.0.0.1:8080",
        "127.0.0.1:50051",
        "127.0.0.1:4317",
    )
    assert settings.log_level == "info"
    assert settings.log_format is LogFormat.JSON
    assert settings.storage.backend is StorageBackend.SQLITE
    assert settings.storage.postgres_url is None
    assert settings.grpc == GrpcSettings(
        max_message_bytes=64 * 1024 * 1024,
        keepalive_time_ms=30_000,
        keepalive_timeout_ms=10_000,
        shutdown_grace_s=5.0,
    )
    assert settings.gateway.default_deadline_s == 30.0


def test_precedence_is_argument_then_env_then_file_then_default(home: Path, tmp_path: Path) -> None:
    config = _write(tmp_path / "mcpd.toml", 'http_addr = "file:1"\n[grpc]\nshutdown_grace_s = 1\n')
    env = _env(home, MCPD_HTTP_ADDR="env:2", MCPD_GRPC_SHUTDOWN_GRACE_S="2.5")
    overrides = {"http_addr": "arg:3", "grpc.shutdown_grace_s": 3.0}

    def effective(**kwargs: object) -> tuple[str, float]:
        settings = load_settings(config_path=config, **kwargs)  # type: ignore[arg-type]
        return settings.http_addr, settings.grpc.shutdown_grace_s

    assert effective(env=env, overrides=overrides) == ("arg:3", 3.0)
    assert effective(env=env) == ("env:2", 2.5)
    assert effective(env=_env(home)) == ("file:1", 1.0)
    assert load_settings(env=_env(home)).http_addr == "127.0.0.1:8080"


def test_env_names_for_top_level_and_section_keys(home: Path) -> None:
    settings = load_settings(
        env=_env(
            home,
            MCPD_HTTP_ADDR="0.0.0.0:9000",
            MCPD_STORAGE_BACKEND="postgres",
            MCPD_STORAGE_POSTGRES_URL="postgresql://mcpd:pw@db:5432/mcpd",
            MCPD_GRPC_MAX_MESSAGE_BYTES="1048576",
            MCPD_GATEWAY_DEFAULT_DEADLINE_S="12.5",
            MCPD_LOG_FORMAT="TEXT",
            MCPD_DATA_DIR=str(home / "data"),
        )
    )
    assert settings.http_addr == "0.0.0.0:9000"
    assert settings.storage.backend is StorageBackend.POSTGRES
    assert settings.storage.postgres_url == "postgresql://mcpd:pw@db:5432/mcpd"
    assert settings.grpc.max_message_bytes == 1_048_576
    assert settings.gateway.default_deadline_s == 12.5
    assert settings.log_format is LogFormat.TEXT
    assert settings.data_dir == home / "data"
    assert env_var("storage.postgres_url") == "MCPD_STORAGE_POSTGRES_URL"


def test_peer_addresses_default_to_the_effective_grpc_address(home: Path) -> None:
    settings = load_settings(env=_env(home, MCPD_GRPC_ADDR="10.0.0.5:7000"))
    peers = {
        settings.ingest_addr,
        settings.query_addr,
        settings.orchestrator_addr,
        settings.evaluation_addr,
        settings.intelligence_addr,
    }
    assert peers == {"10.0.0.5:7000"}

    settings = load_settings(
        env=_env(home, MCPD_GRPC_ADDR="10.0.0.5:7000", MCPD_QUERY_ADDR="query.mcpd.svc:50051")
    )
    assert settings.query_addr == "query.mcpd.svc:50051"
    assert settings.ingest_addr == "10.0.0.5:7000"


def test_constructed_settings_fill_peer_addresses_too(tmp_path: Path) -> None:
    settings = Settings(data_dir=tmp_path, grpc_addr="127.0.0.1:1", query_addr="q:2")
    assert (settings.ingest_addr, settings.query_addr) == ("127.0.0.1:1", "q:2")
    with pytest.raises(dataclasses.FrozenInstanceError):
        settings.http_addr = "x:1"  # type: ignore[misc]


def test_default_file_lives_in_the_data_dir_and_may_be_missing(home: Path, tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    assert load_settings(env=_env(home, MCPD_DATA_DIR=str(data_dir))).log_level == "info"
    _write(data_dir / "mcpd.toml", 'log_level = "debug"\n')
    assert load_settings(env=_env(home, MCPD_DATA_DIR=str(data_dir))).log_level == "debug"


def test_mcpd_config_names_the_file(home: Path, tmp_path: Path) -> None:
    config = _write(
        tmp_path / "elsewhere.toml",
        "[storage]\nbackend = 'clickhouse'\nclickhouse_url = 'chdb:///var/lib/mcpd/ch'\n",
    )
    settings = load_settings(env=_env(home, MCPD_CONFIG=str(config)))
    assert settings.storage.backend is StorageBackend.CLICKHOUSE
    assert settings.storage.clickhouse_url == "chdb:///var/lib/mcpd/ch"


@pytest.mark.parametrize("how", ["argument", "env"])
def test_a_missing_named_file_is_an_error(home: Path, tmp_path: Path, how: str) -> None:
    missing = tmp_path / "nope.toml"
    config_path, env = (
        (missing, _env(home)) if how == "argument" else (None, _env(home, MCPD_CONFIG=str(missing)))
    )
    with pytest.raises(NotFound, match=r"nope\.toml"):
        load_settings(config_path=config_path, env=env)


def test_unknown_file_keys_are_refused_by_name(home: Path, tmp_path: Path) -> None:
    config = _write(tmp_path / "mcpd.toml", 'htp_addr = "127.0.0.1:1"\n')
    with pytest.raises(InvalidArgument, match="'htp_addr'") as caught:
        load_settings(config_path=config, env=_env(home))
    assert caught.value.field == "htp_addr"
    assert caught.value.reason == "UNKNOWN_CONFIG_KEY"

    _write(config, "[storage]\nbakend = 'sqlite'\n")
    with pytest.raises(InvalidArgument, match=r"'storage\.bakend'"):
        load_settings(config_path=config, env=_env(home))


def test_unknown_override_keys_are_refused_but_unknown_env_vars_are_not(home: Path) -> None:
    with pytest.raises(InvalidArgument, match=r"'grpc\.max_msg'"):
        load_settings(env=_env(home), overrides={"grpc": {"max_msg": 1}})
    settings = load_settings(env=_env(home, MCPD_TEST_POSTGRES_URL="postgresql://x@y/z"))
    assert settings.storage.postgres_url is None


def test_wrong_type_in_env_names_the_variable_and_key(home: Path) -> None:
    with pytest.raises(InvalidArgument) as caught:
        load_settings(env=_env(home, MCPD_GRPC_MAX_MESSAGE_BYTES="lots"))
    message = caught.value.message
    assert "MCPD_GRPC_MAX_MESSAGE_BYTES" in message
    assert "grpc.max_message_bytes" in message
    assert "'lots'" in message
    assert caught.value.field == "grpc.max_message_bytes"


def test_wrong_type_in_file_names_the_file_and_key(home: Path, tmp_path: Path) -> None:
    config = _write(tmp_path / "mcpd.toml", "[grpc]\nkeepalive_time_ms = true\n")
    with pytest.raises(InvalidArgument) as caught:
        load_settings(config_path=config, env=_env(home))
    assert "grpc.keepalive_time_ms" in caught.value.message
    assert str(config) in caught.value.message


def test_enums_accept_only_their_values(home: Path) -> None:
    with pytest.raises(InvalidArgument, match="MCPD_STORAGE_BACKEND"):
        load_settings(env=_env(home, MCPD_STORAGE_BACKEND="mysql"))


@pytest.mark.parametrize(
    "address", ["localhost", "http://localhost:8080", "host:port", "::1:80", "h:70000", ""]
)
def test_addresses_must_be_host_port(home: Path, address: str) -> None:
    with pytest.raises(InvalidArgument, match="MCPD_HTTP_ADDR"):
        load_settings(env=_env(home, MCPD_HTTP_ADDR=address))


@pytest.mark.parametrize("address", ["[::1]:80", "0.0.0.0:0", "mcpd-query.ns.svc:50051"])
def test_valid_addresses(home: Path, address: str) -> None:
    assert load_settings(env=_env(home, MCPD_OTLP_GRPC_ADDR=address)).otlp_grpc_addr == address


def test_a_backend_needs_its_url_and_urls_need_the_right_scheme(home: Path) -> None:
    with pytest.raises(InvalidArgument, match=r"storage\.postgres_url") as caught:
        load_settings(env=_env(home, MCPD_STORAGE_BACKEND="postgres"))
    assert "MCPD_STORAGE_BACKEND" in caught.value.message
    with pytest.raises(InvalidArgument, match=r"storage\.clickhouse_url") as caught:
        load_settings(env=_env(home, MCPD_STORAGE_CLICKHOUSE_URL="mysql://u:hunter2@h/db"))
    assert "hunter2" not in caught.value.message


def test_empty_env_value_unsets_an_optional_key(home: Path, tmp_path: Path) -> None:
    config = _write(tmp_path / "mcpd.toml", "[storage]\npostgres_url = 'postgresql://h/db'\n")
    settings = load_settings(config_path=config, env=_env(home, MCPD_STORAGE_POSTGRES_URL=""))
    assert settings.storage.postgres_url is None


def test_paths_expand_home_and_file_paths_are_relative_to_the_file(
    home: Path, tmp_path: Path
) -> None:
    assert load_settings(env=_env(home, MCPD_DATA_DIR="~/d")).data_dir == home / "d"
    config = _write(tmp_path / "conf" / "mcpd.toml", 'data_dir = "state"\n')
    assert load_settings(config_path=config, env=_env(home)).data_dir == tmp_path / "conf/state"


def test_nested_and_string_overrides(home: Path) -> None:
    settings = load_settings(
        env=_env(home),
        overrides={"storage": {"backend": "sqlite"}, "grpc.keepalive_time_ms": "5000"},
    )
    assert settings.grpc.keepalive_time_ms == 5000
    with pytest.raises(InvalidArgument, match="override"):
        load_settings(env=_env(home), overrides={"grpc.keepalive_time_ms": 1.5})


def test_render_masks_passwords(home: Path) -> None:
    settings = load_settings(
        env=_env(
            home,
            MCPD_STORAGE_POSTGRES_URL="postgresql://mcpd:s3cr3t@db:5432/mcpd?sslmode=require",
            MCPD_STORAGE_CLICKHOUSE_URL="https://default:hunter2@ch.example:8443/mcpd",
        )
    )
    text = render_settings(settings)
    assert "s3cr3t" not in text
    assert "hunter2" not in text
    document = tomllib.loads(text)
    assert (
        document["storage"]["postgres_url"] == "postgresql://mcpd:***@db:5432/mcpd?sslmode=require"
    )
    assert document["storage"]["clickhouse_url"] == "https://default:***@ch.example:8443/mcpd"


def test_rendered_settings_load_back_to_the_same_settings(home: Path, tmp_path: Path) -> None:
    settings = load_settings(
        env=_env(
            home,
            MCPD_QUERY_ADDR="query:1",
            MCPD_GRPC_SHUTDOWN_GRACE_S="0.25",
            MCPD_DATA_DIR=str(tmp_path / 'da"ta\\dir'),
        )
    )
    config = _write(tmp_path / "rendered.toml", render_settings(settings))
    assert load_settings(config_path=config, env=_env(home)) == settings


def test_security_settings_parse_booleans_from_file_and_environment(tmp_path: Path) -> None:
    config = tmp_path / "mcpd.toml"
    config.write_text('[security]\nsignup = true\nlocal_project = "lab"\n')
    from_file = load_settings(config_path=config, env={"HOME": str(tmp_path)})
    assert from_file.security.signup is True
    assert from_file.security.local_project == "lab"
    from_env = load_settings(
        config_path=config, env={"HOME": str(tmp_path), "MCPD_SECURITY_SIGNUP": "false"}
    )
    assert from_env.security.signup is False
    with pytest.raises(InvalidArgument) as info:
        load_settings(env={"HOME": str(tmp_path), "MCPD_SECURITY_SIGNUP": "maybe"})
    assert info.value.field == "security.signup"
    assert "MCPD_SECURITY_SIGNUP" in info.value.message
    config.write_text("[security]\nsignup = 1\n")
    with pytest.raises(InvalidArgument, match="true or false"):
        load_settings(config_path=config, env={"HOME": str(tmp_path)})


def test_sessions_defaults(home: Path) -> None:
    sessions = load_settings(env=_env(home)).sessions
    assert sessions == SessionsSettings()
    assert sessions.enabled is True
    assert sessions.sources == "auto"
    assert sessions.sources_file is None
    assert sessions.project == ""
    assert sessions.rescan_interval_s == 30.0


def test_sessions_settings_from_file_and_environment(home: Path, tmp_path: Path) -> None:
    config = _write(
        tmp_path / "conf" / "mcpd.toml",
        "[sessions]\n"
        "enabled = false\n"
        'sources = "codex, claude"\n'
        'sources_file = "sources.toml"\n'
        'project = "agents"\n',
    )
    sessions = load_settings(
        config_path=config, env=_env(home, MCPD_SESSIONS_RESCAN_INTERVAL_S="0.5")
    ).sessions
    assert sessions.enabled is False
    assert sessions.sources == "codex, claude"
    # Relative to the file, like every path in it.
    assert sessions.sources_file == tmp_path / "conf" / "sources.toml"
    assert sessions.project == "agents"
    assert sessions.rescan_interval_s == 0.5
    assert env_var("sessions.sources_file") == "MCPD_SESSIONS_SOURCES_FILE"
    no_sources = load_settings(env=_env(home, MCPD_SESSIONS_SOURCES="")).sessions
    assert no_sources.sources == ""


@pytest.mark.parametrize(
    ("variable", "value", "key"),
    [
        ("MCPD_SESSIONS_RESCAN_INTERVAL_S", "0", "sessions.rescan_interval_s"),
        ("MCPD_SESSIONS_RESCAN_INTERVAL_S", "inf", "sessions.rescan_interval_s"),
        ("MCPD_SESSIONS_RESCAN_INTERVAL_S", "soon", "sessions.rescan_interval_s"),
        ("MCPD_SESSIONS_PROJECT", "   ", "sessions.project"),
        ("MCPD_SESSIONS_SOURCES", "auto,codex", "sessions.sources"),
        ("MCPD_SESSIONS_SOURCES", "codex,,claude", "sessions.sources"),
        ("MCPD_SESSIONS_SOURCES", "Codex", "sessions.sources"),
        ("MCPD_SESSIONS_ENABLED", "sometimes", "sessions.enabled"),
        ("MCPD_INGEST_MAX_RECORD_PAYLOAD_BYTES", "65535", "ingest.max_record_payload_bytes"),
        ("MCPD_INGEST_MAX_RECORD_ATTRIBUTES", "-1", "ingest.max_record_attributes"),
        ("MCPD_INGEST_MAX_SPAN_EVENTS", "-1", "ingest.max_span_events"),
        ("MCPD_INGEST_MAX_SPAN_LINKS", "many", "ingest.max_span_links"),
        ("MCPD_ORCHESTRATOR_LEASE_TTL_MS", "299", "orchestrator.lease_ttl_ms"),
        ("MCPD_ORCHESTRATOR_LEASE_TTL_MS", "86400001", "orchestrator.lease_ttl_ms"),
        ("MCPD_INTELLIGENCE_PASS_INTERVAL_S", "0", "intelligence.pass_interval_s"),
        ("MCPD_INTELLIGENCE_PASS_INTERVAL_S", "inf", "intelligence.pass_interval_s"),
        ("MCPD_INTELLIGENCE_WINDOW_DAYS", "0", "intelligence.window_days"),
        ("MCPD_INTELLIGENCE_PASS_ARMED", "sometimes", "intelligence.pass_armed"),
        ("MCPD_INTELLIGENCE_MIN_NOTES_TO_CLUSTER", "1", "intelligence.min_notes_to_cluster"),
        ("MCPD_INTELLIGENCE_MAX_NOTES_PER_PASS", "49", "intelligence.max_notes_per_pass"),
        ("MCPD_INTELLIGENCE_PAGE_SIZE", "0", "intelligence.page_size"),
        ("MCPD_INTELLIGENCE_PAGE_SIZE", "20001", "intelligence.page_size"),
        ("MCPD_INTELLIGENCE_MAX_ASPECTS", "3", "intelligence.max_aspects"),
    ],
)
def test_invalid_settings_name_the_key_and_variable(
    home: Path, variable: str, value: str, key: str
) -> None:
    with pytest.raises(InvalidArgument) as caught:
        load_settings(env=_env(home, **{variable: value}))
    assert caught.value.field == key
    assert variable in caught.value.message


@pytest.mark.parametrize("value", ["0", "-1", "inf", "nan"])
def test_the_audit_aggregation_window_must_be_finite_and_positive(home: Path, value: str) -> None:
    assert load_settings(env=_env(home)).security.audit_aggregate_window_s == 60.0
    with pytest.raises(InvalidArgument) as caught:
        load_settings(env=_env(home, MCPD_SECURITY_AUDIT_AGGREGATE_WINDOW_S=value))
    assert caught.value.field == "security.audit_aggregate_window_s"


def test_sessions_section_renders_and_loads_back(home: Path, tmp_path: Path) -> None:
    settings = load_settings(
        env=_env(home, MCPD_SESSIONS_SOURCES="codex", MCPD_SESSIONS_RESCAN_INTERVAL_S="2")
    )
    text = render_settings(settings)
    assert "[sessions]" in text
    assert "# sources_file is not set" in text
    config = _write(tmp_path / "rendered.toml", text)
    assert load_settings(config_path=config, env=_env(home)) == settings


def test_record_limits_default_to_one_mebibyte_and_opentelemetrys_counts(home: Path) -> None:
    ingest = load_settings(env=_env(home)).ingest
    assert (
        ingest.max_record_payload_bytes,
        ingest.max_record_attributes,
        ingest.max_span_events,
        ingest.max_span_links,
    ) == (1_048_576, 128, 128, 128)
    lowered = load_settings(
        env=_env(
            home,
            MCPD_INGEST_MAX_RECORD_PAYLOAD_BYTES="65536",
            MCPD_INGEST_MAX_RECORD_ATTRIBUTES="0",
            MCPD_INGEST_MAX_SPAN_EVENTS="8",
            MCPD_INGEST_MAX_SPAN_LINKS="9",
        )
    ).ingest
    assert (
        lowered.max_record_payload_bytes,
        lowered.max_record_attributes,
        lowered.max_span_events,
        lowered.max_span_links,
    ) == (65_536, 0, 8, 9)


def test_the_ingest_byte_bound_is_a_positive_number_of_bytes(home: Path) -> None:
    assert load_settings(env=_env(home)).ingest.max_pending_bytes == 16 * 1024 * 1024
    settings = load_settings(env=_env(home, MCPD_INGEST_MAX_PENDING_BYTES="1048576"))
    assert settings.ingest.max_pending_bytes == 1_048_576
    with pytest.raises(InvalidArgument, match=r"ingest\.max_pending_bytes") as caught:
        load_settings(env=_env(home, MCPD_INGEST_MAX_PENDING_BYTES="0"))
    assert "MCPD_INGEST_MAX_PENDING_BYTES" in caught.value.message


def test_the_lease_ttl_defaults_to_thirty_seconds_and_is_set_from_the_environment(
    home: Path,
) -> None:
    assert load_settings(env=_env(home)).orchestrator.lease_ttl_ms == 30_000
    settings = load_settings(env=_env(home, MCPD_ORCHESTRATOR_LEASE_TTL_MS="300"))
    assert settings.orchestrator.lease_ttl_ms == 300


def test_the_judge_is_configured_from_file_and_environment(home: Path, tmp_path: Path) -> None:
    assert load_settings(env=_env(home)).evaluation == EvaluationSettings(
        judge_url=None,
        judge_model=None,
        judge_key_file=None,
        judge_timeout_s=30.0,
        judge_concurrency=4,
    )
    config = _write(
        tmp_path / "conf" / "mcpd.toml",
        "[evaluation]\n"
        'judge_url = "http://127.0.0.1:8000/v1"\n'
        'judge_model = "gpt-4o-mini"\n'
        'judge_key_file = "judge.key"\n',
    )
    evaluation = load_settings(
        config_path=config,
        env=_env(
            home, MCPD_EVALUATION_JUDGE_TIMEOUT_S="2.5", MCPD_EVALUATION_JUDGE_CONCURRENCY="32"
        ),
    ).evaluation
    assert evaluation == EvaluationSettings(
        judge_url="http://127.0.0.1:8000/v1",
        judge_model="gpt-4o-mini",
        judge_key_file=tmp_path / "conf" / "judge.key",
        judge_timeout_s=2.5,
        judge_concurrency=32,
    )


@pytest.mark.parametrize(
    ("variables", "key", "variable"),
    [
        ({"MCPD_EVALUATION_JUDGE_TIMEOUT_S": "0"}, "evaluation.judge_timeout_s", None),
        ({"MCPD_EVALUATION_JUDGE_TIMEOUT_S": "inf"}, "evaluation.judge_timeout_s", None),
        ({"MCPD_EVALUATION_JUDGE_CONCURRENCY": "0"}, "evaluation.judge_concurrency", None),
        ({"MCPD_EVALUATION_JUDGE_CONCURRENCY": "33"}, "evaluation.judge_concurrency", None),
        ({"MCPD_EVALUATION_JUDGE_URL": "ftp://judge/v1"}, "evaluation.judge_url", None),
        ({"MCPD_EVALUATION_JUDGE_MODEL": " "}, "evaluation.judge_model", None),
        (
            {"MCPD_EVALUATION_JUDGE_URL": "http://judge/v1"},
            "evaluation.judge_model",
            "the defaults",
        ),
        (
            {"MCPD_EVALUATION_JUDGE_MODEL": "gpt-4o-mini"},
            "evaluation.judge_url",
            "the defaults",
        ),
        (
            {"MCPD_EVALUATION_JUDGE_KEY_FILE": "/run/secrets/judge"},
            "evaluation.judge_key_file",
            None,
        ),
    ],
)
def test_invalid_judge_settings_name_the_key(
    home: Path, variables: dict[str, str], key: str, variable: str | None
) -> None:
    with pytest.raises(InvalidArgument) as caught:
        load_settings(env=_env(home, **variables))
    assert caught.value.field == key
    assert (variable or next(iter(variables))) in caught.value.message


def test_the_judge_key_is_never_in_the_rendered_settings(home: Path, tmp_path: Path) -> None:
    key_file = _write(tmp_path / "judge.key", "sk-judge-secret\n")
    settings = load_settings(
        env=_env(
            home,
            MCPD_EVALUATION_JUDGE_URL="https://user:hunter2@judge.example/v1",
            MCPD_EVALUATION_JUDGE_MODEL="gpt-4o-mini",
            MCPD_EVALUATION_JUDGE_KEY_FILE=str(key_file),
        )
    )
    text = render_settings(settings)
    assert "sk-judge-secret" not in text
    assert "hunter2" not in text
    assert tomllib.loads(text)["evaluation"] == {
        "judge_url": "https://user:***@judge.example/v1",
        "judge_model": "gpt-4o-mini",
        "judge_key_file": str(key_file),
        "judge_timeout_s": 30.0,
        "judge_concurrency": 4,
        "monitor_interval_s": 60.0,
        "experiment_interval_s": 2.0,
        "slo_fast_burn": 14.4,
        "slo_slow_burn": 6.0,
    }


def test_monitors_and_slos_are_read_and_shown_without_their_webhook(tmp_path: Path) -> None:
    home = tmp_path / "home"
    data = home / ".local" / "share" / "mcpd"
    data.mkdir(parents=True)
    (data / "mcpd.toml").write_text(
        """
[security]
local_project = "mine"

[[monitors]]
id = "errors"
name = "Failing"
watch = "error_rate"
compare = "above"
threshold = 0.2
window_seconds = 900
webhook = "https://hooks.example.com/T0/B0/secret-token"

[[slos]]
id = "answers"
name = "Answers"
objective = 0.99
window_days = 7
webhook = "https://hooks.example.com/T0/B0/other-token"
"""
    )
    settings = load_settings(env=_env(home))
    (monitor,) = settings.monitors
    assert (monitor.id, monitor.project, monitor.min_samples) == ("errors", "mine", 1)
    text = render_settings(settings)
    assert "secret-token" not in text
    shown = tomllib.loads(text)["monitors"]
    assert shown == [
        {
            "id": "errors",
            "name": "Failing",
            "project": "mine",
            "watch": "error_rate",
            "compare": "above",
            "threshold": 0.2,
            "window_seconds": 900,
            "min_samples": 1,
            "enabled": True,
        }
    ]
    assert "# webhook to hooks.example.com" in text
    assert "other-token" not in text
    assert tomllib.loads(text)["slos"] == [
        {
            "id": "answers",
            "name": "Answers",
            "project": "mine",
            "objective": 0.99,
            "window_days": 7,
            "min_samples": 1,
            "enabled": True,
        }
    ]


def test_the_intelligence_settings_default_and_are_set_from_file_and_environment(
    home: Path, tmp_path: Path
) -> None:
    assert load_settings(env=_env(home)).intelligence == IntelligenceSettings(
        pass_interval_s=3600.0,
        window_days=7,
        pass_armed=True,
        min_notes_to_cluster=50,
        max_notes_per_pass=20_000,
        page_size=500,
        max_aspects=16,
        aspects_file=None,
    )
    config = _write(
        tmp_path / "conf" / "mcpd.toml",
        '[intelligence]\naspects_file = "aspects.toml"\nwindow_days = 3\n',
    )
    intelligence = load_settings(
        config_path=config,
        env=_env(
            home,
            MCPD_INTELLIGENCE_PASS_ARMED="false",
            MCPD_INTELLIGENCE_PASS_INTERVAL_S="60",
            MCPD_INTELLIGENCE_MIN_NOTES_TO_CLUSTER="2",
            MCPD_INTELLIGENCE_MAX_NOTES_PER_PASS="2",
            MCPD_INTELLIGENCE_PAGE_SIZE="2",
            MCPD_INTELLIGENCE_MAX_ASPECTS="4",
        ),
    ).intelligence
    assert intelligence == IntelligenceSettings(
        pass_interval_s=60.0,
        window_days=3,
        pass_armed=False,
        min_notes_to_cluster=2,
        max_notes_per_pass=2,
        page_size=2,
        max_aspects=4,
        aspects_file=tmp_path / "conf" / "aspects.toml",
    )
