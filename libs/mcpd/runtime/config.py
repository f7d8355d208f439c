"""Typed, frozen settings, and the one place mcpd reads its configuration.

`load_settings` layers, from strongest to weakest: the `overrides` argument, `MCPD_*` environment
variables, the TOML file, built-in defaults. The environment is read here and nowhere else;
components receive the `Settings` (or the section they need) through their constructors.

Names: top-level key `http_addr` is `MCPD_HTTP_ADDR`; key `backend` of section `[storage]` is
`MCPD_STORAGE_BACKEND`, and `storage.backend` in `overrides`. Unknown keys in the file and in
`overrides` are errors; unknown `MCPD_*` variables are not (other tools share the prefix, e.g.
`MCPD_TEST_POSTGRES_URL`).
"""

from __future__ import annotations

import dataclasses
import math
import os
import re
import tomllib
from collections.abc import Callable, Mapping
from enum import StrEnum
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from mcpd.runtime import _config_values as values
from mcpd.runtime.errors import InvalidArgument, NotFound
from mcpd.runtime.logging import redact_url
from mcpd.runtime.watch_config import MonitorSettings, SloSettings, parse_monitors, parse_slos

CONFIG_ENV = "MCPD_CONFIG"
DATA_DIR_ENV = "MCPD_DATA_DIR"
CONFIG_FILE_NAME = "mcpd.toml"
ENV_PREFIX = "MCPD_"


class StorageBackend(StrEnum):
    """Which engine holds the trace store."""

    SQLITE = "sqlite"
    POSTGRES = "postgres"
    CLICKHOUSE = "clickhouse"


class LogLevel(StrEnum):
    """The least severe log records written."""

    DEBUG = "debug"
    INFO = "info"
    WARNING = "warning"
    ERROR = "error"
    CRITICAL = "critical"


class LogFormat(StrEnum):
    """How log records are written: `json` lines for machines, `text` for people."""

    JSON = "json"
    TEXT = "text"


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class StorageSettings:
    """`[storage]`: where data lives.

    `backend` picks the trace store. `postgres_url`, when set, holds the run and control stores
    (and the trace store when `backend` is postgres). `clickhouse_url` is
    `http(s)://user:pass@host:port/db` (clickhouse-connect) or `chdb:///abs/path` (embedded).
    """

    backend: StorageBackend = StorageBackend.SQLITE
    postgres_url: str | None = None
    clickhouse_url: str | None = None


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class GrpcSettings:
    """`[grpc]`: transport limits shared by every gRPC server and channel."""

    max_message_bytes: int = 64 * 1024 * 1024
    keepalive_time_ms: int = 30_000
    keepalive_timeout_ms: int = 10_000
    shutdown_grace_s: float = 5.0


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class GatewaySettings:
    """`[gateway]`: the HTTP edge."""

    default_deadline_s: float = 30.0


# The most server processes one `mcpd serve` runs.
MAX_SERVE_PROCESSES = 32


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class ServeSettings:
    """`[serve]`: how `mcpd serve` (every role) uses the machine.

    `processes`: how many identical server processes share its ports (`cli.supervisor`);
    unset means one per CPU core, at most four.
    """

    processes: int | None = None


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class SecuritySettings:
    """`[security]`: who may call mcpd.

    `keys_file` is a TOML file of keys the operator declares (`[[keys]]` with `scope`, `project`
    or `projects`, and `secret` or `digest`); kept apart from this file so it can be mounted from
    a secret store. `signup` opens POST /v1/api/account/signup to anyone. `local_project` is the
    project of unauthenticated requests in local mode (loopback, no keys, no accounts).
    `audit_aggregate_window_s` is the window within which repeats of one refused request are
    written to the audit log as one row with a count. `service_credential_file` holds the
    credential mcpd's services present to each other (default: `service.credential` in the data
    directory, created on first start); every process of a deployment needs the same one, so
    Kubernetes mounts it from a Secret.
    """

    signup: bool = False
    keys_file: Path | None = None
    service_credential_file: Path | None = None
    session_ttl_hours: int = 720
    local_project: str = "default"
    login_max_failures: int = 5
    login_window_s: float = 900.0
    audit_aggregate_window_s: float = 60.0


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class SessionsSettings:
    """`[sessions]`: coding-agent transcripts tailed into the session read model.

    `sources` names the standard sources to watch, comma-separated (`codex,claude`); `auto` is
    every standard source whose directory exists, empty is none. `sources_file` is a TOML file
    of custom sources (`[[sources]]` with `name`, `harness`, `glob`, `enabled`). Sessions land in
    `project`, or in `security.local_project` when it is empty.
    """

    enabled: bool = True
    sources: str = "auto"
    sources_file: Path | None = None
    project: str = ""
    rescan_interval_s: float = 30.0


