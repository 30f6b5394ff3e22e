"""Helpers shared by the broker processors: topic validation and auto-creation."""

from __future__ import annotations

from typing import Any

from engine.topic_config import TopicConfig, topic_name_error

from ..dispatch import ProcessorError
from ..remoting.codes import PERM_INHERIT, PERM_READ, PERM_WRITE, ResponseCode as R

SYSTEM_TOPICS = {"TBW102", "SCHEDULE_TOPIC_XXXX", "RMQ_SYS_TRANS_HALF_TOPIC", "RMQ_SYS_TRANS_OP_HALF_TOPIC",
                 "BenchmarkTest", "OFFSET_MOVED_EVENT", "SELF_TEST_TOPIC", "RMQ_SYS_TRACE_TOPIC"}


def check_topic_name(topic: str | None) -> str:
    """``topic``, or INVALID_PARAMETER with the node's one rule's reason
    (``engine.topic_config.topic_name_error``)."""
    why = topic_name_error(topic)
    if why is not None:
        raise ProcessorError(R.INVALID_PARAMETER, why)
    return topic  # type: ignore[return-value]


async def topic_for_send(broker: Any, topic: str, default_topic: str | None, default_queue_nums: int | None,
                         sys_flag: int = 0) -> TopicConfig:
    """The topic's config, auto-creating it from the default topic (TBW102) when allowed (the
    config file is written off the event loop: an fsync there would stall every connection)."""
    check_topic_name(topic)
    tcm = broker.store.topic_config
    tc = tcm.get(topic)
    if tc is not None:
        return tc
    if topic.startswith("%RETRY%"):
        tc = TopicConfig(topic, read_queue_nums=1, write_queue_nums=1, perm=PERM_READ | PERM_WRITE)
        await broker.run_blocking(tcm.create_or_update, tc)
        broker.topics_changed()
        return tc
    default = tcm.get(default_topic or "TBW102") if broker.broker_config.auto_create_topic_enable else None
    if default is None or not default.perm & PERM_INHERIT:
        raise ProcessorError(R.TOPIC_NOT_EXIST, f"topic[{topic}] not exist, apply first please!")
    nums = min(default.write_queue_nums, default_queue_nums or default.write_queue_nums)
    nums = max(nums, 1)
    tc = TopicConfig(topic, read_queue_nums=nums, write_queue_nums=nums, perm=default.perm & ~PERM_INHERIT,
                     topic_sys_flag=sys_flag)
    await broker.run_blocking(tcm.create_or_update, tc)
    broker.topics_changed()
    return tc


# the store's put statuses as RocketMQ's send answers (code, remark)
PUT_STATUS = {
    "PUT_OK": (R.SUCCESS, None),
    "FLUSH_DISK_TIMEOUT": (R.FLUSH_DISK_TIMEOUT, "flush disk timed out"),
    "FLUSH_SLAVE_TIMEOUT": (R.FLUSH_SLAVE_TIMEOUT, "flush to the slave timed out"),
    "SLAVE_NOT_AVAILABLE": (R.SLAVE_NOT_AVAILABLE, "no slave available"),
    "SERVICE_NOT_AVAILABLE": (R.SERVICE_NOT_AVAILABLE, "service not available now; the store may be shutting down or out of disk"),
    "CREATE_MAPPED_FILE_FAILED": (R.SYSTEM_ERROR, "create mapped file failed, server is busy or broken"),
    "MESSAGE_ILLEGAL": (R.MESSAGE_ILLEGAL, "the message is illegal; body or properties too long"),
    "PROPERTIES_SIZE_EXCEEDED": (R.MESSAGE_ILLEGAL, "the message properties are too long"),
    "OS_PAGE_CACHE_BUSY": (R.SYSTEM_BUSY, "[PC_SYNCHRONIZED]broker busy, start flow control for a while"),
    "UNKNOWN_ERROR": (R.SYSTEM_ERROR, "UNKNOWN_ERROR"),
}
