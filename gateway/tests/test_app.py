"""The app factory: public surface, error shape of mounted routes, websockets."""

from __future__ import annotations

import grpc.aio
import httpx
import pytest
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route
from starlette.types import Message

import gateway.rest
from gateway.app import create_app
from mcpd.auth.metadata import SERVICE_CREDENTIAL


def no_upstream(service: str) -> grpc.aio.Channel:
    raise LookupError(service)


def test_rest_public_names() -> None:
    assert set(gateway.rest.__all__) == {
        "CLIENT_ADDRESS_METADATA",
        "FORWARDED_HEADERS",
        "HTTP_STATUS",
        "TIMEOUT_HEADER",
        "UPSTREAM_NOT_CONFIGURED",
        "ChannelFor",
        "Endpoint",
        "RestTranscoder",
        "Rpc",
        "build_openapi",
        "error_body",
        "error_response",
        "forwarded_metadata",
        "http_status",
        "load_comments",
        "load_rpcs",
        "retry_after",
    }


def test_deadline_settings_are_checked() -> None:
    with pytest.raises(ValueError, match="deadline"):
        create_app(no_upstream, default_deadline_s=0)
    with pytest.raises(ValueError, match="deadline"):
        create_app(no_upstream, default_deadline_s=600, max_deadline_s=300)


async def test_errors_from_routes_mounted_beside_the_transcoder_keep_the_shape() -> None:
    app: Starlette = create_app(no_upstream)

    async def refuse(request: Request) -> Response:
        raise HTTPException(status_code=409, detail="already there")

    # Where the /mcp or OTLP routes of later issues will sit: before the catch-all.
    app.router.routes.insert(0, Route("/v1/traces", refuse, methods=["POST"]))
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://gateway") as client:
        response = await client.post("/v1/traces")
    assert response.status_code == 409
    assert response.json() == {
        "error": {
            "code": 409,
            "status": "ALREADY_EXISTS",
            "reason": "ALREADY_EXISTS",
            "message": "already there",
        }
    }


async def test_openapi_document_describes_itself() -> None:
    transport = httpx.ASGITransport(app=create_app(no_upstream))
    async with httpx.AsyncClient(transport=transport, base_url="http://gateway") as client:
        document = (await client.get("/v1/api/openapi.json")).json()
    assert document["paths"]["/v1/api/openapi.json"]["get"]["operationId"] == "Gateway_GetOpenApi"
    pytest.importorskip("openapi_spec_validator").validate(document)


async def test_websockets_are_refused() -> None:
    sent: list[Message] = []

    async def receive() -> Message:
        return {"type": "websocket.connect"}

    async def send(message: Message) -> None:
        sent.append(message)

    scope = {
        "type": "websocket",
        "path": "/v1/api/traces",
        "raw_path": b"/v1/api/traces",
        "root_path": "",
        "query_string": b"",
        "headers": [],
    }
    await create_app(no_upstream)(scope, receive, send)
    assert sent == [{"type": "websocket.close", "code": 1008}]


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("GET", "/v1/api/capabilities"),
        ("POST", "/v1/api/erasure"),
        ("POST", "/v1/traces"),
        ("POST", "/mcp"),
        ("GET", "/healthz"),
        ("GET", "/no/such/route"),
    ],
)
async def test_a_request_carrying_the_service_credential_is_refused_before_routing(
    method: str, path: str
) -> None:
    # No upstream at all: a request that got past the refusal would answer 503, not 403.
    transport = httpx.ASGITransport(app=create_app(no_upstream))
    async with httpx.AsyncClient(transport=transport, base_url="http://gateway") as client:
        answer = await client.request(
            method,
            path,
            headers={
                "X-Mcpd-Service-Credential": "query:mcpd_c_stolen",
                "authorization": "Bearer k",
            },
            content=b"{}",
        )
        plain = await client.get("/v1/api/capabilities")
    assert answer.status_code == 403
    error = answer.json()["error"]
    assert (error["status"], error["reason"]) == ("PERMISSION_DENIED", "SERVICE_CREDENTIAL_REFUSED")
    assert "mcpd_c_stolen" not in answer.text
    assert plain.status_code == 503  # the same route without it goes on to the (missing) upstream
    # Nor would the gateway have passed it on: it forwards a fixed list of headers.
    assert SERVICE_CREDENTIAL not in gateway.rest.FORWARDED_HEADERS


async def test_without_a_tool_catalogue_there_is_no_mcp_endpoint() -> None:
    transport = httpx.ASGITransport(app=create_app(no_upstream))
    async with httpx.AsyncClient(transport=transport, base_url="http://gateway") as client:
        response = await client.post("/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "ping"})
    assert response.status_code == 404
    assert response.json()["error"]["reason"] == "ROUTE_NOT_FOUND"
