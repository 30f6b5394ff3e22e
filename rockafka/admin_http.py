"""Admin HTTP listener: the console, a JSON API and Prometheus ``/metrics``.

It reads the engine through the same facade the gateways use and the gateways through the
read-only ``NodeViews`` the node wiring hands it (rockafka/admin_state.py), so a slow or broken
HTTP client cannot affect producers or consumers. Store reads run in the default executor. The
writes — resending a dead letter, resetting a group's offsets — go through the node's own
NameServer and broker with the Python SDK, exactly as ``rockafka admin`` does, so the broker's
rules apply (a Kafka group with live members is not reset).

Routes (GET unless marked):
- console pages (rockafka/console): ``/``, ``/topics``, ``/topics/{topic}``, ``/messages``,
  ``/groups``, ``/groups/{group}``, ``/dlq``, ``/dlq/{group}``; POST ``/groups/{group}/reset``,
  POST ``/dlq/{group}/resend``; ``/static/...``
- ``/api/health``, ``/api/cluster``
- ``/api/topics`` and ``/api/topics/{topic}``: queues with min/max offsets and message counts
- ``/api/groups`` and ``/api/groups/{group}``: committed offsets and lag per queue, members of
  both protocols; POST ``/api/groups/{group}/reset`` with ``{"topic": T, "timestamp": ms}``
  (0 = earliest, -1 = latest)
- ``/api/messages?topic=T`` plus one of ``key=K``, ``queue=Q&offset=N``, ``time=ISO|ms`` (or
  nothing: the newest) and ``max=M``; ``/api/messages/{msg_id}``. Kafka records come back
  decoded (key, value, headers, timestamp), native messages with tags, keys and properties.
  Each message is shown only to a user that may READ the topic it is in (``may_read``, the
  check of every read path: internal topics are a super user's only); a search of a topic the
  user may not read, or an id of such a message, answers 403.
- ``/api/dlq/{group}?offset=N&max=M``; POST ``/api/dlq/{group}/resend`` with ``{"msg_id": ID}``
- ``/api/ha``: replication (``MessageStore.ha.runtime_info()``): role, epoch, slaves and their
  lag on a master, the master and how far behind on a slave
- ``/metrics``: Prometheus text exposition of engine.metrics.REGISTRY
Unknown topics, groups and message ids answer 404 with ``{"error": ...}``; bad parameters 400
(a body that is not JSON, nested too deep or with numbers too long to convert included).

Limits (``engine.config.ListenerLimits``, shared with the other listeners): a connection over
the node's connection limits is closed as soon as it is accepted; one without a complete
request for ``min(connections_max_idle_ms, request_receive_timeout_ms)`` is closed (a slow
sender of headers included), a body must arrive within ``request_receive_timeout_ms`` and be
at most ``admin_request_max_bytes`` (413 otherwise, before it is buffered).
"""

from __future__ import annotations

import asyncio
from typing import Any

import structlog
from aiohttp import web
from prometheus_client import generate_latest
from prometheus_client.exposition import CONTENT_TYPE_PLAIN_0_0_4
from prometheus_client.core import GaugeMetricFamily

from engine import metrics
from engine.config import NodeConfig
from broker.listener_limits import ListenerGuard, start_server
from engine.resource_metrics import ResourceCollector
from engine.store import MessageStore

from .admin_state import AdminState, NodeViews, with_members
from .http_params import BadRequest, Forbidden, int_param, time_param
from .ha_metrics import HACollector
from .history import History

log = structlog.get_logger("rockafka.admin")


class NodeCollector:
    """Scrape-time gauges from the gateways' read-only views: open connections per listener,
    live members per consumer group and protocol. Runs on the event loop (``collect_now``)."""

    def __init__(self, views: NodeViews):
        self.views = views
        self.snapshot: list[GaugeMetricFamily] = []

    def collect_now(self) -> None:
        conns = GaugeMetricFamily("rockafka_connections", "Open client connections, per listener.", labels=["listener"])
        for listener, count in sorted(self.views.connections.items()):
            conns.add_metric([listener], count())
        members = GaugeMetricFamily("rockafka_consumer_group_members", "Live members of a consumer group, per "
                                    "protocol.", labels=["group", "protocol"])
        for group, views in sorted(self.views.groups().items()):
            for v in views:
                members.add_metric([group, v.protocol], len(v.members))
        self.snapshot = [conns, members]

    def collect(self):
        return list(self.snapshot)


