"""SaslHandshake (key 17), version 1, and SaslAuthenticate (key 36), versions 0-2: SASL/PLAIN.

Off unless ``sasl_enabled_mechanisms`` includes PLAIN; users come from ``sasl_plain_users``
(``user:password`` pairs separated by commas). When on, a connection must authenticate before
any request other than ApiVersions, SaslHandshake and SaslAuthenticate (the server closes it
otherwise, as a Kafka SASL listener does). SaslHandshake v1 selects the mechanism (an
unknown one gets UNSUPPORTED_SASL_MECHANISM with the enabled list); SaslAuthenticate carries
the PLAIN token ``authzid NUL user NUL password``. A wrong user or password gets
SASL_AUTHENTICATION_FAILED and the connection is closed after the answer. Handshake v0
(unframed tokens) and other mechanisms (SCRAM, OAUTHBEARER, GSSAPI) are not offered; PLAIN
without TLS sends the password in clear text, so it only suits trusted networks.
"""

from __future__ import annotations

import hmac

from gateway_kafka import error_codes as E
from gateway_kafka.apis import RequestContext, api


@api(key=17, min=1, max=1, name="sasl")
async def handshake(ctx: RequestContext, body: dict) -> dict:
    enabled = ctx.gateway.settings.sasl_mechanisms
    mechanism = body.get("mechanism", "")
    if mechanism not in enabled or ctx.conn.authenticated_principal is not None:
        code = E.UNSUPPORTED_SASL_MECHANISM if mechanism not in enabled else E.ILLEGAL_SASL_STATE
        return {"error_code": code, "mechanisms": enabled}
    ctx.conn.sasl_mechanism = mechanism
    return {"error_code": E.NONE, "mechanisms": enabled}


@api(key=36, min=0, max=2, name="sasl")
async def authenticate(ctx: RequestContext, body: dict) -> dict:
    gw = ctx.gateway
    if ctx.conn.sasl_mechanism != "PLAIN" or ctx.conn.authenticated_principal is not None:
        ctx.conn.extra["close_after_response"] = True
        return {"error_code": E.ILLEGAL_SASL_STATE, "error_message": "SaslHandshake must select PLAIN first",
                "auth_bytes": b"", "session_lifetime_ms": 0}
    parts = bytes(body.get("auth_bytes") or b"").split(b"\x00")
    user = password = None
    if len(parts) == 3:
        user, password = parts[1].decode("utf-8", "replace"), parts[2]
    expected = gw.settings.sasl_plain_users.get(user or "")
    if user and expected is not None and hmac.compare_digest(expected.encode("utf-8"), password or b""):
        ctx.conn.authenticated_principal = user
        gw.log.info("sasl_authenticated", peer=f"{ctx.conn.peer_host}:{ctx.conn.peer_port}", user=user)
        return {"error_code": E.NONE, "error_message": None, "auth_bytes": b"", "session_lifetime_ms": 0}
    gw.log.warning("sasl_authentication_failed", peer=f"{ctx.conn.peer_host}:{ctx.conn.peer_port}", user=user)
    ctx.conn.extra["close_after_response"] = True
    return {"error_code": E.SASL_AUTHENTICATION_FAILED,
            "error_message": "Authentication failed: invalid username or password", "auth_bytes": b"",
            "session_lifetime_ms": 0}
