"""CONSUMER_SEND_MSG_BACK (36): a consumer hands back a message it could not consume.

Behaviour (RocketMQ's ``AbstractSendMessageProcessor.consumerSendMsgBack``):
- header: offset (commitlog offset of the consumed unit), group, delayLevel, originMsgId,
  originTopic, maxReconsumeTimes; the unit is looked up in the store (SYSTEM_ERROR when gone).
  A Kafka batch unit is narrowed to the record ``originMsgId`` names (its derived UNIQ_KEY).
  The caller must be allowed to READ the topic the unit is in (NO_PERMISSION otherwise): the
  copy would hand it the message.
- the group's subscription config is found or created (SUBSCRIPTION_GROUP_NOT_EXIST when
  auto-creation is off); ``%RETRY%<group>`` is created when missing (one queue).
- the copy keeps body, flag, tags, keys and properties, gets ``RETRY_TOPIC`` (the original
  topic, kept from the first failure on) and ``ORIGIN_MESSAGE_ID``, and reconsumeTimes + 1.
- when the message's reconsumeTimes reached the limit, or delayLevel < 0, the copy goes to
  ``%DLQ%<group>`` queue 0 (created when missing, read + write); otherwise to the retry topic
  with ``DELAY`` = delayLevel, or 3 + reconsumeTimes when the consumer left it 0, so the store's
  schedule service redelivers it with a growing back-off.
- the limit is the smaller of the client's maxReconsumeTimes (when it sends one, >= 0) and the
  group's ``retryMaxTimes`` (subscriptionGroup.json, default 16), so an operator can cap a group
  whatever its clients say.
"""

from __future__ import annotations

import random
from typing import Any

import structlog

from engine.message import (
    INNER_BATCH_FLAG, Message, PROPERTY_DELAY_TIME_LEVEL, PROPERTY_ORIGIN_MESSAGE_ID, PROPERTY_RETRY_TOPIC,
)
from engine.topic_config import PERM_READ, PERM_WRITE, TopicConfig

from ..remoting.codes import RequestCode as RC, ResponseCode as R
from ..remoting.command import RemotingCommand
from ..transport import Connection
from ..security import processor_check
from . import BROKER_PROCESSORS
from broker.put_path import put_status

from .common import PUT_STATUS as _STATUS

log = structlog.get_logger("rockafka.native.send_back")

RETRY_PREFIX = "%RETRY%"
DLQ_PREFIX = "%DLQ%"


async def ensure_topic(broker: Any, topic: str, queue_nums: int = 1) -> TopicConfig:
    tcm = broker.store.topic_config
    tc = tcm.get(topic)
    if tc is None:
        tc = TopicConfig(topic, read_queue_nums=queue_nums, write_queue_nums=queue_nums, perm=PERM_READ | PERM_WRITE)
        await broker.run_blocking(tcm.create_or_update, tc)  # fsync: off the event loop
        broker.topics_changed()
    return tc


async def subscription_group(broker: Any, group: str) -> Any:
    """The group's settings, auto-created (and persisted off the event loop) when allowed."""
    groups = broker.store.subscription_groups
    return groups.get(group) or await broker.run_blocking(groups.find_or_create, group)