# The smallest `ingest.max_record_payload_bytes`: below it, what truncation never cuts (link ids,
# the markers themselves) could outgrow the limit on a span at the default counts.
MIN_RECORD_PAYLOAD_BYTES = 64 * 1024
# A lease shorter than this could not be kept alive across a slow network; one longer than a
# day would leave a lost worker's step stuck for longer than anyone waits.
MIN_LEASE_TTL_MS = 300
MAX_LEASE_TTL_MS = 86_400_000


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class IngestSettings:
    """`[ingest]`: how signals are accepted.

    `projects_file` is a TOML file of per-project policies (`[[projects]]` with `id`, `name`,
    `retention_days`, `sampling`, `redaction` and `prices`), written to the control store at
    start. `redaction_key_file` holds the key of keyed hashes (user ids, `hash` redaction
    rules); it is created, 32 random bytes with mode 0600, when missing (default:
    `redaction.key` in the data directory). Every replica of a deployment needs the same key,
    or equal user ids stop hashing alike. `group_max_records` caps one group commit;
    `max_pending_records` caps what may wait for storage before requests are refused with 429.
    `max_pending_bytes` caps the ingest requests one process works on at once, by their size as
    received (from before they are mapped until they are answered): beyond it a request is
    refused at once with 429 / RESOURCE_EXHAUSTED and a retry delay (`services.ingest.admission`),
    which bounds an ingest process's memory under a flood.
    Per-record limits (`services.ingest.limits`, docs/security.md): `max_record_payload_bytes`
    bounds the JSON text of one record's payload fields (past it the largest are truncated);
    `max_record_attributes` the top-level keys of a span's attributes or a log's fields,
    `max_span_events` and `max_span_links` a span's events and links (past them the rest are
    dropped). The counts default to OpenTelemetry's own span limits.
    """

    projects_file: Path | None = None
    redaction_key_file: Path | None = None
    group_max_records: int = 20_000
    max_pending_records: int = 500_000
    max_pending_bytes: int = 16 * 1024 * 1024
    policy_ttl_s: float = 5.0
    max_record_payload_bytes: int = 1024 * 1024
    max_record_attributes: int = 128
    max_span_events: int = 128
    max_span_links: int = 128


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class RetentionSettings:
    """`[retention]`: how long signals are kept, and how often the sweeper deletes what aged.

    `default_days` applies to a project without its own `retention_days`; 0 (the default) keeps
    signals forever, so nothing is ever deleted that an operator did not ask to expire.
    `spans_days`, `logs_days`, `metrics_days`, `scores_days` and `feedback_days`, when set, cap one
    signal's window in every project (the shorter of the cap and the project's window wins; `spans`
    also covers traces, held spans and aspect notes). `interval_s` is the time between sweeps.
    `ingest_keys_days` is how long a batch's `ingest_key` is remembered: a batch sent again later
    is written again (0 remembers every key forever, and the table of keys grows with every
    batch).
    """

    default_days: int = 0
    interval_s: float = 3600.0
    ingest_keys_days: int = 7
    spans_days: int | None = None
    logs_days: int | None = None
    metrics_days: int | None = None
    scores_days: int | None = None
    feedback_days: int | None = None


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class OrchestratorSettings:
    """`[orchestrator]`: durable runs.

    `lease_ttl_ms` is how long a worker's lease on a step attempt lasts without a heartbeat
    (a worker is told to heartbeat every third of it); past it the attempt is orphaned and, one
    lease length later, reclaimed.
    """

    lease_ttl_ms: int = 30_000


