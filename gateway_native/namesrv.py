"""NameServer: the routing registry brokers register with and clients ask for routes.

Owns ``RouteInfoManager`` state (RocketMQ's tables):
- ``topic_queue_table``: topic -> broker name -> QueueData (read/write queue counts, perm, sysflag)
- ``broker_addr_table``: broker name -> BrokerData (cluster, broker id -> address)
- ``cluster_addr_table``: cluster -> broker names
- ``broker_live_table``: broker address -> last registration time, data version, connection
and the KV config (namespace -> key -> value, persisted when a path is given).

Invariants: a broker that has not re-registered within ``broker_expired_ms`` (120 s, like
RocketMQ's BROKER_CHANNEL_EXPIRED_TIME) or whose connection closed is removed with every route
it alone carried; each NameServer is independent (brokers register with all of them).
Route data goes out as standard JSON to clients at V4_9_4 or later or that set
``acceptStandardJsonOnly``; older clients get fastjson's legacy form with unquoted integer keys
in ``brokerAddrs``, as Apache RocketMQ's NameServer answers them.
"""

from __future__ import annotations

import asyncio
import json
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import structlog
from engine.config_manager import write_atomic
from engine.topic_config import PERM_WRITE

from . import namesrv_admin
from .dispatch import ProcessorTable, RemotingServer
from .remoting.route import decode_route_json  # noqa: F401  (re-exported: the wire form lives in remoting)
from .remoting.codes import V4_9_4, RequestCode as RC, ResponseCode as R
from .remoting.command import RemotingCommand, loads_json
from .transport import Connection

log = structlog.get_logger("rockafka.namesrv")

ORDER_TOPIC_CONFIG_NAMESPACE = "ORDER_TOPIC_CONFIG"


@dataclass
class BrokerLive:
    last_update: float
    data_version: dict[str, Any]
    conn: Connection | None
    ha_server_addr: str | None
    cluster: str
    broker_name: str
    broker_id: int
    extras: dict[str, Any] = field(default_factory=dict)  # the body's "rockafka" object (Kafka listener, role, ...)


