"""gRPC calls mapped onto the one policy model (``engine.security``, docs/design/security.md).

``GrpcGate`` runs at the top of every MessagingService method:

1. who: RocketMQ 5's clients sign each call with two metadata entries, ``x-mq-date-time``
   (``20260102T030405Z``) and ``authorization: MQv2-HMAC-SHA1 Credential=<accessKey>,
   SignedHeaders=x-mq-date-time, Signature=<hex HMAC-SHA1(secretKey, x-mq-date-time)>``
   (the proxy's ``DefaultAuthenticationContextBuilder``: the scheme is everything before the first
   space, ``Credential``'s first ``/``-separated part is the access key, no clock check). The
   secret is the remoting one (``SecurityService.secret_of``): one user, one secret, both
   protocols. A call carrying ``authorization`` is verified whether or not authentication is
   required (a wrong secret is never silently accepted); without it the principal is
   ``User:ANONYMOUS``, refused when ``authenticationEnabled`` (a client built with empty
   ``Credentials()`` still sends the header, with an empty ``Credential``: that is no credential). A failure answers the rpc's Status
   UNAUTHORIZED (40100) with the reason, after ``connection.failed.authentication.delay.ms``.
2. may it: ``checks(request)`` gives the request's (operation, resource) pairs, RocketMQ's
   PUB = WRITE topic, SUB = READ topic and READ group, route lookups DESCRIBE topic; a refusal is
   FORBIDDEN (40300) naming principal, operation and resource.

The Telemetry stream is authenticated when it opens (its metadata is the stream's) and each
settings command it carries is authorized like the calls it announces.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
from typing import Any

from engine.security import ANONYMOUS, CLUSTER_NAME, Operation as Op, ResourceType as RT, principal_of

from .proto import definition_pb2 as pb

LISTENER = "grpc"
SCHEME = "MQv2-HMAC-SHA1"
RETRY_PREFIX, DLQ_PREFIX = "%RETRY%", "%DLQ%"


class Refused(Exception):
    """A call the gate turns away: ``code`` is the v2 Code (UNAUTHORIZED / FORBIDDEN)."""

    def __init__(self, code: int, message: str):
        super().__init__(message)
        self.code = code


def parse_authorization(value: str) -> tuple[str, str]:
    """(access key, hex signature) from an ``authorization`` value; ValueError saying what is wrong."""
    scheme, _, rest = value.partition(" ")
    if not rest:
        raise ValueError("authentication header is incorrect: expected 'MQv2-HMAC-SHA1 Credential=..., "
                         "SignedHeaders=x-mq-date-time, Signature=...'")
    if scheme != SCHEME:
        raise ValueError(f"authentication scheme {scheme!r} is not supported (only {SCHEME})")
    access_key = signature = ""
    for item in rest.split(","):
        key, sep, val = item.strip().partition("=")
        if not sep:
            raise ValueError(f"authentication header item {item.strip()!r} is not key=value")
        if key == "Credential":
            access_key = val.split("/")[0]
        elif key == "Signature":
            signature = val
    if not access_key:
        raise ValueError("authentication header has no Credential (access key)")
    if not signature:
        raise ValueError("authentication header has no Signature")
    return access_key, signature


def sign(secret_key: str, date_time: str) -> str:
    """What the client sends as ``Signature``: hex HMAC-SHA1 of ``x-mq-date-time``."""
    return hmac.new(secret_key.encode("utf-8"), date_time.encode("utf-8"), hashlib.sha1).hexdigest()


def _topic(op: Op, name: str) -> tuple[Op, RT, str]:
    """A retry / DLQ topic belongs to its group: using it is using the group (RocketMQ's rule)."""
    for prefix in (RETRY_PREFIX, DLQ_PREFIX):
        if name.startswith(prefix):
            return Op.READ, RT.GROUP, name[len(prefix):]
    return op, RT.TOPIC, name


def _consume(group: str, topic: str) -> list[tuple[Op, RT, str]]:
    out = [(Op.READ, RT.GROUP, group)] if group else []
    if topic:
        out.append(_topic(Op.READ, topic))
    return out


def _send(req: Any) -> list[tuple[Op, RT, str]]:
    return [_topic(Op.WRITE, t) for t in dict.fromkeys(m.topic.name for m in req.messages)]


def _settings(st: Any) -> list[tuple[Op, RT, str]]:
    out: list[tuple[Op, RT, str]] = []
    if st.HasField("publishing"):
        out += [_topic(Op.WRITE, t.name) for t in st.publishing.topics if t.name]
    if st.HasField("subscription"):
        out += _consume(st.subscription.group.name, "")
        out += [_topic(Op.READ, e.topic.name) for e in st.subscription.subscriptions if e.topic.name]
    return out


# request message name -> its checks (the proxy's DefaultAuthorizationContextBuilder, in Kafka's terms)
_CHECKS = {
    "QueryRouteRequest": lambda r: [_topic(Op.DESCRIBE, r.topic.name)],
    "QueryAssignmentRequest": lambda r: _consume(r.group.name, r.topic.name),
    "HeartbeatRequest": lambda r: _consume(r.group.name, ""),
    "NotifyClientTerminationRequest": lambda r: _consume(r.group.name, ""),
    "SendMessageRequest": _send,
    "EndTransactionRequest": lambda r: [_topic(Op.WRITE, r.topic.name)],
    "RecallMessageRequest": lambda r: [_topic(Op.WRITE, r.topic.name)],
    "ReceiveMessageRequest": lambda r: _consume(r.group.name, r.message_queue.topic.name),
    "AckMessageRequest": lambda r: _consume(r.group.name, r.topic.name),
    "ChangeInvisibleDurationRequest": lambda r: _consume(r.group.name, r.topic.name),
    "ForwardMessageToDeadLetterQueueRequest": lambda r: _consume(r.group.name, r.topic.name),
    "TelemetryCommand": lambda r: _settings(r.settings) if r.WhichOneof("command") == "settings" else [],
    # answered UNIMPLEMENTED today; their rules are here so that answering them cannot skip one
    "PullMessageRequest": lambda r: _consume(r.group.name, r.message_queue.topic.name or "?"),
    "UpdateOffsetRequest": lambda r: _consume(r.group.name, r.message_queue.topic.name or "?"),
    "GetOffsetRequest": lambda r: _consume(r.group.name, r.message_queue.topic.name or "?"),
    "QueryOffsetRequest": lambda r: [_topic(Op.DESCRIBE, r.message_queue.topic.name or "?")],
    "SyncLiteSubscriptionRequest": lambda r: _consume(r.group.name, r.topic.name or "?"),
}


def checks(request: Any) -> list[tuple[Op, RT, str]]:
    """The (operation, resource type, name) pairs a request needs. A request type no rule names
    needs DESCRIBE on the cluster (fail closed: a new RPC cannot read for anyone by default)."""
    fn = _CHECKS.get(request.DESCRIPTOR.name)
    return fn(request) if fn is not None else [(Op.DESCRIBE, RT.CLUSTER, CLUSTER_NAME)]


class GrpcGate:
    """Authentication and authorization of the gRPC front's calls."""

    def __init__(self, security: Any, listener: str = LISTENER):
        self.security = security
        self.listener = listener
        # the client's real address (the server's relay knows it; grpcio sees the relay's)
        self.peer_of: Any = None

    def _principal(self, md: dict[str, str], peer: str | None = None) -> tuple[str | None, str, str]:
        """(principal, failure reason, message); principal None when the call is refused."""
        sec = self.security
        value = md.get("authorization")
        if value and "Credential=," in value.replace(" ", "") + ",":
            value = None  # Credentials() without a key: the client still sends the header, empty
        if not value:
            if sec.authentication_enabled:
                return None, "not_authenticated", ("authentication header is null: this node requires "
                                                   "authentication (the client's Credentials(accessKey, secretKey))")
            return ANONYMOUS, "", ""
        date_time = md.get("x-mq-date-time")
        if not date_time:
            return None, "bad_signature", "datetime is null: the x-mq-date-time metadata is missing"
        try:
            ak, given = parse_authorization(value)
        except ValueError as exc:
            return None, "bad_signature", str(exc)
        wait = sec.throttled(ak, peer)  # engine.security.throttle: no check while none is due
        if wait:
            return None, "throttled", (f"too many failed authentications for access key {ak} or this address; "
                                       f"retry after {max(1, int(wait * 1000))} ms")
        secret = sec.secret_of(ak)
        if secret is None:
            return None, "unknown_user", f"User:{ak} is not found"
        if not hmac.compare_digest(sign(secret, date_time), given.lower()):
            return None, "bad_signature", f"check signature failed for access key {ak} (wrong secret key?)"
        return principal_of(ak), "", ""

    async def authenticate(self, context: Any) -> str:
        """The call's principal; raises ``Refused`` (UNAUTHORIZED) after the failure delay."""
        md = {k: v for k, v in (context.invocation_metadata() or ()) if isinstance(v, str)}
        peer = self.peer_of(context) if self.peer_of is not None else context.peer()
        principal, reason, message = self._principal(md, peer)
        if principal is None:
            ak = None
            try:
                ak = parse_authorization(md.get("authorization", ""))[0]
            except ValueError:
                pass
            delay = self.security.failed(self.listener, reason, peer, ak)
            if delay > 0:
                await asyncio.sleep(delay)
            raise Refused(pb.Code.TOO_MANY_REQUESTS if reason == "throttled" else pb.Code.UNAUTHORIZED, message)
        return principal

    def authorize(self, principal: str, request: Any, host: str = "*") -> None:
        """Raises ``Refused`` (FORBIDDEN) naming the first check the principal fails."""
        sec = self.security
        for op, rtype, name in checks(request):
            if not sec.authorize(principal, op, rtype, name, host, self.listener):
                raise Refused(pb.Code.FORBIDDEN, f"{principal} may not {op.name} {rtype.name} {name} "
                                                 f"({request.DESCRIPTOR.name}); grant it with an ACL")

    async def check(self, context: Any, request: Any, host: str = "*") -> str:
        """Authenticate the call and authorize ``request``; returns the principal or raises ``Refused``."""
        principal = await self.authenticate(context)
        self.authorize(principal, request, host)
        return principal
