"""Sans-IO Kafka protocol codec: bytes in, typed requests out; response dicts in, bytes out.

Imports no asyncio and does no I/O: the gateway's server reads a length-prefixed frame,
calls ``decode_request``, awaits a handler and writes what ``encode_response`` (or
``encode_response_chunks``) returns. Every API is declared once in ``messages.py`` in the DSL
of ``schema.py``; see docs/design/kafka-protocol.md for the contract.
"""

from .codec import (
    ApiKey,
    ApiRange,
    MalformedRequestError,
    Request,
    RequestHeader,
    UnsupportedVersionError,
    api_name,
    api_schema,
    body_defaults,
    declared_api_keys,
    decode_request,
    decode_response,
    encode_request,
    encode_response,
    encode_response_chunks,
)
from .errors import ErrorCode, KafkaError

__all__ = [
    "ApiKey", "ApiRange", "ErrorCode", "KafkaError", "MalformedRequestError", "Request",
    "RequestHeader", "UnsupportedVersionError", "api_name", "api_schema", "body_defaults",
    "declared_api_keys", "decode_request", "decode_response", "encode_request",
    "encode_response", "encode_response_chunks",
]
