"""What the Kafka gateway's topic placement asks of other broker groups, sent as RocketMQ admin
requests to their masters (docs/design/cluster.md).

``RemoteGroups`` implements ``gateway_kafka.topic_placement.RemoteGroups``: UPDATE_AND_CREATE_TOPIC
(the topic with its ``kafka.partition.ids`` attribute, as ``mqadmin updateTopic -b`` sends it) and
DELETE_TOPIC_IN_BROKER to the master of a named group, found in the NameServer's cluster info at
the time of the call. Requests are signed with the node's inner credentials and use TLS when the
node does (the same client options as its NameServer registration). This module is here, not in
a gateway, because it is where the two gateways meet.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import structlog

from gateway_kafka.topic_placement import RemoteGroupError

log = structlog.get_logger("rockafka.cluster_ops")

_TIMEOUT = 5.0
LOOKUP_MIN_S = 0.2  # between two view refreshes for names the view does not list


class RemoteGroups:
    def __init__(self, broker: Any, refresh_view: Any = None, view_refresh_s: float = 1.0):
        self.broker = broker
        # the Kafka view's refresh from the NameServer, on demand (auto-creation checks first
        # whether another group already holds the topic)
        self.refresh_view = refresh_view
        self.view_refresh_s = view_refresh_s  # every node's view refresh period
        self._lookup: asyncio.Future[None] | None = None  # the refresh ``look_up`` callers share
        self._lookup_ended = -1e9

    async def look_up(self) -> None:
        """``refresh_view`` for a name this node's view does not list: another group may have
        created it a moment ago (its registration is at the NameServer before the creating
        request answers; this node's view reads it only at its next refresh). Callers at the
        same time share one refresh, and none starts within ``LOOKUP_MIN_S`` of the last one
        ending, so a client asking for a topic that does not exist costs the NameServer at most a
        request every ``LOOKUP_MIN_S``. Raises what the refresh raised."""
        if self.refresh_view is None:
            return
        task = self._lookup
        if task is None:
            if time.monotonic() - self._lookup_ended < LOOKUP_MIN_S:
                return
            task = self._lookup = asyncio.ensure_future(self._run_lookup())
            # every caller may have gone away before a failure: it is theirs, not the loop's to log
            task.add_done_callback(lambda t: t.cancelled() or t.exception())
        await asyncio.shield(task)

    async def _run_lookup(self) -> None:
        try:
            await self.refresh_view()
        finally:
            self._lookup = None
            self._lookup_ended = time.monotonic()

    async def wait_visible(self, topic: str, placed: dict[str, list[int]], timeout: float = 10.0,
                           settle: bool = True) -> None:
        """Until the NameServer lists, for every group of ``placed``, its master's registration of
        ``topic`` with those ids; then (``settle``) one view refresh period more, so every node
        (each refreshes on its own clock) has read them. Bounded by ``timeout``."""
        deadline = time.monotonic() + timeout
        want = {name: sorted(ids) for name, ids in placed.items()}
        while time.monotonic() < deadline:
            info = await self.broker.cluster_info()
            if info is not None and all(_registered(info, topic).get(k) == v for k, v in want.items()):
                if settle:
                    await asyncio.sleep(self.view_refresh_s + 0.2)  # a refresh period: nothing to wait on
                return
            await asyncio.sleep(0.05)
        log.warning("topic_registration_slow", topic=topic, groups=sorted(placed), timeout_s=timeout)

    async def _master_addr(self, broker_name: str) -> str:
        info = await self.broker.cluster_info()
        if info is None:
            raise RemoteGroupError("no NameServer answered")
        addr = ((info.get("brokerAddrTable") or {}).get(broker_name) or {}).get("brokerAddrs", {}).get("0")
        if not addr:
            raise RemoteGroupError(f"broker group {broker_name} has no master registered")
        return str(addr)

    async def _invoke(self, broker_name: str, code: int, fields: dict[str, Any]) -> None:
        from gateway_native.remoting.codes import ResponseCode as R
        from gateway_native.remoting.command import RemotingCommand
        from gateway_native.security import node_client_options
        from gateway_native.transport import ConnectionClosedError, RemotingTimeoutError, open_connection

        addr = await self._master_addr(broker_name)
        try:
            conn = await open_connection(addr, None, timeout=_TIMEOUT, **node_client_options(self.broker.config))
        except OSError as exc:
            raise RemoteGroupError(f"cannot connect to its master {addr}: {exc}") from None
        try:
            resp = await conn.invoke(RemotingCommand.request(code, fields, language=0), _TIMEOUT)
        except (ConnectionClosedError, RemotingTimeoutError, OSError) as exc:
            raise RemoteGroupError(f"its master {addr} did not answer: {exc}") from None
        finally:
            conn.close()
        if resp.code != R.SUCCESS:
            raise RemoteGroupError(f"its master {addr} refused (code {resp.code}): {resp.remark}")

    async def create_or_update_topic(self, broker_name: str, tc: Any, create_only: bool = False) -> None:
        """Store ``tc`` on ``broker_name``'s master; ``create_only``: leave a topic it already
        has as it is (an auto-creation passed on by a slave must never reset a topic the
        slave's copy of the topic table does not show yet)."""
        from gateway_native.remoting.codes import RequestCode as RC

        attrs = ",".join(f"+{k}={v}" for k, v in sorted((tc.attributes or {}).items()))
        fields = {"topic": tc.topic_name, "defaultTopic": "TBW102", "readQueueNums": tc.read_queue_nums,
                  "writeQueueNums": tc.write_queue_nums, "perm": tc.perm, "topicFilterType": tc.topic_filter_type,
                  "topicSysFlag": tc.topic_sys_flag, "order": tc.order}
        if attrs:
            fields["attributes"] = attrs
        if create_only:
            fields["createOnly"] = "true"
        await self._invoke(broker_name, RC.UPDATE_AND_CREATE_TOPIC, fields)
        log.info("remote_topic_stored", broker_name=broker_name, topic=tc.topic_name, queues=tc.read_queue_nums,
                 create_only=create_only)

    async def delete_topic(self, broker_name: str, topic: str) -> None:
        from gateway_native.remoting.codes import RequestCode as RC

        await self._invoke(broker_name, RC.DELETE_TOPIC_IN_BROKER, {"topic": topic})
        log.info("remote_topic_deleted", broker_name=broker_name, topic=topic)


class CoordinatorPlacementWatch:
    """Re-registers at once when a coordinator of this group takes state in a new internal-topic
    partition (a group's first join, a transactional id's first use), so other nodes place that
    group or transactional id here before anything else can move it (docs/design/cluster.md).
    ``check`` runs on every cluster view refresh."""

    def __init__(self, broker: Any, kafka: Any):
        self.broker = broker
        self.kafka = kafka
        self._seen: dict[str, list[int]] | None = None

    def check(self) -> None:
        from gateway_kafka.cluster_view import coordinator_partitions

        if not self.broker.is_master or self.kafka.cluster is None:
            return
        now = coordinator_partitions(self.kafka.cluster)
        if now != self._seen:
            if self._seen is not None:
                self.broker.request_registration()
            self._seen = now


def _registered(info: dict[str, Any], topic: str) -> dict[str, list[int]]:
    """Broker name -> the ids of ``topic`` its master registered (masters that registered any)."""
    extras = info.get("brokerExtraTable") or {}
    out: dict[str, list[int]] = {}
    for name, bd in (info.get("brokerAddrTable") or {}).items():
        addr = (bd.get("brokerAddrs") or {}).get("0")
        ids = ((extras.get(addr) or {}).get("kafkaPartitions") or {}).get(topic) if addr else None
        if ids is not None:
            out[name] = sorted(int(i) for i in ids)
    return out
