"""Each project's ingest policy: redaction, sampling and prices, read from the control store.

The control store is the source of truth (written from `ingest.projects_file` at start, the
same for every replica). A policy is cached per project for `ttl_s`, so a change reaches every
replica within that time without a read per record. The server's built-in redaction rules,
its redaction key and the shipped price book are the same for every project; a project adds
rules on top, chooses its sampling and overrides prices.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, MutableMapping
from dataclasses import dataclass
from typing import Any, Protocol

from mcpd import codec
from mcpd.pricing import PriceBook, apply_price, load_price_book
from mcpd.redaction import RedactionPolicy, Redactor, redact_row
from mcpd.runtime.errors import InvalidArgument
from mcpd.runtime.ttl_cache import TtlCache
from mcpd.storage.interfaces import PriceOverrides, ProjectCatalog
from services.ingest.sampling import SamplingPolicy


@dataclass(frozen=True, slots=True)
class ProjectPolicy:
    """What ingest applies to one project's records."""

    redactor: Redactor
    sampling: SamplingPolicy
    prices: PriceBook

    def redact(self, signal: str, row: MutableMapping[str, Any]) -> None:
        """Redact the row's payload fields and hash its identities, in place."""
        redact_row(self.redactor, signal, row)

    def price(self, row: MutableMapping[str, Any]) -> None:
        """Estimate the row's cost from its usage unless the producer reported one."""
        apply_price(row, self.prices)


def check_policies(sampling: Any, redaction: Any, prices: Any) -> None:
    """Raise InvalidArgument naming the field when a project's policy documents are malformed."""
    SamplingPolicy.parse(sampling)
    RedactionPolicy.parse(redaction)
    if not isinstance(prices, Mapping):
        raise InvalidArgument("prices must be a table of models", field="prices")
    load_price_book().with_overrides(prices, field="prices")


class PolicySources(ProjectCatalog, PriceOverrides, Protocol):
    """What policies are read from: the control store's projects and price overrides."""


class ProjectPolicies:
    """Cached per-project policies (see the module docstring). Safe across threads."""

    def __init__(
        self,
        control: PolicySources,
        *,
        key: bytes,
        book: PriceBook,
        monotonic: Callable[[], float],
        ttl_s: float = 5.0,
    ) -> None:
        self._control = control
        self._key = key
        self._book = book
        self._cache = TtlCache(self._load, monotonic=monotonic, ttl_s=ttl_s)

    def get(self, project: str) -> ProjectPolicy:
        """The project's policy, at most `ttl_s` old. Blocking on a cache miss."""
        return self._cache.get(project)

    def _load(self, project: str) -> ProjectPolicy:
        stored = self._control.get_project(project)
        sampling = redaction = None
        if stored is not None:
            # The codec gives whole numbers back as integers (a Value holds only doubles), so
            # `slow_ms = 60000` parses as the integer it was written as.
            if stored.HasField("sampling"):
                sampling = codec.encode(stored.sampling)
            if stored.HasField("redaction"):
                redaction = codec.encode(stored.redaction)
        overrides = self._control.price_overrides(project)
        return ProjectPolicy(
            redactor=Redactor.for_project(redaction, key=self._key),
            sampling=SamplingPolicy.parse(sampling),
            prices=self._book.with_overrides(overrides, name=project) if overrides else self._book,
        )
