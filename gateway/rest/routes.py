"""Matching a request path against every path template at once.

A trie over path segments. At each segment a literal child is tried before the variable child, so
`/v1/api/experiments/compare` wins over `/v1/api/experiments/{experiment_id}` wherever the two are
registered, and a template's specificity never depends on declaration order. A path that reaches
templates without one for the request's method is a 405 (with the methods it does have), not a 404.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from typing import Generic, TypeVar
from urllib.parse import unquote

from gateway.rest.templates import PathTemplate, Variable

T = TypeVar("T")


@dataclasses.dataclass(slots=True)
class _Node(Generic[T]):
    literals: dict[str, _Node[T]] = dataclasses.field(default_factory=dict)
    variable: _Node[T] | None = None
    # HTTP method -> (template, target), for templates ending at this node.
    targets: dict[str, tuple[PathTemplate, T]] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass(frozen=True, slots=True)
class Match(Generic[T]):
    """The target for a request, with its path variables by dotted field name (decoded)."""

    target: T
    template: PathTemplate
    params: dict[str, str]


@dataclasses.dataclass(frozen=True, slots=True)
class MethodNotAllowed:
    """The path is known but not for this method; `allowed` lists the methods it has."""

    allowed: tuple[str, ...]


class Router(Generic[T]):
    """Maps (method, path) to one of the targets registered with `add`."""

    def __init__(self) -> None:
        self._root: _Node[T] = _Node()

    def add(self, http_method: str, template: PathTemplate, target: T) -> None:
        """Register `target`; raises ValueError if an equivalent template has the method already."""
        node = self._root
        for segment in template.segments:
            if isinstance(segment, Variable):
                if node.variable is None:
                    node.variable = _Node()
                node = node.variable
            else:
                node = node.literals.setdefault(segment, _Node())
        if http_method in node.targets:
            other = node.targets[http_method][0].text
            raise ValueError(f"{http_method} {template.text} collides with {other}")
        node.targets[http_method] = (template, target)

    def match(self, http_method: str, raw_path: str) -> Match[T] | MethodNotAllowed | None:
        """The most specific template matching `raw_path` (undecoded) that has `http_method`.

        Segments are percent-decoded after splitting, so an encoded `/` stays inside its segment.
        None means no template matches the path at all.
        """
        if not raw_path.startswith("/"):
            return None
        segments = [unquote(s) for s in raw_path[1:].split("/")]
        first_leaf: _Node[T] | None = None
        for leaf in self._leaves(self._root, segments, 0):
            first_leaf = first_leaf or leaf
            found = leaf.targets.get(http_method)
            if found is not None:
                template, target = found
                params = {
                    segment.name: value
                    for segment, value in zip(template.segments, segments, strict=True)
                    if isinstance(segment, Variable)
                }
                return Match(target, template, params)
        if first_leaf is None:
            return None
        return MethodNotAllowed(tuple(sorted(first_leaf.targets)))

    def _leaves(self, node: _Node[T], segments: list[str], i: int) -> Iterator[_Node[T]]:
        # Depth first, literal before variable: leaves come out most specific first.
        if i == len(segments):
            if node.targets:
                yield node
            return
        segment = segments[i]
        child = node.literals.get(segment)
        if child is not None:
            yield from self._leaves(child, segments, i + 1)
        # A variable matches exactly one non-empty segment (`*` in the template grammar).
        if node.variable is not None and segment:
            yield from self._leaves(node.variable, segments, i + 1)
