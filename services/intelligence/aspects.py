"""The aspect catalogue as the intelligence service answers it: the spec's AspectCatalogue.

What exists, and seeding it, is `mcpd.aspects`, which ingest reads too when it checks a note:
the two read the same rows of the control store, so they cannot disagree.
"""

from __future__ import annotations

from mcpd.aspects import AspectCatalogues
from mcpd.model.v1 import intelligence_pb2
from mcpd.runtime.config import IntelligenceSettings
from mcpd.signals.messages import timestamp_of
from mcpd.storage.aspect_records import AspectRecord


def catalogue(
    catalogues: AspectCatalogues, project: str, settings: IntelligenceSettings
) -> intelligence_pb2.AspectCatalogue:
    """Every aspect of `project` in sort_order, disabled ones included, with the bounds a pass
    runs under. Seeds the project's aspects when this process has not yet. Blocking."""
    return intelligence_pb2.AspectCatalogue(
        aspects=[aspect_message(record) for record in catalogues.get(project).values()],
        limits=limits(settings),
    )


def enabled_aspects(catalogues: AspectCatalogues, project: str) -> list[str]:
    """The names of the project's enabled aspects, in catalogue order: the aspects progress is
    reported along. Blocking."""
    return [name for name, record in catalogues.get(project).items() if record.enabled]


def limits(settings: IntelligenceSettings) -> intelligence_pb2.AspectLimits:
    """The spec's AspectLimits of this deployment."""
    return intelligence_pb2.AspectLimits(
        min_notes_to_cluster=settings.min_notes_to_cluster,
        max_notes_per_pass=settings.max_notes_per_pass,
        page_size=settings.page_size,
        max_aspects=settings.max_aspects,
        pass_armed=settings.pass_armed,
    )


def aspect_message(record: AspectRecord) -> intelligence_pb2.Aspect:
    """One stored version as the spec's Aspect."""
    return intelligence_pb2.Aspect(
        project=record.project,
        name=record.name,
        label=record.label,
        description=record.description,
        instruction=record.instruction,
        derived=record.derived,
        built_in=record.built_in,
        enabled=record.enabled,
        sort_order=record.sort_order,
        version=record.version,
        created_at=timestamp_of(record.created_at),
    )
