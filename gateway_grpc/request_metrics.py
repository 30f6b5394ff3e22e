"""gRPC requests in the node's request series (``rockafka_requests_total``,
``rockafka_request_duration_seconds``, ``rockafka_request_errors_total``) with
``listener="grpc"`` and the RPC's name as ``api``, as the Kafka and remoting listeners count theirs.

A unary RPC counts when it is answered; a streaming one (ReceiveMessage, Telemetry) when its
stream ends, its duration the whole stream (a held receive included, as a long-polling pull's
is). An error is a ``Status`` in the answer whose code is not OK, named by its v2 ``Code``
(MESSAGE_NOT_FOUND, a receive that found nothing, is not an error, as PULL_NOT_FOUND is not), or
an RPC that ended with an exception (``RPC_FAILED``). Wrapping happens once, when the service is
registered: the method names come from the generated code, so the series stay bounded.
"""

from __future__ import annotations

import inspect
import time
from typing import Any, Callable

from engine import metrics

from .proto import definition_pb2 as pb

_NOT_ERRORS = frozenset({pb.Code.OK, pb.Code.MESSAGE_NOT_FOUND})
_clock = time.perf_counter


def _error_of(response: Any) -> str | None:
    status = getattr(response, "status", None)
    if status is None or not response.HasField("status"):
        return None
    code = status.code
    if code in _NOT_ERRORS:
        return None
    try:
        return pb.Code.Name(code)
    except ValueError:
        return str(code)


def counted(method: str, handler: Any) -> Any:
    """``handler`` (a grpc RpcMethodHandler) with its behaviour counted under ``method``."""
    stats = metrics.RequestStats("grpc", method)

    def observe(started: float, error: str | None) -> None:
        stats.observe(_clock() - started, () if error is None else (error,))

    if handler.unary_unary is not None:
        return handler._replace(unary_unary=_answered_once(handler.unary_unary, observe))
    if handler.unary_stream is not None:
        return handler._replace(unary_stream=_streaming(handler.unary_stream, observe))
    if handler.stream_stream is not None:
        return handler._replace(stream_stream=_streaming(handler.stream_stream, observe))
    if handler.stream_unary is not None:
        return handler._replace(stream_unary=_answered_once(handler.stream_unary, observe))
    return handler


def _answered_once(fn: Callable[..., Any], observe: Callable[[float, str | None], None]) -> Callable[..., Any]:
    """A behaviour with one answer (unary or stream-unary): its Status names the error."""
    async def behaviour(request: Any, context: Any) -> Any:
        started, error = _clock(), "RPC_FAILED"
        try:
            response = await fn(request, context)
            error = _error_of(response)
            return response
        finally:
            observe(started, error)
    return behaviour


def _streaming(fn: Callable[..., Any], observe: Callable[[float, str | None], None]) -> Callable[..., Any]:
    """A response-streaming behaviour: an async generator (ReceiveMessage) is wrapped as one,
    a coroutine that writes with ``context.write`` (Telemetry) as a coroutine. The first error
    status among the streamed answers names the error."""
    if inspect.isasyncgenfunction(fn):
        async def generator(request: Any, context: Any) -> Any:
            started, error, failed = _clock(), None, True
            try:
                async for response in fn(request, context):
                    if error is None:
                        error = _error_of(response)
                    yield response
                failed = False
            finally:
                observe(started, "RPC_FAILED" if failed and error is None else error)
        return generator

    async def coroutine(request: Any, context: Any) -> Any:
        started, error = _clock(), "RPC_FAILED"
        try:
            result = await fn(request, context)
            error = None
            return result
        finally:
            observe(started, error)
    return coroutine
