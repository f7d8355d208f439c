"""Shapes mcpd's protos do not use yet (maps, oneofs, bytes, 32-bit types), on a test-only message.

The codec is generic over descriptors; these keep the branches a future proto will reach honest.
"""

from __future__ import annotations

from typing import Any

import pytest
from google.protobuf import descriptor_pb2, descriptor_pool
from google.protobuf.message import Message
from google.protobuf.message_factory import GetMessageClass

from mcpd import codec

F = descriptor_pb2.FieldDescriptorProto


def _kitchen_class() -> type[Message]:
    file = descriptor_pb2.FileDescriptorProto(
        name="codec_kitchen.proto", package="codectest", syntax="proto3"
    )
    message = file.message_type.add(name="Kitchen")
    entry = message.nested_type.add(name="CountsEntry")
    entry.options.map_entry = True
    entry.field.add(name="key", number=1, type=F.TYPE_STRING, label=F.LABEL_OPTIONAL)
    entry.field.add(name="value", number=2, type=F.TYPE_INT64, label=F.LABEL_OPTIONAL)
    scalars = [
        ("small", F.TYPE_INT32),
        ("ratio", F.TYPE_FLOAT),
        ("raw", F.TYPE_BYTES),
        ("delta", F.TYPE_SINT64),
    ]
    for number, (name, kind) in enumerate(scalars, start=1):
        message.field.add(name=name, number=number, type=kind, label=F.LABEL_OPTIONAL)
    message.field.add(
        name="counts",
        number=5,
        type=F.TYPE_MESSAGE,
        label=F.LABEL_REPEATED,
        type_name=".codectest.Kitchen.CountsEntry",
    )
    message.oneof_decl.add(name="choice")
    message.field.add(
        name="text", number=6, type=F.TYPE_STRING, label=F.LABEL_OPTIONAL, oneof_index=0
    )
    message.field.add(
        name="number", number=7, type=F.TYPE_UINT32, label=F.LABEL_OPTIONAL, oneof_index=0
    )
    pool = descriptor_pool.DescriptorPool()
    pool.Add(file)
    return GetMessageClass(pool.FindMessageTypeByName("codectest.Kitchen"))


Kitchen = _kitchen_class()


def test_round_trip_of_every_generic_shape() -> None:
    document = {
        "small": -5,
        "ratio": 0.5,
        "raw": "AAEC/w==",
        "delta": -(2**63),
        "counts": {"a": 1, "b": 2**53 + 1},
        "number": 7,
    }
    message = codec.decode(document, Kitchen)
    message_any: Any = message
    assert message_any.raw == b"\x00\x01\x02\xff"
    assert dict(message_any.counts) == {"a": 1, "b": 2**53 + 1}
    assert message_any.WhichOneof("choice") == "number"
    assert codec.encode(message) == document


def test_unset_oneof_and_empty_map() -> None:
    assert codec.encode(Kitchen()) == {
        "small": 0,
        "ratio": 0.0,
        "raw": "",
        "delta": 0,
        "counts": {},
    }


def test_urlsafe_and_unpadded_base64_are_accepted() -> None:
    message: Any = codec.decode({"raw": "AAEC_w"}, Kitchen)
    assert message.raw == b"\x00\x01\x02\xff"


@pytest.mark.parametrize(
    ("document", "field"),
    [
        ({"text": "a", "number": 1}, "number"),
        ({"small": 2**31}, "small"),
        ({"small": "5"}, "small"),
        ({"ratio": 1e39}, "ratio"),
        ({"raw": "not base64!"}, "raw"),
        ({"counts": []}, "counts"),
        ({"counts": {"a": "x"}}, "counts.a"),
    ],
)
def test_generic_refusals(document: dict[str, Any], field: str) -> None:
    with pytest.raises(codec.CodecError) as caught:
        codec.decode(document, Kitchen)
    assert caught.value.field == field
