"""The OpenAPI document: valid 3.1, complete, and describing exactly what the codec writes."""

from __future__ import annotations

import functools
from typing import Any

import httpx
import jsonschema
import pytest

import gateway.otlp
from gateway.rest import build_openapi, load_rpcs
from gateway.rest.comments import load_comments
from gateway.tests.test_routes import rest_methods
from mcpd import codec
from mcpd.model.v1 import query_pb2, runs_pb2, telemetry_pb2
from tests.libs.codec.samples import sample


@functools.cache
def document() -> dict[str, Any]:
    return build_openapi(load_rpcs(), describe=load_comments(), version="test")


def operations() -> dict[str, tuple[str, str, dict[str, Any]]]:
    found = {}
    for path, item in document()["paths"].items():
        for method, operation in item.items():
            found[operation["operationId"]] = (method, path, operation)
    return found


def schema_validator(name: str) -> jsonschema.Draft202012Validator:
    root = {"$ref": f"#/components/schemas/{name}", "components": document()["components"]}
    return jsonschema.Draft202012Validator(root)


def test_document_is_valid_openapi_3_1() -> None:
    validator = pytest.importorskip("openapi_spec_validator")
    validator.validate(document())
    assert document()["openapi"] == "3.1.0"


def test_one_operation_per_rpc() -> None:
    ids = {f"{name.split('.')[-2]}_{name.split('.')[-1]}" for name in rest_methods()}
    assert set(operations()) == ids
    method, path, _ = operations()["QueryService_GetHealth"]
    assert (method, path) == ("get", "/healthz")
    method, path, _ = operations()["OrchestratorService_GetStepCause"]
    assert (method, path) == ("get", "/v1/api/runs/{run_id}/steps/{step_key}/cause")


def test_text_search_is_the_lowercase_enum() -> None:
    schemas = document()["components"]["schemas"]
    ref = schemas["StoreCapabilities"]["properties"]["text_search"]["$ref"]
    assert ref == "#/components/schemas/TextSearch"
    assert schemas["TextSearch"]["enum"] == ["none", "substring", "words"]
    assert schemas["TextSearch"]["type"] == "string"


def test_parameters_and_bodies() -> None:
    _, _, get_trace = operations()["QueryService_GetTraceJson"]
    params = {p["name"]: p for p in get_trace["parameters"]}
    assert params["trace_id"]["in"] == "path"
    assert params["trace_id"]["required"] is True
    assert params["include"]["schema"]["type"] == "array"
    assert params["include"]["explode"] is True
    _, _, list_traces = operations()["QueryService_ListTraces"]
    params = {p["name"]: p for p in list_traces["parameters"]}
    assert params["from"]["schema"]["format"] == "date-time"
    assert params["kind"]["schema"]["items"] == {"$ref": "#/components/schemas/SpanKind"}
    assert params["limit"]["schema"]["type"] == "integer"
    assert "requestBody" not in list_traces

    _, _, ingest = operations()["IngestService_Ingest"]
    body = ingest["requestBody"]
    assert body["required"] is True
    assert body["content"]["application/json"]["schema"] == {
        "$ref": "#/components/schemas/IngestBatchInput"
    }
    assert "parameters" not in ingest

    # body "*" with a path variable: the variable is not a body property.
    _, _, add_items = operations()["EvaluationService_AddDatasetItems"]
    schema = add_items["requestBody"]["content"]["application/json"]["schema"]
    assert "dataset_id" not in schema["properties"]
    assert [p["name"] for p in add_items["parameters"]] == ["dataset_id"]

    # body naming a field: that field's message is the body; other fields are query parameters.
    _, _, signal = operations()["OrchestratorService_SignalRun"]
    schema = signal["requestBody"]["content"]["application/json"]["schema"]
    assert schema == {"$ref": "#/components/schemas/SignalRequestInput"}


def test_responses_and_security() -> None:
    schemas = document()["components"]["schemas"]
    for _, _, operation in operations().values():
        responses = operation["responses"]
        assert set(responses) == {"200", "4XX", "5XX"}
        assert responses["4XX"] == {"$ref": "#/components/responses/Error"}
    assert document()["security"] == [{"bearer": []}]
    assert document()["components"]["securitySchemes"]["bearer"]["scheme"] == "bearer"
    _, _, health = operations()["QueryService_GetHealth"]
    assert health["security"] == []
    assert health["x-mcpd-access"]["open"] is True
    _, _, delete = operations()["QueryService_DeleteTrace"]
    assert "security" not in delete
    assert delete["x-mcpd-access"]["scope"] == "admin"
    assert delete["x-mcpd-access"]["audit_action"] == "delete_trace"
    error = schemas["ErrorResponse"]["properties"]["error"]
    assert set(error["required"]) == {"code", "status", "reason", "message"}


def test_http_body_answer_is_documented_as_its_json_body_message() -> None:
    method, path, get_trace = operations()["QueryService_GetTraceJson"]
    assert (method, path) == ("get", "/v1/api/traces/{trace_id}")
    ok = get_trace["responses"]["200"]
    assert ok["description"] == "TraceDetail"
    assert ok["content"] == {
        "application/json": {"schema": {"$ref": "#/components/schemas/TraceDetail"}}
    }
    schemas = document()["components"]["schemas"]
    assert "TraceDetail" in schemas
    assert "HttpBody" not in schemas


def test_descriptions_come_from_proto_comments() -> None:
    _, _, health = operations()["QueryService_GetHealth"]
    assert health["description"] == "The daemon's health, as /healthz reports it."
    span = document()["components"]["schemas"]["Span"]
    assert span["description"].startswith("One unit of work.")
    assert span["properties"]["input"]["description"].startswith("What went in.")
    assert (
        "- `agent_run`: One agent invocation."
        in document()["components"]["schemas"]["SpanKind"]["description"]
    )


@pytest.mark.parametrize(
    "descriptor",
    [
        telemetry_pb2.Span.DESCRIPTOR,
        telemetry_pb2.Trace.DESCRIPTOR,
        query_pb2.StoreCapabilities.DESCRIPTOR,
        query_pb2.HealthStatus.DESCRIPTOR,
        query_pb2.TraceDetail.DESCRIPTOR,
        runs_pb2.Run.DESCRIPTOR,
        runs_pb2.RunDetail.DESCRIPTOR,
    ],
    ids=lambda d: d.name,
)
def test_codec_output_validates_against_the_document(descriptor: Any) -> None:
    validator = schema_validator(descriptor.name)
    for variant in range(3):
        validator.validate(codec.encode(sample(descriptor, variant)))
    broken = codec.encode(sample(descriptor))
    broken[codec.required_fields(descriptor)[0]] = {"not": "the right type"}
    assert not validator.is_valid(broken)


def test_every_component_is_referenced_or_an_entry_point() -> None:
    text = str(document())
    for name in document()["components"]["schemas"]:
        assert f"#/components/schemas/{name}'" in text, name


async def test_served_by_the_app(client: httpx.AsyncClient) -> None:
    response = await client.get("/v1/api/openapi.json")
    assert response.status_code == 200
    served = response.json()
    assert set(served["paths"]) == {
        *document()["paths"],
        "/v1/api/openapi.json",
        *gateway.otlp.OPENAPI_PATHS,
    }
    assert served["components"]["schemas"] == document()["components"]["schemas"]
