"""`[[monitors]]` and `[[slos]]` in the configuration file: the spec's Monitor and Slo, one
table each.

```toml
[[monitors]]
id = "support-errors"
name = "Support bot failing"
project = "support"            # default: security.local_project
watch = "error_rate"           # error_rate, latency_p95, cost, trace_count, score_mean,
                               # step_count_divergence, run_repetition
compare = "above"              # above or below (step_count_divergence: above, the default)
threshold = 0.2                # step_count_divergence: the bound, 3.5 by default
window_seconds = 900
min_samples = 20               # default 1
scorer_id = "contains"         # score_mean only, and required there
webhook = "https://hooks.example.com/T000/B000/XXXX"
enabled = true                 # default

[[slos]]
id = "support-success"
name = "Support bot answers"
project = "support"            # default: security.local_project
objective = 0.995              # the fraction of runs that must succeed, above 0 and below 1
window_days = 30
min_samples = 50               # per burn window; default 1
webhook = "https://hooks.example.com/T000/B000/YYYY"
enabled = true                 # default
```

They live in the file alone (no environment variable can hold a list of tables). Every error
names the setting as `monitors[i].key` or `slos[i].key`.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from urllib.parse import urlsplit

from mcpd.runtime.errors import InvalidArgument

__all__ = [
    "COMPARES",
    "DIVERGENCE_BOUND",
    "WATCHES",
    "MonitorSettings",
    "SloSettings",
    "parse_monitors",
    "parse_slos",
]

WATCHES = (
    "error_rate",
    "latency_p95",
    "cost",
    "trace_count",
    "score_mean",
    "step_count_divergence",
    "run_repetition",
)
COMPARES = ("above", "below")
# The spec's bound on a run's modified z-score, the usual one for it (Iglewicz and Hoaglin).
DIVERGENCE = "step_count_divergence"
DIVERGENCE_BOUND = 3.5
_ID = re.compile(r"^[a-z][a-z0-9_-]{0,63}$")
_REQUIRED = ("id", "name", "watch", "window_seconds")
# Required but for step_count_divergence, which has a default for each.
_JUDGED = ("compare", "threshold")
_KNOWN = frozenset(
    {*_REQUIRED, *_JUDGED, "project", "min_samples", "scorer_id", "webhook", "enabled"}
)
_SLO_REQUIRED = ("id", "name", "objective", "window_days")
_SLO_KNOWN = frozenset({*_SLO_REQUIRED, "project", "min_samples", "webhook", "enabled"})


@dataclass(frozen=True, slots=True)
class MonitorSettings:
    """One configured monitor (the spec's Monitor)."""

    id: str
    name: str
    project: str
    watch: str
    compare: str
    threshold: float
    window_seconds: int
    min_samples: int = 1
    scorer_id: str | None = None
    webhook: str | None = None
    enabled: bool = True


@dataclass(frozen=True, slots=True)
class SloSettings:
    """One configured objective (the spec's Slo)."""

    id: str
    name: str
    project: str
    objective: float
    window_days: int
    min_samples: int = 1
    webhook: str | None = None
    enabled: bool = True


def parse_monitors(
    raw: object, source: str, *, default_project: str
) -> tuple[MonitorSettings, ...]:
    """The `monitors` array of tables of the file at `source`, checked."""
    tables = _tables(raw, "monitors", source)
    parsed = tuple(
        _monitor(table, f"monitors[{index}]", source, default_project)
        for index, table in enumerate(tables)
    )
    _unique([monitor.id for monitor in parsed], "monitors", source)
    return parsed


def parse_slos(raw: object, source: str, *, default_project: str) -> tuple[SloSettings, ...]:
    """The `slos` array of tables of the file at `source`, checked."""
    tables = _tables(raw, "slos", source)
    parsed = tuple(
        _slo(table, f"slos[{index}]", source, default_project) for index, table in enumerate(tables)
    )
    _unique([slo.id for slo in parsed], "slos", source)
    return parsed


def _tables(raw: object, name: str, source: str) -> list[Mapping[str, object]]:
    if not isinstance(raw, list) or not all(isinstance(table, Mapping) for table in raw):
        raise _error(name, source, f"expected an array of tables ([[{name}]])")
    return raw


def _unique(ids: list[str], name: str, source: str) -> None:
    seen: set[str] = set()
    for index, watch_id in enumerate(ids):
        if watch_id in seen:
            raise _error(f"{name}[{index}].id", source, f"id {watch_id!r} is used twice")
        seen.add(watch_id)


def _slo(table: Mapping[str, object], at: str, source: str, default_project: str) -> SloSettings:
    _check_keys(table, _SLO_REQUIRED, _SLO_KNOWN, at, source)
    slo = SloSettings(
        id=_id(table, at, source),
        name=_text(table, "name", at, source),
        project=_text(table, "project", at, source) if "project" in table else default_project,
        objective=_number(table, "objective", at, source),
        window_days=_count(table, "window_days", at, source, least=1),
        min_samples=_count(table, "min_samples", at, source, least=0, default=1),
        webhook=_webhook(table, at, source),
        enabled=_flag(table, "enabled", at, source),
    )
    if not 0 < slo.objective < 1:
        raise _error(f"{at}.objective", source, "expected a fraction above 0 and below 1")
    return slo


def _check_keys(
    table: Mapping[str, object],
    required: tuple[str, ...],
    known: frozenset[str],
    at: str,
    source: str,
) -> None:
    unknown = sorted(set(table) - known)
    if unknown:
        raise _error(f"{at}.{unknown[0]}", source, "unknown setting", "UNKNOWN_CONFIG_KEY")
    for key in required:
        if key not in table:
            raise _error(f"{at}.{key}", source, "is required")


def _id(table: Mapping[str, object], at: str, source: str) -> str:
    value = _text(table, "id", at, source)
    if not _ID.match(value):
        raise _error(f"{at}.id", source, "must match ^[a-z][a-z0-9_-]{0,63}$")
    return value


def _monitor(
    table: Mapping[str, object], at: str, source: str, default_project: str
) -> MonitorSettings:
    _check_keys(table, _REQUIRED, _KNOWN, at, source)
    watch = _choice(table, "watch", WATCHES, at, source)
    defaults = {"compare": "above", "threshold": DIVERGENCE_BOUND} if watch == DIVERGENCE else {}
    for key in _JUDGED:
        if key not in table and key not in defaults:
            raise _error(f"{at}.{key}", source, "is required")
    monitor = MonitorSettings(
        id=_id(table, at, source),
        name=_text(table, "name", at, source),
        project=_text(table, "project", at, source) if "project" in table else default_project,
        watch=watch,
        compare=_choice(table, "compare", COMPARES, at, source) if "compare" in table else "above",
        threshold=_number(table, "threshold", at, source)
        if "threshold" in table
        else DIVERGENCE_BOUND,
        window_seconds=_count(table, "window_seconds", at, source, least=1),
        min_samples=_count(table, "min_samples", at, source, least=0, default=1),
        scorer_id=_text(table, "scorer_id", at, source) if "scorer_id" in table else None,
        webhook=_webhook(table, at, source),
        enabled=_flag(table, "enabled", at, source),
    )
    if (monitor.watch == "score_mean") != (monitor.scorer_id is not None):
        raise _error(f"{at}.scorer_id", source, "is required for watch score_mean, and only there")
    if monitor.watch == DIVERGENCE and monitor.compare != "above":
        # It trips on a run whose score exceeds the bound; its value is the highest score.
        raise _error(f"{at}.compare", source, "step_count_divergence trips above its bound only")
    return monitor


def _text(table: Mapping[str, object], key: str, at: str, source: str) -> str:
    value = table[key]
    if not isinstance(value, str) or not value.strip():
        raise _error(f"{at}.{key}", source, "expected a non-empty string")
    return value


def _choice(
    table: Mapping[str, object], key: str, choices: tuple[str, ...], at: str, source: str
) -> str:
    value = _text(table, key, at, source)
    if value not in choices:
        raise _error(f"{at}.{key}", source, f"expected one of {', '.join(choices)}")
    return value


def _number(table: Mapping[str, object], key: str, at: str, source: str) -> float:
    value = table[key]
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise _error(f"{at}.{key}", source, "expected a finite number")
    return float(value)


def _count(
    table: Mapping[str, object],
    key: str,
    at: str,
    source: str,
    *,
    least: int,
    default: int | None = None,
) -> int:
    value = table.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int) or value < least:
        raise _error(f"{at}.{key}", source, f"expected a whole number of at least {least}")
    return value


def _flag(table: Mapping[str, object], key: str, at: str, source: str) -> bool:
    value = table.get(key, True)
    if not isinstance(value, bool):
        raise _error(f"{at}.{key}", source, "expected true or false")
    return value


def _webhook(table: Mapping[str, object], at: str, source: str) -> str | None:
    if "webhook" not in table:
        return None
    url = _text(table, "webhook", at, source)
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        # The URL itself is left out: it is often its own credential.
        raise _error(f"{at}.webhook", source, "expected an http or https URL")
    return url


def _error(
    key: str, source: str, problem: str, reason: str = "INVALID_CONFIG_VALUE"
) -> InvalidArgument:
    return InvalidArgument(
        f"{key} in {source}: {problem}", field=key, reason=reason, metadata={"source": source}
    )
