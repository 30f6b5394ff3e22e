"""The API table: one module per Kafka API key, registered with the versions it handles.

Invariants:
- Each API key is registered exactly once (``@api`` raises on a duplicate), so dispatch is a
  plain dict lookup and there is never a question of which handler answers.
- ApiVersions is built from this same table (intersected with the versions the codec can
  encode), so what the gateway advertises can never drift from what it handles.
- A handler is ``async def handle(ctx: RequestContext, body: dict) -> dict | None``; it gets the
  decoded request body and returns the response body (``None`` = send no response, which only
  Produce with acks=0 does). Handlers never raise for bad client input: they answer with the
  protocol's error code. An exception escaping a handler is a bug; the server logs it and
  closes that one connection.
"""

from __future__ import annotations

import importlib
import pkgutil
from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable


Handler = Callable[["RequestContext", dict], Awaitable[dict | None]]


class DuplicateApiError(RuntimeError):
    """Two modules claim the same API key."""


@dataclass(frozen=True)
class ApiSpec:
    key: int
    name: str
    min_version: int
    max_version: int
    handler: Handler


@dataclass
class ConnectionState:
    """What the server knows about one client connection (shared by its requests)."""

    peer_host: str
    peer_port: int
    client_id: str | None = None
    client_software_name: str | None = None
    client_software_version: str | None = None
    sasl_mechanism: str | None = None
    authenticated_principal: str | None = None  # the SASL user name once a login succeeded
    listener: Any = None  # gateway_kafka.listeners.ListenerSpec the client came in on
    # who the authorizer sees: a SASL login, else a client certificate, else ANONYMOUS (Kafka's)
    principal: str = "User:ANONYMOUS"
    session_expires_at: float = 0.0  # loop time a SASL session ends (KIP-368), 0 = never
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass
class RequestContext:
    gateway: Any  # the KafkaGateway (server.py) that dispatched the request
    conn: ConnectionState
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None

    @property
    def store(self):
        return self.gateway.store


REGISTRY: dict[int, ApiSpec] = {}


def api(*, key: int, min: int, max: int, name: str | None = None) -> Callable[[Handler], Handler]:  # noqa: A002
    """Register ``handler`` for API ``key`` and versions ``min..max`` (inclusive)."""

    def register(handler: Handler) -> Handler:
        if key in REGISTRY:
            raise DuplicateApiError(
                f"api key {key} registered twice: {REGISTRY[key].handler.__module__} and {handler.__module__}"
            )
        if min > max:
            raise ValueError(f"api key {key}: min version {min} > max version {max}")
        label = name or handler.__module__.rsplit(".", 1)[-1]
        REGISTRY[key] = ApiSpec(key, label, min, max, _measured(key, handler))
        return handler

    return register


def _measured(key: int, handler: Handler) -> Handler:
    """``handler`` counted and timed per request (engine.metrics), with the error codes of its
    answer counted by name: once per partition, group or resource that carries one, as Kafka's
    own ``ErrorsPerSec`` does. A handler that raises counts as ``UNKNOWN_SERVER_ERROR``."""
    from engine import metrics
    from gateway_kafka.protocol import api_name

    stats = metrics.RequestStats("kafka", api_name(key))
    by_version: dict[int, Any] = {}  # the version counter's children, bound on first use

    async def measured(ctx: "RequestContext", body: dict) -> dict | None:
        start = metrics.now()
        counter = by_version.get(ctx.api_version)
        if counter is None:
            counter = by_version[ctx.api_version] = metrics.REQUEST_VERSIONS.labels(api_name(key), str(ctx.api_version))
        counter.inc()
        try:
            response = await handler(ctx, body)
        except BaseException:
            stats.observe(metrics.now() - start, ("UNKNOWN_SERVER_ERROR",))
            raise
        stats.observe(metrics.now() - start, _error_names(response) if response else ())
        return response

    return measured


_LEAF_TYPES = frozenset((int, str, bytes, bool, float, type(None), memoryview, bytearray))


def _error_names(node: Any) -> list[str]:
    """Names of the non-zero ``error_code`` fields anywhere in a response body (walks dicts and
    lists only: record bytes are never looked at). Runs once per request over every partition
    of it (4,096 of them in a produce round robin over a large topic), so the loop is plain."""
    found: list[str] = []
    stack = [node]
    pop, push = stack.pop, stack.append
    while stack:
        cur = pop()
        if type(cur) is dict:
            code = cur.get("error_code")
            if code:
                found.append(_error_name(code))
            for v in cur.values():
                t = type(v)
                if t is list or t is dict or (t not in _LEAF_TYPES and isinstance(v, (dict, list))):
                    push(v)
        elif type(cur) is list:
            for v in cur:
                t = type(v)
                if t is list or t is dict or (t not in _LEAF_TYPES and isinstance(v, (dict, list))):
                    push(v)
        else:  # a subclass of dict or list
            if isinstance(cur, dict):
                code = cur.get("error_code")
                if code:
                    found.append(_error_name(code))
                cur = list(cur.values())
            stack.extend(v for v in cur if isinstance(v, (dict, list)))
    return found


def _error_name(code: int) -> str:
    from gateway_kafka.protocol.errors import ErrorCode

    try:
        return ErrorCode(code).name
    except ValueError:
        return str(code)


_loaded = False


def load_all() -> dict[int, ApiSpec]:
    """Import every module in this package once, so each registers itself."""
    global _loaded
    if not _loaded:
        for mod in pkgutil.iter_modules(__path__):
            if not mod.name.startswith("_"):
                importlib.import_module(f"{__name__}.{mod.name}")
        _loaded = True
    return REGISTRY


_advertised: list[tuple[int, int, int]] | None = None


def advertised() -> list[tuple[int, int, int]]:
    """(api_key, min_version, max_version) for ApiVersions: handler range ∩ codec range."""
    global _advertised
    if _advertised is None:
        _advertised = _compute_advertised()
    return _advertised


def _compute_advertised() -> list[tuple[int, int, int]]:
    from gateway_kafka.protocol import api_schema

    out = []
    for key, spec in sorted(load_all().items()):
        try:
            cmin, cmax, _flex = api_schema(key)
        except Exception:  # the codec does not know this key: not advertised
            continue
        lo, hi = max(spec.min_version, cmin), min(spec.max_version, cmax)
        if lo <= hi:
            out.append((key, lo, hi))
    return out
