"""GET_TOPIC_STATS_INFO (202) and GET_CONSUME_STATS (208): per-queue offsets for admin tools.

Bodies are what fastjson writes for ``TopicStatsTable`` and ``ConsumeStats``: maps keyed by a
``MessageQueue`` *object* (``{"brokerName":..,"queueId":..,"topic":..}`` as the key, not a
string — not standard JSON, but what the Java admin client parses):

- topic stats: per queue ``minOffset``, ``maxOffset``, ``lastUpdateTimestamp`` (store time of
  the newest message, 0 when empty);
- consume stats: per queue ``brokerOffset`` (max), ``consumerOffset`` (committed, 0 when none)
  (also as ``pullOffset``) and ``lastTimestamp`` (store time of the last consumed message), plus
  ``consumeTps`` / ``topicPutTps`` (0: not measured). Without a topic, every topic the group has
  committed offsets for is reported. The shape was checked against Apache RocketMQ 5.5's answers.
- a tiered topic's topic stats carry one more field, ``remoteTier`` (remote bytes and segments,
  upload lag in bytes, failed upload passes: ``broker.tiered.topic_summary``), which Java's
  parser ignores and ``rockafka admin topics describe`` prints.
"""

from __future__ import annotations

import json
from typing import Any

from broker import tiered

from ..remoting.codes import RequestCode as RC, ResponseCode as R
from ..remoting.command import RemotingCommand
from ..transport import Connection
from . import BROKER_PROCESSORS


def _mq_key(topic: str, broker_name: str, queue_id: int) -> str:
    return json.dumps({"brokerName": broker_name, "queueId": queue_id, "topic": topic}, separators=(",", ":"), sort_keys=True)


def _table(entries: list[tuple[str, dict[str, Any]]]) -> str:
    return "{" + ",".join(f"{k}:{json.dumps(v, separators=(',', ':'), sort_keys=True)}" for k, v in entries) + "}"


def _store_time(store: Any, topic: str, queue_id: int, offset: int) -> int:
    if offset < 0:
        return 0
    try:
        return max(int(store.get_message_store_timestamp(topic, queue_id, offset)), 0)
    except Exception:  # an offset retention already removed
        return 0


@BROKER_PROCESSORS.register(RC.GET_TOPIC_STATS_INFO)
async def topic_stats(broker: Any, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
    topic = cmd.require_str("topic")
    tc = broker.store.topic_config.get(topic)
    if tc is None:
        return cmd.response(R.TOPIC_NOT_EXIST, f"topic[{topic}] not exist")
    store, name = broker.store, broker.broker_config.broker_name
    entries = []
    for qid in range(tc.write_queue_nums):
        lo, hi = store.get_min_offset_in_queue(topic, qid), store.get_max_offset_in_queue(topic, qid)
        entries.append((_mq_key(topic, name, qid), {"minOffset": lo, "maxOffset": hi,
                                                    "lastUpdateTimestamp": _store_time(store, topic, qid, hi - 1) if hi > lo else 0}))
    remote = tiered.topic_summary(store, topic)   # a tiered topic: its remote tier (an extra field)
    extra = "" if remote is None else ',"remoteTier":' + json.dumps(remote, sort_keys=True)
    return cmd.response(R.SUCCESS, body=('{"offsetTable":' + _table(entries) + ',"topicPutTps":0.0'
                                         + extra + '}').encode())


@BROKER_PROCESSORS.register(RC.GET_CONSUME_STATS)
async def consume_stats(broker: Any, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
    group = cmd.require_str("consumerGroup")
    store, name = broker.store, broker.broker_config.broker_name
    topic = cmd.get_str("topic")
    topics = [topic] if topic else sorted({t for (t, _q) in store.consumer_offsets.offsets_of(group)})
    entries = []
    for t in topics:
        tc = store.topic_config.get(t)
        if tc is None:
            continue
        for qid in range(tc.read_queue_nums):
            committed = store.consumer_offsets.query(group, t, qid)
            consumer = max(committed if committed is not None else -1, 0)
            entries.append((_mq_key(t, name, qid), {"brokerOffset": store.get_max_offset_in_queue(t, qid),
                                                    "consumerOffset": consumer, "pullOffset": consumer,
                                                    "lastTimestamp": _store_time(store, t, qid, consumer - 1)}))
    if not entries and topic:
        return cmd.response(R.TOPIC_NOT_EXIST, f"topic[{topic}] not exist")
    return cmd.response(R.SUCCESS, body=('{"consumeTps":0.0,"offsetTable":' + _table(entries) + "}").encode())
