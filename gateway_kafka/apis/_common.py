"""What the API modules share: topic naming rules, topic lookup and creation, topic ids,
running blocking store calls off the event loop, and unpacking stored units into batches.

A Kafka topic is the engine topic of the same name; its partition count is the topic's
``read_queue_nums`` (partition p = queue id p). Kafka topic configs live in
``TopicConfig.attributes`` under their Kafka names.
"""

from __future__ import annotations

import asyncio
import functools
import struct
import uuid
from typing import Any, Callable

from broker import topics
from broker.read_path import is_internal  # noqa: F401  (Kafka's Topic.isInternal: the handlers' name for it)
from engine import message as msg
from engine.topic_config import TopicConfig
from engine.topic_config import topic_name_error as engine_topic_name_error
from gateway_kafka import error_codes as E
from gateway_kafka.cluster_view import PARTITION_IDS, format_partition_ids

TOPIC_MAX_MESSAGE_BYTES = "max.message.bytes"

MAX_TOPIC_LENGTH = 249

# RocketMQ's system topics (TopicValidator) are not Kafka topics: hidden from "all topics".
_SYSTEM_TOPICS = {"TBW102", "SCHEDULE_TOPIC_XXXX", "BenchmarkTest", "OFFSET_MOVED_EVENT", "SELF_TEST_TOPIC",
                  "TRANS_CHECK_MAX_TIME_TOPIC"}
_SYSTEM_PREFIXES = ("RMQ_SYS_", "rmq_sys_", "%RETRY%", "%DLQ%", "%LMQ%")

# Topic ids are derived from the name (stable across restarts without extra state). A topic
# deleted and re-created under the same name gets the same id; clients only use ids to
# detect re-creation, which they then miss, as with a pre-2.8 Kafka broker.
_TOPIC_ID_NAMESPACE = uuid.UUID("6f1c2a3e-5b7d-4c8e-9a0b-1d2e3f405162")

_I32 = struct.Struct(">i")
UNIT_BODY_POS_V4 = 88  # fixed part of a unit with IPv4 born and store hosts (engine.message)
_BODYLEN_POS_V4 = 84
_SYSFLAG_POS = 36
_V6_FLAGS = msg.BORNHOST_V6_FLAG | msg.STOREHOST_V6_FLAG


# Authorized operations (a bit per AclOperation code) answered when a client asks for them:
# with no authorizer configured Kafka answers every operation the resource type supports
# (AclEntry.supportedOperations), and so does Rockafka.
_READ, _WRITE, _CREATE, _DELETE, _ALTER, _DESCRIBE = 3, 4, 5, 6, 7, 8
_CLUSTER_ACTION, _DESCRIBE_CONFIGS, _ALTER_CONFIGS, _IDEMPOTENT_WRITE = 9, 10, 11, 12


def _ops(*codes: int) -> int:
    return sum(1 << c for c in codes)


TOPIC_OPERATIONS = _ops(_READ, _WRITE, _CREATE, _DESCRIBE, _DELETE, _ALTER, _DESCRIBE_CONFIGS, _ALTER_CONFIGS)
GROUP_OPERATIONS = _ops(_READ, _DESCRIBE, _DELETE, _DESCRIBE_CONFIGS, _ALTER_CONFIGS)
CLUSTER_OPERATIONS = _ops(_CREATE, _CLUSTER_ACTION, _DESCRIBE_CONFIGS, _ALTER_CONFIGS, _IDEMPOTENT_WRITE, _ALTER,
                          _DESCRIBE)
NOT_ASKED = -2147483648  # Kafka's "authorized operations not requested"


def topic_name_error(name: str | None) -> str | None:
    """Why ``name`` is not a legal topic name, or None: the node's one rule
    (``engine.topic_config.topic_name_error``)."""
    return engine_topic_name_error(name)


