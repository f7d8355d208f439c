"""A daemon with keys of every scope in two projects, and helpers to call any RPC."""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import grpc
import httpx
from google.api import annotations_pb2
from google.protobuf import message_factory
from google.protobuf.descriptor import FieldDescriptor, MethodDescriptor
from google.protobuf.message import Message

from mcpd.model.v1 import enums_pb2
from mcpd.options.v1 import access_pb2

SCOPES = ["ingest", "read", "write", "admin", "execute", "worker"]
PROJECTS = ["alpha", "beta"]


def key_secret(project: str, scope: str) -> str:
    """The secret of the configured key of `scope` on `project` (test data, not a real key)."""
    return f"mcpd_k_test_{project}_{scope}_0123456789abcdef"


def bearer(project: str, scope: str) -> dict[str, str]:
    """REST headers carrying the configured key of `scope` on `project`."""
    return {"authorization": f"Bearer {key_secret(project, scope)}"}


def bearer_metadata(project: str, scope: str) -> tuple[tuple[str, str], ...]:
    """gRPC metadata carrying the configured key of `scope` on `project`."""
    return (("authorization", f"Bearer {key_secret(project, scope)}"),)


MULTI_PROJECT_READ = "mcpd_k_test_multi_read_0123456789abcdef"


def write_keys_file(path: Path) -> Path:
    """A keys file declaring one key per scope per project, and one read key on both."""
    entries = [
        f'[[keys]]\nname = "{project}-{scope}"\nscope = "{scope}"\nproject = "{project}"\n'
        f'secret = "{key_secret(project, scope)}"\n'
        for project in PROJECTS
        for scope in SCOPES
    ]
    entries.append(
        '[[keys]]\nname = "both-read"\nscope = "read"\nprojects = ["alpha", "beta"]\n'
        f'secret = "{MULTI_PROJECT_READ}"\n'
    )
    path.write_text("\n".join(entries))
    return path


@dataclass(frozen=True)
class Rpc:
    """One RPC with what a test needs to call it over REST and gRPC."""

    method: MethodDescriptor
    verb: str
    template: str

    @property
    def grpc_path(self) -> str:
        return f"/{self.method.containing_service.full_name}/{self.method.name}"

    @property
    def access(self) -> access_pb2.Access:
        options = self.method.GetOptions()
        return options.Extensions[access_pb2.access]

    @property
    def needed_scope(self) -> str:
        return enums_pb2.KeyScope.Name(self.access.scope).removeprefix("KEY_SCOPE_").lower()

    @property
    def has_project(self) -> bool:
        return "project" in self.method.input_type.fields_by_name

    def rest_path(self) -> str:
        """The route with every path variable filled with a value of its field's type."""

        def value(match: re.Match[str]) -> str:
            field = self.method.input_type.fields_by_name[match.group(1)]
            return "x1" if field.type == FieldDescriptor.TYPE_STRING else "1"

        return re.sub(r"\{([^}=]+)\}", value, self.template)

    def input_type(self) -> type[Message]:
        return message_factory.GetMessageClass(self.method.input_type)

    def output_type(self) -> type[Message]:
        return message_factory.GetMessageClass(self.method.output_type)


def rpcs(methods: Iterator[MethodDescriptor]) -> list[Rpc]:
    """The RPCs with a REST route. (GetTrace is gRPC only: its REST route is GetTraceJson's,
    which carries the same access rule.)"""
    found = []
    for method in methods:
        rule = method.GetOptions().Extensions[annotations_pb2.http]
        verb = rule.WhichOneof("pattern")
        if verb is None:
            continue
        found.append(Rpc(method, verb.upper(), getattr(rule, verb)))
    return sorted(found, key=lambda rpc: rpc.grpc_path)


def wrong_scope(needed: str) -> str:
    """A scope that does not satisfy `needed` (admin satisfies execute and worker)."""
    return "ingest" if needed != "ingest" else "read"


async def call_rest(
    http: httpx.AsyncClient, rpc: Rpc, token: str | None, **params: str
) -> httpx.Response:
    headers = {"authorization": f"Bearer {token}"} if token else {}
    body = b"{}" if rpc.verb in {"POST", "PUT", "PATCH"} else None
    return await http.request(
        rpc.verb,
        rpc.rest_path(),
        params=params,
        content=body,
        headers={**headers, "content-type": "application/json"},
    )


async def call_grpc(
    channel: grpc.aio.Channel, rpc: Rpc, token: str | None, **fields: object
) -> grpc.StatusCode:
    """Call `rpc` with a request holding `fields`; the status code it ends with."""
    request_type, response_type = rpc.input_type(), rpc.output_type()
    call = channel.unary_unary(
        rpc.grpc_path,
        request_serializer=request_type.SerializeToString,
        response_deserializer=response_type.FromString,
    )
    metadata = (("authorization", f"Bearer {token}"),) if token else ()
    try:
        await call(request_type(**fields), metadata=metadata, timeout=10)
    except grpc.aio.AioRpcError as error:
        return error.code()
    return grpc.StatusCode.OK
