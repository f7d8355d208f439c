"""Proto comments by full name, from `descriptors.binpb` (a FileDescriptorSet with source info).

The generated modules drop source info, so the committed descriptor set is the only place the
comments survive; the OpenAPI document's descriptions come from here.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from importlib import resources

from google.protobuf import descriptor_pb2

DESCRIPTOR_SET = "descriptors.binpb"

# Field numbers of FileDescriptorProto / DescriptorProto / EnumDescriptorProto /
# ServiceDescriptorProto, which is how SourceCodeInfo paths address declarations.
_FILE_MESSAGE, _FILE_ENUM, _FILE_SERVICE = 4, 5, 6
_MESSAGE_FIELD, _MESSAGE_NESTED, _MESSAGE_ENUM = 2, 3, 4
_ENUM_VALUE = 2
_SERVICE_METHOD = 2


def load_comments(data: bytes | None = None) -> dict[str, str]:
    """Leading comments keyed by full name: messages, fields, enums, `Enum.VALUE`, services and
    methods. `data` defaults to the descriptor set shipped in the `mcpd` package.
    """
    if data is None:
        data = resources.files("mcpd").joinpath(DESCRIPTOR_SET).read_bytes()
    files = descriptor_pb2.FileDescriptorSet.FromString(data)
    out: dict[str, str] = {}
    for file in files.file:
        located = {
            tuple(loc.path): loc.leading_comments
            for loc in file.source_code_info.location
            if loc.leading_comments
        }
        _walk_file(file, located, out)
    return out


def _clean(comment: str) -> str:
    # Proto comments are hard-wrapped at 100 columns; a description reads better unwrapped, with
    # paragraph breaks (blank lines) and list items kept.
    paragraphs: list[str] = []
    current: list[str] = []
    for raw in comment.strip("\n").split("\n"):
        line = raw.strip()
        if not line or line.startswith(("- ", "* ")):
            if current:
                paragraphs.append(" ".join(current))
            current = []
            if not line:
                paragraphs.append("")
                continue
        current.append(line)
    if current:
        paragraphs.append(" ".join(current))
    return "\n".join(paragraphs).replace("\n\n\n", "\n\n").strip()


def _put(
    out: dict[str, str], name: str, located: Mapping[tuple[int, ...], str], path: tuple[int, ...]
) -> None:
    comment = located.get(path)
    if comment:
        out[name] = _clean(comment)


def _walk_file(
    file: descriptor_pb2.FileDescriptorProto,
    located: Mapping[tuple[int, ...], str],
    out: dict[str, str],
) -> None:
    prefix = f"{file.package}." if file.package else ""
    _walk_messages(file.message_type, prefix, (_FILE_MESSAGE,), located, out)
    _walk_enums(file.enum_type, prefix, (_FILE_ENUM,), located, out)
    for i, service in enumerate(file.service):
        name = prefix + service.name
        _put(out, name, located, (_FILE_SERVICE, i))
        for j, method in enumerate(service.method):
            _put(out, f"{name}.{method.name}", located, (_FILE_SERVICE, i, _SERVICE_METHOD, j))


def _walk_messages(
    messages: Iterable[descriptor_pb2.DescriptorProto],
    prefix: str,
    base: tuple[int, ...],
    located: Mapping[tuple[int, ...], str],
    out: dict[str, str],
) -> None:
    for i, message in enumerate(messages):
        name = prefix + message.name
        path = (*base, i)
        _put(out, name, located, path)
        for j, field in enumerate(message.field):
            _put(out, f"{name}.{field.name}", located, (*path, _MESSAGE_FIELD, j))
        _walk_messages(message.nested_type, f"{name}.", (*path, _MESSAGE_NESTED), located, out)
        _walk_enums(message.enum_type, f"{name}.", (*path, _MESSAGE_ENUM), located, out)


def _walk_enums(
    enums: Iterable[descriptor_pb2.EnumDescriptorProto],
    prefix: str,
    base: tuple[int, ...],
    located: Mapping[tuple[int, ...], str],
    out: dict[str, str],
) -> None:
    for i, enum in enumerate(enums):
        name = prefix + enum.name
        _put(out, name, located, (*base, i))
        for j, value in enumerate(enum.value):
            _put(out, f"{name}.{value.name}", located, (*base, i, _ENUM_VALUE, j))
