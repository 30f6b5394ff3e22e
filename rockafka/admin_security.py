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
- **Throttled guessing**: a login is checked only when the node's limiter says a check is due
  (``engine.security.throttle``, shared with every listener); otherwise 429 with
  ``Retry-After``, the password unchecked.
- **Key rotation**: ``POST /api/security/rotate-key`` (ALTER on the cluster) gives the node a new
  key for the remoting secrets sealed in the log and re-seals them all through the log's one
  writer; ``rockafka security rotate-key`` is its command line.
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

ROTATE_KEY_PATH = "/api/security/rotate-key"
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
    if path == ROTATE_KEY_PATH:
        return [(Op.ALTER, RT.CLUSTER, CLUSTER_NAME)]
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
            wait = security.throttled(login[0], peer) if login is not None else 0.0
            if wait:  # engine.security.throttle: no password checked while no check is due
                security.failed("admin", "throttled", peer, login[0])
                await asyncio.sleep(security.throttled_hold(wait))
                return web.json_response({"error": "too many failed authentications for this user or address"},
                                         status=429, headers={"Retry-After": str(max(1, int(wait + 0.999)))})
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


def add_routes(app: web.Application, security: Any) -> None:
    """The security routes of the admin HTTP (behind ``middleware``)."""
    async def rotate_key(request: web.Request) -> web.Response:
        from engine.security import SecretBoxError, SecurityStateError

        try:
            kid = await asyncio.get_running_loop().run_in_executor(None, security.rotate_key)
        except (SecretBoxError, SecurityStateError) as exc:
            return web.json_response({"error": str(exc)}, status=409)
        return web.json_response({"kid": kid, "resealed": len(security.state.secrets),
                                  "keyFile": security.box.path if security.box.source == "file" else None})

    app.router.add_post(ROTATE_KEY_PATH, rotate_key)


def add_security_parser(sub: Any) -> None:
    import argparse
    import os

    sec = sub.add_parser("security", help="operate the node's security (rotate the key sealing the secrets)")
    what = sec.add_subparsers(dest="security_command", metavar="ACTION")
    rot = what.add_parser("rotate-key", help="a new key for the remoting secrets sealed in the log; every secret is "
                                             "re-sealed with it (the previous key leaves the key file)",
                          formatter_class=argparse.RawDescriptionHelpFormatter,
                          description="Asks a running node (its admin HTTP) to make a new sealing key and re-seal "
                                      "every remoting secret with it. Copy the new key file to the group's slaves.")
    rot.add_argument("--admin-url", default=os.environ.get("ROCKAFKA_ADMIN_URL", "http://127.0.0.1:8080"),
                     help="the node's admin HTTP (default $ROCKAFKA_ADMIN_URL or http://127.0.0.1:8080)")
    rot.add_argument("--user", default=os.environ.get("ROCKAFKA_ADMIN_USER"), help="a user with ALTER on the cluster")
    rot.add_argument("--password", default=os.environ.get("ROCKAFKA_ADMIN_PASSWORD"),
                     help="its password (default $ROCKAFKA_ADMIN_PASSWORD)")
    rot.add_argument("--ca", help="CA file to verify an HTTPS admin listener (default: the system's)")


def security_main(args: Any) -> int:
    import json
    import ssl
    import sys
    import urllib.error
    import urllib.request

    if getattr(args, "security_command", None) != "rotate-key":
        print("rockafka security: missing action; see `rockafka security --help`", file=sys.stderr)
        return 2
    req = urllib.request.Request(args.admin_url.rstrip("/") + ROTATE_KEY_PATH, data=b"{}", method="POST",
                                 headers={"Content-Type": "application/json"})
    if args.user:
        token = base64.b64encode(f"{args.user}:{args.password or ''}".encode()).decode()
        req.add_header("Authorization", f"Basic {token}")
    ctx = ssl.create_default_context(cafile=args.ca) if args.ca else None
    if ctx is not None:
        ctx.check_hostname = False  # nodes are addressed by IP; the CA is what is checked
    try:
        with urllib.request.urlopen(req, timeout=60, context=ctx) as r:
            doc = json.loads(r.read())
    except urllib.error.HTTPError as exc:
        try:
            why = json.loads(exc.read()).get("error", "")
        except ValueError:
            why = ""
        print(f"rockafka security: {exc.code} {why}".rstrip(), file=sys.stderr)
        return 1
    except (urllib.error.URLError, OSError) as exc:
        print(f"rockafka security: cannot reach {args.admin_url}: {getattr(exc, 'reason', exc)}", file=sys.stderr)
        return 1
    print(f"key {doc['kid']}: {doc['resealed']} secrets re-sealed" + (f"; key file {doc['keyFile']}" if doc.get("keyFile") else ""))
    return 0