# How many judge calls one scoring pass may make at once, at most.
MAX_JUDGE_CONCURRENCY = 32
# Monitors read the query service every interval: not more often than this.
MIN_MONITOR_INTERVAL_S = 0.1


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class EvaluationSettings:
    """`[evaluation]`: the judge of the judged scorer, `llm_judge`, and the monitors' pace.

    `judge_url` is the base URL of an OpenAI-compatible API (the scorer POSTs to
    `{judge_url}/chat/completions`) and `judge_model` the model it asks; with neither set no judge
    is configured and `llm_judge` declines. `judge_key_file` holds the API key, sent as a bearer
    token; it is read at start and kept out of settings, logs and `mcpd config show` (local
    servers need none). `judge_timeout_s` bounds one judge call; `judge_concurrency` is how many
    calls one scoring pass makes at once. Together they cap the runs a judged pass takes: as many
    as fit in the request's deadline (docs/evaluation.md). `monitor_interval_s` is how often the
    monitors (`[[monitors]]`) and objectives (`[[slos]]`) are read; an objective trips when its
    one-hour burn rate exceeds `slo_fast_burn` and its six-hour rate `slo_slow_burn` together.
    `experiment_interval_s` is how often the experiments mcpd drives are advanced (runs started,
    ended runs scored).
    """

    judge_url: str | None = None
    judge_model: str | None = None
    judge_key_file: Path | None = None
    judge_timeout_s: float = 30.0
    judge_concurrency: int = 4
    monitor_interval_s: float = 60.0
    experiment_interval_s: float = 2.0
    slo_fast_burn: float = 14.4
    slo_slow_burn: float = 6.0


# The built-in aspects (goal, sentiment, behaviour, outcome) count towards a project's ceiling.
BUILT_IN_ASPECTS = 4


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class IntelligenceSettings:
    """`[intelligence]`: the aspects notes are filed under, and the clustering pass over them.

    `pass_armed` says whether the pass runs at all; it runs every `pass_interval_s` over the
    notes of the last `window_days`. An aspect of one entity is clustered once it has
    `min_notes_to_cluster` notes; a pass reads at most `max_notes_per_pass` of them, newest
    first, `page_size` at a time. `max_aspects` caps the aspects one project defines, the four
    built-ins included. `aspects_file` is a TOML file of `[[aspects]]` (`mcpd.aspects.config`):
    custom aspects, and changes to the built-ins, written to the control store (as new versions)
    when a role starts and when a project is first seen.
    """

    pass_interval_s: float = 3600.0
    window_days: int = 7
    pass_armed: bool = True
    min_notes_to_cluster: int = 50
    max_notes_per_pass: int = 20_000
    page_size: int = 500
    max_aspects: int = 16
    aspects_file: Path | None = None


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class Settings:
    """The effective configuration of one mcpd process.

    The `*_addr` of the five gRPC roles say where peers are found; left empty when constructing
    directly, they become `grpc_addr` (one process serving every role). `load_settings` always
    fills them.
    """

    data_dir: Path
    http_addr: str = "127.0.0.1:8080"
    grpc_addr: str = "127.0.0.1:50051"
    otlp_grpc_addr: str = "127.0.0.1:4317"
    ingest_addr: str = ""
    query_addr: str = ""
    orchestrator_addr: str = ""
    evaluation_addr: str = ""
    intelligence_addr: str = ""
    log_level: LogLevel = LogLevel.INFO
    log_format: LogFormat = LogFormat.JSON
    storage: StorageSettings = dataclasses.field(default_factory=StorageSettings)
    grpc: GrpcSettings = dataclasses.field(default_factory=GrpcSettings)
    gateway: GatewaySettings = dataclasses.field(default_factory=GatewaySettings)
    serve: ServeSettings = dataclasses.field(default_factory=ServeSettings)
    security: SecuritySettings = dataclasses.field(default_factory=SecuritySettings)
    sessions: SessionsSettings = dataclasses.field(default_factory=SessionsSettings)
    ingest: IngestSettings = dataclasses.field(default_factory=IngestSettings)
    retention: RetentionSettings = dataclasses.field(default_factory=RetentionSettings)
    orchestrator: OrchestratorSettings = dataclasses.field(default_factory=OrchestratorSettings)
    evaluation: EvaluationSettings = dataclasses.field(default_factory=EvaluationSettings)
    intelligence: IntelligenceSettings = dataclasses.field(default_factory=IntelligenceSettings)
    # `[[monitors]]` and `[[slos]]` tables: from the file alone (`mcpd.runtime.watch_config`).
    monitors: tuple[MonitorSettings, ...] = ()
    slos: tuple[SloSettings, ...] = ()

    def __post_init__(self) -> None:
        for name in PEER_ADDRESS_KEYS:
            if not getattr(self, name):
                # Frozen dataclass: assigning in __post_init__ needs object.__setattr__.
                object.__setattr__(self, name, self.grpc_addr)


