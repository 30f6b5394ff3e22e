"""The console: server-rendered pages (Jinja2 templates) with htmx for partial updates.

Every page is complete HTML that works without JavaScript — forms are plain GET/POST forms —
and htmx, when present, swaps only the part that changes: search results, the overview's
refreshing cards, the answer to a resend or an offset reset. htmx is vendored into ``static/``
by ``deploy/dev/vendor-htmx.sh`` (from its npm package, at a pinned version and checksum) when
the project is installed; nothing is fetched from elsewhere at run time, and without the file
the pages still work, only with whole-page loads.

Pages: overview (a health line: disk, replication in sync; node, listeners, store, throughput
and lag charts over the last hour), topics (with current produce/consume rates and consumer
lag), one topic (queues with min/max offsets, leader, replicas, configs), the message browser
(search by topic and queue/offset, time, key or message id -- the client id UNIQ_KEY or the
offset id; Kafka records decoded to key,
value, headers and timestamp, native messages to tags, keys, properties, delay and reconsume
count), consumer groups of both protocols (members, lag per queue, offset reset), dead letters
(browse, resend), users and ACL bindings (read-only for everyone: changes go through the ACL
admin requests, where authorization applies). Handlers only read (AdminState, NodeViews) except the two forms, which call
the admin component's SDK-backed writes.
"""

from __future__ import annotations

import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import jinja2
from aiohttp import web

from .. import __version__
from ..admin_security import csrf_token
from .charts import line_chart

HERE = Path(__file__).resolve().parent
STATIC = HERE / "static"


def _time(ms: Any) -> str:
    if not isinstance(ms, (int, float)) or ms <= 0:
        return ""
    return datetime.fromtimestamp(ms / 1000, timezone.utc).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3] + "Z"


def _size(n: Any) -> str:
    n = float(n or 0)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if n < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return str(n)


ENV = jinja2.Environment(loader=jinja2.FileSystemLoader(str(HERE / "templates")),
                         autoescape=jinja2.select_autoescape(["html"]), trim_blocks=True, lstrip_blocks=True,
                         undefined=jinja2.StrictUndefined)
ENV.filters["time"] = _time
ENV.filters["size"] = _size


def node_health(info: dict[str, Any], store: Any) -> dict[str, Any]:
    """One line for the overview: ``ok`` or what is wrong (disk full, a slave out of sync or
    disconnected, a slave without its master)."""
    problems = []
    if store.disk_full:
        problems.append("disk full: puts are refused")
    ha = info.get("replication") or {}
    for sl in ha.get("slaves") or []:
        if not sl.get("inSync"):
            problems.append(f"slave {sl.get('brokerId')} at {sl.get('address')} is not in sync")
    if ha.get("brokerRole") == "SLAVE" and not ha.get("connected"):
        problems.append("not connected to its master")
    slaves = ha.get("slaves") or []
    summary = (f"{len([s for s in slaves if s.get('inSync')])}/{len(slaves)} slaves in sync" if slaves
               else "no slaves" if ha.get("brokerRole") != "SLAVE" else "slave")
    return {"ok": not problems, "problems": problems, "summary": summary}


