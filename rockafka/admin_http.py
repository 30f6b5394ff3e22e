"""Admin HTTP listener: a JSON API, Prometheus ``/metrics`` and a dashboard page.

It reads the engine through the same facade the gateways use and never writes to the store
itself, so a slow or broken HTTP client cannot affect producers or consumers. Every store call
runs in the default executor: listing thousands of queues is not done on the event loop. The one
write, resending a dead letter, goes through the node's own NameServer and broker with the
Python SDK, exactly as ``rockafka admin dlq resend`` does.

Routes (GET unless marked):
- ``/`` dashboard (static HTML that renders the JSON below)
- ``/api/health``
- ``/api/topics`` and ``/api/topics/{topic}``: queues with min/max offsets and message counts
- ``/api/groups`` and ``/api/groups/{group}``: committed offsets and lag per queue
- ``/api/messages?topic=T&key=K`` (query by key, newest first) and ``/api/messages/{msg_id}``
- ``/api/dlq/{group}?offset=N&max=M``: browse the group's dead-letter queue
- POST ``/api/dlq/{group}/resend`` with ``{"msg_id": ID}``: send that dead letter back to
  ``%RETRY%<group>`` (reconsume count 0), so the group consumes it again under its original topic
- ``/metrics``: Prometheus text exposition
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
import base64
import time
from typing import Any, Callable

import structlog
from aiohttp import web

from engine.config import NodeConfig
from engine.listener_limits import ListenerGuard, start_server
from engine.message import decode_message
from engine.store import MessageStore

log = structlog.get_logger("rockafka.admin")

DLQ_PREFIX = "%DLQ%"
BODY_PREVIEW = 256


def _body_view(body: bytes) -> dict[str, Any]:
    preview = body[:BODY_PREVIEW]
    try:
        return {"body": preview.decode("utf-8"), "body_encoding": "utf-8", "body_size": len(body)}
    except UnicodeDecodeError:
        return {"body": base64.b64encode(preview).decode(), "body_encoding": "base64", "body_size": len(body)}


def message_view(unit: bytes) -> dict[str, Any]:
    m = decode_message(unit)
    view = {
        "msg_id": m.msg_id,
        "topic": m.topic,
        "queue_id": m.queue_id,
        "queue_offset": m.queue_offset,
        "commitlog_offset": m.commitlog_offset,
        "store_timestamp": m.store_timestamp,
        "born_timestamp": m.born_timestamp,
        "reconsume_times": m.reconsume_times,
        "properties": m.properties,
    }
    view.update(_body_view(m.body))
    return view


class AdminState:
    """Synchronous views over the store, run in an executor by the handlers."""

    def __init__(self, store: MessageStore):
        self.store = store
        self.guard: ListenerGuard | None = None
        self.send_queue: Any = None

    def queue_ids(self, topic: str) -> list[int]:
        cfg = self.store.topic_config.get(topic)
        known = set(self.store.queue_ids(topic))
        if cfg is not None:
            known.update(range(max(cfg.read_queue_nums, cfg.write_queue_nums)))
        return sorted(known)

    def topic_names(self) -> list[str]:
        names = set(self.store.topic_config.all())
        names.update(t for (t, _q) in self.store.consume_queues())
        return sorted(names)

    def queues(self, topic: str) -> list[dict[str, int]]:
        out = []
        for qid in self.queue_ids(topic):
            lo = self.store.get_min_offset_in_queue(topic, qid)
            hi = self.store.get_max_offset_in_queue(topic, qid)
            out.append({"queue_id": qid, "min_offset": lo, "max_offset": hi, "messages": max(0, hi - lo)})
        return out

    def topic(self, topic: str) -> dict[str, Any] | None:
        cfg = self.store.topic_config.get(topic)
        queues = self.queues(topic)
        if cfg is None and not queues:
            return None
        doc: dict[str, Any] = {"topic": topic, "queues": queues, "messages": sum(q["messages"] for q in queues)}
        if cfg is not None:
            doc.update(read_queue_nums=cfg.read_queue_nums, write_queue_nums=cfg.write_queue_nums,
                       perm=cfg.perm, order=cfg.order, attributes=dict(cfg.attributes))
        return doc

    def topics(self) -> list[dict[str, Any]]:
        return [t for t in (self.topic(name) for name in self.topic_names()) if t is not None]

    def group(self, group: str) -> dict[str, Any] | None:
        offsets = self.store.consumer_offsets.offsets_of(group)
        if not offsets:
            return None
        rows = []
        for (topic, qid), committed in sorted(offsets.items()):
            hi = self.store.get_max_offset_in_queue(topic, qid)
            rows.append({"topic": topic, "queue_id": qid, "committed_offset": committed,
                         "max_offset": hi, "lag": max(0, hi - committed)})
        return {"group": group, "queues": rows, "lag": sum(r["lag"] for r in rows)}

    def groups(self) -> list[dict[str, Any]]:
        return [g for g in (self.group(name) for name in sorted(self.store.consumer_offsets.groups())) if g]

    def query_by_key(self, topic: str, key: str, max_num: int) -> list[dict[str, Any]]:
        result = self.store.query_message(topic, key, max_num, 0, int(time.time() * 1000) + 60_000)
        return [message_view(bytes(u)) for u in result.messages]

    def message_by_id(self, msg_id: str) -> dict[str, Any] | None:
        m = self.store.look_message_by_id(msg_id)
        if m is None:
            return None
        view = {"msg_id": m.msg_id, "topic": m.topic, "queue_id": m.queue_id, "queue_offset": m.queue_offset,
                "commitlog_offset": m.commitlog_offset, "store_timestamp": m.store_timestamp,
                "born_timestamp": m.born_timestamp, "reconsume_times": m.reconsume_times,
                "properties": m.properties}
        view.update(_body_view(m.body))
        return view

    def dlq(self, group: str, offset: int | None, max_msgs: int) -> dict[str, Any]:
        topic = DLQ_PREFIX + group
        messages: list[dict[str, Any]] = []
        queues = self.queues(topic)
        for q in queues:
            start = q["min_offset"] if offset is None else max(offset, q["min_offset"])
            res = self.store.get_message("rockafka-admin", topic, q["queue_id"], start, max_msgs - len(messages))
            messages.extend(message_view(bytes(u)) for u in res.messages)
            if len(messages) >= max_msgs:
                break
        return {"group": group, "topic": topic, "queues": queues, "messages": messages}

    def metrics(self) -> str:
        lines = [
            "# HELP rockafka_queue_max_offset Next logical offset to be written, per queue.",
            "# TYPE rockafka_queue_max_offset gauge",
        ]
        mins = ["# HELP rockafka_queue_min_offset First readable logical offset, per queue.",
                "# TYPE rockafka_queue_min_offset gauge"]
        for topic in self.topic_names():
            for q in self.queues(topic):
                labels = f'topic="{_esc(topic)}",queue="{q["queue_id"]}"'
                lines.append(f"rockafka_queue_max_offset{{{labels}}} {q['max_offset']}")
                mins.append(f"rockafka_queue_min_offset{{{labels}}} {q['min_offset']}")
        lines += mins
        lines += ["# HELP rockafka_consumer_lag Messages between a group's committed offset and the queue end.",
                  "# TYPE rockafka_consumer_lag gauge"]
        for g in self.groups():
            for r in g["queues"]:
                lines.append(f'rockafka_consumer_lag{{group="{_esc(g["group"])}",topic="{_esc(r["topic"])}",'
                             f'queue="{r["queue_id"]}"}} {r["lag"]}')
        lines += ["# HELP rockafka_commitlog_max_offset Bytes appended to the commitlog so far.",
                  "# TYPE rockafka_commitlog_max_offset counter",
                  f"rockafka_commitlog_max_offset {self.store.commitlog.max_offset}",
                  "# HELP rockafka_disk_used_ratio Percentage of the data disk in use.",
                  "# TYPE rockafka_disk_used_ratio gauge",
                  f"rockafka_disk_used_ratio {self.store.disk_used_ratio():.2f}"]
        lines += disk_metrics(self.store)
        if self.guard is not None:
            lines += listener_metrics(self.guard)
        lines += flow_control_metrics(self.store, self.send_queue)
        return "\n".join(lines) + "\n"


class _GuardedProtocol(asyncio.Protocol):
    """An accepted admin connection: passes the node's ``ListenerGuard`` first (closed at once
    when over a limit), then is aiohttp's own request handler."""

    def __init__(self, guard: ListenerGuard, make_handler: Callable[[], Any]):
        self._guard = guard
        self._make_handler = make_handler
        self._inner: Any = None
        self._ticket = None

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