def is_hidden(name: str, gateway: Any) -> bool:
    if name in _SYSTEM_TOPICS or name.startswith(_SYSTEM_PREFIXES) or name.endswith("_REPLY_TOPIC"):
        return True
    broker = gateway.config.broker
    if name in (broker.broker_cluster_name, broker.broker_name):
        return True  # RocketMQ registers topics named after the cluster and the broker
    return topic_name_error(name) is not None


def message_limit(gateway: Any, tc: TopicConfig) -> int:
    """Largest record batch the topic takes: its ``max.message.bytes`` when set, else the
    broker's ``message.max.bytes`` (``message_max_bytes``), as Kafka decides."""
    raw = tc.attributes.get(TOPIC_MAX_MESSAGE_BYTES)
    if raw is not None:
        try:
            return int(raw)
        except ValueError:
            pass
    return gateway.settings.message_max_bytes


def partition_results(topics: Any, codes: dict[tuple[str, int], int]) -> list[dict]:
    """A response's per-topic, per-partition error codes in request order (0 when not in
    ``codes``), as OffsetCommit and TxnOffsetCommit answer."""
    return [{"name": t.get("name"), "partitions": [
        {"partition_index": p.get("partition_index", -1),
         "error_code": codes.get((t.get("name"), p.get("partition_index", -1)), 0)}
        for p in t.get("partitions") or ()]} for t in topics or ()]


@functools.lru_cache(maxsize=1 << 16)
def topic_id(name: str) -> uuid.UUID:
    """A topic's id, derived from its name (so every node of a cluster gives the same one);
    remembered, since every Fetch, Produce v13 and Metadata answer names it (a SHA-1 each)."""
    return uuid.uuid5(_TOPIC_ID_NAMESPACE, name)


_ids_by_version: tuple[int, dict[uuid.UUID, str]] = (-1, {})


def topic_by_id(gateway: Any, tid: uuid.UUID | None) -> str | None:
    """The name of the topic whose id is ``tid`` (None when no topic has it)."""
    global _ids_by_version
    if tid is None:
        return None
    tcm = gateway.store.topic_config
    version = tcm.data_version.counter
    cached_version, table = _ids_by_version
    if cached_version != version:
        table = {topic_id(name): name for name in tcm.all()}
        _ids_by_version = (version, table)
    return table.get(tid)


def partition_count(tc: TopicConfig) -> int:
    return tc.read_queue_nums


def local_queue(gateway: Any, topic: str, partition: int) -> tuple[int | None, int]:
    """(local queue id, NONE) when this node's group owns ``partition`` of ``topic``; (None,
    NOT_LEADER_OR_FOLLOWER) when another group does; (None, UNKNOWN_TOPIC_OR_PARTITION) when no
    group does (docs/design/cluster.md)."""
    cluster = gateway.cluster
    if cluster is None:
        tc = find_topic(gateway, topic)
        ok = tc is not None and 0 <= partition < partition_count(tc)
        return (partition, E.NONE) if ok else (None, E.UNKNOWN_TOPIC_OR_PARTITION)
    queue = cluster.local_queue(topic, partition)
    if queue is not None:
        return queue, E.NONE
    if cluster.owner(topic, partition) is not None:
        return None, E.NOT_LEADER_OR_FOLLOWER
    return None, E.UNKNOWN_TOPIC_OR_PARTITION


def partition_exists(gateway: Any, topic: str, partition: int) -> bool:
    """Some group of the cluster owns ``partition`` of ``topic`` (offsets may be committed for it)."""
    if gateway.cluster is None:
        tc = find_topic(gateway, topic)
        return tc is not None and 0 <= partition < partition_count(tc)
    return gateway.cluster.owner(topic, partition) is not None


async def blocking(fn: Callable, *args: Any, **kwargs: Any) -> Any:
    """Run a store call that may wait on disk in the default executor."""
    loop = asyncio.get_running_loop()
    return await loop.run_in_executor(None, functools.partial(fn, *args, **kwargs))


