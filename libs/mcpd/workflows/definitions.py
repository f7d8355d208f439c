"""Checking a posted workflow definition body: the schema (`definition.schema.json`, JSON Schema
2020-12), then the checks a schema cannot express (docs/orchestrator.md, "Write-time checks").

Every refusal is an InvalidArgument whose `field` is the JSON path of the offending part of the
body, as `steps[2].retry.attempts`; the caller prefixes it when the body sits deeper in its
request. The body comes back normalised: numbers that arrived as integral floats (a
`google.protobuf.Value` holds only doubles) are integers again.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any

from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError, ValidationError, best_match

from mcpd.runtime.errors import InvalidArgument, quoted
from mcpd.workflows.templates import TemplateError, TemplatePath, paths_in

__all__ = ["SCHEMA_FILE", "check_definition", "definition_schema", "json_path", "normalised"]

SCHEMA_FILE = "definition.schema.json"
# Fields of a node that hold templates (rendered against the run) and guards.
_TEMPLATE_FIELDS = ("input", "key", "items")
_GUARD_FIELDS = ("when",)
# The guard operators in the order of the schema's `guard` forms (after the template string).
_GUARD_OPERATORS = ("eq", "ne", "lt", "lte", "gt", "gte", "in", "exists", "and", "or", "not")


@cache
def definition_schema() -> dict[str, Any]:
    """The definition body's JSON Schema, as shipped in `spec/definition.schema.json`."""
    text = resources.files(__package__).joinpath(SCHEMA_FILE).read_text(encoding="utf-8")
    schema: dict[str, Any] = json.loads(text)
    return schema


@cache
def _validator() -> Draft202012Validator:
    return Draft202012Validator(definition_schema())


def json_path(parts: Sequence[str | int]) -> str:
    """`["steps", 2, "retry"]` as `steps[2].retry`."""
    out = ""
    for part in parts:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else part
    return out