class _GuardedProtocol(asyncio.Protocol):
    """An accepted admin connection: passes the node's ``ListenerGuard`` first (closed at once
    when over a limit), then is aiohttp's own request handler."""

    def __init__(self, guard: ListenerGuard, make_handler: Any):
        self._guard = guard
        self._make_handler = make_handler
        self._inner: Any = None
        self._ticket: Any = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        peer = transport.get_extra_info("peername") or ("?", 0)
        sock = transport.get_extra_info("socket")
        self._ticket = self._guard.admit("admin", str(peer[0]), sock.fileno() if sock is not None else -1)
        if self._ticket is None:
            transport.close()
            return
        self._inner = self._make_handler()
        self._inner.connection_made(transport)

    def data_received(self, data: bytes) -> None:
        if self._inner is not None:
            self._inner.data_received(data)

    def eof_received(self) -> bool | None:
        return self._inner.eof_received() if self._inner is not None else None

    def pause_writing(self) -> None:
        if self._inner is not None:
            self._inner.pause_writing()

    def resume_writing(self) -> None:
        if self._inner is not None:
            self._inner.resume_writing()

    def connection_lost(self, exc: BaseException | None) -> None:
        if self._inner is not None:
            self._inner.connection_lost(exc)
        self._guard.release(self._ticket)
        self._ticket = None


