"""The audit decision: an RPC whose response reaches a field marked `(mcpd.model.v1.payload)`
must audit its allowed calls or say why not, or the rules are not built."""

from __future__ import annotations

from collections.abc import Sequence

import pytest
from google.api import httpbody_pb2
from google.protobuf import any_pb2, descriptor_pb2, descriptor_pool, struct_pb2
from google.protobuf.descriptor import FileDescriptor

from mcpd.auth.access import AccessRule, access_rules, build_rules, payload_path
from mcpd.model.v1 import enums_pb2, payload_pb2, query_pb2
from mcpd.options.v1 import access_pb2

Field = descriptor_pb2.FieldDescriptorProto
READ = enums_pb2.KEY_SCOPE_READ


def _message(
    file: descriptor_pb2.FileDescriptorProto,
    name: str,
    fields: Sequence[tuple[str, str | None]] = (),
    *,
    payload: Sequence[str] = (),
    repeated: Sequence[str] = (),
) -> descriptor_pb2.DescriptorProto:
    """A message of `fields` (name, message type or None for a string), those named in
    `payload` marked, those in `repeated` repeated."""
    message = file.message_type.add(name=name)
    for number, (field_name, type_name) in enumerate(fields, start=1):
        field = message.field.add(name=field_name, number=number, label=Field.LABEL_OPTIONAL)
        if type_name is None:
            field.type = Field.TYPE_STRING
        else:
            field.type, field.type_name = Field.TYPE_MESSAGE, type_name
        if field_name in repeated:
            field.label = Field.LABEL_REPEATED
        if field_name in payload:
            field.options.Extensions[payload_pb2.payload] = True
    return message


def _file(*dependencies: FileDescriptor) -> descriptor_pb2.FileDescriptorProto:
    file = descriptor_pb2.FileDescriptorProto(name="t.proto", package="t.v1", syntax="proto3")
    file.dependency.extend(dependency.name for dependency in dependencies)
    _message(file, "Empty")
    return file


def _rules(
    file: descriptor_pb2.FileDescriptorProto,
    returns: str,
    *dependencies: FileDescriptor,
    **access: object,
) -> dict[str, AccessRule]:
    """The rules of a service `t.v1.Reads` in a copy of `file`, its one RPC `Get` answering
    `returns`."""
    file = descriptor_pb2.FileDescriptorProto.FromString(file.SerializeToString())
    service = file.service.add(name="Reads")
    method = service.method.add(name="Get", input_type=".t.v1.Empty", output_type=returns)
    method.options.Extensions[access_pb2.access].CopyFrom(access_pb2.Access(**access))  # type: ignore[arg-type]
    pool = descriptor_pool.DescriptorPool()
    for dependency in dependencies:
        pool.Add(descriptor_pb2.FileDescriptorProto.FromString(dependency.serialized_pb))
    pool.Add(file)
    return build_rules([pool.FindServiceByName("t.v1.Reads")])


def _page_of_items() -> descriptor_pb2.FileDescriptorProto:
    file = _file()
    _message(file, "Page", [("items", ".t.v1.Item")], repeated=["items"])
    _message(file, "Item", [("id", None), ("body", None)], payload=["body"])
    return file


def test_a_method_returning_payload_without_a_decision_stops_the_build() -> None:
    with pytest.raises(
        ValueError,
        match=r"^t\.v1\.Reads\.Get returns stored payload \(t\.v1\.Page\.items\.body\): .*"
        r"audit_action or unaudited_because",
    ):
        _rules(_page_of_items(), ".t.v1.Page", scope=READ)


@pytest.mark.parametrize(
    ("decision", "audited"),
    [({"audit_action": "list_items"}, True), ({"unaudited_because": "it echoes"}, False)],
)
def test_either_decision_lets_a_payload_method_build(
    decision: dict[str, str], audited: bool
) -> None:
    (rule,) = _rules(_page_of_items(), ".t.v1.Page", scope=READ, **decision).values()
    assert rule.audited is audited
    assert rule.unaudited_because == decision.get("unaudited_because", "")


def test_a_method_returning_no_payload_needs_no_decision() -> None:
    file = _file()
    _message(file, "Page", [("items", ".t.v1.Item")], repeated=["items"])
    _message(file, "Item", [("id", None), ("body", None)])
    (rule,) = _rules(file, ".t.v1.Page", scope=READ).values()
    assert not rule.audited