class Console:
    def __init__(self, admin: Any):  # the AdminHttp (admin_http.py) that owns the routes
        self.admin = admin

    def add_routes(self, app: web.Application) -> None:
        r = app.router
        r.add_get("/", self.overview)
        r.add_get("/topics", self.topics)
        r.add_get("/topics/{topic}", self.topic)
        r.add_get("/messages", self.messages)
        r.add_get("/groups", self.groups)
        r.add_get("/groups/{group}", self.group)
        r.add_post("/groups/{group}/reset", self.group_reset)
        r.add_get("/dlq", self.dlq_list)
        r.add_get("/dlq/{group}", self.dlq)
        r.add_post("/dlq/{group}/resend", self.dlq_resend)
        r.add_get("/acls", self.acls)
        r.add_static("/static/", STATIC, show_index=False)

    def render(self, request: web.Request, template: str, status: int = 200, **context: Any) -> web.Response:
        page = ENV.get_template(template)  # always a whole page: htmx picks its part with hx-select
        ctx = dict({"notice": None, "error": None}, **context, version=__version__, node=self.admin.node_info(), path=request.path,
                   htmx=(STATIC / "htmx.min.js").exists(), csrf=csrf_token(request))
        return web.Response(text=page.render(**ctx), status=status, content_type="text/html", charset="utf-8")

    # -- pages --------------------------------------------------------------------------------
    async def overview(self, request: web.Request) -> web.Response:
        state, history = self.admin.state, self.admin.history
        topics = await self.admin.call(state.topics, self.admin.node_info().get("broker_name", ""))
        groups = await self.admin.groups_doc()
        now = time.time()
        rates = history.rates()
        charts = [
            line_chart({"produced": rates["messages_in"], "consumed": rates["messages_out"]}, now,
                       "Messages per second, last hour", "/s"),
            line_chart({"in": rates["bytes_in"], "out": rates["bytes_out"]}, now, "Bytes per second, last hour",
                       "B/s"),
            line_chart(history.lags(), now, "Consumer lag (messages), last hour"),
        ]
        store = self.admin.store
        user_topics = [t for t in topics if not t["system"]]
        return self.render(request, "overview.html", title="Overview", charts=charts,
                           health=node_health(self.admin.node_info(), store),
                           topics=len(user_topics), messages=sum(t["messages"] for t in user_topics),
                           groups=len(groups), lag=sum(g["lag"] for g in groups),
                           connections={k: f() for k, f in sorted(self.admin.views.connections.items())},
                           store={"commitlog_bytes": store.commitlog.max_offset - store.commitlog.min_offset,
                                  "disk_used_ratio": store.disk_used_ratio() / 100.0, "disk_full": store.disk_full,
                                  "flush_disk_type": store.config.flush_disk_type,
                                  "delay_backlog": store.schedule.pending(), "timer_backlog": store.timer.pending()})

    async def topics(self, request: web.Request) -> web.Response:
        topics = await self.admin.call(self.admin.state.topics, self.admin.node_info().get("broker_name", ""))
        show_system = request.query.get("system") == "1"
        shown = [t for t in topics if show_system or not t["system"]]
        rates = self.admin.history.topic_rates()
        lag: dict[str, int] = {}
        for g in await self.admin.groups_doc():
            for q in g.get("queues") or []:
                lag[q["topic"]] = lag.get(q["topic"], 0) + int(q.get("lag") or 0)
        shown = [dict(t, rate_in=rates.get(t["topic"], (0.0, 0.0))[0], rate_out=rates.get(t["topic"], (0.0, 0.0))[1],
                      lag=lag.get(t["topic"], 0)) for t in shown]
        return self.render(request, "topics.html", title="Topics", topics=shown, show_system=show_system,
                           hidden=len(topics) - len(shown))

    async def acls(self, request: web.Request) -> web.Response:
        """Users and ACL bindings, read-only (changes go through the ACL admin requests)."""
        from engine.security import AclFilter

        security = self.admin.security
        users = [{"username": u["username"], "userType": u["userType"], "userStatus": u["userStatus"]}
                 for u in await self.admin.call(security.list_users)]
        bindings = sorted(await self.admin.call(security.describe_acls, AclFilter()),
                          key=lambda b: (b.principal, b.resource_type.name, b.resource_name, b.operation.name))
        rows = [{"principal": b.principal, "resource": f"{b.resource_type.name.lower()}:{b.resource_name}",
                 "pattern": b.pattern_type.name.lower(), "operation": b.operation.name.lower(),
                 "host": b.host, "permission": b.permission.name.lower()} for b in bindings]
        return self.render(request, "acls.html", title="Users and ACLs", users=users, acls=rows,
                           enforced=self.admin.config.security.authorization_enabled)

    async def topic(self, request: web.Request) -> web.Response:
        name = request.match_info["topic"]
        doc = await self.admin.call(self.admin.state.topic, name, self.admin.node_info().get("broker_name", ""))
        if doc is None:
            return self.render(request, "error.html", status=404, title="Not found",
                               message=f"Topic {name} does not exist.")
        return self.render(request, "topic.html", title=f"Topic {name}", topic=doc)

    async def messages(self, request: web.Request) -> web.Response:
        from ..http_params import Forbidden
        from ..http_params import BadRequest

        query = request.query
        rows: list[dict[str, Any]] | None = None
        error = None
        if any((query.get(k) or "").strip() for k in ("topic", "msg_id")):
            try:
                rows = await self.admin.search_messages(query, request)
            except (BadRequest, Forbidden) as exc:
                error = str(exc)
        principal, host = request.get("principal") or "User:ANONYMOUS", request.remote or "*"
        topics = [t for t in await self.admin.call(self.admin.state.topic_names)
                  if self.admin.security.may_read(principal, t, host)]  # only what the user may search
        return self.render(request, "messages.html", title="Messages", rows=rows, error=error, q=dict(query),
                           topics=topics)

    async def groups(self, request: web.Request) -> web.Response:
        return self.render(request, "groups.html", title="Consumer groups", groups=await self.admin.groups_doc())

    async def group(self, request: web.Request, notice: str | None = None, error: str | None = None,
                    status: int = 200) -> web.Response:
        name = request.match_info["group"]
        doc = await self.admin.group_doc(name)
        if doc is None:
            return self.render(request, "error.html", status=404, title="Not found",
                               message=f"Group {name} has no committed offsets and no members.")
        topics = sorted({r["topic"] for r in doc["queues"]} |
                        {s.split(":")[0] for m in doc["members"] for s in m["subscriptions"]})
        return self.render(request, "group.html", status=status, title=f"Group {name}", group=doc, topics=topics,
                           notice=notice, error=error)

    async def group_reset(self, request: web.Request) -> web.Response:
        from gateway_native.client import MQClientError

        from ..http_params import BadRequest, time_param

        form = await request.post()
        group = request.match_info["group"]
        topic = str(form.get("topic") or "").strip()
        to = str(form.get("to") or "")
        try:
            if not topic:
                raise BadRequest("choose a topic")
            ts = {"earliest": 0, "latest": -1}.get(to)
            if ts is None:
                ts = time_param(form, "time")
                if ts is None:
                    raise BadRequest("choose earliest, latest or give a time")
            rows = await self.admin.reset_offsets(group, topic, ts)
        except (BadRequest, MQClientError) as exc:
            return await self.group(request, error=f"Offsets not reset: {exc}", status=400)
        moved = ", ".join(f"queue {r['queue_id']} → {r['offset']}" for r in rows) or "no queue"
        return await self.group(request, notice=f"Offsets of {group} on {topic} reset: {moved}.")

    async def dlq_list(self, request: web.Request) -> web.Response:
        return self.render(request, "dlq_list.html", title="Dead letters",
                           groups=await self.admin.call(self.admin.state.dlq_groups))

    async def dlq(self, request: web.Request, notice: str | None = None, error: str | None = None,
                  status: int = 200) -> web.Response:
        group = request.match_info["group"]
        doc = await self.admin.call(self.admin.state.dlq, group, None, 200)
        return self.render(request, "dlq.html", status=status, title=f"Dead letters of {group}", dlq=doc,
                           notice=notice, error=error)

    async def dlq_resend(self, request: web.Request) -> web.Response:
        from gateway_native.client import MQClientError

        from ..http_params import BadRequest

        form = await request.post()
        msg_id = str(form.get("msg_id") or "").strip()
        group = request.match_info["group"]
        try:
            if not msg_id:
                raise BadRequest("no message id given")
            result = await self.admin.resend_dead_letter(group, msg_id)
        except (BadRequest, MQClientError) as exc:
            return await self.dlq(request, error=f"Not resent: {exc}", status=400)
        return await self.dlq(request, notice=f"Resent {result['resent']} to {result['to']}: group {group} "
                                              f"consumes it again from topic {result['originTopic']}.")