@dataclass
class RouteInfo:
    topic_queue_table: dict[str, dict[str, dict[str, Any]]] = field(default_factory=dict)
    broker_addr_table: dict[str, dict[str, Any]] = field(default_factory=dict)
    cluster_addr_table: dict[str, set[str]] = field(default_factory=dict)
    broker_live_table: dict[str, BrokerLive] = field(default_factory=dict)

    # -- registration -------------------------------------------------------------------------
    def register(self, cluster: str, broker_addr: str, broker_name: str, broker_id: int, ha_server_addr: str | None,
                 topic_configs: dict[str, dict[str, Any]], data_version: dict[str, Any], conn: Connection | None,
                 extras: dict[str, Any] | None = None) -> dict[str, Any]:
        self.cluster_addr_table.setdefault(cluster, set()).add(broker_name)
        bd = self.broker_addr_table.setdefault(broker_name, {"cluster": cluster, "brokerName": broker_name,
                                                             "brokerAddrs": {}, "enableActingMaster": False})
        addrs: dict[int, str] = bd["brokerAddrs"]
        if broker_id == 0 and extras and addrs.get(0) not in (None, broker_addr):
            # controller mode: two brokers claim to be master (a zombie has not learned yet that it
            # was replaced); the newer master epoch keeps brokerId 0, the other is listed as a slave
            holder = self.broker_live_table.get(addrs[0])
            theirs = int((holder.extras if holder else {}).get("masterEpoch", -1))
            mine = int(extras.get("masterEpoch", -1))
            if holder is not None and theirs > mine and extras.get("replicaId") is not None:
                log.warning("broker_stale_master_registration", broker_name=broker_name, addr=broker_addr,
                            epoch=mine, master_addr=addrs[0], master_epoch=theirs)
                broker_id = int(extras["replicaId"])
        # one address per id: a broker that came back on another address replaces its old entry
        for bid, addr in list(addrs.items()):
            if addr == broker_addr and bid != broker_id:
                del addrs[bid]
        first = addrs.get(broker_id) != broker_addr
        addrs[broker_id] = broker_addr
        prev = self.broker_live_table.get(broker_addr)
        changed = prev is None or prev.data_version != data_version or first
        master_missing = broker_id != 0 and 0 not in addrs
        if changed and (broker_id == 0 or (master_missing and topic_configs)):
            # the master's topic set is authoritative for this broker name; while no master is
            # registered, a slave's keeps the group routable (consumers read from the slave)
            for topic, qmap in list(self.topic_queue_table.items()):
                if broker_name in qmap and topic not in topic_configs:
                    del qmap[broker_name]
                    if not qmap:
                        del self.topic_queue_table[topic]
            for topic, tc in topic_configs.items():
                self.topic_queue_table.setdefault(topic, {})[broker_name] = {
                    "brokerName": broker_name, "readQueueNums": int(tc.get("readQueueNums", 8)),
                    "writeQueueNums": int(tc.get("writeQueueNums", 8)), "perm": int(tc.get("perm", 6)),
                    "topicSysFlag": int(tc.get("topicSysFlag", 0)),
                }
        self.broker_live_table[broker_addr] = BrokerLive(time.monotonic(), data_version, conn, ha_server_addr,
                                                         cluster, broker_name, broker_id, dict(extras or {}))
        if prev is None:
            log.info("broker_registered", cluster=cluster, broker_name=broker_name, broker_id=broker_id, addr=broker_addr,
                     topics=len(topic_configs))
        result: dict[str, Any] = {"haServerAddr": None, "masterAddr": None}
        if broker_id != 0:
            master = addrs.get(0)
            if master:
                result["masterAddr"] = master
                live = self.broker_live_table.get(master)
                result["haServerAddr"] = live.ha_server_addr if live else None
        return result

    def unregister(self, cluster: str, broker_addr: str, broker_name: str, broker_id: int, reason: str) -> None:
        self.broker_live_table.pop(broker_addr, None)
        bd = self.broker_addr_table.get(broker_name)
        if bd is not None:
            addrs = bd["brokerAddrs"]
            if addrs.get(broker_id) == broker_addr:
                del addrs[broker_id]
            if not addrs:
                del self.broker_addr_table[broker_name]
                names = self.cluster_addr_table.get(cluster)
                if names is not None:
                    names.discard(broker_name)
                    if not names:
                        del self.cluster_addr_table[cluster]
                for topic, qmap in list(self.topic_queue_table.items()):
                    qmap.pop(broker_name, None)
                    if not qmap:
                        del self.topic_queue_table[topic]
        log.info("broker_unregistered", cluster=cluster, broker_name=broker_name, broker_id=broker_id, addr=broker_addr,
                 reason=reason)

    def expire(self, max_age_s: float) -> list[str]:
        now = time.monotonic()
        gone = [addr for addr, live in self.broker_live_table.items() if now - live.last_update > max_age_s]
        for addr in gone:
            live = self.broker_live_table[addr]
            self.unregister(live.cluster, addr, live.broker_name, live.broker_id, "expired")
            if live.conn is not None:
                live.conn.close()
        return gone

    def connection_closed(self, conn: Connection) -> None:
        for addr, live in list(self.broker_live_table.items()):
            if live.conn is conn:
                self.unregister(live.cluster, addr, live.broker_name, live.broker_id, "connection_closed")

    # -- queries -------------------------------------------------------------------------
    def route(self, topic: str) -> dict[str, Any] | None:
        qmap = self.topic_queue_table.get(topic)
        if not qmap:
            return None
        queue_datas = [dict(q) for _, q in sorted(qmap.items())]
        broker_datas = []
        for name in sorted(qmap):
            bd = self.broker_addr_table.get(name)
            if bd is not None:
                broker_datas.append({**bd, "brokerAddrs": dict(sorted(bd["brokerAddrs"].items()))})
        if not broker_datas:
            return None
        return {"brokerDatas": broker_datas, "filterServerTable": {}, "queueDatas": queue_datas}

    def cluster_info(self) -> dict[str, Any]:
        """RocketMQ's ClusterInfo, plus ``brokerExtraTable`` (broker address -> what it registered
        under "rockafka": Kafka listener, role, replication state); Java tools ignore the extra key."""
        return {
            "brokerAddrTable": {name: {**bd, "brokerAddrs": dict(sorted(bd["brokerAddrs"].items()))}
                                for name, bd in sorted(self.broker_addr_table.items())},
            "clusterAddrTable": {c: sorted(names) for c, names in sorted(self.cluster_addr_table.items())},
            "brokerExtraTable": {addr: dict(live.extras) for addr, live in sorted(self.broker_live_table.items())
                                 if live.extras},
            # broker name -> its topics whose queues lack the write bit here (wipeWritePerm): the
            # Kafka view refuses produce to those partitions while consumers still read them
            "readOnlyTopicTable": self.read_only_topics(),
        }

    def read_only_topics(self) -> dict[str, list[str]]:
        out: dict[str, list[str]] = {}
        for topic, qmap in sorted(self.topic_queue_table.items()):
            for name, qd in qmap.items():
                if not int(qd.get("perm", 6)) & PERM_WRITE:
                    out.setdefault(name, []).append(topic)
        return out


