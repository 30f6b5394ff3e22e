"""Admin helpers over the remoting protocol (a small ``DefaultMQAdminExt``).

Topics (create on every master of a cluster, delete, route, list), cluster info, message
queries (by key through QUERY_MESSAGE on every broker of the topic, by offset message id
through VIEW_MESSAGE_BY_ID at the store host the id encodes, by client unique id through the
UNIQ_KEY index), queue offsets, and consumer progress: per queue the broker's max offset, the
group's committed offset and the lag between them.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Any

from ..remoting.route import decode_route_json
from ..remoting.codes import RequestCode as RC, ResponseCode as R
from ..remoting.message_codec import MessageDecodeError, MessageClientExt, decode_offset_msg_id, decode_units
from .message import MessageQueue, MQBrokerError, MQClientError
from .runtime import ClientRuntime


def dead_letter_origin(group: str, properties: dict[str, str]) -> tuple[str | None, str, int]:
    """Where a dead letter of ``group`` came from and where a resend puts it: ``(original topic,
    resend topic, queue id)``, read from its RETRY_TOPIC, which holds the topic the message was
    stored in when it was dead-lettered (RocketMQ's consumerSendMsgBack):

    - a POP consumer's letter after a retry names the group's POP retry topic
      ``%RETRY%<group>_<topic>`` (``+`` in RocketMQ's retry topic V2): back into that topic,
      which the group's POP consumers read, under ``<topic>``;
    - a Kafka share group's letter (property SHARE_PARTITION) names its topic: back to the end
      of the partition it came from (share consumers read only the topics they subscribe to);
    - any other names the original topic: back to ``%RETRY%<group>``, which the group's push
      and pull consumers read."""
    retry = properties.get("RETRY_TOPIC")
    if retry and "SHARE_PARTITION" in properties:
        return retry, retry, int(properties["SHARE_PARTITION"])
    for sep in ("_", "+"):
        prefix = f"%RETRY%{group}{sep}"
        if retry and retry.startswith(prefix) and len(retry) > len(prefix):
            return retry[len(prefix):], retry, 0
    return retry, "%RETRY%" + group, 0


@dataclass
class QueueProgress:
    queue: MessageQueue
    broker_offset: int
    consumer_offset: int

    @property
    def lag(self) -> int:
        return max(self.broker_offset - max(self.consumer_offset, 0), 0)


class Admin:
    def __init__(self, namesrv_addr: str | list[str], *, timeout_ms: int = 5000, serialize_type: str = "JSON",
                 credentials: tuple[str, str] | None = None, tls: Any = None):
        self.runtime = ClientRuntime(namesrv_addr, instance_name=f"admin-{time.time_ns()}", timeout_ms=timeout_ms,
                                     serialize_type=serialize_type, credentials=credentials, tls=tls)

    def start(self) -> "Admin":
        self.runtime.start()
        return self

    def shutdown(self) -> None:
        self.runtime.shutdown()

    def __enter__(self) -> "Admin":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.shutdown()

    def _call(self, coro: Any) -> Any:
        return self.runtime.call(coro, timeout=60)

    async def _ok(self, addr: str, code: int, fields: dict[str, Any] | None = None, body: bytes = b"") -> Any:
        resp = await self.runtime.invoke(addr, self.runtime.request(code, fields, body))
        if resp.code != R.SUCCESS:
            raise MQBrokerError(resp.code, resp.remark, addr)
        return resp

    # -- failover controller (docs/design/failover.md) -------------------------------------------
    async def _controller(self, addrs: list[str], code: int, fields: dict[str, Any] | None = None,
                          body: bytes = b"") -> Any:
        """Ask the controller leader among ``addrs`` (a follower's answer names it)."""
        order, tried, last = list(addrs), set(), None
        while order:
            addr = order.pop(0)
            if addr in tried:
                continue
            tried.add(addr)
            try:
                resp = await self.runtime.invoke(addr, self.runtime.request(code, fields, body))
            except Exception as exc:  # that peer is down: try the next
                last = f"{addr}: {exc}"
                continue
            if resp.code == R.CONTROLLER_NOT_LEADER:
                leader = (resp.ext_fields or {}).get("controllerLeaderAddress")
                if leader:
                    order.insert(0, str(leader))
                last = f"{addr}: {resp.remark}"
                continue
            if resp.code != R.SUCCESS:
                raise MQBrokerError(resp.code, resp.remark, addr)
            return resp
        raise MQClientError(f"no controller leader among {', '.join(addrs)} ({last})")

    def controller_metadata(self, addrs: list[str]) -> list[dict[str, Any]]:
        """CONTROLLER_GET_METADATA_INFO of every peer that answers (None for one that does not)."""
        async def run() -> list[dict[str, Any]]:
            out = []
            for addr in addrs:
                try:
                    resp = await self.runtime.invoke(addr, self.runtime.request(RC.CONTROLLER_GET_METADATA_INFO))
                    out.append({"address": addr, **json.loads(bytes(resp.body))} if resp.code == R.SUCCESS
                               else {"address": addr, "error": resp.remark})
                except Exception as exc:
                    out.append({"address": addr, "error": str(exc)})
            return out
        return self._call(run())

    def sync_state_data(self, addrs: list[str], broker_names: list[str] | None = None) -> dict[str, Any]:
        """CONTROLLER_GET_SYNC_STATE_DATA: per group master, epochs, in-sync and other replicas."""
        async def run() -> dict[str, Any]:
            resp = await self._controller(addrs, RC.CONTROLLER_GET_SYNC_STATE_DATA,
                                          body=json.dumps(broker_names).encode() if broker_names else b"")
            return json.loads(bytes(resp.body)).get("replicasInfoTable", {})
        return self._call(run())

    def elect_master(self, addrs: list[str], broker_name: str, broker_id: int | None = None,
                     cluster: str = "DefaultCluster") -> dict[str, Any]:
        """CONTROLLER_ELECT_MASTER (mqadmin electMaster): ``broker_id`` = the member to lead (it
        must be alive and in the SyncStateSet), None = the controller picks."""
        async def run() -> dict[str, Any]:
            fields = {"clusterName": cluster, "brokerName": broker_name, "designateElect": broker_id is not None,
                      "invokeTime": int(time.time() * 1000)}
            if broker_id is not None:
                fields["brokerId"] = broker_id
            resp = await self._controller(addrs, RC.CONTROLLER_ELECT_MASTER, fields)
            ext = resp.ext_fields or {}
            return {"brokerName": broker_name, "masterBrokerId": int(ext.get("masterBrokerId", -1)),
                    "masterAddress": ext.get("masterAddress"), "masterEpoch": int(ext.get("masterEpoch", 0)),
                    "syncStateSetEpoch": int(ext.get("syncStateSetEpoch", 0))}
        return self._call(run())

    # -- cluster and topics --------------------------------------------------------------------
    def cluster_info(self) -> dict[str, Any]:
        async def run() -> dict[str, Any]:
            resp = await self.runtime.invoke_namesrv(lambda: self.runtime.request(RC.GET_BROKER_CLUSTER_INFO))
            if resp.code != R.SUCCESS:
                raise MQBrokerError(resp.code, resp.remark)
            return decode_route_json(resp.body)
        return self._call(run())

    def topic_route(self, topic: str) -> dict[str, Any] | None:
        return self._call(self.runtime.fetch_route(topic))

    def topic_list(self) -> list[str]:
        async def run() -> list[str]:
            resp = await self.runtime.invoke_namesrv(lambda: self.runtime.request(RC.GET_ALL_TOPIC_LIST_FROM_NAMESERVER))
            if resp.code != R.SUCCESS:
                raise MQBrokerError(resp.code, resp.remark)
            return list(json.loads(resp.body)["topicList"])
        return self._call(run())

    def _masters(self, cluster: str | None) -> list[str]:
        info = self.cluster_info()
        names = set(info["brokerAddrTable"])
        if cluster is not None:
            names = set(info["clusterAddrTable"].get(cluster, []))
            if not names:
                raise MQClientError(f"cluster {cluster!r} has no brokers")
        return [info["brokerAddrTable"][n]["brokerAddrs"]["0"] for n in sorted(names) if "0" in info["brokerAddrTable"][n]["brokerAddrs"]]

    def create_topic(self, topic: str, queue_nums: int = 8, *, cluster: str | None = None, perm: int = 6,
                     order: bool = False, wait_route: bool = True, attributes: dict[str, str] | None = None) -> None:
        """Create (or update) the topic on every master, then wait until the NameServer routes it.
        ``attributes``: RocketMQ topic attributes, e.g. ``{"message.type": "FIFO"}``."""
        masters = self._masters(cluster)
        if not masters:
            raise MQClientError("no broker master registered with the NameServer")
        fields = {"topic": topic, "defaultTopic": "TBW102", "readQueueNums": queue_nums, "writeQueueNums": queue_nums,
                  "perm": perm, "topicFilterType": "SINGLE_TAG", "topicSysFlag": 0, "order": order}
        if attributes:
            fields["attributes"] = ",".join(f"+{k}={v}" for k, v in attributes.items())
        for addr in masters:
            self._call(self._ok(addr, RC.UPDATE_AND_CREATE_TOPIC, fields))
        if wait_route:
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline:
                route = self.topic_route(topic)
                if route and sum(int(q["writeQueueNums"]) for q in route["queueDatas"]) >= queue_nums:
                    return
                time.sleep(0.05)
            raise MQClientError(f"topic {topic} was created but the NameServer does not route it yet")

    def update_acl_config(self, access_key: str, secret_key: str, *, topic_perms: str | None = None,
                          group_perms: str | None = None, admin: bool = False, cluster: str | None = None) -> None:
        """RocketMQ's updateAclConfig on every master: the user's remoting secret and its
        topic/group permissions (``name=PUB|SUB`` comma separated)."""
        fields = {"accessKey": access_key, "secretKey": secret_key, "topicPerms": topic_perms,
                  "groupPerms": group_perms, "admin": admin}
        for addr in self._masters(cluster):
            self._call(self._ok(addr, 50, fields))

    def delete_acl_config(self, access_key: str, cluster: str | None = None) -> None:
        for addr in self._masters(cluster):
            self._call(self._ok(addr, 51, {"accessKey": access_key}))

    def delete_topic(self, topic: str, cluster: str | None = None) -> None:
        for addr in self._masters(cluster):
            self._call(self._ok(addr, RC.DELETE_TOPIC_IN_BROKER, {"topic": topic}))

        async def ns() -> None:
            await self.runtime.invoke_namesrv(lambda: self.runtime.request(RC.DELETE_TOPIC_IN_NAMESRV, {"topic": topic}))
        self._call(ns())

    def message_queues(self, topic: str) -> list[MessageQueue]:
        route = self._call(self.runtime.update_route(topic))
        if route is None:
            raise MQClientError(f"No route info of this topic: {topic}")
        return ClientRuntime.subscribe_queues(topic, route)

    # -- offsets -------------------------------------------------------------------------------
    async def _queue_offset(self, code: int, mq: MessageQueue, extra: dict[str, Any] | None = None) -> int:
        if mq.topic not in self.runtime.routes:
            await self.runtime.update_route(mq.topic)
        addr = self.runtime.master_addr(mq.broker_name)
        if addr is None:
            raise MQClientError(f"The broker[{mq.broker_name}] not exist")
        resp = await self._ok(addr, code, {"topic": mq.topic, "queueId": mq.queue_id, **(extra or {})})
        return int(resp.get_int("offset", 0))

    def max_offset(self, mq: MessageQueue) -> int:
        return self._call(self._queue_offset(RC.GET_MAX_OFFSET, mq))

    def min_offset(self, mq: MessageQueue) -> int:
        return self._call(self._queue_offset(RC.GET_MIN_OFFSET, mq))

    def search_offset(self, mq: MessageQueue, timestamp_ms: int) -> int:
        return self._call(self._queue_offset(RC.SEARCH_OFFSET_BY_TIMESTAMP, mq, {"timestamp": timestamp_ms}))

    def remote_tier(self, topic: str) -> dict[str, dict[str, int]]:
        """Broker name -> the remote tier of ``topic`` on that group's master (remote bytes and
        segments, upload lag in bytes, failed upload passes), for the groups where it is tiered."""
        async def run() -> dict[str, dict[str, int]]:
            route = await self.runtime.update_route(topic)
            if route is None:
                raise MQClientError(f"No route info of this topic: {topic}")
            out: dict[str, dict[str, int]] = {}
            for name in sorted({mq.broker_name for mq in ClientRuntime.subscribe_queues(topic, route)}):
                addr = self.runtime.master_addr(name)
                if addr is None:
                    continue
                resp = await self._ok(addr, RC.GET_TOPIC_STATS_INFO, {"topic": topic})
                body = bytes(resp.body or b"").decode("utf-8", "replace")
                at = body.rfind('"remoteTier":')   # the last field; the rest is fastjson's shape
                if at >= 0:
                    out[name] = json.loads(body[at + len('"remoteTier":'):-1])
            return out
        return self._call(run())

    def consumer_progress(self, group: str, topic: str) -> list[QueueProgress]:
        async def run() -> list[QueueProgress]:
            route = await self.runtime.update_route(topic)
            if route is None:
                raise MQClientError(f"No route info of this topic: {topic}")
            out = []
            for mq in ClientRuntime.subscribe_queues(topic, route):
                hi = await self._queue_offset(RC.GET_MAX_OFFSET, mq)
                addr = self.runtime.master_addr(mq.broker_name)
                resp = await self.runtime.invoke(addr, self.runtime.request(RC.QUERY_CONSUMER_OFFSET, {
                    "consumerGroup": group, "topic": topic, "queueId": mq.queue_id}))
                committed = int(resp.get_int("offset", -1)) if resp.code == R.SUCCESS else -1
                out.append(QueueProgress(mq, hi, committed))
            return out
        return self._call(run())

    def consumer_ids(self, group: str, topic: str) -> list[str]:
        async def run() -> list[str]:
            route = await self.runtime.update_route(topic)
            for bd in (route or {}).get("brokerDatas") or []:
                addr = bd["brokerAddrs"].get("0")
                resp = await self.runtime.invoke(addr, self.runtime.request(RC.GET_CONSUMER_LIST_BY_GROUP, {"consumerGroup": group}))
                if resp.code == R.SUCCESS:
                    return sorted(json.loads(resp.body)["consumerIdList"])
            return []
        return self._call(run())

    # -- messages ------------------------------------------------------------------------------
    def query_message_by_key(self, topic: str, key: str, max_num: int = 32, begin_ms: int = 0,
                             end_ms: int | None = None, unique_key: bool = False) -> list[MessageClientExt]:
        async def run() -> list[MessageClientExt]:
            route = await self.runtime.update_route(topic)
            if route is None:
                raise MQClientError(f"No route info of this topic: {topic}")
            found: list[MessageClientExt] = []
            for bd in route.get("brokerDatas") or []:
                addr = bd["brokerAddrs"].get("0") or next(iter(bd["brokerAddrs"].values()))
                fields = {"topic": topic, "key": key, "maxNum": max_num, "beginTimestamp": begin_ms,
                          "endTimestamp": end_ms if end_ms is not None else int(time.time() * 1000) + 60_000}
                if unique_key:
                    fields["_UNIQUE_KEY_QUERY"] = "true"
                resp = await self.runtime.invoke(addr, self.runtime.request(RC.QUERY_MESSAGE, fields))
                if resp.code == R.SUCCESS:
                    for m in decode_units(bytes(resp.body)):
                        m.broker_name = bd["brokerName"]
                        keys = set(m.keys) | {m.properties.get("UNIQ_KEY", "")}
                        if key in keys:
                            found.append(m)
                elif resp.code != R.QUERY_NOT_FOUND:
                    raise MQBrokerError(resp.code, resp.remark, addr)
            return found[:max_num]
        return self._call(run())

    def view_message(self, msg_id: str, topic: str | None = None) -> MessageClientExt:
        """By client unique id (needs ``topic``) or by offset message id (store host + commitlog offset)."""
        if topic is not None:
            msgs = self.query_message_by_key(topic, msg_id, 1, unique_key=True)
            if msgs:
                return msgs[0]
        try:
            ip, port, offset = decode_offset_msg_id(msg_id)
        except MessageDecodeError as exc:
            raise MQClientError(str(exc)) from None

        async def run() -> MessageClientExt:
            resp = await self._ok(f"{ip}:{port}", RC.VIEW_MESSAGE_BY_ID, {"offset": offset})
            return decode_units(bytes(resp.body))[0]
        if not 0 < port < 65536:  # a client (unique) id decodes to nonsense here
            raise MQClientError(f"{msg_id} is not an offset message id (its store port would be {port}); "
                                "for a client message id give the topic too (--topic)")
        try:
            return self._call(run())
        except (OSError, ConnectionError) as exc:
            raise MQClientError(f"message {msg_id} not found: {exc}") from None

    # -- rewind, groups, dead letters ------------------------------------------------------------
    def reset_offset_by_timestamp(self, group: str, topic: str, timestamp_ms: int, *,
                                  force: bool = True) -> dict[MessageQueue, int]:
        """Rewind (or forward) ``group`` on ``topic`` to the first message stored at or after
        ``timestamp_ms`` (-1: the end) on every master; online consumers are told at once."""
        from .consumer_base import parse_reset_offset_body

        async def run() -> dict[MessageQueue, int]:
            route = await self.runtime.update_route(topic)
            if route is None:
                raise MQClientError(f"No route info of this topic: {topic}")
            out: dict[MessageQueue, int] = {}
            for bd in route.get("brokerDatas") or []:
                addr = bd["brokerAddrs"].get("0")
                if addr is None:
                    continue
                resp = await self._ok(addr, RC.INVOKE_BROKER_TO_RESET_OFFSET, {
                    "topic": topic, "group": group, "timestamp": timestamp_ms, "isForce": force})
                out.update(parse_reset_offset_body(resp.body))
            return out
        return self._call(run())

    def consumer_groups(self) -> dict[str, dict[str, Any]]:
        """Every group a master knows (committed offsets or subscription config), with its topics."""
        masters = self._masters(None)

        async def run() -> dict[str, dict[str, Any]]:
            groups: dict[str, dict[str, Any]] = {}
            for addr in masters:
                resp = await self._ok(addr, RC.GET_ALL_CONSUMER_OFFSET)
                for key in json.loads(resp.body).get("offsetTable", {}):
                    topic, _, group = key.rpartition("@")
                    groups.setdefault(group, {"topics": set(), "config": None})["topics"].add(topic)
                resp = await self._ok(addr, RC.GET_ALL_SUBSCRIPTIONGROUP_CONFIG)
                for group, cfg in json.loads(resp.body).get("subscriptionGroupTable", {}).items():
                    groups.setdefault(group, {"topics": set(), "config": None})["config"] = cfg
            return {g: {"topics": sorted(v["topics"]), "config": v["config"]} for g, v in sorted(groups.items())}
        return self._call(run())

    def update_subscription_group(self, group: str, **settings: Any) -> None:
        """Create or change a group's config, e.g. ``retryMaxTimes=3`` (camelCase keys)."""
        body = json.dumps({"groupName": group, **settings}).encode()
        for addr in self._masters(None):
            self._call(self._ok(addr, RC.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, None, body))

    def dlq_messages(self, group: str, max_num: int = 32) -> list[MessageClientExt]:
        """Messages in ``%DLQ%<group>`` (oldest first), with their origin in RETRY_TOPIC /
        ORIGIN_MESSAGE_ID and how often they were tried in ``reconsume_times``."""
        from ..remoting.subscription import SubscriptionData
        from .pull_api import PullAPI, PullStatus

        topic = "%DLQ%" + group

        async def run() -> list[MessageClientExt]:
            route = await self.runtime.update_route(topic)
            if route is None:
                return []
            api = PullAPI(self.runtime, "rockafka_admin")
            sub = SubscriptionData.build(topic, "*")
            out: list[MessageClientExt] = []
            for mq in ClientRuntime.subscribe_queues(topic, route):
                offset = await self._queue_offset(RC.GET_MIN_OFFSET, mq)
                for _ in range(10_000):  # bounded: one pull per batch of messages
                    if len(out) >= max_num:
                        break
                    res = await api.pull(mq, sub, offset, min(32, max_num - len(out)), suspend_ms=0, timeout_ms=5000)
                    if res.status != PullStatus.FOUND or res.next_begin_offset <= offset:
                        break
                    for m in res.messages:
                        m.broker_name = mq.broker_name
                    out.extend(res.messages)
                    offset = res.next_begin_offset
            return out[:max_num]
        return self._call(run())

    def resend_dlq_message(self, group: str, msg_id: str) -> MessageClientExt:
        """Send a dead letter back where ``dead_letter_origin`` says (reconsume count reset to
        0), so that group — and only it — consumes it again, under its original topic name."""
        found = [m for m in self.dlq_messages(group, 10_000)
                 if msg_id in (m.msg_id, m.offset_msg_id, m.properties.get("ORIGIN_MESSAGE_ID"))]
        if not found:
            raise MQClientError(f"message {msg_id} is not in %DLQ%{group}")
        m = found[0]
        props = dict(m.properties)
        props.pop("DELAY", None)
        _, retry, queue_id = dead_letter_origin(group, props)
        props.pop("SHARE_PARTITION", None)

        async def run() -> None:
            route = await self.runtime.update_route(retry)
            datas = [bd for bd in (route or {}).get("brokerDatas", []) if "0" in bd["brokerAddrs"]]
            if not datas:
                # a POP retry topic the broker has not registered yet (Apache RocketMQ's broker
                # creates it locally and registers it with its next heartbeat): the broker that
                # wrote the dead letter holds it
                dlq_route = await self.runtime.update_route("%DLQ%" + group) or {}
                datas = [bd for bd in dlq_route.get("brokerDatas", [])
                         if "0" in bd["brokerAddrs"] and bd.get("brokerName") == m.broker_name]
            if not datas:
                raise MQClientError(f"No route info of the retry topic {retry}")
            addr = datas[0]["brokerAddrs"]["0"]
            from ..remoting.message_codec import properties_to_string

            await self._ok(addr, RC.SEND_MESSAGE, {
                "producerGroup": "rockafka_admin", "topic": retry, "defaultTopic": "TBW102", "defaultTopicQueueNums": 1,
                "queueId": queue_id, "sysFlag": 0, "bornTimestamp": int(time.time() * 1000), "flag": m.flag,
                "properties": properties_to_string(props), "reconsumeTimes": 0, "unitMode": False}, m.body)
        self._call(run())
        return m