def normalised(value: Any) -> Any:
    """`value` with integral floats as ints, at any depth (booleans stay booleans)."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, Mapping):
        return {key: normalised(item) for key, item in value.items()}
    if isinstance(value, list):
        return [normalised(item) for item in value]
    return value


def check_definition(definition_id: str, body: Any) -> dict[str, Any]:
    """The normalised body of definition `definition_id`, or InvalidArgument naming the field."""
    body = normalised(body)
    error = best_match(_validator().iter_errors(body))
    if error is not None:
        raise _schema_refusal(error)
    assert isinstance(body, dict)  # the schema's top level is an object
    _Checks(definition_id, body).run()
    return body


def _schema_refusal(error: ValidationError) -> InvalidArgument:
    if error.schema is definition_schema()["$defs"]["guard"]:
        error = _guard_error(error)
    parts: list[str | int] = list(error.absolute_path)
    # The offending value, the keyword's value in the schema, and the schema: any JSON.
    instance: Any = error.instance
    limit: Any = error.validator_value
    schema: Any = error.schema
    match error.validator:
        case "additionalProperties" if isinstance(instance, Mapping):
            allowed = schema.get("properties", {})
            extra = sorted(key for key in instance if key not in allowed)
            field = json_path([*parts, extra[0]])
            return InvalidArgument(
                f"{field} is not a field{_node_kind(instance)}; allowed: "
                f"{', '.join(sorted(allowed))}",
                field=field,
            )
        case "required" if isinstance(instance, Mapping):
            missing = next(name for name in limit if name not in instance)
            field = json_path([*parts, missing])
            kind = instance.get("kind")
            where = f" in a {kind} node" if isinstance(kind, str) else ""
            return InvalidArgument(f"{field} is required{where}", field=field)
    field = json_path(parts) or "body"
    return InvalidArgument(f"{field} {_problem(error)}", field=field)


def _problem(error: ValidationError) -> str:
    """What is wrong with the value, without echoing a large one back."""
    instance: Any = error.instance
    limit: Any = error.validator_value
    match error.validator:
        case "minimum":
            return f"must be at least {limit}, got {quoted(instance)}"
        case "maximum":
            return f"must be at most {limit}, got {quoted(instance)}"
        case "exclusiveMinimum":
            return f"must be more than {limit}, got {quoted(instance)}"
        case "minItems":
            return f"has {len(instance)} items; at least {limit} needed"
        case "maxItems":
            return f"has {len(instance)} items; at most {limit} allowed"
        case "minLength":
            return f"must not be shorter than {limit} characters"
        case "type":
            return f"must be of type {_or(limit)}, got {_json_type(instance)}"
        case "enum":
            return f"must be one of {_or(limit)}, got {quoted(instance)}"
        case "const":
            return f"must be {json.dumps(limit)}, got {quoted(instance)}"
        case "pattern":
            return f"must match {limit}, got {quoted(instance)}"
    return f"is not valid: {error.message}"


def _or(values: Any) -> str:
    if isinstance(values, str):
        return values
    return " or ".join(
        json.dumps(value) if not isinstance(value, str) else value for value in values
    )


def _json_type(value: Any) -> str:
    match value:
        case None:
            return "null"
        case bool():
            return "boolean"
        case int() | float():
            return "number"
        case str():
            return "string"
        case list():
            return "array"
    return "object"


def _guard_error(error: ValidationError) -> ValidationError:
    """What is wrong with a guard that matches no form: its operator's own error when it names
    a known one, else an error saying which operators there are."""
    guard = error.instance
    operators = _GUARD_OPERATORS
    if isinstance(guard, Mapping) and len(guard) == 1:
        (operator,) = guard
        if operator in operators:
            form = operators.index(operator) + 1  # its place among the guard's oneOf forms
            inner = [e for e in error.context or () if e.relative_schema_path[0] == form]
            found: ValidationError | None = best_match(inner)
            if found is not None:
                return found
    known = ", ".join(operators)
    return ValidationError(
        f"a guard is a template string or an object with one operator of: {known}",
        path=error.absolute_path,
        validator="guard",
    )


def _node_kind(instance: Mapping[str, Any]) -> str:
    kind = instance.get("kind")
    return f" of a {kind} node" if isinstance(kind, str) else ""


@dataclass(frozen=True, slots=True)
class _Scope:
    """What a template at some place may read: the nodes declared before it, and the
    fan-out variables around it."""

    declared: frozenset[str]
    item: bool = False
    iteration: bool = False


class _Checks:
    """The write-time checks of one schema-valid body."""

    def __init__(self, definition_id: str, body: dict[str, Any]) -> None:
        self._id = definition_id
        self._body = body

    def run(self) -> None:
        steps: list[dict[str, Any]] = self._body["steps"]
        self._unique_ids(steps)
        if "input_schema" in self._body:
            self._input_schema(self._body["input_schema"])
        declared: set[str] = set()
        for index, node in enumerate(steps):
            self._node(["steps", index], node, frozenset(declared))
            declared.add(node["id"])
        if "output" in self._body:
            self._template(["output"], self._body["output"], _Scope(frozenset(declared)))

    def _unique_ids(self, steps: list[dict[str, Any]]) -> None:
        seen: dict[str, str] = {}
        for path, node_id in _ids(steps):
            field = json_path([*path, "id"])
            if node_id in seen:
                raise InvalidArgument(
                    f"{field}: id {node_id!r} is already used at {seen[node_id]}", field=field
                )
            seen[node_id] = field

    def _input_schema(self, schema: Any) -> None:
        try:
            Draft202012Validator.check_schema(schema)
        except SchemaError as error:
            field = json_path(["input_schema", *error.absolute_path])
            raise InvalidArgument(
                f"{field}: input_schema is not a valid JSON Schema 2020-12 document: "
                f"{error.message}",
                field=field,
            ) from None

    def _node(self, path: list[str | int], node: dict[str, Any], declared: frozenset[str]) -> None:
        scope = _Scope(declared)
        for name in _GUARD_FIELDS:
            if name in node:
                self._guard([*path, name], node[name], scope)
        for name in _TEMPLATE_FIELDS:
            if name in node:
                self._template([*path, name], node[name], scope)
        match node["kind"]:
            case "sleep_until":
                self._template([*path, "until"], node["until"], scope)
            case "parallel":
                for index, branch in enumerate(node["branches"]):
                    self._claimable([*path, "branches", index], branch, scope)
            case "foreach":
                inside = _Scope(declared, item=True)
                self._claimable([*path, "body"], node["body"], inside)
            case "loop":
                # Inside a loop, `steps.<body id>` reads the iteration that just ended.
                inside = _Scope(declared | {node["body"]["id"]}, iteration=True)
                self._claimable([*path, "body"], node["body"], inside)
                if "until" in node:
                    self._guard([*path, "until"], node["until"], inside)
            case "subworkflow":
                if node["definition_id"] == self._id:
                    field = json_path([*path, "definition_id"])
                    raise InvalidArgument(
                        f"{field}: a subworkflow may not run its own definition {self._id!r}",
                        field=field,
                    )

    def _claimable(self, path: list[str | int], step: dict[str, Any], scope: _Scope) -> None:
        if "input" in step:
            self._template([*path, "input"], step["input"], scope)

    def _guard(self, path: list[str | int], guard: Any, scope: _Scope) -> None:
        if isinstance(guard, str):
            self._template(path, guard, scope)
            return
        ((operator, operand),) = guard.items()  # the schema allows one operator per object
        where = [*path, operator]
        if operator == "exists":
            self._exists(where, operand, scope)
        elif operator == "not":
            self._guard(where, operand, scope)
        elif operator in ("and", "or"):
            for index, inner in enumerate(operand):
                self._guard([*where, index], inner, scope)
        else:
            for index, side in enumerate(operand):
                self._template([*where, index], side, scope)

    def _exists(self, path: list[str | int], operand: str, scope: _Scope) -> None:
        found = self._paths(path, operand, scope)
        if len(found) != 1 or operand != f"${{{found[0].text}}}":
            field = json_path(path)
            raise InvalidArgument(
                f'{field}: exists takes exactly one "${{path}}", got {operand!r}', field=field
            )

    def _template(self, path: list[str | int], template: Any, scope: _Scope) -> None:
        self._paths(path, template, scope)

    def _paths(self, path: list[str | int], template: Any, scope: _Scope) -> list[TemplatePath]:
        """The template's paths, each checked against `scope`."""
        checked: list[TemplatePath] = []
        for where, value in _strings(path, template):
            try:
                found = list(paths_in(value))
            except TemplateError as error:
                field = json_path(where)
                raise InvalidArgument(f"{field}: {error}", field=field) from None
            for parsed in found:
                self._in_scope(where, parsed, scope)
                checked.append(parsed)
        return checked

    def _in_scope(self, where: list[str | int], parsed: TemplatePath, scope: _Scope) -> None:
        field = json_path(where)
        reference = f"${{{parsed.text}}}"
        if parsed.root in ("item", "index") and not scope.item:
            raise InvalidArgument(
                f"{field}: {reference} reads {parsed.root}, which only a foreach body has",
                field=field,
            )
        if parsed.root == "iteration" and not scope.iteration:
            raise InvalidArgument(
                f"{field}: {reference} reads iteration, which only a loop body and its until have",
                field=field,
            )
        step = parsed.step_id
        if step is not None and step not in scope.declared:
            raise InvalidArgument(
                f"{field}: {reference} reads step {step!r}, which is not a node declared "
                "earlier in steps",
                field=field,
            )


def _ids(steps: list[dict[str, Any]]) -> Iterator[tuple[list[str | int], str]]:
    """Every id of the document (nodes, branches, bodies) with where it is."""
    for index, node in enumerate(steps):
        path: list[str | int] = ["steps", index]
        yield path, node["id"]
        for number, branch in enumerate(node.get("branches", ())):
            yield [*path, "branches", number], branch["id"]
        if "body" in node:
            yield [*path, "body"], node["body"]["id"]


def _strings(path: list[str | int], value: Any) -> Iterator[tuple[list[str | int], str]]:
    """Every string inside a template, with where it is."""
    if isinstance(value, str):
        yield path, value
    elif isinstance(value, Mapping):
        for key, item in value.items():
            yield from _strings([*path, key], item)
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _strings([*path, index], item)
