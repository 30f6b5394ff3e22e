"""QUERY_CONSUMER_OFFSET (14) and UPDATE_CONSUMER_OFFSET (15): a group's committed offsets.

Offsets live in the engine's ``consumer_offsets`` (shared with Kafka groups, key topic@group).
A group without a committed offset is answered QUERY_NOT_FOUND and the client applies its
consumeFromWhere. (RocketMQ answers 0 instead when the queue starts at 0 and its first message has
left the page cache; this store's queues are memory-mapped, so that case does not arise.)
"""

from __future__ import annotations

from typing import Any

from ..remoting.codes import RequestCode as RC, ResponseCode as R
from ..remoting.command import RemotingCommand
from ..transport import Connection
from . import BROKER_PROCESSORS


@BROKER_PROCESSORS.register(RC.QUERY_CONSUMER_OFFSET)
async def query_consumer_offset(broker: Any, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
    group, topic, qid = cmd.require_str("consumerGroup"), cmd.require_str("topic"), cmd.require_int("queueId")
    offset = broker.store.consumer_offsets.query(group, topic, qid)
    if offset is not None and offset >= 0:
        return cmd.response(R.SUCCESS, None, {"offset": offset})
    return cmd.response(R.QUERY_NOT_FOUND, "Not found, maybe this group consumer boot first")


@BROKER_PROCESSORS.register(RC.UPDATE_CONSUMER_OFFSET)
async def update_consumer_offset(broker: Any, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
    group, topic, qid = cmd.require_str("consumerGroup"), cmd.require_str("topic"), cmd.require_int("queueId")
    offset = cmd.require_int("commitOffset")
    if broker.store.topic_config.get(topic) is None:
        return cmd.response(R.TOPIC_NOT_EXIST, f"topic[{topic}] not exist")
    broker.store.consumer_offsets.commit(group, topic, qid, offset)
    return cmd.response(R.SUCCESS)
