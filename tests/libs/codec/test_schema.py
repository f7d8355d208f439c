"""The schemas describe exactly what encode writes: every encoded sample validates against them."""

from __future__ import annotations

import copy
from typing import Any

import jsonschema
import pytest
from google.protobuf.descriptor import Descriptor, EnumDescriptor
from google.protobuf.message_factory import GetMessageClass

from mcpd import codec
from mcpd.model.v1 import enums_pb2, query_pb2, telemetry_pb2
from tests.libs.codec.samples import all_message_types, sample

MESSAGES = all_message_types()


class Registry:
    """A `codec.SchemaRefs` collecting every schema under `$defs`, keyed by full name."""

    def __init__(self) -> None:
        self.defs: dict[str, dict[str, Any]] = {}

    def message_ref(self, message: Descriptor, *, for_input: bool) -> str:
        key = message.full_name + (":in" if for_input else "")
        if key not in self.defs:
            self.defs[key] = {}
            self.defs[key] = codec.message_schema(message, self, for_input=for_input)
        return f"#/$defs/{key}"

    def enum_ref(self, enum: EnumDescriptor) -> str:
        self.defs.setdefault(enum.full_name, codec.enum_schema(enum))
        return f"#/$defs/{enum.full_name}"

    def validator(self, message: Descriptor, *, for_input: bool = False) -> Any:
        root = {"$ref": self.message_ref(message, for_input=for_input)}
        return jsonschema.Draft202012Validator({**root, "$defs": self.defs})


REGISTRY = Registry()


@pytest.mark.parametrize("variant", [0, 1])
@pytest.mark.parametrize("descriptor", MESSAGES, ids=lambda d: d.full_name)
def test_encoded_samples_validate_both_ways(descriptor: Descriptor, variant: int) -> None:
    encoded = codec.encode(sample(descriptor, variant))
    REGISTRY.validator(descriptor).validate(encoded)
    REGISTRY.validator(descriptor, for_input=True).validate(encoded)


@pytest.mark.parametrize("descriptor", MESSAGES, ids=lambda d: d.full_name)
def test_encoded_empty_messages_validate(descriptor: Descriptor) -> None:
    REGISTRY.validator(descriptor).validate(codec.encode(GetMessageClass(descriptor)()))


def test_output_schema_requires_always_written_fields() -> None:
    schema = codec.message_schema(telemetry_pb2.Span.DESCRIPTOR, REGISTRY)
    required = set(schema["required"])
    assert {"trace_id", "span_id", "name", "is_root", "is_event", "links", "tags"} <= required
    # Presence fields, message fields and enums (UNSPECIFIED is omitted) are not required.
    assert not required & {"parent_span_id", "duration_ns", "start_time", "usage", "kind", "input"}
    encoded = codec.encode(sample(telemetry_pb2.Span.DESCRIPTOR))
    del encoded["trace_id"]
    with pytest.raises(jsonschema.ValidationError):
        REGISTRY.validator(telemetry_pb2.Span.DESCRIPTOR).validate(encoded)


def test_input_schema_requires_nothing_and_refuses_unknown_fields() -> None:
    validator = REGISTRY.validator(telemetry_pb2.Span.DESCRIPTOR, for_input=True)
    validator.validate({})
    with pytest.raises(jsonschema.ValidationError):
        validator.validate({"traceId": "x"})


def test_wire_types_in_the_schema() -> None:
    span = codec.message_schema(telemetry_pb2.Span.DESCRIPTOR, REGISTRY)["properties"]
    assert span["start_time"]["type"] == "string"
    assert span["start_time"]["format"] == "date-time"
    assert span["duration_ns"]["type"] == "integer"
    assert span["duration_ns"]["maximum"] == 2**64 - 1
    assert set(span["input"]) <= {"description"}  # any JSON at all
    assert span["tags"] == {"type": "array", "items": {"type": "string"}}
    caps = codec.message_schema(query_pb2.StoreCapabilities.DESCRIPTOR, REGISTRY)
    ref = caps["properties"]["text_search"]["$ref"]
    assert REGISTRY.defs[ref.rsplit("/", 1)[1]]["enum"] == ["none", "substring", "words"]


def test_a_wrong_enum_name_fails_validation() -> None:
    encoded = codec.encode(sample(query_pb2.StoreCapabilities.DESCRIPTOR))
    broken = copy.deepcopy(encoded)
    broken["text_search"] = "TEXT_SEARCH_WORDS"
    with pytest.raises(jsonschema.ValidationError):
        REGISTRY.validator(query_pb2.StoreCapabilities.DESCRIPTOR).validate(broken)


def test_descriptions_come_from_the_callback() -> None:
    notes = {
        "mcpd.model.v1.TextSearch": "What q matches.",
        "mcpd.model.v1.TextSearch.TEXT_SEARCH_WORDS": "Whole words.",
        "mcpd.model.v1.HealthStatus.status": "ok or degraded.",
    }
    enum = codec.enum_schema(enums_pb2.TextSearch.DESCRIPTOR, notes.get)
    assert (
        enum["description"] == "What q matches.\n\n- `none`\n- `substring`\n- `words`: Whole words."
    )
    health = codec.message_schema(query_pb2.HealthStatus.DESCRIPTOR, REGISTRY, describe=notes.get)
    assert health["properties"]["status"]["description"] == "ok or degraded."
    assert "description" not in health
