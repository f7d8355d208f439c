"""Sample messages for codec tests: every message type of mcpd, filled field by field.

Hypothesis is not a dependency, so breadth comes from walking the descriptors instead: every
field of every message gets a value that exercises its wire rule (a 64-bit integer above 2**53,
a timestamp with milliseconds and an offset-free UTC form, a json field holding nested JSON,
the last value of an enum), and a `variant` shifts the choices so two samples differ.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Iterator
from typing import Any

from google.protobuf.descriptor import Descriptor, FieldDescriptor
from google.protobuf.message import Message
from google.protobuf.message_factory import GetMessageClass
from google.protobuf.struct_pb2 import Struct, Value

import mcpd

_INT_SAMPLES: dict[int, tuple[int, ...]] = {
    FieldDescriptor.TYPE_INT32: (-(2**31), 7, 2**31 - 1),
    FieldDescriptor.TYPE_UINT32: (0, 2**32 - 1, 42),
    FieldDescriptor.TYPE_INT64: (-(2**63), 2**53 + 1, 2**63 - 1),
    FieldDescriptor.TYPE_UINT64: (2**64 - 1, 0, 2**53 + 1),
}
_TIMESTAMPS = ((1_777_488_151, 125_000_000), (0, 0), (-62_135_596_800, 999_000_000))


def all_message_types() -> list[Descriptor]:
    """Every message declared in mcpd's generated modules (nested ones included), by full name."""
    found: dict[str, Descriptor] = {}
    for module in pkgutil.walk_packages(mcpd.__path__, "mcpd."):
        if not module.name.endswith("_pb2") or module.name.endswith("_grpc"):
            continue
        file = importlib.import_module(module.name).DESCRIPTOR
        for message in file.message_types_by_name.values():
            for descriptor in _with_nested(message):
                found[descriptor.full_name] = descriptor
    return [found[name] for name in sorted(found)]


def _with_nested(message: Descriptor) -> Iterator[Descriptor]:
    if message.GetOptions().map_entry:
        return
    yield message
    for nested in message.nested_types:
        yield from _with_nested(nested)


def json_sample(variant: int) -> Any:
    """A JSON value exercising every JSON type; numbers are exactly representable doubles."""
    samples: list[Any] = [
        {"messages": [{"role": "user", "content": "héllo"}], "n": 3, "ratio": 0.25, "ok": True},
        ["a", 1, None, False, {"deep": [[]]}, -2.5],
        "plain text",
        None,
    ]
    return samples[variant % len(samples)]


def fill(message: Message, variant: int = 0, depth: int = 0) -> Message:
    """Set every field of `message` (recursively, to a bounded depth) and return it."""
    descriptor: Descriptor = message.DESCRIPTOR  # type: ignore[assignment]  # upb union
    for field in descriptor.fields:
        if field.is_repeated:
            container = getattr(message, field.name)
            for i in range(2):
                if field.type == FieldDescriptor.TYPE_MESSAGE:
                    if depth < 3:
                        _fill_message(container.add(), variant + i, depth + 1)
                else:
                    container.append(_scalar(field, variant + i))
        elif field.type == FieldDescriptor.TYPE_MESSAGE:
            if depth < 3:
                _fill_message(getattr(message, field.name), variant, depth + 1)
        else:
            setattr(message, field.name, _scalar(field, variant))
    return message


def _fill_message(target: Message, variant: int, depth: int) -> None:
    name = target.DESCRIPTOR.full_name
    if name == "google.protobuf.Timestamp":
        seconds, nanos = _TIMESTAMPS[variant % len(_TIMESTAMPS)]
        target.seconds, target.nanos = seconds, nanos  # type: ignore[attr-defined]
    elif name == "google.protobuf.Value":
        assert isinstance(target, Value)
        _set_json(target, json_sample(variant))
    elif name == "google.protobuf.Struct":
        assert isinstance(target, Struct)
        target.update({"variant": variant, "sample": json_sample(variant)})
    else:
        fill(target, variant, depth)


def _set_json(target: Value, data: Any) -> None:
    if data is None:
        target.null_value = 0  # type: ignore[assignment]
    elif isinstance(data, bool):
        target.bool_value = data
    elif isinstance(data, int | float):
        target.number_value = data
    elif isinstance(data, str):
        target.string_value = data
    elif isinstance(data, dict):
        target.struct_value.update(data)
    else:
        target.list_value.extend(data)


def _scalar(field: FieldDescriptor, variant: int) -> Any:
    kind = field.type
    if kind == FieldDescriptor.TYPE_STRING:
        return ["", "abc", "ünïcode ✓", "with, comma"][variant % 4]
    if kind == FieldDescriptor.TYPE_BOOL:
        return variant % 2 == 0
    if kind == FieldDescriptor.TYPE_BYTES:
        return [b"", b'{"a":1}', b"\x00\xff\xfe", "ünïcode".encode()][variant % 4]
    if kind == FieldDescriptor.TYPE_DOUBLE:
        return [0.0, 1.5, -2.25e10, 3.0][variant % 4]
    if kind == FieldDescriptor.TYPE_ENUM:
        assert field.enum_type is not None
        numbers = [v.number for v in field.enum_type.values if v.number != 0]
        return numbers[-1 - variant % len(numbers)]
    samples = _INT_SAMPLES[kind]
    return samples[variant % len(samples)]


def sample(descriptor: Descriptor, variant: int = 0) -> Message:
    """A filled instance of `descriptor`'s message class."""
    return fill(GetMessageClass(descriptor)(), variant)
