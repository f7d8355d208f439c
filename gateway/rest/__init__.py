"""REST transcoding of the gRPC services, and the OpenAPI document that describes it."""

from gateway.rest.catalog import Rpc, load_rpcs
from gateway.rest.comments import load_comments
from gateway.rest.errors import (
    HTTP_STATUS,
    UPSTREAM_NOT_CONFIGURED,
    error_body,
    error_response,
    http_status,
    retry_after,
)
from gateway.rest.openapi import build_openapi
from gateway.rest.transcoder import (
    CLIENT_ADDRESS_METADATA,
    FORWARDED_HEADERS,
    TIMEOUT_HEADER,
    ChannelFor,
    Endpoint,
    RestTranscoder,
    forwarded_metadata,
)

__all__ = [
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
]