def _metric(name: str, kind: str, help_text: str, value: float | int) -> list[str]:
    return [f"# HELP {name} {help_text}", f"# TYPE {name} {kind}", f"{name} {value}"]


def disk_metrics(store: MessageStore) -> list[str]:
    d, cfg = store.disk, store.config
    return (
        _metric("rockafka_disk_full", "gauge", "1 while puts are refused because the data disk is full.", int(d.full))
        + _metric("rockafka_disk_space_warning_level_ratio", "gauge",
                  "diskSpaceWarningLevelRatio: above it puts are refused.", cfg.disk_space_warning_level_ratio)
        + _metric("rockafka_disk_space_clean_forcibly_ratio", "gauge",
                  "diskSpaceCleanForciblyRatio: above it the oldest segments are deleted (cleanFileForciblyEnable "
                  f"{str(cfg.clean_file_forcibly_enable).lower()}).", cfg.disk_space_clean_forcibly_ratio)
        + _metric("rockafka_puts_refused_disk_full_total", "counter", "Puts refused because the disk was full.",
                  d.puts_refused)
        + _metric("rockafka_disk_enospc_total", "counter", "Space reservations that failed with ENOSPC.",
                  d.enospc_count)
        + _metric("rockafka_commitlog_segments_deleted_forcibly_total", "counter",
                  "Commitlog segments deleted unexpired because the disk passed diskSpaceCleanForciblyRatio.",
                  d.segments_deleted_forcibly)
        + _metric("rockafka_commitlog_segments_deleted_expired_total", "counter",
                  "Commitlog segments deleted after fileReservedTime.", d.segments_deleted_expired)
        + _metric("rockafka_index_keys_not_indexed_total", "counter",
                  "Units whose keys a full disk kept out of the index (still stored and readable).",
                  store.index_service.keys_not_indexed)
    )


