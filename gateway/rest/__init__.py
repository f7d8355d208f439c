"""REST transcoding of the gRPC services, and the OpenAPI document that describes it."""

from gateway.rest.catalog import Rpc, load_rpcs
from gateway.rest.errors import HTTP_STATUS, error_body
from gateway.rest.openapi import build_openapi
from gateway.rest.transcoder import FORWARDED_HEADERS, TIMEOUT_HEADER, ChannelFor, RestTranscoder

__all__ = [
    "FORWARDED_HEADERS",
    "HTTP_STATUS",
    "TIMEOUT_HEADER",
    "ChannelFor",
    "RestTranscoder",
    "Rpc",
    "build_openapi",
    "error_body",
    "load_rpcs",
]
