"""What the API modules share: topic naming rules, topic lookup and creation, topic ids,
running blocking store calls off the event loop, and unpacking stored units into batches.

A Kafka topic is the engine topic of the same name; its partition count is the topic's
``read_queue_nums`` (partition p = queue id p). Kafka topic configs live in
``TopicConfig.attributes`` under their Kafka names.
"""

from __future__ import annotations

import asyncio
import functools
import re
import struct
import uuid
from typing import Any, Callable

from engine import message as msg
from engine.state_log import is_internal  # noqa: F401  (Kafka's Topic.isInternal: the handlers' name for it)
from engine.topic_config import TopicConfig

TOPIC_MAX_MESSAGE_BYTES = "max.message.bytes"

LEGAL_TOPIC = re.compile(r"^[a-zA-Z0-9._-]+$")
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


def topic_name_error(name: str | None) -> str | None:
    """Why ``name`` is not a legal Kafka topic name, or None when it is."""
    if not name:
        return "topic name is empty"
    if name in (".", ".."):
        return f"topic name cannot be {name!r}"
    if len(name) > MAX_TOPIC_LENGTH:
        return f"topic name is {len(name)} characters, the maximum is {MAX_TOPIC_LENGTH}"
    if not LEGAL_TOPIC.match(name):
        return f"topic name {name!r} has characters other than ASCII letters, digits, '.', '_' and '-'"
    return None


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


def topic_id(name: str) -> uuid.UUID:
    return uuid.uuid5(_TOPIC_ID_NAMESPACE, name)


def partition_count(tc: TopicConfig) -> int:
    return tc.read_queue_nums


async def blocking(fn: Callable, *args: Any, **kwargs: Any) -> Any:
    """Run a store call that may wait on disk in the default executor."""
    loop = asyncio.get_running_loop()
    return await loop.run_in_executor(None, functools.partial(fn, *args, **kwargs))


def visible_topics(gateway: Any) -> dict[str, TopicConfig]:
    return {n: tc for n, tc in gateway.store.topic_config.all().items() if not is_hidden(n, gateway)}


def find_topic(gateway: Any, name: str) -> TopicConfig | None:
    return gateway.store.topic_config.get(name)


def new_topic_config(name: str, partitions: int, configs: dict[str, str] | None = None) -> TopicConfig:
    return TopicConfig(topic_name=name, read_queue_nums=partitions, write_queue_nums=partitions,
                       attributes=dict(configs or {}))


async def auto_create(gateway: Any, name: str) -> TopicConfig:
    """Create ``name`` with the gateway's default partition count (Kafka's num.partitions)."""
    existing = find_topic(gateway, name)
    if existing is not None:
        return existing
    tc = new_topic_config(name, gateway.settings.num_partitions)
    await blocking(gateway.store.topic_config.create_or_update, tc)
    gateway.log.info("topic_auto_created", topic=name, partitions=tc.read_queue_nums)
    return tc


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
