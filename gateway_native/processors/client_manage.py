"""Client management: HEART_BEAT (34), UNREGISTER_CLIENT (35), GET_CONSUMER_LIST_BY_GROUP (38),
CHECK_CLIENT_CONFIG (46), GET_CONSUMER_CONNECTION_LIST (203), GET_CONSUMER_RUNNING_INFO (307).

Behaviour: a heartbeat (``HeartbeatData`` JSON: clientID, producerDataSet, consumerDataSet with
subscriptions) registers the client's producer and consumer groups on this connection; a
consumer group's first member or any membership / subscription change notifies every member
(NOTIFY_CONSUMER_IDS_CHANGED). Clustering consumers get their ``%RETRY%<group>`` topic created
(one queue), as RocketMQ does, so retry consumption can be routed later. CHECK_CLIENT_CONFIG
compiles a SQL92 subscription (SUBSCRIPTION_PARSE_FAILED with the reason). Consumer running info
is asked of the client itself and relayed.
"""

from __future__ import annotations

import json
import time
from typing import Any

from engine.sql92 import Sql92Error
from engine.topic_config import PERM_READ, PERM_WRITE, TopicConfig

from ..channels import ClientChannel
from ..remoting.codes import RequestCode as RC, ResponseCode as R
from ..remoting.command import RemotingCommand, loads_json
from ..subscription import SubscriptionData
from ..transport import Connection, ConnectionClosedError, RemotingTimeoutError
from . import BROKER_PROCESSORS

reg = BROKER_PROCESSORS.register


def _json(obj: Any) -> bytes:
    return json.dumps(obj, separators=(",", ":")).encode()


async def _ensure_retry_topic(broker: Any, group: str) -> None:
    topic = f"%RETRY%{group}"
    if broker.store.topic_config.get(topic) is None:
        # the config file's fsync runs off the event loop, which also serves every other client
        await broker.run_blocking(broker.store.topic_config.create_or_update,
                                  TopicConfig(topic, read_queue_nums=1, write_queue_nums=1, perm=PERM_READ | PERM_WRITE))
        broker.topics_changed()


@reg(RC.HEART_BEAT)
async def heart_beat(broker: Any, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
    try:
        data = loads_json(cmd.body or b"{}", "heartbeat body")
        if not isinstance(data, dict):
            raise ValueError("heartbeat body must be a JSON object")
    except ValueError as exc:
        return cmd.response(R.SYSTEM_ERROR, f"bad heartbeat body: {exc}")
    client_id = str(data.get("clientID") or "")
    if not client_id:
        return cmd.response(R.SYSTEM_ERROR, "heartbeat without clientID")
    conn.attrs["client_id"] = client_id
    now = time.monotonic()
    for cd in data.get("consumerDataSet") or []:
        group = str(cd.get("groupName") or "")
        if not group:
            continue
        subs = []
        for sd in cd.get("subscriptionDataSet") or []:
            try:
                subs.append(SubscriptionData.from_json(sd))
            except (Sql92Error, ValueError):
                # a bad expression is reported on CHECK_CLIENT_CONFIG / pull; skip it here
                continue
        model = str(cd.get("messageModel") or "CLUSTERING")
        broker.store.subscription_groups.find_or_create(group)  # as RocketMQ: a group exists once it heartbeats
        if model == "CLUSTERING":
            await _ensure_retry_topic(broker, group)
        channel = ClientChannel(client_id, conn, cmd.language, cmd.version, now)
        broker.consumers.register(group, channel, str(cd.get("consumeType") or "CONSUME_PASSIVELY"), model,
                                  str(cd.get("consumeFromWhere") or "CONSUME_FROM_LAST_OFFSET"), subs)
    for pd in data.get("producerDataSet") or []:
        group = str(pd.get("groupName") or "")
        if group:
            broker.producers.register(group, ClientChannel(client_id, conn, cmd.language, cmd.version, now))
    return cmd.response(R.SUCCESS)


@reg(RC.UNREGISTER_CLIENT)
async def unregister_client(broker: Any, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
    client_id = cmd.require_str("clientID")
    if cmd.get_str("producerGroup"):
        broker.producers.unregister(cmd.get_str("producerGroup"), client_id)
    if cmd.get_str("consumerGroup"):
        broker.consumers.unregister(cmd.get_str("consumerGroup"), client_id, "unregister_request")
    return cmd.response(R.SUCCESS)


@reg(RC.GET_CONSUMER_LIST_BY_GROUP)
async def consumer_list(broker: Any, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
    group = cmd.require_str("consumerGroup")
    info = broker.consumers.groups.get(group)
    if info is None or not info.channels:
        return cmd.response(R.SYSTEM_ERROR, f"no consumer for this group, {group}")
    return cmd.response(R.SUCCESS, body=_json({"consumerIdList": info.client_ids()}))


@reg(RC.CHECK_CLIENT_CONFIG)
async def check_client_config(broker: Any, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
    try:
        body = loads_json(cmd.body or b"{}", "client config body")
        sd = body.get("subscriptionData") or {}
        SubscriptionData.build(str(sd.get("topic", "")), sd.get("subString"), sd.get("expressionType"))
    except Sql92Error as exc:
        return cmd.response(R.SUBSCRIPTION_PARSE_FAILED, f"parse the SQL92 subscription failed: {exc}")
    except (ValueError, AttributeError) as exc:
        return cmd.response(R.SUBSCRIPTION_PARSE_FAILED, f"bad subscription: {exc}")
    return cmd.response(R.SUCCESS)


@reg(RC.GET_CONSUMER_CONNECTION_LIST)
async def consumer_connections(broker: Any, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
    group = cmd.require_str("consumerGroup")
    info = broker.consumers.groups.get(group)
    if info is None or not info.channels:
        return cmd.response(R.CONSUMER_NOT_ONLINE, f"the consumer group[{group}] not online")
    from ..remoting.codes import language_name as lang

    body = {"connectionSet": [{"clientId": ch.client_id, "clientAddr": ch.conn.remote_addr, "language": lang(ch.language),
                               "version": ch.version} for ch in info.channels.values()],
            "subscriptionTable": {t: s.to_json() for t, s in info.subscriptions.items()},
            "consumeType": info.consume_type, "messageModel": info.message_model,
            "consumeFromWhere": info.consume_from_where}
    return cmd.response(R.SUCCESS, body=_json(body))


@reg(RC.GET_CONSUMER_RUNNING_INFO)
async def consumer_running_info(broker: Any, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
    group, client_id = cmd.require_str("consumerGroup"), cmd.require_str("clientId")
    info = broker.consumers.groups.get(group)
    ch = info.channels.get(client_id) if info else None
    if ch is None:
        return cmd.response(R.SYSTEM_ERROR, f"The Consumer <{client_id}> <{group}> not online")
    fwd = RemotingCommand.request(RC.GET_CONSUMER_RUNNING_INFO, cmd.ext_fields, language=0)
    try:
        resp = await ch.conn.invoke(fwd, 5.0)
    except (ConnectionClosedError, RemotingTimeoutError) as exc:
        return cmd.response(R.SYSTEM_ERROR, f"invoke the consumer <{client_id}> failed: {exc}")
    return cmd.response(resp.code, resp.remark, resp.ext_fields, resp.body)
