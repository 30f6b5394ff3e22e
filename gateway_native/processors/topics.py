"""UPDATE_AND_CREATE_TOPIC (17), DELETE_TOPIC_IN_BROKER (215), GET_ALL_TOPIC_CONFIG (21),
GET_TOPIC_CONFIG (351).

Creating or deleting a topic updates the engine's topic config and re-registers the broker with
every NameServer at once, so routes change without waiting for the periodic registration.
Topic names follow RocketMQ's rule (``^[%|a-zA-Z0-9_-]+$``, at most 127 characters); system
topics cannot be created or deleted this way. Attributes (``+key=value``) go through the
tiering rules every protocol shares (``broker/tiered.refusal``: ``remote.storage.enable=true``
only on a broker with a remote tier, never compacted or internal): INVALID_PARAMETER otherwise.
"""

from __future__ import annotations

import json
from typing import Any

from broker import tiered
from engine.state_log import is_internal
from engine.topic_config import TopicConfig

from ..channels import topic_config_json
from ..remoting.codes import RequestCode as RC, ResponseCode as R
from ..remoting.command import RemotingCommand
from ..transport import Connection
from . import BROKER_PROCESSORS
from .common import SYSTEM_TOPICS, check_topic_name

reg = BROKER_PROCESSORS.register


def apply_attributes(current: dict[str, str] | None, spec: str | None) -> dict[str, str]:
    """RocketMQ's AttributeParser: ``+key=value`` sets, ``-key`` removes, comma-separated
    (``mqadmin updateTopic -a +message.type=FIFO``)."""
    out = dict(current or {})
    for item in filter(None, (p.strip() for p in (spec or "").split(","))):
        if item.startswith("+") and "=" in item:
            key, _, value = item[1:].partition("=")
            out[key.strip()] = value.strip()
        elif item.startswith("-") and "=" not in item:
            out.pop(item[1:].strip(), None)
        else:
            raise ValueError(f"attribute {item!r}: use +key=value to set or -key to remove")
    return out


@reg(RC.UPDATE_AND_CREATE_TOPIC)
async def create_topic(broker: Any, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
    topic = check_topic_name(cmd.get_str("topic"))
    if topic in SYSTEM_TOPICS or is_internal(topic) or topic == broker.broker_config.broker_cluster_name:
        return cmd.response(R.SYSTEM_ERROR, f"The topic[{topic}] is conflict with system topic.")
    read_q, write_q = cmd.get_int("readQueueNums", 8), cmd.get_int("writeQueueNums", 8)
    limit = broker.broker_config.max_topic_queue_nums
    if read_q is None or write_q is None or not 0 < read_q <= limit or not 0 < write_q <= limit:
        return cmd.response(R.INVALID_PARAMETER,
                            f"queue numbers must be 1..{limit} (maxTopicQueueNums), got read {read_q} write {write_q}")
    tc = TopicConfig(topic, read_queue_nums=read_q, write_queue_nums=write_q, perm=cmd.get_int("perm", 6) or 6,
                     topic_filter_type=cmd.get_str("topicFilterType") or "SINGLE_TAG",
                     topic_sys_flag=cmd.get_int("topicSysFlag", 0) or 0, order=cmd.get_bool("order"))
    existing = broker.store.topic_config.get(topic)
    if existing is not None:
        tc.attributes = dict(existing.attributes or {})
    try:
        tc.attributes = apply_attributes(tc.attributes, cmd.get_str("attributes"))
    except ValueError as exc:
        return cmd.response(R.INVALID_PARAMETER, str(exc))
    why = tiered.refusal(broker.store.config, topic, tc.attributes)   # remote.storage.enable & co.
    if why:
        return cmd.response(R.INVALID_PARAMETER, why)
    await broker.run_blocking(broker.store.topic_config.create_or_update, tc)
    broker.topics_changed()
    await broker.register_all()
    return cmd.response(R.SUCCESS)


@reg(RC.DELETE_TOPIC_IN_BROKER)
async def delete_topic(broker: Any, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
    topic = check_topic_name(cmd.get_str("topic"))
    if topic in SYSTEM_TOPICS or is_internal(topic):
        return cmd.response(R.SYSTEM_ERROR, f"The topic[{topic}] is conflict with system topic.")
    await broker.run_blocking(broker.store.delete_topic, topic)  # its producer state and offsets too
    broker.topics_changed()
    await broker.register_all()
    return cmd.response(R.SUCCESS)


@reg(RC.GET_ALL_TOPIC_CONFIG)
async def all_topic_config(broker: Any, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
    body = json.loads(broker.register_body())["topicConfigSerializeWrapper"]
    return cmd.response(R.SUCCESS, body=json.dumps(body, separators=(",", ":")).encode())


@reg(RC.GET_TOPIC_CONFIG)
async def topic_config(broker: Any, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
    topic = cmd.require_str("topic")
    tc = broker.store.topic_config.get(topic)
    if tc is None:
        return cmd.response(R.TOPIC_NOT_EXIST, f"No topic in this broker. topic: {topic}")
    return cmd.response(R.SUCCESS, body=json.dumps({"topicConfig": topic_config_json(tc)}).encode())
