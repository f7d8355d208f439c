"""Helpers shared by every service's servicers: registration and not-yet-landed RPCs.

The API surface is complete from day one: every RPC exists and answers UNIMPLEMENTED (REST 501)
until its issue implements it. The generated base servicers answer UNIMPLEMENTED with no word of
why; `pending_rpcs` fills every method a servicer class does not override with one that raises
`Unimplemented` naming the RPC and what brings it, so a 501 reads as "not yet", not as a bug.
"""

from __future__ import annotations

import functools
import importlib
from collections.abc import Callable
from typing import Any, NoReturn, TypeVar

import grpc
from google.protobuf.descriptor import ServiceDescriptor

from mcpd.runtime.errors import Unimplemented
from mcpd.runtime.server import ServiceRegistration

S = TypeVar("S", bound=type)
T = TypeVar("T")


def _generated_base(cls: type) -> type:
    for klass in cls.__mro__:
        if klass.__module__.endswith("_pb2_grpc"):
            return klass
    raise TypeError(f"{cls.__name__} does not derive from a generated servicer")


def service_descriptor(cls: type) -> ServiceDescriptor:
    """The proto service a servicer class implements, found through its generated base."""
    base = _generated_base(cls)
    messages = importlib.import_module(base.__module__.removesuffix("_grpc"))
    descriptor: ServiceDescriptor = messages.DESCRIPTOR.services_by_name[
        base.__name__.removesuffix("Servicer")
    ]
    return descriptor


def _unimplemented(rpc: str, landing: str) -> Callable[..., Any]:
    async def handler(self: object, request: object, context: object) -> NoReturn:
        raise Unimplemented(f"{rpc} is not implemented yet; it lands with {landing}")

    handler.__name__ = rpc.rsplit("/", 1)[-1]
    return handler


def pending_rpcs(landing: str) -> Callable[[S], S]:
    """Class decorator: every RPC the class does not implement answers UNIMPLEMENTED.

    `landing` says what brings the rest, so a caller reading the error knows it is not a bug.
    """

    def decorate(cls: S) -> S:
        base = _generated_base(cls)
        service = service_descriptor(cls).full_name
        for name, attr in vars(base).items():
            if not name.startswith("_") and callable(attr) and getattr(cls, name) is attr:
                setattr(cls, name, _unimplemented(f"{service}/{name}", landing))
        return cls

    return decorate


def registration(servicer: T, add: Callable[[T, grpc.aio.Server], None]) -> ServiceRegistration:
    """Register `servicer` with the generated `add_*Servicer_to_server` function `add`."""
    return ServiceRegistration(
        service_descriptor(type(servicer)).full_name, functools.partial(add, servicer)
    )
