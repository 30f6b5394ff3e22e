"""SaslHandshake (key 17), version 1, and SaslAuthenticate (key 36), versions 0-2.

Mechanisms: ``sasl.enabled.mechanisms`` of PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, offered on
SASL_PLAINTEXT and SASL_SSL listeners (``gateway_kafka/listeners.py``). Before a login only
ApiVersions, SaslHandshake and SaslAuthenticate are served; anything else closes the
connection (server.py), as a Kafka SASL listener does. Credentials and decisions belong to
``engine.security`` (docs/design/security.md): PLAIN checks the password against the user's
stored SCRAM credential (salted with the stored salt; no password table), or the clear-text
``sasl_plain_users`` of older configs; SCRAM runs RFC 5802's two round trips through
``scramp`` (client-first -> server-first, client-final -> server-final) against the stored
salted keys.

A failed login answers SASL_AUTHENTICATION_FAILED (Kafka's message), is held for
``connection.failed.authentication.delay.ms`` and closes the connection; an unknown user fails
the same way and at the same step as a wrong password.

Throttled guessing (``engine.security.throttle``): before a password or a SCRAM proof is
checked the node's limiter is asked (per user and per source address, across connections and
listeners); when no check is due the login is refused unchecked — SASL_AUTHENTICATION_FAILED
with "too many failed authentications ... retry after N ms" (SaslAuthenticate has no throttle
field, so the time is in the message and the answer is held up to a second), connection
closed. The check and the failure report run with no await between them, so concurrent
guesses on the loop cannot share one admitted check.

KIP-368 re-authentication: with ``connections.max.reauth.ms`` > 0 a login answers
``session_lifetime_ms`` (v1+) and the connection must log in again (SaslHandshake +
SaslAuthenticate on the same connection) before it ends; a request after the end closes the
connection. A re-authentication must name the same principal (Kafka's rule). GSSAPI and
OAUTHBEARER are not offered.
"""

from __future__ import annotations

import asyncio

from gateway_kafka import error_codes as E
from gateway_kafka.apis import RequestContext, api

_FAILED = "Authentication failed during authentication due to invalid credentials with SASL mechanism {}"


@api(key=17, min=1, max=1, name="sasl")
async def handshake(ctx: RequestContext, body: dict) -> dict:
    enabled = ctx.gateway.settings.sasl_mechanisms
    mechanism = body.get("mechanism", "")
    spec = ctx.conn.listener
    if spec is None or not spec.sasl or mechanism not in enabled:
        return {"error_code": E.UNSUPPORTED_SASL_MECHANISM, "mechanisms": enabled if spec is not None and spec.sasl else []}
    ctx.conn.sasl_mechanism = mechanism
    ctx.conn.extra.pop("scram", None)
    return {"error_code": E.NONE, "mechanisms": enabled}


def _answer(code: int, message: str | None = None, auth_bytes: bytes = b"", lifetime_ms: int = 0) -> dict:
    return {"error_code": code, "error_message": message, "auth_bytes": auth_bytes, "session_lifetime_ms": lifetime_ms}


async def _refuse(ctx: RequestContext, reason: str, user: str | None) -> dict:
    conn = ctx.conn
    delay = ctx.gateway.security.failed("kafka", reason, f"{conn.peer_host}:{conn.peer_port}", user,
                                        mechanism=conn.sasl_mechanism)
    if delay > 0:
        await asyncio.sleep(delay)  # Kafka's connection.failed.authentication.delay.ms
    conn.extra["close_after_response"] = True
    return _answer(E.SASL_AUTHENTICATION_FAILED, _FAILED.format(conn.sasl_mechanism))


async def _throttled(ctx: RequestContext, user: str | None, wait_s: float) -> dict:
    conn = ctx.conn
    security = ctx.gateway.security
    security.failed("kafka", "throttled", f"{conn.peer_host}:{conn.peer_port}", user, mechanism=conn.sasl_mechanism)
    await asyncio.sleep(security.throttled_hold(wait_s))
    conn.extra["close_after_response"] = True
    return _answer(E.SASL_AUTHENTICATION_FAILED,
                   f"Authentication failed: too many failed authentications for this user or address; retry after "
                   f"{max(1, int(wait_s * 1000))} ms")


def _logged_in(ctx: RequestContext, user: str, auth_bytes: bytes = b"") -> dict:
    conn = ctx.conn
    gw = ctx.gateway
    principal = f"User:{user}"
    if conn.authenticated_principal is not None and conn.principal != principal:
        conn.extra["close_after_response"] = True  # KIP-368: a session keeps its principal
        return _answer(E.SASL_AUTHENTICATION_FAILED, "Cannot change principals during re-authentication from "
                       f"{conn.principal}: {principal}")
    reauth = conn.authenticated_principal is not None
    conn.authenticated_principal = user
    conn.principal = principal
    conn.sasl_mechanism, mechanism = None, conn.sasl_mechanism
    lifetime = gw.security.reauth_ms if ctx.api_version >= 1 else 0
    conn.session_expires_at = asyncio.get_running_loop().time() + lifetime / 1000.0 if lifetime else 0.0
    gw.security.succeeded("kafka", mechanism or "?", principal, f"{conn.peer_host}:{conn.peer_port}",
                          reauthenticated=reauth)
    return _answer(E.NONE, None, auth_bytes, lifetime)


@api(key=36, min=0, max=2, name="sasl")
async def authenticate(ctx: RequestContext, body: dict) -> dict:
    conn = ctx.conn
    security = ctx.gateway.security
    mechanism = conn.sasl_mechanism
    token = bytes(body.get("auth_bytes") or b"")
    if mechanism is None:
        conn.extra["close_after_response"] = True
        return _answer(E.ILLEGAL_SASL_STATE, "SaslHandshake must select a mechanism first")
    if mechanism == "PLAIN":
        parts = token.split(b"\x00")
        if len(parts) != 3 or not parts[1]:
            return await _refuse(ctx, "malformed_token", None)
        user = parts[1].decode("utf-8", "replace")
        if parts[0] and parts[0] != parts[1]:
            return await _refuse(ctx, "authzid_differs", user)
        wait = security.throttled(user, f"{conn.peer_host}:{conn.peer_port}")
        if wait:
            return await _throttled(ctx, user, wait)
        if not security.verify_password(user, parts[2]):
            return await _refuse(ctx, "bad_password" if security.knows_user(user) else "unknown_user", user)
        return _logged_in(ctx, user)
    session = conn.extra.get("scram")
    try:
        text = token.decode("utf-8")
    except UnicodeDecodeError:
        return await _refuse(ctx, "malformed_token", None)
    if session is None:
        session = security.scram_session(mechanism)
        try:
            server_first = session.first(text)
        except ValueError:
            return await _refuse(ctx, "malformed_token", session.user)
        wait = security.throttled(session.user, f"{conn.peer_host}:{conn.peer_port}")
        if wait:
            return await _throttled(ctx, session.user, wait)
        conn.extra["scram"] = session
        return _answer(E.NONE, None, server_first.encode("utf-8"))
    conn.extra.pop("scram", None)
    wait = security.throttled(session.user, f"{conn.peer_host}:{conn.peer_port}")  # checked again: the proof is the guess
    if wait:
        return await _throttled(ctx, session.user, wait)
    try:
        server_final = session.final(text)
    except ValueError:
        return await _refuse(ctx, "bad_password" if session.known else "unknown_user", session.user)
    return _logged_in(ctx, session.user or "", server_final.encode("utf-8"))
