"""The broker-level requests of RocketMQ's operator CLI (mqadmin, rocketmq-tools 5.5):

- GET_BROKER_RUNTIME_INFO (28): ``KVTable`` body ``{"table": {...}}`` with what the store and
  the broker's counters know (``clusterList``, ``brokerStatus``): version, put/get totals and
  TPS (``broker_stats``), commitlog min/max offset, earliest message time, disk ratio, dispatch
  lag, timer and schedule progress, the broker's role and id. Extra fields come from
  ``broker.runtime_info_providers`` (callables returning a dict), which the node fills with
  whatever else it runs (replication state, for example).
- GET_BROKER_CONFIG (26): every broker and store key, camelCase ``key=value`` lines, and the
  ``version`` header (the config's DataVersion JSON).
- UPDATE_BROKER_CONFIG (25): ``key=value`` lines applied to the running node. Keys that only
  take effect at start (listeners, paths, identity, role, file sizes) are refused with
  NO_PERMISSION naming them (RocketMQ refuses its black-listed keys the same way); a bad value
  is INVALID_PARAMETER with the validation message. Changes last until the node restarts:
  put them in the node's config file to keep them.
- GET_PRODUCER_CONNECTION_LIST (204): ``ProducerConnection`` of a producer group's live clients.
- QUERY_TOPIC_CONSUME_BY_WHO (300): ``GroupList`` of groups subscribed to or holding offsets of
  a topic. QUERY_TOPICS_BY_CONSUMER (343): ``TopicList`` of a group's topics.
- VIEW_BROKER_STATS_DATA (315): ``BrokerStatsData`` of ``TOPIC_PUT_NUMS <topic>`` or
  ``GROUP_GET_NUMS <topic@group>`` (``statsAll``).
- GET_BROKER_CONSUME_STATS (317): ``ConsumeStatsList`` of every group and topic on this broker.
- INVOKE_BROKER_TO_GET_CONSUMER_STATUS (223): asks each online member of a group
  (GET_CONSUMER_STATUS_FROM_CLIENT, 221) for its offsets of a topic; ``GetConsumerStatusBody``.
- GET_SYSTEM_TOPIC_LIST_FROM_BROKER (304) and QUERY_CONSUME_TIME_SPAN (303).
- GET_BROKER_HA_STATUS (907): ``HARuntimeInfo`` of the store's replication (``haStatus``): on a
  master its commitlog end and one ``haConnectionInfo`` per slave (acknowledged offset, bytes
  behind, in sync, bytes a second); on a slave ``haClientRuntimeInfo`` (its master, its own
  end, the master's, the last read and write).
"""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

import structlog

from broker import store_view
from broker.replication import Replication
from engine import config as engine_config

from .. import broker_stats
from ..remoting.codes import SERVER_VERSION, RequestCode as RC, ResponseCode as R, language_name
from ..remoting.command import RemotingCommand
from ..transport import Connection, ConnectionClosedError, RemotingTimeoutError
from . import BROKER_PROCESSORS
from .common import SYSTEM_TOPICS
from .stats import _mq_key, _store_time

log = structlog.get_logger("rockafka.native.broker_admin")

reg = BROKER_PROCESSORS.register

# keys that only take effect when the node starts
STATIC_KEYS = {
    "host", "kafka_port", "namesrv_port", "admin_port", "listen_port", "ha_listen_port", "store_path_root_dir",
    "broker_cluster_name", "broker_name", "broker_id", "broker_role", "flush_disk_type", "mapped_file_size_commit_log",
    "mapped_file_size_consume_queue", "max_hash_slot_num", "max_index_num", "serialize_type", "broker_ip1",
    "namesrv_addr", "warm_mapped_file_enable", "timer_precision_ms", "message_delay_level",
}


def _camel(key: str) -> str:
    head, *rest = key.split("_")
    return head + "".join(p[:1].upper() + p[1:] for p in rest)