PEER_ADDRESS_KEYS = (
    "ingest_addr",
    "query_addr",
    "orchestrator_addr",
    "evaluation_addr",
    "intelligence_addr",
)

_SECTIONS: Mapping[str, type] = {
    "storage": StorageSettings,
    "grpc": GrpcSettings,
    "gateway": GatewaySettings,
    "serve": ServeSettings,
    "security": SecuritySettings,
    "sessions": SessionsSettings,
    "ingest": IngestSettings,
    "retention": RetentionSettings,
    "orchestrator": OrchestratorSettings,
    "evaluation": EvaluationSettings,
    "intelligence": IntelligenceSettings,
}


def _key_kinds() -> dict[str, values.Kind]:
    """Every setting as `key` or `section.key`, with the kind of value it holds."""
    kinds: dict[str, values.Kind] = {}
    for name, annotation in values.field_types(Settings).items():
        if name not in _SECTIONS and name not in _TABLE_ARRAYS:
            kinds[name] = values.kind_of(annotation)
    for section, cls in _SECTIONS.items():
        for name, annotation in values.field_types(cls).items():
            kinds[f"{section}.{name}"] = values.kind_of(annotation)
    return kinds


# Settings that are arrays of tables in the file, read apart from the keys.
_TABLE_ARRAYS = frozenset({"monitors", "slos"})
KEYS = _key_kinds()


def env_var(key: str) -> str:
    """The environment variable that sets `key` (`storage.backend` -> `MCPD_STORAGE_BACKEND`)."""
    return ENV_PREFIX + key.replace(".", "_").upper()


