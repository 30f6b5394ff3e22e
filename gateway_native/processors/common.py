"""Helpers shared by the broker processors: topic validation, auto-creation (broker.topics's rule)
and the one table of put statuses as remoting response codes."""

from __future__ import annotations

from typing import Any

from broker import topics
from broker.put_path import PutStatus
from engine.topic_config import TopicConfig, topic_name_error

from ..dispatch import ProcessorError
from ..remoting.codes import ResponseCode as R

SYSTEM_TOPICS = {"TBW102", "SCHEDULE_TOPIC_XXXX", "RMQ_SYS_TRANS_HALF_TOPIC", "RMQ_SYS_TRANS_OP_HALF_TOPIC",
                 "BenchmarkTest", "OFFSET_MOVED_EVENT", "SELF_TEST_TOPIC", "RMQ_SYS_TRACE_TOPIC"}


_VALID_NAMES: set[str] = set()  # names that passed: every send checks its topic's name


def check_topic_name(topic: str | None) -> str:
    """``topic``, or INVALID_PARAMETER with the node's one rule's reason
    (``engine.topic_config.topic_name_error``)."""
    if topic in _VALID_NAMES:
        return topic  # type: ignore[return-value]
    why = topic_name_error(topic)
    if why is not None:
        raise ProcessorError(R.INVALID_PARAMETER, why)
    if len(_VALID_NAMES) >= 10_000:  # bounded: a client naming ever new topics
        _VALID_NAMES.clear()
    _VALID_NAMES.add(topic)  # type: ignore[arg-type]
    return topic  # type: ignore[return-value]


async def topic_for_send(broker: Any, topic: str, default_topic: str | None, default_queue_nums: int | None,
                         sys_flag: int = 0) -> TopicConfig:
    """The topic's config, auto-created by RocketMQ's rule (broker.topics) when allowed."""
    check_topic_name(topic)
    tc = broker.store.topic_config.get(topic)
    if tc is not None:
        return tc
    tc = await topics.auto_create(broker.store, broker.broker_config, topic, "remoting", default_topic,
                                  default_queue_nums, sys_flag)
    if tc is None:
        raise ProcessorError(R.TOPIC_NOT_EXIST, f"topic[{topic}] not exist, apply first please!")
    broker.topics_changed()
    return tc


# the put path's neutral statuses as RocketMQ's send answers (code, remark): the one table
PUT_STATUS = {
    PutStatus.OK: (R.SUCCESS, None),
    PutStatus.FLUSH_DISK_TIMEOUT: (R.FLUSH_DISK_TIMEOUT, "flush disk timed out"),
    PutStatus.FLUSH_SLAVE_TIMEOUT: (R.FLUSH_SLAVE_TIMEOUT, "flush to the slave timed out"),
    PutStatus.SLAVE_NOT_AVAILABLE: (R.SLAVE_NOT_AVAILABLE, "no slave available"),
    PutStatus.SERVICE_NOT_AVAILABLE: (R.SERVICE_NOT_AVAILABLE, "service not available now; the store may be shutting down or out of disk"),
    PutStatus.DISK_FULL: (R.SERVICE_NOT_AVAILABLE, "service not available now; the store may be shutting down or out of disk"),
    PutStatus.CREATE_MAPPED_FILE_FAILED: (R.SYSTEM_ERROR, "create mapped file failed, server is busy or broken"),
    PutStatus.MESSAGE_ILLEGAL: (R.MESSAGE_ILLEGAL, "the message is illegal; body or properties too long"),
    PutStatus.PROPERTIES_SIZE_EXCEEDED: (R.MESSAGE_ILLEGAL, "the message properties are too long"),
    PutStatus.OS_PAGE_CACHE_BUSY: (R.SYSTEM_BUSY, "[PC_SYNCHRONIZED]broker busy, start flow control for a while"),
    PutStatus.SEND_QUEUE_BUSY: (R.SYSTEM_BUSY, "[TIMEOUT_CLEAN_QUEUE]broker busy, start flow control for a while"),
    PutStatus.UNKNOWN_ERROR: (R.SYSTEM_ERROR, "UNKNOWN_ERROR"),
}