def _version_desc(v: int) -> str:
    """MQVersion.getVersionDesc of the ordinals named in ``remoting.codes``."""
    from ..remoting import codes

    names = {getattr(codes, n): n for n in dir(codes) if n.startswith("V") and n[1:2].isdigit()}
    return names.get(v, f"V{v}")


def _json(obj: Any) -> bytes:
    return json.dumps(obj, separators=(",", ":")).encode()


def _config_values(broker: Any) -> dict[str, str]:
    cfg = broker.config
    out: dict[str, str] = {}
    for section in (cfg.broker, cfg.store):
        for name in section.__dataclass_fields__:
            v = getattr(section, name)
            out[_camel(name)] = "" if v is None else (str(v).lower() if isinstance(v, bool) else str(v))
    for name in ("host", "kafka_port", "namesrv_port", "admin_port"):
        out[_camel(name)] = str(getattr(cfg, name))
    for k, v in cfg.extra.items():
        out.setdefault(_camel(k), str(v))
    return {k: engine_config.shown_value(k, v) for k, v in sorted(out.items())}


def _config_version(broker: Any) -> dict[str, Any]:
    v = getattr(broker, "_config_version", None)
    if v is None:
        v = broker._config_version = {"counter": 0, "timestamp": int(time.time() * 1000)}
    return v