@pytest.mark.parametrize(
    ("access", "message"),
    [
        (
            {"scope": READ, "audit_action": "get", "unaudited_because": "why"},
            "sets both audit_action and unaudited_because",
        ),
        ({"open": True, "audit_action": "get"}, "an open method cannot be audited"),
    ],
)
def test_an_incoherent_audit_decision_stops_the_build(
    access: dict[str, object], message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        _rules(_page_of_items(), ".t.v1.Page", **access)


def test_an_exemption_for_a_method_that_returns_no_payload_stops_the_build() -> None:
    with pytest.raises(ValueError, match=r"t\.v1\.Reads\.Get returns no stored payload"):
        _rules(_file(), ".t.v1.Empty", scope=READ, unaudited_because="stale")


def test_the_walk_ends_on_cycles_and_still_finds_payload_behind_them() -> None:
    file = _file()
    # A <-> B cycle with the payload one step off it; Node refers to itself three ways.
    _message(file, "A", [("b", ".t.v1.B")])
    _message(file, "B", [("a", ".t.v1.A"), ("node", ".t.v1.Node"), ("c", ".t.v1.C")])
    c = _message(file, "C", [("text", None)], payload=["text"])
    _message(
        file,
        "Node",
        [("parent", ".t.v1.Node"), ("children", ".t.v1.Node"), ("a", ".t.v1.A")],
        repeated=["children"],
    )
    with pytest.raises(ValueError, match=r"\(t\.v1\.A\.b\.c\.text\)"):
        _rules(file, ".t.v1.A", scope=READ)
    c.field[0].options.ClearExtension(payload_pb2.payload)
    (rule,) = _rules(file, ".t.v1.Node", scope=READ).values()
    assert not rule.audited


def test_a_map_value_is_walked() -> None:
    file = _file()
    page = _message(file, "Page", [("items", ".t.v1.Page.ItemsEntry")], repeated=["items"])
    entry = page.nested_type.add(name="ItemsEntry")
    entry.options.map_entry = True
    entry.field.add(name="key", number=1, type=Field.TYPE_STRING, label=Field.LABEL_OPTIONAL)
    entry.field.add(
        name="value",
        number=2,
        type=Field.TYPE_MESSAGE,
        type_name=".t.v1.Item",
        label=Field.LABEL_OPTIONAL,
    )
    _message(file, "Item", [("body", None)], payload=["body"])
    with pytest.raises(ValueError, match=r"\(t\.v1\.Page\.items\.value\.body\)"):
        _rules(file, ".t.v1.Page", scope=READ)


@pytest.mark.parametrize(("marked", "payload"), [(False, False), (True, True)])
def test_a_value_is_payload_only_where_its_field_is_marked(marked: bool, payload: bool) -> None:
    file = _file(struct_pb2.DESCRIPTOR)
    _message(
        file,
        "Holder",
        [("data", ".google.protobuf.Value"), ("doc", ".google.protobuf.Struct")],
        payload=["data"] if marked else [],
    )
    (rule,) = _rules(
        file,
        ".t.v1.Holder",
        struct_pb2.DESCRIPTOR,
        scope=READ,
        **({"audit_action": "get"} if payload else {}),
    ).values()
    assert rule.audited is payload
    if not payload:
        with pytest.raises(ValueError, match="returns no stored payload"):
            _rules(file, ".t.v1.Holder", struct_pb2.DESCRIPTOR, scope=READ, unaudited_because="x")


def test_an_http_body_is_payload() -> None:
    # The walk cannot see what was rendered into its bytes.
    with pytest.raises(ValueError, match=r"returns stored payload \(google\.api\.HttpBody\)"):
        _rules(
            _file(httpbody_pb2.DESCRIPTOR),
            ".google.api.HttpBody",
            any_pb2.DESCRIPTOR,
            httpbody_pb2.DESCRIPTOR,
            scope=READ,
        )


def test_payload_paths_of_real_messages() -> None:
    assert payload_path(query_pb2.DeltaResponse.DESCRIPTOR) == (
        "mcpd.model.v1.DeltaResponse.spans.input"
    )
    assert payload_path(query_pb2.TraceListResponse.DESCRIPTOR) is None
    assert payload_path(query_pb2.AnalyticsSummary.DESCRIPTOR) is None


QUERY = "/mcpd.query.v1.QueryService"


@pytest.mark.parametrize(
    ("path", "action"),
    [
        (f"{QUERY}/ListDeltas", "list_deltas"),
        (f"{QUERY}/SearchSessions", "search_sessions"),
        (f"{QUERY}/Open", "open"),
        (f"{QUERY}/ListSessions", "list_sessions"),
        (f"{QUERY}/FileAttention", "file_attention"),
        (f"{QUERY}/GetTraceJson", "get_trace"),
        (f"{QUERY}/ListScores", "list_scores"),
        (f"{QUERY}/ListFeedback", "list_feedback"),
        ("/mcpd.evaluation.v1.EvaluationService/ListDatasetItems", "list_dataset_items"),
        ("/mcpd.orchestrator.v1.OrchestratorService/GetRun", "get_run"),
    ],
)
def test_payload_reads_of_mcpd_are_audited(path: str, action: str) -> None:
    assert access_rules()[path].audit_action == action


def test_every_mcpd_rpc_returning_payload_has_decided() -> None:
    # access_rules() would have raised otherwise; the exemptions are the few echoing writes.
    exempt = {path for path, rule in access_rules().items() if rule.unaudited_because}
    assert exempt == {
        "/mcpd.ingest.v1.IngestService/CreateScore",
        "/mcpd.ingest.v1.IngestService/CreateFeedback",
        "/mcpd.orchestrator.v1.OrchestratorService/Claim",
    }