def flow_control_metrics(store: MessageStore, send_queue: Any) -> list[str]:
    lines = _metric("rockafka_puts_refused_os_page_cache_busy_total", "counter",
                    "Puts refused because another put held the commitlog longer than osPageCacheBusyTimeOutMills.",
                    store.page_cache_busy_refused)
    if send_queue is not None:
        lines += _metric("rockafka_send_queue_refused_total", "counter",
                         "Sends refused after waiting longer than waitTimeMillsInSendQueue ([TIMEOUT_CLEAN_QUEUE]).",
                         send_queue.refused)
        lines += _metric("rockafka_send_queue_size", "gauge", "Sends waiting for a store writer thread.",
                         send_queue.queued)
    return lines


def listener_metrics(guard: ListenerGuard) -> list[str]:
    m = guard.metrics()
    lines = ["# HELP rockafka_connections Client connections open, per listener.", "# TYPE rockafka_connections gauge"]
    lines += [f'rockafka_connections{{listener="{_esc(k)}"}} {v}' for k, v in sorted(m["connections_by_listener"].items())]
    lines += ["# HELP rockafka_connections_refused_total Connections closed when accepted, by limit.",
              "# TYPE rockafka_connections_refused_total counter"]
    lines += [f'rockafka_connections_refused_total{{reason="{r}"}} {m["connections_refused"].get(r, 0)}'
              for r in ("max_connections", "max_connections_per_ip", "open_files")]
    lines += ["# HELP rockafka_connections_closed_total Connections closed for a limit, by reason.",
              "# TYPE rockafka_connections_closed_total counter"]
    lines += [f'rockafka_connections_closed_total{{reason="{r}"}} {m["connections_closed"].get(r, 0)}'
              for r in ("idle", "request_receive_timeout")]
    for name, kind, help_text in (
            ("request_bytes_in_flight", "gauge", "Bytes of requests read and not yet answered (all listeners)."),
            ("request_bytes_in_flight_peak", "gauge", "Most request bytes held at once since start."),
            ("request_budget_waits", "counter", "Requests that waited for request budget (their socket unread)."),
            ("requests_waiting_for_budget", "gauge", "Requests waiting for request budget now."),
            ("max_connections", "gauge", "max_connections: node-wide connection limit."),
            ("max_connections_per_ip", "gauge", "max_connections_per_ip."),
            ("queued_max_request_bytes", "gauge", "queued_max_request_bytes: the request budget."),
            ("request_receive_timeout_ms", "gauge", "Time a request may take to arrive after its length prefix."),
            ("open_files_limit", "gauge", "The process's open-files (descriptor) limit."),
            ("open_files_reserve", "gauge", "Descriptors kept free for the store: connections refused past it.")):
        lines += _metric(f"rockafka_{name}", kind, help_text, m[name])
    return lines


