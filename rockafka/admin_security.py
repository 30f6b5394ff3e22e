"""Admin HTTP under the node's security (docs/design/security.md, "Admin HTTP and CLI").

- **Authentication** (``authenticationEnabled``): every route but ``/api/health`` and the
  console's static files needs ``Authorization: Basic`` with a user whose password matches its
  stored SCRAM credential (the same users Kafka clients log in as). A missing or wrong login
  answers 401 with ``WWW-Authenticate: Basic`` (a browser asks), after
  ``connection.failed.authentication.delay.ms``, counted in
  ``rockafka_authentication_failures_total{listener="admin"}``.
- **Authorization** (``authorizationEnabled``): reads need DESCRIBE on the cluster, except
  messages: a DLQ page needs READ on the group, a message search or lookup (API or console)
  READ on each message's topic, not DESCRIBE on the cluster (``AdminHttp.readable``; internal topics a super user's only); a DLQ resend
  needs READ on the group, an offset reset READ on the group and the topic (what the same
  request needs over remoting); 403 otherwise.
- **Cross-site requests** (always, security on or off): a POST whose ``Origin`` (or
  ``Referer``) names another host is refused; a JSON API POST must say ``Content-Type:
  application/json`` (a cross-site form cannot, without a preflight the node never answers);
  a console form POST must carry the ``csrf_token`` field equal to the ``rockafka_csrf`` cookie
  (double submit, the cookie SameSite=Strict). Refusals are 403 with the reason.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import hmac
import secrets
from typing import Any
from urllib.parse import urlsplit

from aiohttp import web

from engine.security import CLUSTER_NAME, Operation as Op, ResourceType as RT, principal_of

CSRF_COOKIE = "rockafka_csrf"
CSRF_FIELD = "csrf_token"
_OPEN = ("/api/health", "/static/")


def csrf_token(request: web.Request) -> str:
    """The request's CSRF token (the cookie's, or a new one the response must set)."""
    token = request.get("csrf_new") or request.cookies.get(CSRF_COOKIE)
    if not token:
        token = request["csrf_new"] = secrets.token_urlsafe(24)
    return token


def set_csrf_cookie(request: web.Request, response: web.StreamResponse) -> None:
    new = request.get("csrf_new")
    if new:
        response.set_cookie(CSRF_COOKIE, new, httponly=True, samesite="Strict", path="/")


def _forbidden(reason: str) -> web.Response:
    return web.json_response({"error": reason}, status=403)


def _same_origin(request: web.Request) -> bool:
    source = request.headers.get("Origin") or request.headers.get("Referer")
    if not source or source == "null":
        return source != "null"
    return urlsplit(source).netloc.lower() == (request.host or "").lower()


async def _csrf_refusal(request: web.Request) -> str | None:
    if not _same_origin(request):
        return "cross-site request refused: the Origin is not this node"
    if request.path.startswith("/api/"):
        if request.content_type != "application/json":
            return "JSON API POSTs need Content-Type: application/json"
        return None
    form = await request.post()
    given, cookie = str(form.get(CSRF_FIELD) or request.headers.get("X-CSRF-Token") or ""), \
        request.cookies.get(CSRF_COOKIE, "")
    if not cookie or not hmac.compare_digest(given, cookie):
        return "missing or stale CSRF token: reload the page and try again"
    return None


def _basic(request: web.Request) -> tuple[str, bytes] | None:
    header = request.headers.get("Authorization", "")
    if not header.lower().startswith("basic "):
        return None
    try:
        raw = base64.b64decode(header[6:].strip(), validate=True)
    except (binascii.Error, ValueError):
        return None
    user, sep, password = raw.partition(b":")
    if not sep:
        return None
    return user.decode("utf-8", "replace"), password


def _needs(request: web.Request) -> list[tuple[Op, RT, str]]:
    path, info = request.path, request.match_info
    if request.method == "POST" and path.endswith("/resend"):
        return [(Op.READ, RT.GROUP, info.get("group", ""))]
    if request.method == "POST" and path.endswith("/reset"):
        return [(Op.READ, RT.GROUP, info.get("group", ""))]
    if request.method == "GET" and (path in ("/messages", "/api/messages") or path.startswith("/api/messages/")):
        return []  # a message search is checked per message: READ on its topic (AdminHttp.readable)
    if request.method == "GET" and "group" in info and (path.startswith(("/api/dlq/", "/dlq/"))):
        return [(Op.READ, RT.GROUP, info["group"])]  # dead letters are the group's messages
    return [(Op.DESCRIBE, RT.CLUSTER, CLUSTER_NAME)]


def middleware(security: Any):
    @web.middleware
    async def guard(request: web.Request, handler):
        if request.method == "POST":
            refusal = await _csrf_refusal(request)
            if refusal is not None:
                return _forbidden(refusal)
        login = _basic(request)
        if (login is not None or security.authentication_enabled) and not request.path.startswith(_OPEN):
            # a login given is always checked (a wrong password is never ignored), as remoting
            # signatures are; without authenticationEnabled a request without one is ANONYMOUS
            peer = request.remote or "?"
            if login is None or not security.verify_password(login[0], login[1]):
                reason = "not_authenticated" if login is None else "bad_password"
                delay = security.failed("admin", reason, peer, login[0] if login else None) if login else 0.0
                if delay:
                    await asyncio.sleep(delay)
                return web.json_response({"error": "authentication required: log in with a user and its password"},
                                         status=401, headers={"WWW-Authenticate": 'Basic realm="rockafka", charset="UTF-8"'})
            principal = principal_of(login[0])
        else:
            principal = "User:ANONYMOUS"
        request["principal"] = principal
        for op, rtype, name in (() if request.path.startswith(_OPEN) else _needs(request)):
            if not security.authorize(principal, op, rtype, name, request.remote or "*", "admin"):
                return _forbidden(f"{principal} may not {op.name} {rtype.name} {name}")
        response = await handler(request)
        set_csrf_cookie(request, response)
        return response
    return guard
