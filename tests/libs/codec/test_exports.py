"""The codec's public surface, pinned: a change here is an API change for every caller."""

from __future__ import annotations

from mcpd import codec


def test_public_names() -> None:
    assert sorted(codec.__all__) == [
        "CodecError",
        "EncodeError",
        "EnumNames",
        "SchemaRefs",
        "UNKNOWN_FIELD",
        "decode",
        "decode_query_param",
        "encode",
        "enum_names",
        "enum_schema",
        "field_schema",
        "is_inline",
        "message_schema",
        "nanos_to_json",
        "query_bindable",
        "required_fields",
    ]
    for name in codec.__all__:
        assert getattr(codec, name) is not None


def test_codec_errors_are_invalid_argument() -> None:
    from mcpd.runtime.errors import InvalidArgument

    assert issubclass(codec.CodecError, InvalidArgument)
    assert not issubclass(codec.EncodeError, InvalidArgument)