@BROKER_PROCESSORS.register(RC.CONSUMER_SEND_MSG_BACK)
async def consumer_send_msg_back(broker: Any, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
    group = cmd.require_str("group")
    offset = cmd.require_int("offset")
    delay_level = cmd.get_int("delayLevel", 0) or 0
    origin_msg_id = cmd.get_str("originMsgId")
    client_max = cmd.get_int("maxReconsumeTimes", -1)
    store = broker.store
    sub_cfg = await subscription_group(broker, group)
    if sub_cfg is None:
        return cmd.response(R.SUBSCRIPTION_GROUP_NOT_EXIST, f"subscription group not exist, {group}")
    max_times = sub_cfg.retry_max_times
    if client_max is not None and client_max >= 0:
        max_times = min(max_times, client_max)

    ext = await broker.run_blocking(_look, store, offset, origin_msg_id)
    if ext is None:
        return cmd.response(R.SYSTEM_ERROR, f"look message by offset failed, {offset}")
    # the copy lands in the group's retry topic, where the caller reads it: READ on the topic the
    # message is in, as reading it by id (engine/security/reads.py)
    refusal = processor_check(broker, conn, cmd, ext.topic)
    if refusal is not None:
        return cmd.response(R.NO_PERMISSION, refusal)
    props = dict(ext.properties)
    props.setdefault(PROPERTY_RETRY_TOPIC, ext.topic)
    props.setdefault(PROPERTY_ORIGIN_MESSAGE_ID, origin_msg_id or ext.msg_id)
    props.pop(PROPERTY_DELAY_TIME_LEVEL, None)
    props.pop("REAL_TOPIC", None)
    props.pop("REAL_QID", None)
    if ext.reconsume_times >= max_times or delay_level < 0:
        topic = DLQ_PREFIX + group
        await ensure_topic(broker, topic)
        queue_id = 0
        log.info("message_to_dlq", group=group, topic=props[PROPERTY_RETRY_TOPIC], msg_id=props[PROPERTY_ORIGIN_MESSAGE_ID],
                 reconsume_times=ext.reconsume_times + 1)
    else:
        topic = RETRY_PREFIX + group
        tc = await ensure_topic(broker, topic, max(sub_cfg.retry_queue_nums, 1))
        queue_id = random.randrange(max(tc.write_queue_nums, 1))
        props[PROPERTY_DELAY_TIME_LEVEL] = str(delay_level if delay_level > 0 else 3 + ext.reconsume_times)
    tags = props.pop("TAGS", None)
    keys = props.pop("KEYS", None)
    msg = Message(topic=topic, body=ext.body, tags=tags, keys=keys.split(" ") if keys else None, properties=props,
                  queue_id=queue_id, flag=ext.flag, sys_flag=ext.sys_flag & ~INNER_BATCH_FLAG & ~0xC,
                  born_timestamp=ext.born_timestamp, born_host=ext.born_host, store_host=broker.addr,
                  reconsume_times=ext.reconsume_times + 1)
    result = await broker.put(store.put_message, msg)
    code, remark = _STATUS.get(put_status(result), (R.SYSTEM_ERROR, str(result.status)))
    if code in (R.SUCCESS, R.FLUSH_DISK_TIMEOUT, R.FLUSH_SLAVE_TIMEOUT, R.SLAVE_NOT_AVAILABLE):
        return cmd.response(R.SUCCESS)
    return cmd.response(code, result.error or remark)


async def redirect_retry_send(broker: Any, cmd: RemotingCommand, msg: Message) -> None:
    """SEND_MESSAGE to ``%RETRY%<group>`` (RocketMQ's ``handleRetryAndDLQ``): a message sent
    there with reconsumeTimes above the group's limit goes to ``%DLQ%<group>`` instead."""
    group = msg.topic[len(RETRY_PREFIX):]
    cfg = await subscription_group(broker, group)
    limit = cfg.retry_max_times if cfg is not None else 16
    client_max = cmd.get_int("maxReconsumeTimes", -1)
    if client_max is not None and client_max >= 0:
        limit = min(limit, client_max)
    if msg.reconsume_times > limit:
        msg.topic = DLQ_PREFIX + group
        msg.queue_id = 0
        if msg.properties:
            msg.properties.pop(PROPERTY_DELAY_TIME_LEVEL, None)
        await ensure_topic(broker, msg.topic)
        log.info("message_to_dlq", group=group, reconsume_times=msg.reconsume_times, via="retry_send")


def _look(store: Any, offset: int, origin_msg_id: str | None) -> Any:
    from engine.batch_convert import expand_batch_unit
    from engine.message import decode_message, encode_message

    ext = store.look_message_by_offset(offset) if offset >= 0 else None
    if ext is None or not ext.sys_flag & INNER_BATCH_FLAG:
        return ext
    unit = encode_message(Message(topic=ext.topic, body=ext.body, properties=dict(ext.properties),
                                  queue_id=ext.queue_id, flag=ext.flag, sys_flag=ext.sys_flag,
                                  born_timestamp=ext.born_timestamp, born_host=ext.born_host,
                                  reconsume_times=ext.reconsume_times),
                          queue_offset=ext.queue_offset, physical_offset=ext.commitlog_offset,
                          store_timestamp=ext.store_timestamp, store_host=ext.store_host)
    try:
        records = [decode_message(u) for u in expand_batch_unit(bytes(unit))]
    except ValueError:
        return None
    for rec in records:  # the record the consumer failed on: its derived UNIQ_KEY is the id it saw
        if origin_msg_id and rec.properties.get("UNIQ_KEY") == origin_msg_id:
            return rec
    return records[0] if records else None