def visible_topics(gateway: Any) -> dict[str, TopicConfig]:
    return {n: tc for n, tc in gateway.store.topic_config.all().items() if not is_hidden(n, gateway)}


def find_topic(gateway: Any, name: str) -> TopicConfig | None:
    return gateway.store.topic_config.get(name)


def cluster_topics(gateway: Any) -> dict[str, TopicConfig | None]:
    """Every Kafka-visible topic of the cluster: this node's (with its config) and those only
    other broker groups hold (None)."""
    out: dict[str, TopicConfig | None] = dict(visible_topics(gateway))
    if gateway.cluster is not None:
        for name in gateway.cluster.topic_names():
            if name not in out and not is_hidden(name, gateway):
                out[name] = None
    return out


def topic_partition_ids(gateway: Any, name: str, tc: TopicConfig | None) -> list[int]:
    """The topic's partition ids over the whole cluster, ascending."""
    if gateway.cluster is None:
        return list(range(partition_count(tc))) if tc is not None else []
    return gateway.cluster.partition_ids(name)


def new_topic_config(name: str, partitions: int, configs: dict[str, str] | None = None) -> TopicConfig:
    return TopicConfig(topic_name=name, read_queue_nums=partitions, write_queue_nums=partitions,
                       attributes=dict(configs or {}))


async def look_up_elsewhere(gateway: Any, name: str) -> bool:
    """True when ``name``, which this node neither holds nor lists, turns out to be held by
    another broker group once the view is refreshed from the NameServer (a topic created through
    another node a moment ago: Kafka's brokers all list a new topic within milliseconds, and a
    consumer told UNKNOWN_TOPIC_OR_PARTITION would look again only at its next metadata refresh,
    minutes later). Refreshes are shared and spaced (``RemoteGroups.look_up``); no NameServer
    answering leaves the answer as it was."""
    cluster = gateway.cluster
    look_up = getattr(gateway.remote_groups, "look_up", None)
    if cluster is None or look_up is None:
        return False
    try:
        await look_up()
    except Exception as exc:
        gateway.log.warning("cluster_view_refresh_failed", topic=name, error=str(exc))
        return False
    return name in cluster.topic_names()


async def auto_create(gateway: Any, name: str) -> TopicConfig | None:
    """Auto-create ``name`` (Kafka Metadata with ``allow_auto_topic_creation``) with the gateway's
    default partition count (Kafka's num.partitions). Returns this node's config of it when this
    node's group holds it; None when another group holds it (the caller lists that group's
    partitions) or the creation was passed on and is not listed yet (the caller answers
    LEADER_NOT_AVAILABLE, as Kafka does for a topic being created; the client asks again).

    One group creates a given name: ``auto_create_group`` (the same on every node), so two nodes
    asked at once never each create a copy of partition 0 — the producer writing to one copy and
    the consumer led to the other. With several groups the view is first refreshed from the
    NameServer (a topic created a moment ago is listed, never created again); a node that is not
    that group's master (another group, or a slave, whose topic table is its master's copy)
    passes the creation to that group's master (docs/design/cluster.md)."""
    existing = find_topic(gateway, name)
    if existing is not None:
        return existing
    cluster = gateway.cluster
    refresh = getattr(gateway.remote_groups, "refresh_view", None)
    namesrv_answered = False
    if cluster is not None and refresh is not None:
        try:
            await refresh()
            namesrv_answered = True
        except Exception as exc:  # no NameServer answered: decide on the view as it is
            gateway.log.warning("cluster_view_refresh_failed", topic=name, error=str(exc))
        if name in cluster.topic_names():
            return find_topic(gateway, name)
    tc = new_topic_config(name, gateway.settings.num_partitions)
    ids = list(range(tc.read_queue_nums))
    others = cluster is not None and bool(getattr(cluster, "others", None))
    if others:
        # stored and registered ids: every node then knows which group holds the topic (one
        # without ids is visible on its own group only)
        tc.attributes[PARTITION_IDS] = format_partition_ids(ids)
    if cluster is None:
        return await topics.create(gateway.store, tc, via="kafka")
    group = cluster.auto_create_group(name) if others else cluster.broker_name
    if group != cluster.broker_name or not cluster.is_master:
        await _create_on(gateway, group, tc)
        return None
    created = await topics.create(gateway.store, tc, via="kafka")
    wait = getattr(gateway.remote_groups, "wait_visible", None)
    if others and wait is not None and namesrv_answered:
        # the answer waits (bounded) until the NameServer lists the registration, so a client
        # asking another node next finds the topic there
        await wait(name, {cluster.broker_name: ids}, timeout=5.0, settle=False)
    return created


