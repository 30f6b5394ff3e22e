"""Admin requests for rewind and group settings: INVOKE_BROKER_TO_RESET_OFFSET (222),
GET_ALL_CONSUMER_OFFSET (43), GET_ALL_DELAY_OFFSET (45), UPDATE_AND_CREATE_SUBSCRIPTIONGROUP (200),
GET_ALL_SUBSCRIPTIONGROUP_CONFIG (201).

Reset (RocketMQ's ``Broker2Client.resetOffset``): header topic, group, timestamp (ms; -1 = the
queue's end), isForce. Per readable queue the target is the first offset stored at or after
the timestamp; without isForce a queue is only moved backwards (target < committed offset).
The broker commits the targets itself (so an offline group is rewound too), then tells every
online native member with RESET_CONSUMER_CLIENT_OFFSET (oneway; body ``{"offsetTable":
{MessageQueue: offset}}`` in fastjson's object-key form, which stock Java clients parse), and
answers the same table. A Kafka consumer group of that name with live members is refused
(SYSTEM_ERROR with the reason), as Kafka's tools only reset empty groups; ``broker.
foreign_group_state`` is that check, wired by the node (the gateways do not import each other).

Subscription groups: the JSON body is a ``SubscriptionGroupConfig`` (camelCase), e.g.
``{"groupName": "g", "retryMaxTimes": 3}``; unknown fields are ignored.
"""

from __future__ import annotations

import json
from typing import Any

import structlog

from engine.subscription_group import SubscriptionGroupConfig

from ..remoting.codes import RequestCode as RC, ResponseCode as R
from ..remoting.command import RemotingCommand, loads_json
from ..transport import Connection, ConnectionClosedError
from . import BROKER_PROCESSORS

log = structlog.get_logger("rockafka.native.admin")

_KAFKA_IDLE_STATES = {None, "Empty", "Dead", "EMPTY", "DEAD"}


def offset_table_json(broker_name: str, topic: str, offsets: dict[int, int]) -> bytes:
    """``ResetOffsetBody`` as fastjson writes a map keyed by MessageQueue objects."""
    items = ",".join(
        '{"brokerName":%s,"queueId":%d,"topic":%s}:%d' % (json.dumps(broker_name), qid, json.dumps(topic), off)
        for qid, off in sorted(offsets.items()))
    return ('{"offsetTable":{%s}}' % items).encode()


@BROKER_PROCESSORS.register(RC.INVOKE_BROKER_TO_RESET_OFFSET)
async def reset_offset(broker: Any, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
    topic = cmd.require_str("topic")
    group = cmd.require_str("group")
    timestamp = cmd.get_int("timestamp", -1)
    force = cmd.get_bool("isForce", True)
    store = broker.store
    tc = store.topic_config.get(topic)
    if tc is None:
        return cmd.response(R.TOPIC_NOT_EXIST, f"topic[{topic}] not exist")
    state_of = getattr(broker, "foreign_group_state", None)
    kafka_state = state_of(group) if state_of is not None else None
    if kafka_state not in _KAFKA_IDLE_STATES:
        return cmd.response(R.SYSTEM_ERROR, f"the Kafka consumer group {group} has active members (state {kafka_state}); "
                                            "stop its consumers first, offsets of a non-empty Kafka group are not reset")
    offsets: dict[int, int] = {}
    for qid in range(tc.read_queue_nums):
        if timestamp is None or timestamp < 0:
            target = store.get_max_offset_in_queue(topic, qid)
        else:
            target = store.get_offset_in_queue_by_time(topic, qid, timestamp)
        committed = store.consumer_offsets.query(group, topic, qid)
        if not force and 0 <= committed <= target:
            target = committed
        offsets[qid] = target
        store.consumer_offsets.commit(group, topic, qid, target)
    await broker.run_blocking(store.consumer_offsets.persist)
    body = offset_table_json(broker.broker_config.broker_name, topic, offsets)
    info = broker.consumers.groups.get(group)
    notified = 0
    for ch in list(info.channels.values()) if info else []:
        push = RemotingCommand.request(RC.RESET_CONSUMER_CLIENT_OFFSET,
                                       {"topic": topic, "group": group, "timestamp": timestamp, "isForce": force},
                                       body, oneway=True)
        push.language = 0
        push.serialize_type = broker.serialize_type
        try:
            ch.conn.send(push)
            notified += 1
        except ConnectionClosedError:
            pass
    log.info("consumer_offset_reset", group=group, topic=topic, timestamp=timestamp, force=force,
             offsets=offsets, clients_notified=notified)
    return cmd.response(R.SUCCESS, None if notified else "no native consumer online; committed offsets were reset",
                        None, body)


@BROKER_PROCESSORS.register(RC.GET_ALL_CONSUMER_OFFSET)
async def all_consumer_offsets(broker: Any, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
    table: dict[str, dict[str, int]] = {}
    co = broker.store.consumer_offsets
    for group in sorted(co.groups()):
        for (topic, qid), off in co.offsets_of(group).items():
            table.setdefault(f"{topic}@{group}", {})[str(qid)] = off
    return cmd.response(R.SUCCESS, body=json.dumps({"offsetTable": table}, separators=(",", ":")).encode())


@BROKER_PROCESSORS.register(RC.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP)
async def update_subscription_group(broker: Any, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
    try:
        doc = loads_json(cmd.body or b"{}", "subscription group body")
        if not isinstance(doc, dict) or not doc.get("groupName"):
            raise ValueError("body must be a JSON object with groupName")
        current = broker.store.subscription_groups.get(str(doc["groupName"]))
        merged = {**(current.to_json() if current else {}), **doc}
        cfg = SubscriptionGroupConfig.from_json(merged)
        if not isinstance(cfg.retry_max_times, int) or cfg.retry_max_times < 0:
            raise ValueError("retryMaxTimes must be a non-negative integer")
    except (ValueError, TypeError) as exc:
        return cmd.response(R.INVALID_PARAMETER, f"bad subscription group config: {exc}")
    await broker.run_blocking(broker.store.subscription_groups.create_or_update, cfg)
    return cmd.response(R.SUCCESS)


@BROKER_PROCESSORS.register(RC.GET_ALL_SUBSCRIPTIONGROUP_CONFIG)
async def all_subscription_groups(broker: Any, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
    groups = broker.store.subscription_groups
    body = {"subscriptionGroupTable": {k: v.to_json() for k, v in groups.all().items()},
            "dataVersion": groups.data_version.to_json()}
    return cmd.response(R.SUCCESS, body=json.dumps(body, separators=(",", ":")).encode())


@BROKER_PROCESSORS.register(RC.GET_ALL_DELAY_OFFSET)
async def all_delay_offsets(broker: Any, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
    """delayOffset.json as RocketMQ serves it (slaves and admin tools read delivery progress)."""
    schedule = getattr(broker.store, "schedule", None)
    table = dict(schedule.offsets.table) if schedule is not None else {}
    body = {"offsetTable": {str(k): v for k, v in sorted(table.items())}}
    return cmd.response(R.SUCCESS, body=json.dumps(body, separators=(",", ":")).encode())
