"""Each project's aspects in the control store: brought to what the configuration defines, and
read through a cache.

Seeding is lazy and per process: the first time a process reads a project's aspects (a
catalogue request, a note to check) it syncs that project first, and a role syncs the projects
the aspects file names when it starts. A project nobody reads is never written, and a project
first seen long after the start is seeded the moment it matters. A sync is safe to run in every
replica at once: each computes the same versions from the same configuration, and storing one
skips a version stored already.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable, Mapping
from dataclasses import replace
from types import MappingProxyType

from mcpd.aspects.config import AspectConfig
from mcpd.aspects.definitions import AspectDefinition
from mcpd.runtime.clock import Clock, epoch_nanos
from mcpd.runtime.config import Settings
from mcpd.runtime.ttl_cache import TtlCache
from mcpd.storage.aspect_records import AspectRecord
from mcpd.storage.interfaces import AspectRecords

__all__ = ["AspectCatalogues", "open_catalogues", "sync_aspects"]

log = logging.getLogger("mcpd.aspects")


def sync_aspects(
    store: AspectRecords, config: AspectConfig, projects: Iterable[str], clock: Clock
) -> list[AspectRecord]:
    """Store a new version of each aspect of `projects` whose configured definition differs
    from its newest stored one, and return the versions stored. Built-ins are seeded as version
    1; a custom aspect the configuration no longer defines gets a version switched off, since
    notes already name it. Identical definitions write nothing. Blocking."""
    now = epoch_nanos(clock.now())
    versions = [
        version
        for project in projects
        for version in _new_versions(project, store.aspects(project), config.wanted(project), now)
    ]
    store.store_aspect_versions(versions)
    if versions:
        log.info(
            "aspect versions stored",
            extra={"aspects": [f"{v.project}/{v.name}@{v.version}" for v in versions]},
        )
    return versions


def _new_versions(
    project: str,
    stored: Iterable[AspectRecord],
    wanted: Mapping[str, AspectDefinition],
    now: int,
) -> list[AspectRecord]:
    newest = {record.name: record for record in stored}
    retired = [
        replace(AspectDefinition.of(record), enabled=False)
        for name, record in newest.items()
        if name not in wanted
    ]
    versions = []
    for definition in (*wanted.values(), *retired):
        previous = newest.get(definition.name)
        if previous is None:
            versions.append(definition.stored_as(project, 1, now))
        elif AspectDefinition.of(previous) != definition:
            versions.append(definition.stored_as(project, previous.version + 1, now))
    return versions


class AspectCatalogues:
    """Each project's aspects as this process reads them: synced on first use, then read from
    the store at most every `ttl_s` (see the module docstring). Safe across threads."""

    def __init__(
        self, store: AspectRecords, config: AspectConfig, clock: Clock, *, ttl_s: float
    ) -> None:
        self._store = store
        self._config = config
        self._clock = clock
        self._synced: set[str] = set()
        self._lock = threading.Lock()
        self._cache: TtlCache[Mapping[str, AspectRecord]] = TtlCache(
            self._load, monotonic=clock.monotonic, ttl_s=ttl_s
        )

    def get(self, project: str) -> Mapping[str, AspectRecord]:
        """The newest version of each of the project's aspects by name, in catalogue order, at
        most `ttl_s` old. Blocking on a cache miss."""
        return self._cache.get(project)

    def sync(self, projects: Iterable[str]) -> list[AspectRecord]:
        """Sync `projects` now (`sync_aspects`), so that reading them later does not; the
        versions stored. Blocking."""
        projects = list(projects)
        stored = sync_aspects(self._store, self._config, projects, self._clock)
        with self._lock:
            self._synced.update(projects)
        return stored

    def _load(self, project: str) -> Mapping[str, AspectRecord]:
        with self._lock:
            synced = project in self._synced
        if not synced:
            self.sync([project])
        # Read-only: one mapping is handed to every thread until the next load.
        return MappingProxyType({record.name: record for record in self._store.aspects(project)})


def open_catalogues(
    settings: Settings, store: AspectRecords, clock: Clock, *, ttl_s: float
) -> AspectCatalogues:
    """The catalogues of a role that starts: the aspects file read and checked (InvalidArgument
    names the entry and key at fault), then the projects it names synced. Blocking."""
    config = AspectConfig.from_settings(settings)
    catalogues = AspectCatalogues(store, config, clock, ttl_s=ttl_s)
    catalogues.sync(config.projects())
    return catalogues