def load_settings(
    *,
    config_path: Path | None = None,
    env: Mapping[str, str] | None = None,
    overrides: Mapping[str, object] | None = None,
) -> Settings:
    """The effective settings: `overrides` > environment > TOML file > defaults.

    `env` defaults to `os.environ`. The file is `config_path`, else `$MCPD_CONFIG`, else
    `mcpd.toml` in the data directory; only that last, implicit one may be missing.
    `overrides` takes `key` / `section.key` names or nested `{"section": {...}}` mappings, with
    typed values or strings (parsed as the environment's are).

    Raises `InvalidArgument` naming the key (and its source) for unknown keys in the file or in
    `overrides`, for values of the wrong type, and for invalid values; `NotFound` when an
    explicitly named file does not exist.
    """
    environ: Mapping[str, str] = os.environ if env is None else env
    home = Path(environ["HOME"]) if environ.get("HOME") else Path.home()
    layer_overrides = values.flatten_overrides(overrides or {}, KEYS)
    layer_env = {
        key: (env_var(key), environ[env_var(key)]) for key in KEYS if env_var(key) in environ
    }
    path, explicit = _config_file(config_path, environ, layer_overrides, home)
    layer_file, tables = _read_file(path, explicit)

    merged: dict[str, object] = {}
    sources: dict[str, str] = {}
    for key, raw in layer_file.items():
        merged[key] = values.from_file(raw, KEYS[key], key, str(path), home, path.parent)
        sources[key] = str(path)
    for key, (name, text) in layer_env.items():
        merged[key] = values.from_text(text, KEYS[key], key, name, home)
        sources[key] = name
    for key, raw in layer_overrides.items():
        source = f"override {key!r}"
        if isinstance(raw, str):
            merged[key] = values.from_text(raw, KEYS[key], key, source, home)
        else:
            merged[key] = values.from_file(raw, KEYS[key], key, source, home, Path.cwd())
        sources[key] = source
    merged.setdefault("data_dir", _default_data_dir(home))
    settings = _build(merged)
    _validate(settings, sources)
    project = settings.security.local_project
    if "monitors" in tables:
        monitors = parse_monitors(tables["monitors"], str(path), default_project=project)
        settings = dataclasses.replace(settings, monitors=monitors)
    if "slos" in tables:
        slos = parse_slos(tables["slos"], str(path), default_project=project)
        settings = dataclasses.replace(settings, slos=slos)
    return settings


def _default_data_dir(home: Path) -> Path:
    return home / ".local" / "share" / "mcpd"


def _config_file(
    config_path: Path | None,
    environ: Mapping[str, str],
    overrides: Mapping[str, object],
    home: Path,
) -> tuple[Path, bool]:
    """Where the TOML file is, and whether it was named explicitly (so must exist)."""
    if config_path is not None:
        return values.expand(config_path, home, Path.cwd()), True
    if environ.get(CONFIG_ENV):
        return values.expand(Path(environ[CONFIG_ENV]), home, Path.cwd()), True
    # The file lives in the data directory, which therefore cannot come from the file itself.
    data_dir = overrides.get("data_dir") or environ.get(DATA_DIR_ENV) or _default_data_dir(home)
    if not isinstance(data_dir, str | os.PathLike):
        raise InvalidArgument(
            f"override 'data_dir' must be a path, got {type(data_dir).__name__}",
            field="data_dir",
            reason="INVALID_CONFIG_VALUE",
        )
    return values.expand(Path(data_dir), home, Path.cwd()) / CONFIG_FILE_NAME, False


def _read_file(path: Path, explicit: bool) -> tuple[dict[str, object], dict[str, object]]:
    """The file's settings as `key` / `section.key`, unknown keys refused, and its arrays of
    tables (`_TABLE_ARRAYS`) as they are."""
    try:
        with path.open("rb") as handle:
            document = tomllib.load(handle)
    except FileNotFoundError:
        if explicit:
            raise NotFound(
                f"config file {path} does not exist", field="config", reason="CONFIG_NOT_FOUND"
            ) from None
        return {}, {}
    except tomllib.TOMLDecodeError as exc:
        raise InvalidArgument(
            f"config file {path} is not valid TOML: {exc}", field="config", reason="INVALID_CONFIG"
        ) from exc
    except OSError as exc:
        raise InvalidArgument(
            f"cannot read config file {path}: {exc.strerror}",
            field="config",
            reason="INVALID_CONFIG",
        ) from exc
    tables = {name: document.pop(name) for name in _TABLE_ARRAYS if name in document}
    return values.flatten_document(document, KEYS, _SECTIONS, str(path)), tables


