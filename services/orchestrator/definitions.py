"""Definitions: posted documents checked (`mcpd.workflows`) and stored under the versioning rule,
listed and read back.

A refusal names the field by its JSON path inside the body, as `steps[2].retry.attempts`
(docs/orchestrator.md); a document inside a worker registration is named with its place in the
request before it (`definitions[1].steps[2].retry.attempts`). A registration's documents are
stored together or not at all.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Protocol

from mcpd.model.v1 import enums_pb2, runs_pb2
from mcpd.orchestrator.v1 import orchestrator_service_pb2 as rpc
from mcpd.runtime import cursors
from mcpd.runtime.clock import Clock, epoch_nanos
from mcpd.runtime.errors import Conflict, InvalidArgument, NotFound, quoted
from mcpd.signals.messages import python_of, timestamp_of, value_of
from mcpd.storage.interfaces import DefinitionReads, DefinitionWrites
from mcpd.storage.run_records import NewDefinition, StoredDefinition
from mcpd.workflows import check_definition

__all__ = ["DefinitionStore", "Definitions"]

WORKFLOW = "workflow"
_ID = re.compile(r"[a-z][a-z0-9_]*")
_LIST = "definitions"
_POSITION = (str,)


class DefinitionStore(DefinitionWrites, DefinitionReads, Protocol):
    """What definitions need of the run store."""


class Definitions:
    """Posting, listing and reading definitions of a project."""

    def __init__(self, store: DefinitionStore, clock: Clock) -> None:
        self._store = store
        self._clock = clock

    def create(
        self, project: str, documents: Sequence[runs_pb2.DefinitionDocument], *, prefix: str = ""
    ) -> list[runs_pb2.DefinitionVersion]:
        """Check every document, then store them all in one transaction (none when one is
        refused); `prefix` is where the documents sit in the request (`definitions`), empty for a
        request that is one document."""
        checked = [
            _checked(document, f"{prefix}[{index}]." if prefix else "")
            for index, document in enumerate(documents)
        ]
        now = epoch_nanos(self._clock.now())
        try:
            placed = self._store.put_definitions(project, checked, now=now)
        except Conflict as error:
            if not prefix:
                raise
            where = f"{prefix}[{error.metadata.get('index', '0')}]."
            raise Conflict(
                f"{where}{error.message}", field=f"{where}{error.field}", reason=error.reason
            ) from None
        return [
            runs_pb2.DefinitionVersion(id=p.id, version=p.version, assigned=p.assigned)
            for p in placed
        ]

    def list(self, request: rpc.ListDefinitionsRequest) -> rpc.ListDefinitionsResponse:
        """A page of the project's definitions, the highest version of each, in id order."""
        page = cursors.paging(request, _LIST, _POSITION)
        after = None if page.after is None else str(page.after[0])
        found = self._store.list_definitions(request.project, after=after, limit=page.limit + 1)
        answer = rpc.ListDefinitionsResponse()
        shown = cursors.page_of(request, _LIST, found, page.limit, _definition_key, answer.page)
        answer.definitions.extend(_message(d) for d in shown)
        return answer

    def get(self, request: rpc.GetDefinitionVersionRequest) -> runs_pb2.Definition:
        """One version of one definition; NotFound naming what is missing."""
        found = self._store.definition(request.project, request.id, request.version)
        if found is None:
            raise NotFound(
                f"definition {quoted(request.id)} has no version {request.version}",
                field="version",
            )
        return _message(found)


def _checked(document: runs_pb2.DefinitionDocument, prefix: str) -> NewDefinition:
    """The document checked and normalised; InvalidArgument naming the field after `prefix`."""
    definition_id = document.id
    if not _ID.fullmatch(definition_id):
        raise _invalid(prefix, "id", f"must match ^[a-z][a-z0-9_]*$, got {quoted(definition_id)}")
    if document.HasField("kind") and document.kind != enums_pb2.DEFINITION_KIND_WORKFLOW:
        raise _invalid(prefix, "kind", "only workflow definitions are served")
    version = document.version if document.HasField("version") else None
    if version == 0:
        raise _invalid(prefix, "version", "versions start at 1")
    if not document.HasField("body"):
        raise _invalid(prefix, "body", "is required: the definition's steps")
    try:
        body = check_definition(definition_id, python_of(document.body))
    except InvalidArgument as error:
        raise _within(error, prefix) from None
    return NewDefinition(id=definition_id, kind=WORKFLOW, body=body, version=version)


def _definition_key(stored: StoredDefinition) -> list[str]:
    return [stored.id]


def _message(stored: StoredDefinition) -> runs_pb2.Definition:
    return runs_pb2.Definition(
        project=stored.project,
        id=stored.id,
        version=stored.version,
        kind=enums_pb2.DEFINITION_KIND_WORKFLOW,
        body=value_of(stored.body),
        created_at=timestamp_of(stored.created_at),
    )


def _invalid(prefix: str, field: str, why: str) -> InvalidArgument:
    return InvalidArgument(f"{prefix}{field} {why}", field=f"{prefix}{field}")


def _within(error: InvalidArgument, prefix: str) -> InvalidArgument:
    """A body's refusal as the request's: its field prefixed with where the body sits."""
    if not prefix:
        return error
    return InvalidArgument(
        f"{prefix}{error.message}", field=f"{prefix}{error.field or ''}", reason=error.reason
    )