def encode_route_json(obj: Any, standard: bool) -> bytes:
    """JSON of route data; ``standard=False`` writes ``brokerAddrs`` keys unquoted (fastjson's form)."""
    text = json.dumps(obj, separators=(",", ":"), sort_keys=True)
    if standard:
        return text.encode()
    import re

    def unquote(m: "re.Match[str]") -> str:
        return re.sub(r'"(-?\d+)":', r"\1:", m.group(0))
    return re.sub(r'"brokerAddrs":\{[^{}]*\}', unquote, text).encode()


class KVConfig:
    def __init__(self, path: str | os.PathLike[str] | None):
        self.path = Path(path) if path else None
        self.table: dict[str, dict[str, str]] = {}
        if self.path and self.path.exists():
            try:
                self.table = json.loads(self.path.read_text("utf-8")).get("configTable", {})
            except (OSError, ValueError) as exc:
                log.warning("kv_config_unreadable", path=str(self.path), error=str(exc))

    def _persist(self) -> None:
        if not self.path:
            return
        write_atomic(self.path, json.dumps({"configTable": self.table}, indent=1).encode("utf-8"))

    def put(self, ns: str, key: str, value: str) -> None:
        self.table.setdefault(ns, {})[key] = value
        self._persist()

    def get(self, ns: str, key: str) -> str | None:
        return self.table.get(ns, {}).get(key)

    def delete(self, ns: str, key: str) -> None:
        if self.table.get(ns, {}).pop(key, None) is not None:
            if not self.table[ns]:
                del self.table[ns]
            self._persist()


# -- processors ---------------------------------------------------------------------------
NAMESRV_PROCESSORS = ProcessorTable("namesrv")
reg = NAMESRV_PROCESSORS.register


def _json(obj: Any) -> bytes:
    return json.dumps(obj, separators=(",", ":"), sort_keys=True).encode()


