"""Guards of a workflow definition (`when`, a loop's `until`), evaluated against a run.

A guard is a template string, whose rendered value's JSON truthiness decides (`false`, `null`,
`0`, `""`, `[]` and `{}` are false), or one operator object: `eq`, `ne`, `lt`, `lte`, `gt`,
`gte` over two templates (ordering compares numbers with numbers and strings with strings;
anything else is false), `in` (an element of an array, or a substring of a string), `exists`
(the path resolves to a value, null included), `and`, `or`, `not`. Booleans are not numbers
here, as in JSON: `true` equals `true` and never `1`.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Mapping
from typing import Any

from mcpd.workflows.templates import Missing, paths_in, render, resolve

__all__ = ["holds", "truthy"]

_ORDERINGS: Mapping[str, Callable[[Any, Any], bool]] = {
    "lt": operator.lt,
    "lte": operator.le,
    "gt": operator.gt,
    "gte": operator.ge,
}


def truthy(value: Any) -> bool:
    """JSON truthiness: false, null, 0, "", [] and {} are false."""
    if value is None or value is False:
        return False
    if isinstance(value, bool):
        return True
    if isinstance(value, int | float):
        return value != 0
    if isinstance(value, str | list | dict):
        return len(value) > 0
    return True


def holds(guard: Any, scope: Mapping[str, Any]) -> bool:
    """Whether a (checked) guard holds for the run `scope` describes (`templates.resolve`)."""
    if isinstance(guard, str):
        return truthy(render(guard, scope))
    ((name, operand),) = guard.items()
    match name:
        case "and":
            return all(holds(inner, scope) for inner in operand)
        case "or":
            return any(holds(inner, scope) for inner in operand)
        case "not":
            return not holds(operand, scope)
        case "exists":
            (path,) = paths_in(operand)
            return resolve(path, scope) is not Missing
    left, right = (render(side, scope) for side in operand)
    match name:
        case "eq":
            return _same(left, right)
        case "ne":
            return not _same(left, right)
        case "in":
            return _contains(right, left)
    return _ordered(name, left, right)


def _same(left: Any, right: Any) -> bool:
    """JSON equality: a boolean equals only a boolean, numbers compare by value."""
    if isinstance(left, bool) or isinstance(right, bool):
        return type(left) is type(right) and left == right
    if isinstance(left, list) and isinstance(right, list):
        return len(left) == len(right) and all(
            _same(a, b) for a, b in zip(left, right, strict=True)
        )
    if isinstance(left, dict) and isinstance(right, dict):
        return left.keys() == right.keys() and all(_same(left[k], right[k]) for k in left)
    return bool(left == right)


def _contains(container: Any, item: Any) -> bool:
    if isinstance(container, list):
        return any(_same(item, element) for element in container)
    if isinstance(container, str) and isinstance(item, str):
        return item in container
    return False


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _ordered(name: str, left: Any, right: Any) -> bool:
    compare = _ORDERINGS[name]
    if _number(left) and _number(right):
        return compare(left, right)
    if isinstance(left, str) and isinstance(right, str):
        return compare(left, right)
    return False