async def _create_on(gateway: Any, group: str, tc: TopicConfig) -> None:
    """Ask ``group``'s master to create ``tc`` if absent (``createOnly``: a topic it holds, which
    this node's view or topic table may not show yet, is never reset). Failures are logged: the
    client's next Metadata tries again."""
    create = getattr(gateway.remote_groups, "create_or_update_topic", None)
    if create is None:
        return
    try:
        await create(group, tc, create_only=True)
    except Exception as exc:
        gateway.log.warning("auto_create_passed_on_failed", topic=tc.topic_name, group=group, error=str(exc))


def stored_batch(unit: Any) -> Any | None:
    """The batch a unit produced as a Kafka batch carries (a view, no copy); None for a
    natively produced unit (which has no producer id, sequence or batch header)."""
    sys_flag = _I32.unpack_from(unit, _SYSFLAG_POS)[0]
    if not sys_flag & msg.INNER_BATCH_FLAG:
        return None
    if not sys_flag & _V6_FLAGS:
        n = _I32.unpack_from(unit, _BODYLEN_POS_V4)[0]
        return memoryview(unit)[UNIT_BODY_POS_V4:UNIT_BODY_POS_V4 + n]
    h = msg.UnitHeader(unit)
    return memoryview(unit)[h.body_pos:h.body_pos + h.body_len]


def batch_of_unit(unit: Any) -> Any:
    """The Kafka RecordBatch a stored unit is served as.

    A unit produced as a Kafka batch (INNER_BATCH) carries the batch as its body, base offset
    already patched: sliced out without copying. Any other unit (produced natively) becomes a
    one-record batch built on read, at its queue offset.
    """
    sys_flag = _I32.unpack_from(unit, _SYSFLAG_POS)[0]
    if sys_flag & msg.INNER_BATCH_FLAG:
        if not sys_flag & _V6_FLAGS:
            n = _I32.unpack_from(unit, _BODYLEN_POS_V4)[0]
            return memoryview(unit)[UNIT_BODY_POS_V4:UNIT_BODY_POS_V4 + n]
        h = msg.UnitHeader(unit)
        return memoryview(unit)[h.body_pos:h.body_pos + h.body_len]
    from engine import batch_convert

    return batch_convert.unit_to_batch(unit)


def mutation_quota(ctx: Any, strict_since: int):
    """The controller-mutation quota (KIP-599) of this CreateTopics / CreatePartitions /
    DeleteTopics request, strict from version ``strict_since`` (None when none applies)."""
    return ctx.gateway.quotas.mutation_quota(ctx.conn.principal, ctx.client_id, ctx.api_version >= strict_since)


def mutation_throttle(ctx: Any, quota: Any) -> int:
    """The request's ``throttle_time_ms`` under its controller-mutation quota; the connection
    then reads nothing for that long (KIP-219)."""
    if quota is None:
        return 0
    ms = quota.throttle_ms()
    if ms:
        ctx.conn.extra["throttle_time_ms"] = max(ms, ctx.conn.extra.get("throttle_time_ms", 0))
    return ms
