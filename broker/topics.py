"""Topic auto-creation: the one place a write (or a metadata request) creates a topic config.

Two rules, one creation step:
- RocketMQ's (native sends, gRPC sends): a topic inherits from the default topic (TBW102, or the
  one the client names) when ``autoCreateTopicEnable`` is on and that topic carries
  PERM_INHERIT; its queue count is the smaller of the default topic's and the one asked for
  (``defaultTopicQueueNums``); the new topic has the default's permissions without INHERIT.
  ``%RETRY%`` topics are created with one queue, read and write.
- Kafka's: the gateway decides the partition count (``num.partitions``) and attributes and
  hands the config over.
Either way the config file is written off the event loop (an fsync there would stall every
connection) and one ``topic_auto_created`` event is logged.
"""

from __future__ import annotations

import asyncio
from typing import Any

import structlog

from engine.topic_config import PERM_INHERIT, PERM_READ, PERM_WRITE, TopicConfig

log = structlog.get_logger("rockafka.broker.topics")

DEFAULT_TOPIC = "TBW102"


def inherited_config(store: Any, broker_config: Any, topic: str, default_topic: str | None = None,
                     queue_nums: int | None = None, sys_flag: int = 0) -> TopicConfig | None:
    """The config ``topic`` gets by RocketMQ's rule, or None when auto-creation is refused
    (disabled, or the default topic missing or not inheritable)."""
    tcm = store.topic_config
    if topic.startswith("%RETRY%"):
        return TopicConfig(topic, read_queue_nums=1, write_queue_nums=1, perm=PERM_READ | PERM_WRITE)
    default = tcm.get(default_topic or DEFAULT_TOPIC) if broker_config.auto_create_topic_enable else None
    if default is None or not default.perm & PERM_INHERIT:
        return None
    nums = max(1, min(default.write_queue_nums, queue_nums or default.write_queue_nums))
    return TopicConfig(topic, read_queue_nums=nums, write_queue_nums=nums, perm=default.perm & ~PERM_INHERIT,
                       topic_sys_flag=sys_flag)


async def create(store: Any, tc: TopicConfig, via: str) -> TopicConfig:
    """Store ``tc`` (off the event loop) and log it; returns it."""
    await asyncio.get_running_loop().run_in_executor(None, store.topic_config.create_or_update, tc)
    log.info("topic_auto_created", topic=tc.topic_name, queues=tc.write_queue_nums, via=via)
    return tc


async def auto_create(store: Any, broker_config: Any, topic: str, via: str, default_topic: str | None = None,
                      queue_nums: int | None = None, sys_flag: int = 0) -> TopicConfig | None:
    """``topic``'s config, created by RocketMQ's rule when it has none; None when refused."""
    tc = store.topic_config.get(topic)
    if tc is not None:
        return tc
    tc = inherited_config(store, broker_config, topic, default_topic, queue_nums, sys_flag)
    return None if tc is None else await create(store, tc, via)