def _build(merged: Mapping[str, object]) -> Settings:
    sections = {
        section: cls(
            **{
                key.partition(".")[2]: value
                for key, value in merged.items()
                if key.startswith(section + ".")
            }
        )
        for section, cls in _SECTIONS.items()
    }
    top: dict[str, Any] = {key: value for key, value in merged.items() if "." not in key}
    return Settings(**top, **sections)


_ADDRESS_KEYS = ("http_addr", "grpc_addr", "otlp_grpc_addr", *PEER_ADDRESS_KEYS)
_POSTGRES_SCHEMES = frozenset({"postgres", "postgresql", "postgresql+psycopg"})
_CLICKHOUSE_SCHEMES = frozenset({"http", "https", "chdb"})


def _validate(settings: Settings, sources: Mapping[str, str]) -> None:
    """Refuse values that parse but cannot work, naming the key and where it was set."""

    def fail(key: str, message: str) -> InvalidArgument:
        return values.error(key, sources.get(key, "the defaults"), message, "INVALID_CONFIG_VALUE")

    for key in _ADDRESS_KEYS:
        address: str = getattr(settings, key)
        problem = values.address_problem(address)
        if problem is not None:
            raise fail(key, f"{problem}, got {address!r}")
    grpc, gateway, storage = settings.grpc, settings.gateway, settings.storage
    for name in ("max_message_bytes", "keepalive_time_ms", "keepalive_timeout_ms"):
        if getattr(grpc, name) <= 0:
            raise fail(f"grpc.{name}", "must be positive")
    if not (math.isfinite(grpc.shutdown_grace_s) and grpc.shutdown_grace_s >= 0):
        raise fail("grpc.shutdown_grace_s", "must be a finite number of seconds, 0 or more")
    if not (math.isfinite(gateway.default_deadline_s) and gateway.default_deadline_s > 0):
        raise fail("gateway.default_deadline_s", "must be a finite positive number of seconds")
    security = settings.security
    for name in ("session_ttl_hours", "login_max_failures"):
        if getattr(security, name) <= 0:
            raise fail(f"security.{name}", "must be positive")
    for name in ("login_window_s", "audit_aggregate_window_s"):
        seconds = getattr(security, name)
        if not (math.isfinite(seconds) and seconds > 0):
            raise fail(f"security.{name}", "must be a finite positive number of seconds")
    if not security.local_project.strip():
        raise fail("security.local_project", "must not be empty")
    _validate_sessions(settings.sessions, fail)
    _validate_ingest(settings.ingest, fail)
    processes = settings.serve.processes
    if processes is not None and not 1 <= processes <= MAX_SERVE_PROCESSES:
        raise fail("serve.processes", f"must be from 1 to {MAX_SERVE_PROCESSES} processes")
    _validate_retention(settings.retention, fail)
    if not MIN_LEASE_TTL_MS <= settings.orchestrator.lease_ttl_ms <= MAX_LEASE_TTL_MS:
        raise fail(
            "orchestrator.lease_ttl_ms",
            f"must be from {MIN_LEASE_TTL_MS} to {MAX_LEASE_TTL_MS} milliseconds",
        )
    _validate_evaluation(settings.evaluation, fail)
    _validate_intelligence(settings.intelligence, fail)
    for name, url, schemes in (
        ("postgres_url", storage.postgres_url, _POSTGRES_SCHEMES),
        ("clickhouse_url", storage.clickhouse_url, _CLICKHOUSE_SCHEMES),
    ):
        problem = None if url is None else values.url_problem(url, schemes)
        if url is not None and problem is not None:
            # The URL itself may carry a password: show it redacted.
            raise fail(f"storage.{name}", f"{problem}, got {redact_url(url)!r}")
    needed = {
        StorageBackend.POSTGRES: ("postgres_url", storage.postgres_url),
        StorageBackend.CLICKHOUSE: ("clickhouse_url", storage.clickhouse_url),
    }.get(storage.backend)
    if needed is not None and needed[1] is None:
        backend_source = sources.get("storage.backend", "the defaults")
        raise fail(
            f"storage.{needed[0]}",
            f"must be set when storage.backend is {storage.backend} (set by {backend_source})",
        )


