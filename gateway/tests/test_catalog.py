"""What `load_rpcs` refuses at load, on small descriptors built here rather than mcpd's own."""

from __future__ import annotations

import pytest
from google.api import annotations_pb2, httpbody_pb2
from google.protobuf import any_pb2, descriptor_pb2, descriptor_pool
from google.protobuf.descriptor import FileDescriptor

from gateway.rest.catalog import load_rpcs
from mcpd.options.v1 import rendering_pb2

HTTP_BODY = ".google.api.HttpBody"


def service_file(output: str, json_body: str | None) -> FileDescriptor:
    """A file in its own pool: `Svc.Get(Req) returns (output)` on GET /doc, maybe with json_body."""
    proto = descriptor_pb2.FileDescriptorProto(
        name="gateway_test/doc.proto",
        package="gateway_test",
        syntax="proto3",
        dependency=["google/api/httpbody.proto"],
    )
    proto.message_type.add(name="Req")
    proto.message_type.add(name="Doc")
    method = proto.service.add(name="Svc").method.add(
        name="Get", input_type=".gateway_test.Req", output_type=output
    )
    method.options.Extensions[annotations_pb2.http].get = "/doc"
    if json_body is not None:
        method.options.Extensions[rendering_pb2.json_body] = json_body
    pool = descriptor_pool.DescriptorPool()
    for dependency in (any_pb2.DESCRIPTOR, httpbody_pb2.DESCRIPTOR):
        pool.AddSerializedFile(dependency.serialized_pb)
    pool.Add(proto)
    return pool.FindFileByName(proto.name)


def test_http_body_is_documented_as_its_json_body_message() -> None:
    (rpc,) = load_rpcs([service_file(HTTP_BODY, "gateway_test.Doc")])
    assert rpc.returns_http_body
    assert rpc.response_message.full_name == "gateway_test.Doc"


def test_other_outputs_are_documented_as_themselves() -> None:
    (rpc,) = load_rpcs([service_file(".gateway_test.Doc", None)])
    assert not rpc.returns_http_body
    assert rpc.response_message.full_name == "gateway_test.Doc"


@pytest.mark.parametrize(
    ("output", "json_body", "error"),
    [
        (HTTP_BODY, None, "needs the json_body option"),
        (HTTP_BODY, "", "needs the json_body option"),
        (HTTP_BODY, "gateway_test.Nope", "names no known message 'gateway_test.Nope'"),
        (".gateway_test.Doc", "gateway_test.Doc", "json_body is only for"),
    ],
)
def test_json_body_mistakes_fail_at_load(output: str, json_body: str | None, error: str) -> None:
    with pytest.raises(ValueError, match=error):
        load_rpcs([service_file(output, json_body)])