@reg(RC.GET_BROKER_CONFIG)
async def get_broker_config(broker: Any, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
    text = "".join(f"{k}={v}\n" for k, v in _config_values(broker).items())
    return cmd.response(R.SUCCESS, None, {"version": json.dumps(_config_version(broker), separators=(",", ":"))},
                        text.encode())


def parse_properties(text: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for line in text.splitlines():
        line = line.strip()
        if not line or line[0] in "#!":
            continue
        key, sep, value = line.partition("=")
        if not sep:
            key, sep, value = line.partition(":")
        if not sep or not key.strip():
            raise ValueError(f"expected key=value, got {line!r}")
        out[key.strip()] = value.strip()
    return out


@reg(RC.UPDATE_BROKER_CONFIG)
async def update_broker_config(broker: Any, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
    try:
        props = parse_properties((cmd.body or b"").decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        return cmd.response(R.SYSTEM_ERROR, f"string2Properties error: {exc}")
    static = sorted(k for k in props if engine_config._ALIASES.get(engine_config.snake_case(k),
                                                                    engine_config.snake_case(k)) in STATIC_KEYS)
    if static:
        return cmd.response(R.NO_PERMISSION, f"Can not update config in black list: {', '.join(static)} take effect "
                                             "only when the node starts; set them in its config file")
    cfg = broker.config
    before = _config_values(broker)
    try:
        engine_config.apply(cfg, props)
    except (engine_config.ConfigError, ValueError) as exc:
        # put back what was there: apply() may have set some keys before it failed
        engine_config.apply(cfg, {k: before[_camel(engine_config.snake_case(k))] for k in props
                                  if _camel(engine_config.snake_case(k)) in before})
        return cmd.response(R.INVALID_PARAMETER, str(exc))
    v = _config_version(broker)
    v["counter"] += 1
    v["timestamp"] = int(time.time() * 1000)
    log.info("broker_config_updated", caller=conn.remote_addr, keys=sorted(props))
    return cmd.response(R.SUCCESS)


def runtime_info(broker: Any) -> dict[str, str]:
    store = broker.store
    stats = broker_stats.for_broker(broker)
    info: dict[str, str] = {
        "brokerVersionDesc": _version_desc(SERVER_VERSION),
        "brokerVersion": str(SERVER_VERSION),
        "brokerActive": "false",
        "brokerRole": str(broker.config.store.broker_role),
        "brokerId": str(broker.broker_config.broker_id),
        "bootTimestamp": str(int(broker.started_at * 1000)),
        "runtime": f"[ {int(time.time() - broker.started_at)} seconds ]",
        "putTps": stats.tps_text(put=True),
        "getTransferredTps": stats.tps_text(put=False),
        "getTotalTps": stats.tps_text(put=False),
        "putMessageTimesTotal": str(stats.put_total),
        "sendThreadPoolQueueSize": "0", "sendThreadPoolQueueCapacity": "10000",
        "pullThreadPoolQueueSize": "0", "pullThreadPoolQueueCapacity": "100000",
        "ackThreadPoolQueueSize": "0", "ackThreadPoolQueueCapacity": "100000",
        "litePullThreadPoolQueueSize": "0", "queryThreadPoolQueueSize": "0",
        "sendThreadPoolQueueHeadWaitTimeMills": "0", "pullThreadPoolQueueHeadWaitTimeMills": "0",
        "ackThreadPoolQueueHeadWaitTimeMills": "0", "queryThreadPoolQueueHeadWaitTimeMills": "0",
        "litePullThreadPoolQueueHeadWaitTimeMills": "0", "EndTransactionQueueSize": "0",
        "pageCacheLockTimeMills": "0",
        "timerReadBehind": "0", "timerOffsetBehind": "0", "timerCongestNum": "0",
        "timerEnqueueTps": "0.0", "timerDequeueTps": "0.0",
        "heldPullRequests": str(broker.pull_hold.held),
    }
    info.update(stats.totals())
    try:
        figures = store_view.commitlog_figures(store)
        info["commitLogMinOffset"] = str(figures["min_offset"])
        info["commitLogMaxOffset"] = str(figures["max_offset"])
        info["dispatchBehindBytes"] = str(figures["dispatch_behind_bytes"])
        info["commitLogDiskRatio"] = f"{store.disk_used_ratio() / 100:.4f}"
        info["remainHowManyDataToFlush"] = f"{figures['unflushed_bytes']} B"
        earliest = _earliest_store_time(store)
        info["earliestMessageTimeStamp"] = str(earliest)
        info["brokerActive"] = str(bool(store.running)).lower()
    except Exception as exc:  # a store shutting down still answers what it can
        log.warning("runtime_info_partial", error=str(exc))
    for provider in getattr(broker, "runtime_info_providers", []):
        try:
            info.update({str(k): str(v) for k, v in provider().items()})
        except Exception:
            log.exception("runtime_info_provider_failed")
    return info


def _earliest_store_time(store: Any) -> int:
    lo = store_view.commitlog_min_offset(store)
    if store_view.commitlog_max_offset(store) <= lo:
        return 0
    ext = store.look_message_by_offset(lo)
    return int(ext.store_timestamp) if ext is not None else 0


@reg(RC.GET_BROKER_RUNTIME_INFO)
async def get_broker_runtime_info(broker: Any, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
    info = await broker.run_blocking(runtime_info, broker)
    return cmd.response(R.SUCCESS, None, body=_json({"table": info}))


def ha_status(broker: Any) -> dict[str, Any]:
    """RocketMQ's ``HARuntimeInfo`` built from the replication facade's ``runtime_info()``."""
    ha = Replication(broker.store)
    info = ha.runtime_info()
    now_ms = int(time.time() * 1000)
    end = int(info.get("commitLogMaxOffset", 0))
    if ha.is_master:
        slaves = info.get("slaves") or []
        conns = []
        for s in slaves:
            ack = int(s.get("ackOffset", 0))
            conns.append({"addr": s.get("address", ""), "slaveAckOffset": ack, "diff": max(0, end - ack),
                          "inSync": bool(s.get("inSync")), "transferFromWhere": int(s.get("sentOffset", 0)),
                          "transferredByteInSecond": int(s.get("bytesPerSecond", 0))})
        return {"master": True, "masterCommitLogMaxOffset": end, "inSyncSlaveNums": int(info.get("inSyncSlaves", 0)),
                "haConnectionInfo": conns, "haClientRuntimeInfo": None}
    def stamp(ms_ago: Any) -> int:
        return now_ms - int(ms_ago) if ms_ago is not None else 0

    client = {"masterAddr": info.get("masterAddress") or "", "maxOffset": end,
              "masterFlushOffset": max(0, int(info.get("masterMaxOffset") or 0)),
              "lastReadTimestamp": stamp(info.get("lastReceiveMsAgo")),
              "lastWriteTimestamp": stamp(info.get("lastAckMsAgo")),
              "transferredByteInSecond": int(info.get("bytesPerSecond") or 0), "activated": bool(info.get("connected"))}
    return {"master": False, "masterCommitLogMaxOffset": 0, "inSyncSlaveNums": 0, "haConnectionInfo": [],
            "haClientRuntimeInfo": client}


@reg(RC.GET_BROKER_HA_STATUS)
async def get_broker_ha_status(broker: Any, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
    return cmd.response(R.SUCCESS, body=_json(ha_status(broker)))


@reg(RC.GET_PRODUCER_CONNECTION_LIST)
async def producer_connection_list(broker: Any, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
    group = cmd.require_str("producerGroup")
    chans = broker.producers.groups.get(group) or {}
    if not chans:
        return cmd.response(R.SYSTEM_ERROR, f"the producer group[{group}] not exist")
    conns = [{"clientId": ch.client_id, "clientAddr": ch.conn.remote_addr, "language": language_name(ch.language),
              "version": ch.version} for ch in chans.values()]
    return cmd.response(R.SUCCESS, body=_json({"connectionSet": conns}))


def _groups_of_topic(broker: Any, topic: str) -> list[str]:
    groups = {g for g, info in broker.consumers.groups.items() if topic in info.subscriptions}
    groups |= set(broker.store.consumer_offsets.groups_of_topic(topic))
    return sorted(g for g in groups if not g.startswith("CID_RMQ_SYS_"))


@reg(RC.QUERY_TOPIC_CONSUME_BY_WHO)
async def query_topic_consume_by_who(broker: Any, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
    topic = cmd.require_str("topic")
    return cmd.response(R.SUCCESS, body=_json({"groupList": _groups_of_topic(broker, topic)}))


@reg(RC.QUERY_TOPICS_BY_CONSUMER)
async def query_topics_by_consumer(broker: Any, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
    group = cmd.require_str("group")
    topics = {t for t, _ in broker.store.consumer_offsets.offsets_of(group)}
    info = broker.consumers.groups.get(group)
    if info is not None:
        topics |= set(info.subscriptions)
    return cmd.response(R.SUCCESS, body=_json({"topicList": sorted(topics), "brokerAddr": broker.addr}))


@reg(RC.VIEW_BROKER_STATS_DATA)
async def view_broker_stats_data(broker: Any, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
    name, key = cmd.require_str("statsName"), cmd.require_str("statsKey")
    data = broker_stats.for_broker(broker).stats_data(name, key)
    if data is None:
        return cmd.response(R.SYSTEM_ERROR, f"The stats <{name}> <{key}> not exist")
    return cmd.response(R.SUCCESS, body=_json(data))


@reg(RC.GET_SYSTEM_TOPIC_LIST_FROM_BROKER)
async def system_topic_list(broker: Any, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
    topics = sorted(t for t in broker.store.topic_config.all()
                    if t in SYSTEM_TOPICS or t.startswith(("rmq_sys_", "RMQ_SYS_")))
    return cmd.response(R.SUCCESS, body=_json({"topicList": topics, "brokerAddr": broker.addr}))


@reg(RC.QUERY_CONSUME_TIME_SPAN)
async def query_consume_time_span(broker: Any, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
    topic, group = cmd.require_str("topic"), cmd.require_str("group")
    store = broker.store
    tc = store.topic_config.get(topic)
    if tc is None:
        return cmd.response(R.TOPIC_NOT_EXIST, f"topic[{topic}] not exist")

    def spans() -> list[dict[str, Any]]:
        out = []
        for qid in range(tc.write_queue_nums):
            lo, hi = store.get_min_offset_in_queue(topic, qid), store.get_max_offset_in_queue(topic, qid)
            done = store.consumer_offsets.query(group, topic, qid)
            out.append({"messageQueue": {"topic": topic, "brokerName": broker.broker_config.broker_name, "queueId": qid},
                        "minTimeStamp": _store_time(store, topic, qid, lo) if hi > lo else 0,
                        "maxTimeStamp": _store_time(store, topic, qid, hi - 1) if hi > lo else 0,
                        "consumeTimeStamp": _store_time(store, topic, qid, done - 1) if done > lo else 0,
                        "delayTime": 0})
        return out

    return cmd.response(R.SUCCESS, body=_json({"consumeTimeSpanSet": await broker.run_blocking(spans)}))


@reg(RC.GET_BROKER_CONSUME_STATS)
async def broker_consume_stats(broker: Any, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
    store = broker.store
    name = broker.broker_config.broker_name

    def build() -> tuple[list[str], int]:
        entries, total = [], 0
        offsets = store.consumer_offsets
        groups = sorted({g for g in offsets.groups() if not g.startswith("CID_RMQ_SYS_")} | set(broker.consumers.groups))
        for group in groups:
            stats_list = []
            for topic in sorted({t for t, _ in offsets.offsets_of(group)}):
                tc = store.topic_config.get(topic)
                if tc is None:
                    continue
                table, diff = [], 0
                for qid in range(tc.read_queue_nums):
                    hi = store.get_max_offset_in_queue(topic, qid)
                    done = max(offsets.query(group, topic, qid), 0)
                    diff += max(hi - done, 0)
                    table.append((_mq_key(topic, name, qid), {"brokerOffset": hi, "consumerOffset": done,
                                                              "pullOffset": done,
                                                              "lastTimestamp": _store_time(store, topic, qid, done - 1)}))
                total += diff
                body = "{" + ",".join(f"{k}:{json.dumps(v, separators=(',', ':'))}" for k, v in table) + "}"
                stats_list.append('{"consumeTps":0.0,"offsetTable":%s}' % body)
            if stats_list:
                entries.append("{%s:[%s]}" % (json.dumps(group), ",".join(stats_list)))
        return entries, total

    entries, total = await broker.run_blocking(build)
    text = '{"brokerAddr":%s,"consumeStatsList":[%s],"totalDiff":%d,"totalInflightDiff":0}' % (
        json.dumps(broker.addr), ",".join(entries), total)
    return cmd.response(R.SUCCESS, body=text.encode())


@reg(RC.INVOKE_BROKER_TO_GET_CONSUMER_STATUS)
async def invoke_get_consumer_status(broker: Any, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
    topic, group = cmd.require_str("topic"), cmd.require_str("group")
    client_addr = cmd.get_str("clientAddr") or ""
    info = broker.consumers.groups.get(group)
    if info is None or not info.channels:
        return cmd.response(R.SYSTEM_ERROR, f"No Any Consumer online in the consumer group: [{group}]")
    targets = [ch for ch in info.channels.values() if not client_addr or ch.conn.remote_addr == client_addr
               or ch.client_id == client_addr]

    async def ask(ch: Any) -> tuple[str, Any]:
        req = RemotingCommand.request(RC.GET_CONSUMER_STATUS_FROM_CLIENT,
                                      {"topic": topic, "group": group, "clientAddr": client_addr}, language=0)
        try:
            resp = await ch.conn.invoke(req, 5.0)
        except (ConnectionClosedError, RemotingTimeoutError) as exc:
            return ch.client_id, f"invoke failed: {exc}"
        if resp.code != R.SUCCESS:
            return ch.client_id, f"code {resp.code}: {resp.remark}"
        return ch.client_id, resp.body or b"{}"

    answers = await asyncio.gather(*(ask(ch) for ch in targets))
    parts, failed = [], []
    for client_id, body in answers:
        if isinstance(body, bytes):
            # the client answers {"messageQueueTable": {MessageQueue: offset}} in fastjson's object-key form
            text = body.decode("utf-8", "replace")
            start = text.find("{", text.find('"messageQueueTable"'))
            table = _balanced(text, start) if start >= 0 else "{}"
            parts.append(f"{json.dumps(client_id)}:{table}")
        else:
            failed.append(f"{client_id}: {body}")
    if not parts:
        return cmd.response(R.SYSTEM_ERROR, "no consumer answered: " + "; ".join(failed))
    text = '{"consumerTable":{%s},"messageQueueTable":{}}' % ",".join(parts)
    return cmd.response(R.SUCCESS, None if not failed else "; ".join(failed), body=text.encode())


def _balanced(text: str, start: int) -> str:
    """The JSON object starting at ``start`` (fastjson's object keys are not standard JSON)."""
    depth, in_str, esc = 0, False, False
    for i in range(start, len(text)):
        c = text[i]
        if in_str:
            esc = not esc and c == "\\"
            if c == '"' and not esc:
                in_str = False
            continue
        if c == '"':
            in_str = True
        elif c == "{":
            depth += 1
        elif c == "}":
            depth -= 1
            if depth == 0:
                return text[start:i + 1]
    return "{}"


@reg(RC.DELETE_SUBSCRIPTIONGROUP)
async def delete_subscription_group(broker: Any, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
    group = cmd.require_str("groupName")
    store = broker.store
    state_of = getattr(broker, "foreign_group_state", None)  # a Kafka group of that name (wired by the node)
    kafka_state = state_of(group) if state_of is not None else None
    if kafka_state not in (None, "Empty", "Dead", "EMPTY", "DEAD"):
        return cmd.response(R.SYSTEM_ERROR, f"the Kafka consumer group {group} has active members (state "
                                            f"{kafka_state}); stop its consumers first, as Kafka's DeleteGroups requires")
    store.subscription_groups.delete(group)
    if cmd.get_bool("cleanOffset", False):
        store.consumer_offsets.delete_group(group)
        store.consumer_offsets.persist()
    log.info("subscription_group_deleted", group=group, clean_offset=cmd.get_bool("cleanOffset", False),
             caller=conn.remote_addr)
    return cmd.response(R.SUCCESS)


@reg(RC.CLEAN_EXPIRED_CONSUMEQUEUE)
async def clean_expired_consume_queue(broker: Any, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
    """Consume-queue entries behind the commitlog's start go (RocketMQ's cleanExpiredConsumerQueue)."""
    await broker.run_blocking(broker.store.correct_min_offsets)
    return cmd.response(R.SUCCESS)


@reg(RC.QUERY_CONSUME_QUEUE)
async def query_consume_queue(broker: Any, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
    topic, qid = cmd.require_str("topic"), cmd.require_int("queueId")
    index, count = cmd.require_int("index"), max(0, min(cmd.get_int("count", 10) or 10, 1000))
    group = cmd.get_str("consumerGroup")
    cq = broker.store.find_consume_queue(topic, qid)
    if cq is None:
        return cmd.response(R.SYSTEM_ERROR, f"{qid}@{topic} is not exist!")
    body: dict[str, Any] = {"maxQueueIndex": cq.max_offset, "minQueueIndex": cq.min_offset}
    if group:
        info = broker.consumers.groups.get(group)
        sub = info.subscriptions.get(topic) if info else None
        body["subscriptionData"] = sub.to_json() if sub else None
        if sub is None:
            body["filterData"] = f"{group}@{topic} is not online!"
    if not cq.min_offset <= index < cq.max_offset:
        return cmd.response(R.SUCCESS, f"Index {index} of {qid}@{topic} is not exist!", body=_json(body))
    units = cq.read_units(index, count)
    body["queueData"] = [{"physicOffset": pos, "physicSize": size, "tagsCode": tags} for pos, size, tags in units]
    return cmd.response(R.SUCCESS, body=_json(body))