_SOURCE_NAME = re.compile(r"[a-z0-9][a-z0-9._-]*")


def _validate_ingest(ingest: IngestSettings, fail: Callable[[str, str], InvalidArgument]) -> None:
    for key in ("group_max_records", "max_pending_records"):
        if getattr(ingest, key) < 1:
            raise fail(f"ingest.{key}", "must be a positive number of records")
    if ingest.max_pending_bytes < 1:
        raise fail("ingest.max_pending_bytes", "must be a positive number of bytes")
    if ingest.max_pending_records < ingest.group_max_records:
        raise fail("ingest.max_pending_records", "must be at least ingest.group_max_records")
    if not (math.isfinite(ingest.policy_ttl_s) and ingest.policy_ttl_s >= 0):
        raise fail("ingest.policy_ttl_s", "must be a finite number of seconds, 0 or more")
    if ingest.max_record_payload_bytes < MIN_RECORD_PAYLOAD_BYTES:
        raise fail(
            "ingest.max_record_payload_bytes", f"must be at least {MIN_RECORD_PAYLOAD_BYTES} bytes"
        )
    for key in ("max_record_attributes", "max_span_events", "max_span_links"):
        if getattr(ingest, key) < 0:
            raise fail(f"ingest.{key}", "must be a number of items, 0 or more")


_JUDGE_SCHEMES = frozenset({"http", "https"})


def _validate_evaluation(
    evaluation: EvaluationSettings, fail: Callable[[str, str], InvalidArgument]
) -> None:
    url, model = evaluation.judge_url, evaluation.judge_model
    if url is not None:
        problem = values.url_problem(url, _JUDGE_SCHEMES)
        if problem is not None:
            raise fail("evaluation.judge_url", f"{problem}, got {redact_url(url)!r}")
    if model is not None and not model.strip():
        raise fail("evaluation.judge_model", "must not be blank")
    # Half a judge is a mistake, not a choice: say which half is missing.
    if url is not None and model is None:
        raise fail("evaluation.judge_model", "must be set when evaluation.judge_url is")
    if model is not None and url is None:
        raise fail("evaluation.judge_url", "must be set when evaluation.judge_model is")
    if evaluation.judge_key_file is not None and url is None:
        raise fail("evaluation.judge_key_file", "is set but no judge is: set evaluation.judge_url")
    timeout = evaluation.judge_timeout_s
    if not (math.isfinite(timeout) and timeout > 0):
        raise fail("evaluation.judge_timeout_s", "must be a finite positive number of seconds")
    if not 1 <= evaluation.judge_concurrency <= MAX_JUDGE_CONCURRENCY:
        raise fail(
            "evaluation.judge_concurrency", f"must be from 1 to {MAX_JUDGE_CONCURRENCY} calls"
        )
    for key in ("monitor_interval_s", "experiment_interval_s"):
        interval = getattr(evaluation, key)
        if not (math.isfinite(interval) and interval >= MIN_MONITOR_INTERVAL_S):
            raise fail(f"evaluation.{key}", f"must be at least {MIN_MONITOR_INTERVAL_S} seconds")
    for key in ("slo_fast_burn", "slo_slow_burn"):
        rate = getattr(evaluation, key)
        if not (math.isfinite(rate) and rate > 0):
            raise fail(f"evaluation.{key}", "must be a finite positive burn rate")


