"""Every enum value and entity field of spec/data-model.md exists in the compiled protos."""

from __future__ import annotations

import re

import pytest
from google.protobuf.descriptor import Descriptor, EnumDescriptor, FieldDescriptor

from mcpd.model.v1 import (
    account_pb2,
    enums_pb2,
    evaluation_pb2,
    intelligence_pb2,
    query_pb2,
    runs_pb2,
    telemetry_pb2,
)
from tests.contract import spec_tables

SPEC = spec_tables.load()
MODULES = [
    account_pb2,
    enums_pb2,
    evaluation_pb2,
    intelligence_pb2,
    query_pb2,
    runs_pb2,
    telemetry_pb2,
]
MESSAGES: dict[str, Descriptor] = {
    name: desc for m in MODULES for name, desc in m.DESCRIPTOR.message_types_by_name.items()
}
ENUMS: dict[str, EnumDescriptor] = {
    name: desc for m in MODULES for name, desc in m.DESCRIPTOR.enum_types_by_name.items()
}
SCALARS = {
    "string": FieldDescriptor.TYPE_STRING,
    "u64": FieldDescriptor.TYPE_UINT64,
    "u32": FieldDescriptor.TYPE_UINT32,
    "i64": FieldDescriptor.TYPE_INT64,
    "f64": FieldDescriptor.TYPE_DOUBLE,
    "bool": FieldDescriptor.TYPE_BOOL,
}


def _upper_snake(name: str) -> str:
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", name).upper()


def test_spec_is_what_the_issue_counts() -> None:
    # The foundation issue counts 39 enumerations with 206 values and 118 entities with 716
    # fields; a parser that silently dropped tables would fail here.
    assert len(SPEC.enums) == 39
    assert sum(len(values) for values in SPEC.enums.values()) == 206
    assert len(SPEC.entities) == 118
    assert sum(len(fields) for fields in SPEC.entities.values()) == 716


@pytest.mark.parametrize("enum_name", sorted(SPEC.enums))
def test_enum_values_exist_in_buf_standard_style(enum_name: str) -> None:
    descriptor = ENUMS[enum_name]
    prefix = _upper_snake(enum_name)
    names = [value.name for value in descriptor.values]
    assert names[0] == f"{prefix}_UNSPECIFIED"
    assert descriptor.values[0].number == 0
    expected = [f"{prefix}_{value.upper()}" for value in SPEC.enums[enum_name]]
    assert names[1:] == expected


@pytest.mark.parametrize("entity_name", sorted(SPEC.entities))
def test_entity_fields_exist_with_matching_types(entity_name: str) -> None:
    descriptor = MESSAGES[entity_name]
    for spec_field in SPEC.entities[entity_name]:
        field = descriptor.fields_by_name.get(spec_field.name)
        assert field is not None, f"{entity_name}.{spec_field.name} missing"
        where = f"{entity_name}.{spec_field.name}"
        assert field.is_repeated == spec_field.repeated, where
        _assert_type(field, spec_field.base_type, where)
        if not spec_field.repeated and field.type != FieldDescriptor.TYPE_MESSAGE:
            # Absent differs from zero exactly where the spec does not require the field.
            assert field.has_presence == (not spec_field.required), where


def _assert_type(field: FieldDescriptor, spec_type: str, where: str) -> None:
    if spec_type in SCALARS:
        assert field.type == SCALARS[spec_type], where
        return
    if spec_type in SPEC.enums:
        assert field.enum_type is not None, where
        assert field.enum_type.full_name == f"mcpd.model.v1.{spec_type}", where
        return
    expected = {
        "timestamp": "google.protobuf.Timestamp",
        "json": "google.protobuf.Value",
    }.get(spec_type, f"mcpd.model.v1.{spec_type}")
    assert field.message_type is not None, where
    assert field.message_type.full_name == expected, where