@reg(RC.REGISTER_BROKER)
async def register_broker(ns: "NameServer", conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
    if cmd.get_bool("compressed"):
        return cmd.response(R.SYSTEM_ERROR, "compressed register-broker bodies are not supported; register with compressed=false")
    topic_configs: dict[str, Any] = {}
    data_version: dict[str, Any] = {}
    extras: dict[str, Any] = {}
    if cmd.body:
        try:
            body = loads_json(cmd.body, "register-broker body")
            wrapper = body.get("topicConfigSerializeWrapper") or {}
            topic_configs = wrapper.get("topicConfigTable") or {}
            data_version = wrapper.get("dataVersion") or {}
            extras = body.get("rockafka") or {}
            if not isinstance(extras, dict):
                extras = {}
        except (ValueError, AttributeError) as exc:
            return cmd.response(R.SYSTEM_ERROR, f"register-broker body is not valid JSON: {exc}")
    result = ns.routes.register(cmd.require_str("clusterName"), cmd.require_str("brokerAddr"), cmd.require_str("brokerName"),
                                cmd.require_int("brokerId"), cmd.get_str("haServerAddr"), topic_configs, data_version, conn,
                                extras)
    order = ns.kv.table.get(ORDER_TOPIC_CONFIG_NAMESPACE, {})
    return cmd.response(R.SUCCESS, None, {k: v for k, v in result.items() if v}, _json({"table": order}))


@reg(RC.UNREGISTER_BROKER)
async def unregister_broker(ns: "NameServer", conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
    ns.routes.unregister(cmd.require_str("clusterName"), cmd.require_str("brokerAddr"), cmd.require_str("brokerName"),
                         cmd.require_int("brokerId"), "unregister_request")
    return cmd.response(R.SUCCESS)


@reg(RC.GET_ROUTEINFO_BY_TOPIC)
async def get_route(ns: "NameServer", conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
    topic = cmd.require_str("topic")
    route = ns.routes.route(topic)
    if route is None:
        return cmd.response(R.TOPIC_NOT_EXIST, f"No topic route info in name server for the topic: {topic}")
    order_conf = ns.kv.get(ORDER_TOPIC_CONFIG_NAMESPACE, topic)
    if order_conf:
        route["orderTopicConf"] = order_conf
    standard = cmd.version >= V4_9_4 or cmd.get_bool("acceptStandardJsonOnly")
    return cmd.response(R.SUCCESS, body=encode_route_json(route, standard))


@reg(RC.GET_BROKER_CLUSTER_INFO)
async def cluster_info(ns: "NameServer", conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
    return cmd.response(R.SUCCESS, body=encode_route_json(ns.routes.cluster_info(), cmd.version >= V4_9_4))


@reg(RC.GET_ALL_TOPIC_LIST_FROM_NAMESERVER)
async def all_topics(ns: "NameServer", conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
    return cmd.response(R.SUCCESS, body=_json({"topicList": sorted(ns.routes.topic_queue_table)}))


@reg(RC.GET_TOPICS_BY_CLUSTER)
async def topics_by_cluster(ns: "NameServer", conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
    names = ns.routes.cluster_addr_table.get(cmd.require_str("cluster"), set())
    topics = sorted(t for t, q in ns.routes.topic_queue_table.items() if names & set(q))
    return cmd.response(R.SUCCESS, body=_json({"topicList": topics}))


@reg(RC.DELETE_TOPIC_IN_NAMESRV)
async def delete_topic(ns: "NameServer", conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
    ns.routes.topic_queue_table.pop(cmd.require_str("topic"), None)
    return cmd.response(R.SUCCESS)


@reg(RC.PUT_KV_CONFIG)
async def put_kv(ns: "NameServer", conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
    ns.kv.put(cmd.require_str("namespace"), cmd.require_str("key"), cmd.get_str("value") or "")
    return cmd.response(R.SUCCESS)


@reg(RC.GET_KV_CONFIG)
async def get_kv(ns: "NameServer", conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
    space, key = cmd.require_str("namespace"), cmd.require_str("key")
    value = ns.kv.get(space, key)
    if value is None:
        return cmd.response(R.QUERY_NOT_FOUND, f"No config item, Namespace: {space} Key: {key}")
    return cmd.response(R.SUCCESS, None, {"value": value})


@reg(RC.DELETE_KV_CONFIG)
async def delete_kv(ns: "NameServer", conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
    ns.kv.delete(cmd.require_str("namespace"), cmd.require_str("key"))
    return cmd.response(R.SUCCESS)


@reg(RC.GET_KVLIST_BY_NAMESPACE)
async def kv_list(ns: "NameServer", conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
    space = cmd.require_str("namespace")
    table = ns.kv.table.get(space)
    if not table:
        return cmd.response(R.QUERY_NOT_FOUND, f"No config item, Namespace: {space}")
    return cmd.response(R.SUCCESS, body=_json({"table": table}))


# the failover controller's requests (answered when this NameServer runs one)
from .controller import register_handlers as _register_controller_handlers  # noqa: E402

_register_controller_handlers(NAMESRV_PROCESSORS)


class BrokerAuthDelegate:
    """Route reads for every user on a NameServer that keeps no users (a standalone one).

    Users, secrets and ACLs live in the brokers' logs (``rmq_sys_SECURITY``); a standalone
    NameServer knows only the inner credentials. When a read of ``CODES`` (a route, the cluster
    view, the topic list) is signed by an access key it does not know, the gate asks a registered master
    (AUTH_CHECK_FOR_NAMESRV, signed with the NameServer's inner credentials, TLS when
    ``tlsEnable``): the master recomputes the signature over the same signed content with the
    user's secret and authorizes the request's operations (DESCRIBE on the topic) from the
    client's address; the first master that says yes decides. A yes is remembered for
    ``TTL_S`` per (access key, signature, request): RocketMQ's route request signature carries no
    time, so a client asking again costs nothing; a user removed or a grant revoked reaches the
    NameServer within that time. A no is never remembered (and counts as a failed
    authentication on the broker, which throttles guessing)."""

    # route reads, and the cluster view and topic list an operator's tools read first (DESCRIBE
    # on the cluster): nothing that changes the NameServer
    CODES = frozenset({RC.GET_ROUTEINFO_BY_TOPIC, RC.GET_BROKER_CLUSTER_INFO, RC.GET_ALL_TOPIC_LIST_FROM_NAMESERVER})
    TTL_S = 30.0
    MAX_REMEMBERED = 10_000

    def __init__(self, ns: "NameServer", config: Any):
        self.ns = ns
        self.config = config
        self._conns: dict[str, Connection] = {}
        self._yes: dict[tuple, float] = {}

    def _masters(self) -> list[str]:
        out = []
        for bd in self.ns.routes.broker_addr_table.values():
            addr = (bd.get("brokerAddrs") or {}).get(0)
            if addr:
                out.append(addr)
        return sorted(out)

    async def _conn(self, addr: str) -> Connection:
        from .security import node_client_options
        from .transport import open_connection

        conn = self._conns.get(addr)
        if conn is None or conn.closed:
            conn = self._conns[addr] = await open_connection(addr, None, timeout=3.0,
                                                             **node_client_options(self.config))
        return conn

    async def __call__(self, conn: Connection, cmd: RemotingCommand) -> tuple[str | None, str]:
        if cmd.code not in self.CODES:
            return None, ""
        from .remoting import acl
        from .security import _checks
        from .transport import ConnectionClosedError, RemotingTimeoutError

        ak, sig = str(cmd.ext_fields.get(acl.ACCESS_KEY) or ""), str(cmd.ext_fields.get(acl.SIGNATURE) or "")
        checks = [[int(op), int(rt), name] for op, rt, name in _checks(cmd)]
        host = conn.remote_addr.rsplit(":", 1)[0]
        key = (ak, sig, int(cmd.code), json.dumps(checks), host)
        now = time.monotonic()
        if self._yes.get(key, 0.0) > now:
            return f"User:{ak}", ""
        fields = {"accessKey": ak, "signature": sig, "host": host, "checks": json.dumps(checks, separators=(",", ":"))}
        why = f"signature check failed: unknown AccessKey {ak} (no broker registered to check it with)"
        for addr in self._masters():
            try:
                bconn = await self._conn(addr)
                resp = await bconn.invoke(RemotingCommand.request(RC.AUTH_CHECK_FOR_NAMESRV, fields,
                                                                  acl.signed_content(cmd), language=0), 3.0)
            except (ConnectionClosedError, RemotingTimeoutError, OSError, ValueError) as exc:
                log.warning("namesrv_auth_check_failed", broker=addr, error=str(exc))
                continue
            if resp.code == R.SUCCESS:
                if len(self._yes) >= self.MAX_REMEMBERED:
                    self._yes.clear()
                self._yes[key] = now + self.TTL_S
                return f"User:{ak}", ""
            why = resp.remark or why
        return None, why

    async def close(self) -> None:
        for conn in self._conns.values():
            try:
                conn.close()
            except Exception:
                pass
        self._conns.clear()


def announced_host(listen_host: str, advertised: str | None = None) -> str:
    """The host this NameServer's controller names as the leader's address (brokers and admin
    tools connect there): the configured advertised host, else the listen address, else -- when
    listening on every interface -- this machine's own address as the broker picks it for
    brokerIP1 (``local_address``), never 127.0.0.1, which a broker on another host cannot reach."""
    if advertised:
        return advertised
    if listen_host not in ("0.0.0.0", "::", ""):
        return listen_host
    from .addresses import local_address

    return local_address()


class NameServer:
    """The NameServer component: ``name="namesrv"``, ``port`` after ``start``. With a
    ``ControllerConfig`` (``enableControllerInNamesrv``) it also runs a failover controller peer."""

    name = "namesrv"

    def __init__(self, host: str, port: int, *, kv_config_path: str | os.PathLike[str] | None = None,
                 broker_expired_ms: int = 120_000, scan_interval_ms: int = 5_000, guard=None, controller: Any = None,
                 data_dir: str | os.PathLike[str] = ".", advertised_host: str | None = None):
        self.controller_config = controller
        self.advertised_host = advertised_host  # where others reach this NameServer (its controller)
        self.controller_raft_password: str | None = None  # set when authentication is on
        self.data_dir = data_dir
        self.controller: Any = None
        self.routes = RouteInfo()
        self.kv = KVConfig(kv_config_path)
        self.broker_expired_ms = broker_expired_ms
        self.scan_interval_ms = scan_interval_ms
        self.server = RemotingServer("namesrv", host, port, NAMESRV_PROCESSORS, self, guard=guard)
        self.server.on_connection_closed.append(self.routes.connection_closed)
        self._scan_task: asyncio.Task[None] | None = None

    @property
    def port(self) -> int:
        return self.server.port

    async def start(self) -> None:
        await self.server.start()
        self._scan_task = asyncio.ensure_future(self._scan_loop())
        if self.controller_config is not None:
            from .controller import ControllerService

            host = announced_host(self.server.host, self.advertised_host)
            self.controller = ControllerService(self.controller_config, self.data_dir, f"{host}:{self.port}",
                                                raft_password=self.controller_raft_password)
            await self.controller.start()

    async def _scan_loop(self) -> None:
        while True:
            await asyncio.sleep(self.scan_interval_ms / 1000)
            try:
                self.routes.expire(self.broker_expired_ms / 1000)
            except Exception:
                log.exception("broker_scan_failed")

    async def stop(self) -> None:
        if self.controller is not None:
            await self.controller.stop()
        if self._scan_task is not None:
            self._scan_task.cancel()
            try:
                await self._scan_task
            except asyncio.CancelledError:
                pass
        await self.server.stop()

namesrv_admin.register(NAMESRV_PROCESSORS)  # the operator requests: write permission, config