def _validate_intelligence(
    intelligence: IntelligenceSettings, fail: Callable[[str, str], InvalidArgument]
) -> None:
    interval = intelligence.pass_interval_s
    if not (math.isfinite(interval) and interval > 0):
        raise fail("intelligence.pass_interval_s", "must be a finite positive number of seconds")
    if intelligence.window_days < 1:
        raise fail("intelligence.window_days", "must be a positive number of days")
    # One note is not a theme, and a pair is the least that can share wording.
    floor = intelligence.min_notes_to_cluster
    if floor < 2:
        raise fail("intelligence.min_notes_to_cluster", "must be at least 2 notes")
    ceiling = intelligence.max_notes_per_pass
    if ceiling < floor:
        raise fail("intelligence.max_notes_per_pass", "must be at least min_notes_to_cluster")
    if not 1 <= intelligence.page_size <= ceiling:
        raise fail("intelligence.page_size", "must be from 1 to max_notes_per_pass notes")
    if intelligence.max_aspects < BUILT_IN_ASPECTS:
        raise fail(
            "intelligence.max_aspects",
            f"must be at least {BUILT_IN_ASPECTS}, the built-in aspects every project has",
        )


_RETENTION_CAPS = ("spans_days", "logs_days", "metrics_days", "scores_days", "feedback_days")


def _validate_retention(
    retention: RetentionSettings, fail: Callable[[str, str], InvalidArgument]
) -> None:
    for key in ("default_days", "ingest_keys_days"):
        if getattr(retention, key) < 0:
            raise fail(f"retention.{key}", "must be a number of days, 0 (keep forever) or more")
    for key in _RETENTION_CAPS:
        days = getattr(retention, key)
        if days is not None and days < 1:
            raise fail(f"retention.{key}", "must be a positive number of days (or left unset)")
    if not (math.isfinite(retention.interval_s) and retention.interval_s > 0):
        raise fail("retention.interval_s", "must be a finite positive number of seconds")


def _validate_sessions(
    sessions: SessionsSettings, fail: Callable[[str, str], InvalidArgument]
) -> None:
    if not (math.isfinite(sessions.rescan_interval_s) and sessions.rescan_interval_s > 0):
        raise fail("sessions.rescan_interval_s", "must be a finite positive number of seconds")
    if sessions.project and not sessions.project.strip():
        raise fail("sessions.project", "must not be blank (leave it empty for the local project)")
    names = [name.strip() for name in sessions.sources.split(",")] if sessions.sources else []
    if "auto" in names and len(names) > 1:
        raise fail("sessions.sources", "'auto' cannot be combined with source names")
    for name in names:
        if not _SOURCE_NAME.fullmatch(name):
            raise fail(
                "sessions.sources",
                f"expected comma-separated source names (a-z, 0-9, '-', '.', '_'), got {name!r}",
            )


def render_settings(settings: Settings) -> str:
    """`settings` as a TOML document (what `mcpd config show` prints), secrets masked.

    Unset optional keys appear as comments, since TOML has no null.
    """
    lines = ["# mcpd effective configuration (secrets masked)"]
    current_section = ""
    for key in KEYS:
        section, _, name = key.rpartition(".")
        if section != current_section:
            lines += ["", f"[{section}]"]
            current_section = section
        owner = getattr(settings, section) if section else settings
        value = getattr(owner, name)
        if value is None:
            lines.append(f"# {name} is not set")
        else:
            lines.append(f"{name} = {values.toml_value(value, secret=name.endswith('_url'))}")
    watches: list[tuple[str, MonitorSettings | SloSettings]] = [
        *(("monitors", monitor) for monitor in settings.monitors),
        *(("slos", slo) for slo in settings.slos),
    ]
    for table, watch in watches:
        lines += ["", f"[[{table}]]"]
        for field in dataclasses.fields(watch):
            value = getattr(watch, field.name)
            if field.name == "webhook" and value is not None:
                # A webhook URL is often its own credential: its host alone.
                lines.append(f"# webhook to {urlsplit(value).hostname} (its URL is not shown)")
            elif value is not None:
                lines.append(f"{field.name} = {values.toml_value(value, secret=False)}")
    return "\n".join(lines) + "\n"