class AdminHttp:
    """The admin listener as a node component."""

    name = "admin"

    def __init__(self, store: MessageStore, config: NodeConfig, views: NodeViews | None = None,
                 guard: ListenerGuard | None = None, send_queue: Any = None):
        self.store = store
        self.guard = guard or ListenerGuard(config.limits)  # the node passes the one all listeners share
        self.send_queue = send_queue
        self._server: Any = None
        self.state = AdminState(store)
        self.config = config
        self.views = views or NodeViews()
        self.history = History(self.state.group_lags, config.extra_int("console_sample_interval_ms", 10_000) / 1000)
        self.port: int | None = None
        self._runner: web.AppRunner | None = None
        self._collectors: list[Any] = []

    async def call(self, fn, *args):
        return await asyncio.get_running_loop().run_in_executor(None, fn, *args)

    def app(self) -> web.Application:
        from .console import Console

        from engine import security as engine_security

        from .admin_security import middleware

        self.security = engine_security.for_store(self.store, self.config)
        app = web.Application(client_max_size=self.config.limits.admin_request_max_bytes,
                              middlewares=[middleware(self.security)])
        r = app.router
        r.add_get("/api/health", self.health)
        r.add_get("/api/cluster", self.cluster)
        r.add_get("/api/topics", self.topics)
        r.add_get("/api/topics/{topic}", self.topic)
        r.add_get("/api/groups", self.groups)
        r.add_get("/api/groups/{group}", self.group)
        r.add_post("/api/groups/{group}/reset", self.group_reset)
        r.add_get("/api/messages", self.query_messages)
        r.add_get("/api/messages/{msg_id}", self.message)
        r.add_get("/api/dlq/{group}", self.dlq)
        r.add_post("/api/dlq/{group}/resend", self.dlq_resend)
        r.add_get("/api/ha", self.ha)
        r.add_get("/metrics", self.metrics)
        from .admin_security import add_routes

        add_routes(app, self.security)
        Console(self).add_routes(app)
        return app

    async def start(self) -> None:
        self._collectors = [metrics.StoreCollector(self.store), NodeCollector(self.views), HACollector(self.store),
                            ResourceCollector(self.store, self.guard, self.send_queue)]
        for c in self._collectors:
            metrics.REGISTRY.register(c)
        lim = self.config.limits
        timeouts = [t for t in (lim.connections_max_idle_ms, lim.request_receive_timeout_ms) if t > 0]
        self._runner = web.AppRunner(self.app(), access_log=None,
                                     keepalive_timeout=min(timeouts) / 1000.0 if timeouts else 3630)
        await self._runner.setup()
        make_handler = self._runner.server
        guard = self.guard
        # the node's accept loop (not TCPSite), so every accepted connection passes the guard
        tls = None
        if self.config.security.admin_tls_enable:  # HTTPS with the node's certificate
            from broker.listener_limits import ListenerTls
            from broker import tls as sec_tls

            tls = ListenerTls(sec_tls.server_context(self.config, self.config.security.admin_host), "enforcing")
        # loopback unless adminHost says otherwise (docs/design/security.md, "Safe defaults")
        self._server = await start_server(guard, "admin", self.config.security.admin_host, self.config.admin_port,
                                          lambda: _GuardedProtocol(guard, make_handler), tls=tls)
        self.port = self._server.sockets[0].getsockname()[1]
        self.history.start()
        log.info("admin_http_listening", host=self.config.security.admin_host, port=self.port,
                 https=self.config.security.admin_tls_enable)

    async def stop(self) -> None:
        await self.history.stop()
        if self._server is not None:
            self._server.close()
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None
        if self._server is not None:
            await self._server.wait_closed()
            self._server = None
        for c in self._collectors:
            metrics.REGISTRY.unregister(c)
        self._collectors = []

    # -- shared by the API and the console ------------------------------------------------------
    def node_info(self) -> dict[str, Any]:
        return self.views.node_info()

    def readable(self, request: Any, rows: list[dict[str, Any]] | None, what: str) -> list[dict[str, Any]] | None:
        """``rows`` when the request's user may read every row's topic; Forbidden otherwise
        (engine/security/reads.py: READ on the topic a message is in)."""
        principal, host = request.get("principal") or "User:ANONYMOUS", request.remote or "*"
        for topic in sorted({r.get("topic") or "" for r in rows or ()}):
            if not self.security.may_read(principal, topic, host, "admin"):
                raise Forbidden(f"{principal} may not read {what}")
        return rows

    async def search_messages(self, query: Any, request: Any) -> list[dict[str, Any]]:
        """Rows for a message search (see the module docstring) the request's user may read;
        BadRequest on bad input, Forbidden for a topic (or message) the user may not read."""
        topic = (query.get("topic") or "").strip()
        msg_id = (query.get("msg_id") or "").strip()
        max_rows = int_param(query, "max", 32, 1, 1000)
        if msg_id:
            try:
                rows = await self.call(self.state.message_by_id, msg_id, topic or None)
            except ValueError as exc:
                raise BadRequest(str(exc)) from None
            return self.readable(request, rows, f"message {msg_id}") or []
        if not topic:
            raise BadRequest("search needs a topic (or a message id)")
        self.readable(request, [{"topic": topic}], f"the messages of topic {topic}")
        key = (query.get("key") or "").strip()
        if key:
            return await self.call(self.state.query_by_key, topic, key, max_rows)
        queue = int_param(query, "queue", None, 0, 1 << 20)
        offset = int_param(query, "offset", None, 0, 2**63 - 1)
        since = time_param(query, "time")
        if offset is not None and queue is None:
            raise BadRequest("an offset needs a queue (partition)")
        return await self.call(self.state.browse, topic, queue, offset, since, max_rows)

    async def groups_doc(self) -> list[dict[str, Any]]:
        return await self.call(self.state.groups, self.views.groups())

    async def group_doc(self, name: str) -> dict[str, Any] | None:
        live = self.views.groups().get(name, [])
        doc = await self.call(self.state.group, name)
        if doc is None and not live:
            return None
        return with_members(doc or {"group": name, "queues": [], "lag": 0}, live)

    async def resend_dead_letter(self, group: str, msg_id: str) -> dict[str, Any]:
        from gateway_native.client import Admin
        from gateway_native.client.admin import dead_letter_origin

        def resend() -> dict[str, Any]:
            with Admin(self._namesrv(), timeout_ms=10_000, **self._client_options()) as admin:
                m = admin.resend_dlq_message(group, msg_id)
            origin, to, _ = dead_letter_origin(group, m.properties)
            return {"resent": m.properties.get("ORIGIN_MESSAGE_ID") or m.msg_id, "to": to, "originTopic": origin}

        result = await self.call(resend)
        log.info("dlq_resent", group=group, msg_id=msg_id, origin_topic=result["originTopic"])
        return result

    async def reset_offsets(self, group: str, topic: str, timestamp_ms: int) -> list[dict[str, Any]]:
        from gateway_native.client import Admin

        def reset() -> list[dict[str, Any]]:
            with Admin(self._namesrv(), timeout_ms=10_000, **self._client_options()) as admin:
                table = admin.reset_offset_by_timestamp(group, topic, timestamp_ms)
            return [{"queue_id": mq.queue_id, "offset": off} for mq, off in sorted(table.items())]

        rows = await self.call(reset)
        log.info("group_offsets_reset", group=group, topic=topic, timestamp=timestamp_ms, queues=len(rows))
        return rows

    def _client_options(self) -> dict[str, Any]:
        """The node's own writes go through its NameServer and broker as the node itself: signed
        with the inner credentials (the HTTP user was authorized here), over TLS when the
        remoting ports require it."""
        from engine.security import parse_pair
        from broker.tls import client_context, tls_mode

        inner = parse_pair(self.config.security.inner_client_authentication_credentials, "accessKey", "secretKey")
        tls = client_context(self.config) if tls_mode(self.config) == "enforcing" or self.config.security.tls_enable \
            else None
        return {"credentials": inner, "tls": tls}

    def _namesrv(self) -> str:
        if self.views.namesrv_addr is None:
            raise BadRequest("this listener runs without the node's NameServer")
        return self.views.namesrv_addr()

    # -- JSON API ---------------------------------------------------------------------------
    @staticmethod
    def error(status: int, message: str) -> web.Response:
        return web.json_response({"error": message}, status=status)

    async def health(self, request: web.Request) -> web.Response:
        return web.json_response({"status": "ok"})

    async def cluster(self, request: web.Request) -> web.Response:
        return web.json_response(self.node_info())

    async def ha(self, request: web.Request) -> web.Response:
        return web.json_response(await self.call(self.store.ha.runtime_info))

    async def topics(self, request: web.Request) -> web.Response:
        return web.json_response({"topics": await self.call(self.state.topics, self.node_info().get("broker_name", ""))})

    async def topic(self, request: web.Request) -> web.Response:
        name = request.match_info["topic"]
        doc = await self.call(self.state.topic, name, self.node_info().get("broker_name", ""))
        if doc is None:
            return self.error(404, f"topic {name!r} does not exist")
        return web.json_response(doc)

    async def groups(self, request: web.Request) -> web.Response:
        return web.json_response({"groups": await self.groups_doc()})

    async def group(self, request: web.Request) -> web.Response:
        name = request.match_info["group"]
        doc = await self.group_doc(name)
        if doc is None:
            return self.error(404, f"group {name!r} has no committed offsets and no members")
        return web.json_response(doc)

    async def _json_body(self, request: web.Request, example: str) -> dict[str, Any]:
        """The JSON object in the body; BadRequest when it is not JSON Python can hold (nested
        too deep, integers over 4300 digits, lone surrogates) or does not arrive in time."""
        from gateway_native.remoting.command import loads_json

        timeout_ms = self.config.limits.request_receive_timeout_ms
        try:
            async with asyncio.timeout(timeout_ms / 1000.0 if timeout_ms else None):
                raw = await request.read()
        except TimeoutError:
            raise BadRequest("the request body did not arrive within request_receive_timeout_ms") from None
        try:
            doc = loads_json(raw, "the body")
        except ValueError as exc:
            raise BadRequest(f"the body must be JSON: {example} ({exc})") from None
        if not isinstance(doc, dict):
            raise BadRequest(f"the body must be a JSON object: {example}")
        return doc

    async def group_reset(self, request: web.Request) -> web.Response:
        from gateway_native.client import MQClientError

        group = request.match_info["group"]
        try:
            doc = await self._json_body(request, '{"topic": "...", "timestamp": 0}')
            topic, ts = doc.get("topic"), doc.get("timestamp")
            if not isinstance(topic, str) or not topic or not isinstance(ts, int):
                raise BadRequest("topic (a string) and timestamp (epoch ms; 0 earliest, -1 latest) are required")
            return web.json_response({"group": group, "topic": topic, "queues": await self.reset_offsets(group, topic, ts)})
        except BadRequest as exc:
            return self.error(400, str(exc))
        except MQClientError as exc:
            return self.error(409 if "member" in str(exc).lower() else 502, str(exc))

    async def query_messages(self, request: web.Request) -> web.Response:
        try:
            return web.json_response({"messages": await self.search_messages(request.query, request)})
        except BadRequest as exc:
            return self.error(400, str(exc))
        except Forbidden as exc:
            return self.error(403, str(exc))

    async def message(self, request: web.Request) -> web.Response:
        msg_id = request.match_info["msg_id"]
        try:
            rows = self.readable(request, await self.call(self.state.message_by_id, msg_id,
                                                          request.query.get("topic") or None),
                                 f"message {msg_id}")
        except ValueError as exc:
            return self.error(400, str(exc))
        except Forbidden as exc:
            return self.error(403, str(exc))
        if not rows:
            return self.error(404, f"no message with id {msg_id}")
        return web.json_response(dict(rows[0], records=rows) if len(rows) > 1 else rows[0])

    async def dlq(self, request: web.Request) -> web.Response:
        try:
            offset = int_param(request.query, "offset", None, 0, 2**63 - 1)
            max_msgs = int_param(request.query, "max", 32, 1, 1000)
        except BadRequest as exc:
            return self.error(400, str(exc))
        return web.json_response(await self.call(self.state.dlq, request.match_info["group"], offset, max_msgs))

    async def dlq_resend(self, request: web.Request) -> web.Response:
        from gateway_native.client import MQClientError

        group = request.match_info["group"]
        try:
            doc = await self._json_body(request, '{"msg_id": "..."}')
            msg_id = doc.get("msg_id")
            if not isinstance(msg_id, str) or not msg_id:
                raise BadRequest("msg_id (a message id string) is required")
            return web.json_response(await self.resend_dead_letter(group, msg_id))
        except BadRequest as exc:
            return self.error(400, str(exc))
        except MQClientError as exc:
            return self.error(404 if "is not in %DLQ%" in str(exc) else 502, str(exc))

    async def metrics(self, request: web.Request) -> web.Response:
        for c in self._collectors:
            if isinstance(c, NodeCollector):
                c.collect_now()  # gateway state is read on the loop that owns it
        body = await self.call(generate_latest, metrics.REGISTRY)
        # the 0.0.4 text format every Prometheus (Debian's 2.42 too) parses
        return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_PLAIN_0_0_4})