def _esc(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _int_param(request: web.Request, name: str, default: int | None, lo: int, hi: int) -> int | None:
    raw = request.query.get(name)
    if raw is None:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise web.HTTPBadRequest(text=f'{{"error": "{name} must be an integer"}}', content_type="application/json")
    if not lo <= value <= hi:
        raise web.HTTPBadRequest(text=f'{{"error": "{name} must be in {lo}..{hi}"}}', content_type="application/json")
    return value


class AdminHttp:
    """The admin listener as a node component."""

    name = "admin"

    def __init__(self, store: MessageStore, config: NodeConfig,
                 namesrv_resolver: Callable[[], str] | None = None, guard: ListenerGuard | None = None,
                 send_queue: Any = None):
        self.state = AdminState(store)
        self.config = config
        self.namesrv_resolver = namesrv_resolver
        self.guard = guard or ListenerGuard(config.limits)
        self.state.guard = self.guard
        self.state.send_queue = send_queue
        self.port: int | None = None
        self._runner: web.AppRunner | None = None
        self._server: Any = None

    async def _call(self, fn, *args):
        return await asyncio.get_running_loop().run_in_executor(None, fn, *args)

    def app(self) -> web.Application:
        app = web.Application(client_max_size=self.config.limits.admin_request_max_bytes)
        r = app.router
        r.add_get("/", self.dashboard)
        r.add_get("/api/health", self.health)
        r.add_get("/api/topics", self.topics)
        r.add_get("/api/topics/{topic}", self.topic)
        r.add_get("/api/groups", self.groups)
        r.add_get("/api/groups/{group}", self.group)
        r.add_get("/api/messages", self.query_messages)
        r.add_get("/api/messages/{msg_id}", self.message)
        r.add_get("/api/dlq/{group}", self.dlq)
        r.add_post("/api/dlq/{group}/resend", self.dlq_resend)
        r.add_get("/metrics", self.metrics)
        return app

    async def start(self) -> None:
        lim = self.config.limits
        timeouts = [t for t in (lim.connections_max_idle_ms, lim.request_receive_timeout_ms) if t > 0]
        self._runner = web.AppRunner(self.app(), access_log=None,
                                     keepalive_timeout=min(timeouts) / 1000.0 if timeouts else 3630)
        await self._runner.setup()
        make_handler = self._runner.server
        guard = self.guard
        # the node's accept loop (not TCPSite), so every accepted connection passes the guard
        self._server = await start_server(guard, "admin", self.config.host, self.config.admin_port,
                                          lambda: _GuardedProtocol(guard, make_handler))
        self.port = self._server.sockets[0].getsockname()[1]
        log.info("admin_http_listening", host=self.config.host, port=self.port)

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None
        if self._server is not None:
            await self._server.wait_closed()
            self._server = None

    # -- handlers ---------------------------------------------------------------------------
    async def health(self, request: web.Request) -> web.Response:
        return web.json_response({"status": "ok"})

    async def topics(self, request: web.Request) -> web.Response:
        return web.json_response({"topics": await self._call(self.state.topics)})

    async def topic(self, request: web.Request) -> web.Response:
        name = request.match_info["topic"]
        doc = await self._call(self.state.topic, name)
        if doc is None:
            return web.json_response({"error": f"topic {name!r} does not exist"}, status=404)
        return web.json_response(doc)

    async def groups(self, request: web.Request) -> web.Response:
        return web.json_response({"groups": await self._call(self.state.groups)})

    async def group(self, request: web.Request) -> web.Response:
        name = request.match_info["group"]
        doc = await self._call(self.state.group, name)
        if doc is None:
            return web.json_response({"error": f"group {name!r} has no committed offsets"}, status=404)
        return web.json_response(doc)

    async def query_messages(self, request: web.Request) -> web.Response:
        topic, key = request.query.get("topic"), request.query.get("key")
        if not topic or not key:
            return web.json_response({"error": "query by key needs ?topic=...&key=..."}, status=400)
        max_num = _int_param(request, "max", 32, 1, 1000)
        return web.json_response({"messages": await self._call(self.state.query_by_key, topic, key, max_num)})

    async def message(self, request: web.Request) -> web.Response:
        msg_id = request.match_info["msg_id"]
        try:
            doc = await self._call(self.state.message_by_id, msg_id)
        except ValueError as exc:  # not a well-formed message id
            return web.json_response({"error": str(exc)}, status=400)
        if doc is None:
            return web.json_response({"error": f"no message with id {msg_id}"}, status=404)
        return web.json_response(doc)

    async def dlq(self, request: web.Request) -> web.Response:
        group = request.match_info["group"]
        offset = _int_param(request, "offset", None, 0, 2**63 - 1)
        max_msgs = _int_param(request, "max", 32, 1, 1000)
        return web.json_response(await self._call(self.state.dlq, group, offset, max_msgs))

    async def _json_body(self, request: web.Request) -> Any:
        """The request's JSON body; ValueError (a 400) when it is not JSON Python can hold:
        malformed, nested too deep (RecursionError), numbers over 4300 digits."""
        timeout_ms = self.config.limits.request_receive_timeout_ms
        try:
            async with asyncio.timeout(timeout_ms / 1000.0 if timeout_ms else None):
                raw = await request.read()
        except TimeoutError:
            raise web.HTTPRequestTimeout(text='{"error": "the request body did not arrive in time"}',
                                         content_type="application/json") from None
        from gateway_native.remoting.command import loads_json

        return loads_json(raw, "the request body")  # ValueError for anything Python cannot hold

    async def dlq_resend(self, request: web.Request) -> web.Response:
        group = request.match_info["group"]
        try:
            doc = await self._json_body(request)
        except ValueError:
            return web.json_response({"error": "the body must be JSON: {\"msg_id\": \"...\"}"}, status=400)
        msg_id = doc.get("msg_id") if isinstance(doc, dict) else None
        if not isinstance(msg_id, str) or not msg_id:
            return web.json_response({"error": "msg_id (a message id string) is required"}, status=400)
        if self.namesrv_resolver is None:
            return web.json_response({"error": "resend needs the node's NameServer"}, status=503)
        from gateway_native.client import Admin, MQClientError

        def resend() -> dict[str, Any]:
            with Admin(self.namesrv_resolver(), timeout_ms=10_000) as admin:
                m = admin.resend_dlq_message(group, msg_id)
            return {"resent": m.properties.get("ORIGIN_MESSAGE_ID") or m.msg_id, "to": "%RETRY%" + group,
                    "originTopic": m.properties.get("RETRY_TOPIC")}

        try:
            result = await self._call(resend)
        except MQClientError as exc:
            status = 404 if "is not in %DLQ%" in str(exc) else 502
            return web.json_response({"error": str(exc)}, status=status)
        log.info("dlq_resent", group=group, msg_id=msg_id, origin_topic=result["originTopic"])
        return web.json_response(result)

    async def metrics(self, request: web.Request) -> web.Response:
        text = await self._call(self.state.metrics)
        return web.Response(text=text, content_type="text/plain", charset="utf-8",
                            headers={"X-Prometheus-Format": "0.0.4"})

    async def dashboard(self, request: web.Request) -> web.Response:
        return web.Response(text=DASHBOARD_HTML, content_type="text/html", charset="utf-8")


DASHBOARD_HTML = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Rockafka</title>
<style>
body{font-family:system-ui,sans-serif;margin:2em;color:#222}
table{border-collapse:collapse;margin-bottom:2em}
th,td{border:1px solid #ccc;padding:.3em .7em;text-align:left}
th{background:#f3f3f3} .num{text-align:right} h1{margin-top:0}
</style></head>
<body>
<h1>Rockafka</h1>
<h2>Topics</h2><table id="topics"><thead><tr><th>topic</th><th>queues</th><th class="num">messages</th></tr></thead><tbody></tbody></table>
<h2>Consumer groups</h2><table id="groups"><thead><tr><th>group</th><th>queues</th><th class="num">lag</th></tr></thead><tbody></tbody></table>
<h2>Dead letters</h2><p>Browse a group's dead-letter queue: <input id="dlqgroup" placeholder="group"> <button id="dlqgo">show</button></p>
<table id="dlq"><thead><tr><th>msg id</th><th>original topic</th><th class="num">reconsumed</th><th>body</th><th></th></tr></thead><tbody></tbody></table>
<p id="dlqmsg"></p>
<script>
function cell(tr, text, cls){const td=document.createElement('td');td.textContent=text;if(cls)td.className=cls;tr.appendChild(td);}
async function load(){
  const t=await (await fetch('api/topics')).json(); const tb=document.querySelector('#topics tbody'); tb.innerHTML='';
  for(const x of t.topics){const tr=document.createElement('tr');cell(tr,x.topic);cell(tr,x.queues.length);cell(tr,x.messages,'num');tb.appendChild(tr);}
  const g=await (await fetch('api/groups')).json(); const gb=document.querySelector('#groups tbody'); gb.innerHTML='';
  for(const x of g.groups){const tr=document.createElement('tr');cell(tr,x.group);cell(tr,x.queues.length);cell(tr,x.lag,'num');gb.appendChild(tr);}
}
async function resend(grp, id){
  const r=await fetch('api/dlq/'+encodeURIComponent(grp)+'/resend',{method:'POST',headers:{'Content-Type':'application/json'},body:JSON.stringify({msg_id:id})});
  const d=await r.json(); document.getElementById('dlqmsg').textContent=r.ok?('resent '+d.resent+' to '+d.to):('resend failed: '+d.error);
}
document.getElementById('dlqgo').onclick=async()=>{
  const grp=document.getElementById('dlqgroup').value; if(!grp)return;
  const d=await (await fetch('api/dlq/'+encodeURIComponent(grp))).json(); const b=document.querySelector('#dlq tbody'); b.innerHTML='';
  for(const m of d.messages){const tr=document.createElement('tr');const id=(m.properties||{}).ORIGIN_MESSAGE_ID||m.msg_id;cell(tr,id);cell(tr,(m.properties||{}).RETRY_TOPIC||'');cell(tr,m.reconsume_times,'num');cell(tr,m.body);
    const td=document.createElement('td');const btn=document.createElement('button');btn.textContent='resend';btn.onclick=()=>resend(grp,id);td.appendChild(btn);tr.appendChild(td);b.appendChild(tr);}
};
load(); setInterval(load, 5000);
</script>
</body></html>
"""
