"""Remoting POP consumption over ``engine.pop``: POP_MESSAGE (200050), ACK_MESSAGE (200051),
BATCH_ACK_MESSAGE (200151), CHANGE_MESSAGE_INVISIBLETIME (200053), NOTIFICATION (200054),
POLLING_INFO (200055), and the server-side assignment a RocketMQ 5 push consumer asks for
before it pops: QUERY_ASSIGNMENT (400), SET_MESSAGE_REQUEST_MODE (401, ``mqadmin setConsumeMode``).

As Apache RocketMQ's ``PopMessageProcessor`` family answers them:

- POP_MESSAGE header ``consumerGroup topic queueId(-1 = all) maxMsgNums(<=32) invisibleTime
  pollTime bornTime initMode expType exp order attemptId``. Response header ``popTime
  invisibleTime reviveQid(0; 999 for orderly) restNum startOffsetInfo msgOffsetInfo
  orderCountInfo``; body = the stored units. ``startOffsetInfo`` is ``t qid startOffset`` per
  queue read and ``msgOffsetInfo`` ``t qid o1,o2,...`` (``;`` between queues, ``t`` = 0 topic /
  1 POP retry topic); the client builds each message's ack key (``POP_CK``, ExtraInfoUtil's
  ``startOffset popTime invisibleTime reviveQid t brokerName queueId queueOffset``) from them.
  Messages of the POP retry topic are re-encoded with the subscribed topic and their ``POP_CK``
  property set (RocketMQ's default ``popResponseReturnActualRetryTopic=false``). Nothing found:
  the request is held up to ``pollTime`` (long polling) and answered POLLING_TIMEOUT.
- ACK_MESSAGE header ``consumerGroup topic(real: the retry topic for retries) queueId
  extraInfo offset``: SUCCESS, or NO_MESSAGE when the checkpoint is unknown, finished or past
  its invisible time (the client reports AckStatus.NO_EXIST). BATCH_ACK_MESSAGE body
  ``{"brokerName", "acks":[{"c","t","r","so","q","rq","pt","it","b":[bit set as long words]}]}``.
- CHANGE_MESSAGE_INVISIBLETIME header ``... extraInfo offset invisibleTime``: response header
  ``popTime invisibleTime reviveQid``; the client rebuilds the new ack key with ``startOffset``
  = the message's offset (engine.pop writes a one-message checkpoint there).
- NOTIFICATION answers ``hasMsg`` (held up to ``pollTime`` while nothing is there);
  POLLING_INFO answers ``pollingNum`` (POP requests of that group held on that topic now).
- QUERY_ASSIGNMENT body ``{topic, consumerGroup, clientId, strategyName, messageModel}`` ->
  ``{"messageQueueAssignments":[{"messageQueue":{topic,brokerName,queueId},"mode":...}]}``: in
  POP mode every client gets every queue as one entry with queueId -1 (RocketMQ's
  ``allocate4Pop`` with popShareQueueNum 0); in PULL mode the queues are split averagely by
  client id. The mode comes from SET_MESSAGE_REQUEST_MODE (saved in
  ``config/messageRequestMode.json``), else the broker key ``defaultMessageRequestMode``
  (PULL); retry topics are always PULL.
"""

from __future__ import annotations

import asyncio
import json
import os
import struct
import threading
import time
from pathlib import Path
from typing import Any

import structlog
from engine.expression_filter import ExpressionFilter
from engine.message import PROPERTY_POP_CK, encode_properties, encode_unit
from engine.pop import (
    INIT_MODE_MAX, INIT_MODE_MIN, RETRY_PREFIX, TOPIC_TYPE_NORMAL, TOPIC_TYPE_RETRY, AckStatus, Handle, PopError,
    for_store, pop_retry_topic,
)
from engine.sql92 import Sql92Error
from engine.topic_config import PERM_READ

from .. import broker_stats
from ..remoting.codes import RequestCode as RC, ResponseCode as R
from ..remoting.command import RemotingCommand
from ..transport import Connection
from . import BROKER_PROCESSORS

log = structlog.get_logger("rockafka.native.pop")

POP_ORDER_REVIVE_QUEUE = 999  # KeyBuilder.POP_ORDER_REVIVE_QUEUE: the reviveQid that marks an orderly pop
MAX_POP_BATCH = 32
MAX_POLL_MS = 60_000
MODE_PULL, MODE_POP = "PULL", "POP"
_POLLING: dict[tuple[str, str], int] = {}  # (group, topic) -> POP requests held now (POLLING_INFO)


def _pop(broker: Any) -> Any:
    return for_store(broker.store)


def _check_topic(cmd: RemotingCommand, broker: Any, topic: str, queue_id: int, what: str) -> RemotingCommand | None:
    tc = broker.store.topic_config.get(topic)
    if tc is None:
        return cmd.response(R.TOPIC_NOT_EXIST, f"topic[{topic}] not exist, apply first please!")
    if not tc.perm & PERM_READ:
        return cmd.response(R.NO_PERMISSION, f"the topic[{topic}] {what} message is forbidden")
    if queue_id >= tc.read_queue_nums:
        return cmd.response(R.INVALID_PARAMETER, f"queueId[{queue_id}] is illegal, topic:[{topic}] "
                                                 f"topicConfig.readQueueNums:[{tc.read_queue_nums}]")
    return None


def _check_group(cmd: RemotingCommand, broker: Any, group: str) -> RemotingCommand | None:
    cfg = broker.store.subscription_groups.find_or_create(group)
    if cfg is None:
        return cmd.response(R.SUBSCRIPTION_GROUP_NOT_EXIST, f"subscription group [{group}] does not exist")
    if not cfg.consume_enable:
        return cmd.response(R.NO_PERMISSION, f"subscription group no permission, {group}")
    return None


def _retry_flag(topic: str) -> str:
    return TOPIC_TYPE_RETRY if topic.startswith(RETRY_PREFIX) else TOPIC_TYPE_NORMAL


def _waiters(broker: Any, keys: list[tuple[str, int]]) -> asyncio.Event:
    ev = asyncio.Event()
    for topic, qid in keys:
        broker.pull_hold.waiter(topic, qid, ev)
    return ev


def _drop_waiters(broker: Any, keys: list[tuple[str, int]], ev: asyncio.Event) -> None:
    for topic, qid in keys:
        broker.pull_hold.remove(topic, qid, ev)


def _watched(broker: Any, group: str, topic: str, queue_id: int) -> list[tuple[str, int]]:
    tc = broker.store.topic_config.get(topic)
    queues = [queue_id] if queue_id >= 0 else list(range(tc.read_queue_nums if tc else 0))
    return [(topic, q) for q in queues] + [(pop_retry_topic(group, topic), 0)]


def _encode_for_client(unit: bytes, ext: Any, subscribed_topic: str, handle: Handle) -> bytes:
    """A POP retry message as the client expects it: the subscribed topic, POP_CK set."""
    props = dict(ext.properties)
    props.setdefault(PROPERTY_POP_CK, " ".join(handle.encode().split(" ")[:8]))
    return bytes(encode_unit(
        topic=subscribed_topic.encode(), body=ext.body, props=encode_properties(props), queue_id=ext.queue_id,
        queue_offset=ext.queue_offset, physical_offset=ext.commitlog_offset, flag=ext.flag, sys_flag=ext.sys_flag,
        born_timestamp=ext.born_timestamp, born_host=ext.born_host, store_timestamp=ext.store_timestamp,
        store_host=ext.store_host, reconsume_times=ext.reconsume_times,
        prepared_transaction_offset=ext.prepared_transaction_offset))


@BROKER_PROCESSORS.register(RC.POP_MESSAGE, suspends=True)
async def pop_message(broker: Any, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
    group = cmd.require_str("consumerGroup")
    topic = cmd.require_str("topic")
    queue_id = cmd.get_int("queueId", -1)
    queue_id = -1 if queue_id is None else queue_id
    max_msgs = cmd.get_int("maxMsgNums", MAX_POP_BATCH) or MAX_POP_BATCH
    invisible = cmd.require_int("invisibleTime")
    poll_ms = max(0, min(cmd.get_int("pollTime", 0) or 0, MAX_POLL_MS))
    init_mode = INIT_MODE_MIN if cmd.get_int("initMode", INIT_MODE_MAX) == INIT_MODE_MIN else INIT_MODE_MAX
    orderly = cmd.get_bool("order", False)
    if max_msgs > MAX_POP_BATCH or max_msgs <= 0:
        return cmd.response(R.INVALID_PARAMETER, f"the broker pop message's num {max_msgs} is not in 1..{MAX_POP_BATCH}")
    bad = _check_topic(cmd, broker, topic, queue_id, "peeking") or _check_group(cmd, broker, group)
    if bad is not None:
        return bad
    try:
        flt = ExpressionFilter(cmd.get_str("expType"), cmd.get_str("exp"))
    except (Sql92Error, ValueError) as exc:
        return cmd.response(R.SUBSCRIPTION_PARSE_FAILED, f"parse the consumer's subscription failed: {exc}")
    pop = _pop(broker)
    deadline = time.monotonic() + poll_ms / 1000
    keys = _watched(broker, group, topic, queue_id)
    ev = _waiters(broker, keys)
    held = False
    try:
        while True:
            ev.clear()
            try:
                result = await broker.run_blocking(lambda: pop.pop(
                    group, topic, queue_id, max_msgs, invisible, message_filter=None if flt.matches_all else flt,
                    orderly=orderly, init_mode=init_mode))
            except PopError as exc:
                code = R.INVALID_PARAMETER if exc.code == "ILLEGAL_INVISIBLE_TIME" else R.SYSTEM_ERROR
                return cmd.response(code, str(exc))
            left = deadline - time.monotonic()
            if result.found or left <= 0 or conn.closed:
                break
            if not held:
                held = True
                _POLLING[(group, topic)] = _POLLING.get((group, topic), 0) + 1
            try:  # woken by an arrival; orderly unlocks and revives are caught by the bounded wait
                await asyncio.wait_for(ev.wait(), min(left, 0.5))
            except asyncio.TimeoutError:
                pass
    finally:
        _drop_waiters(broker, keys, ev)
        if held:
            n = _POLLING.get((group, topic), 1) - 1
            if n > 0:
                _POLLING[(group, topic)] = n
            else:
                _POLLING.pop((group, topic), None)
    revive_qid = POP_ORDER_REVIVE_QUEUE if orderly else result.revive_qid
    start_info = ";".join(f"{_retry_flag(r.topic)} {r.queue_id} {r.start_offset}" for r in result.reads)
    msg_info = ";".join(f"{_retry_flag(r.topic)} {r.queue_id} {','.join(map(str, r.offsets))}" for r in result.reads)
    fields: dict[str, Any] = {"popTime": result.pop_time, "invisibleTime": invisible, "reviveQid": revive_qid,
                              "restNum": result.rest_num, "startOffsetInfo": start_info, "msgOffsetInfo": msg_info}
    if orderly:
        fields["orderCountInfo"] = ";".join(
            f"{TOPIC_TYPE_NORMAL} qo{m.message.queue_id}%{m.message.queue_offset} {m.delivery_attempt - 1}"
            for m in result.messages)
    if not result.found:
        return cmd.response(R.POLLING_TIMEOUT, "NO_MESSAGE_IN_QUEUE", fields)
    broker_stats.for_broker(broker).got(group, topic, len(result.messages))
    body = bytearray()
    for m in result.messages:
        h = Handle.parse(m.handle)
        if orderly:
            h = Handle(h.start_offset, h.pop_time, h.invisible_ms, POP_ORDER_REVIVE_QUEUE, h.topic_type, h.broker_name,
                       h.queue_id, h.queue_offset, h.commitlog_offset)
        body += _encode_for_client(m.unit, m.message, topic, h) if h.topic_type == TOPIC_TYPE_RETRY else m.unit
    return cmd.response(R.SUCCESS, "FOUND", fields, bytes(body))


def _ack_key(broker: Any, cmd: RemotingCommand) -> tuple[str, str, str, int] | RemotingCommand:
    """(group, topic, 8-field ack key, offset) of an ACK / CHANGE_INVISIBLETIME header, or the
    error answer. A 7-field key (older clients) names its message by the header's offset."""
    group = cmd.require_str("consumerGroup")
    topic = cmd.require_str("topic")
    extra = cmd.require_str("extraInfo")
    offset = cmd.require_int("offset")
    if broker.store.topic_config.get(topic) is None:
        return cmd.response(R.TOPIC_NOT_EXIST, f"topic[{topic}] not exist, apply first please!")
    if len(extra.split(" ")) < 8:
        extra = f"{extra} {offset}"
    return group, topic, extra, offset


def _ack_one(broker: Any, group: str, topic: str, extra_info: str) -> AckStatus:
    return _pop(broker).ack(group, topic, extra_info)


@BROKER_PROCESSORS.register(RC.ACK_MESSAGE)
async def ack_message(broker: Any, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
    key = _ack_key(broker, cmd)
    if isinstance(key, RemotingCommand):
        return key
    group, topic, extra, offset = key
    st = await broker.run_blocking(_ack_one, broker, group, topic, extra)
    if st is AckStatus.OK:
        return cmd.response(R.SUCCESS)
    if st is AckStatus.BAD_HANDLE:
        return cmd.response(R.MESSAGE_ILLEGAL, f"extraInfo {extra!r} is not a POP ack key")
    return cmd.response(R.NO_MESSAGE, f"no checkpoint for {group}@{topic} offset {offset}: acknowledged, expired or unknown")


def _bitset_offsets(words: Any) -> list[int]:
    """fastjson's BitSet form in BatchAck: a JSON array of 64-bit words (BitSet.toLongArray)."""
    if isinstance(words, str):  # a base64 / text form: not what the Java client sends
        raise ValueError("bit set must be an array of longs")
    out = []
    for i, w in enumerate(words or []):
        w = int(w) & 0xFFFFFFFFFFFFFFFF
        b = 0
        while w:
            if w & 1:
                out.append(i * 64 + b)
            w >>= 1
            b += 1
    return out


@BROKER_PROCESSORS.register(RC.BATCH_ACK_MESSAGE)
async def batch_ack_message(broker: Any, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
    try:
        doc = json.loads(cmd.body or b"{}")
        broker_name = doc.get("brokerName") or broker.broker_config.broker_name
        acks = doc.get("acks") or []
        items = []
        for a in acks:
            group = a.get("c", a.get("consumerGroup"))
            topic = a.get("t", a.get("topic"))
            retry = str(a.get("r", a.get("retry", "0")))
            so, qid = int(a.get("so", a.get("startOffset"))), int(a.get("q", a.get("queueId")))
            pt, it = int(a.get("pt", a.get("popTime"))), int(a.get("it", a.get("invisibleTime", 0)))
            rq = int(a.get("rq", a.get("reviveQueueId", 0)))
            for bit in _bitset_offsets(a.get("b", a.get("bitSet"))):
                real = pop_retry_topic(group, topic) if retry != TOPIC_TYPE_NORMAL and not topic.startswith(RETRY_PREFIX) else topic
                items.append((group, real, f"{so} {pt} {it} {rq} {retry} {broker_name} {qid} {so + bit}"))
    except (ValueError, TypeError, AttributeError) as exc:
        return cmd.response(R.MESSAGE_ILLEGAL, f"BATCH_ACK_MESSAGE body is not a BatchAckMessageRequestBody: {exc}")

    def run() -> list[AckStatus]:
        return [_ack_one(broker, g, t, e) for g, t, e in items]

    statuses = await broker.run_blocking(run)
    failed = sum(1 for s in statuses if s is not AckStatus.OK)
    if failed and failed == len(statuses):
        return cmd.response(R.NO_MESSAGE, f"none of the {failed} acknowledged offsets has a live checkpoint")
    return cmd.response(R.SUCCESS, f"{failed} of {len(statuses)} offsets had no live checkpoint" if failed else None)


@BROKER_PROCESSORS.register(RC.CHANGE_MESSAGE_INVISIBLETIME)
async def change_invisible_time(broker: Any, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
    invisible = cmd.require_int("invisibleTime")
    key = _ack_key(broker, cmd)
    if isinstance(key, RemotingCommand):
        return key
    group, topic, extra, _ = key
    pop = _pop(broker)
    try:
        new = await broker.run_blocking(pop.change_invisible, group, topic, extra, invisible)
    except PopError as exc:
        if exc.code == "ILLEGAL_INVISIBLE_TIME":
            return cmd.response(R.INVALID_PARAMETER, str(exc))
        if exc.code == AckStatus.BAD_HANDLE.value:
            return cmd.response(R.MESSAGE_ILLEGAL, str(exc))
        return cmd.response(R.NO_MESSAGE, str(exc))
    h = Handle.parse(new)
    old = Handle.parse(extra)
    return cmd.response(R.SUCCESS, None, {"popTime": h.pop_time, "invisibleTime": h.invisible_ms, "reviveQid": old.revive_qid})


@BROKER_PROCESSORS.register(RC.NOTIFICATION, suspends=True)
async def notification(broker: Any, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
    group = cmd.require_str("consumerGroup")
    topic = cmd.require_str("topic")
    queue_id = cmd.get_int("queueId", -1)
    queue_id = -1 if queue_id is None else queue_id
    poll_ms = max(0, min(cmd.get_int("pollTime", 0) or 0, MAX_POLL_MS))
    bad = _check_topic(cmd, broker, topic, queue_id, "peeking") or _check_group(cmd, broker, group)
    if bad is not None:
        return bad
    store = broker.store
    keys = _watched(broker, group, topic, queue_id)

    def has_msg() -> bool:
        for t, q in keys:
            if store.topic_config.get(t) is None:
                continue
            off = store.consumer_offsets.query(group, t, q)
            if off < 0:
                off = store.get_min_offset_in_queue(t, q)
            if store.get_max_offset_in_queue(t, q) > off:
                return True
        return False

    deadline = time.monotonic() + poll_ms / 1000
    ev = _waiters(broker, keys)
    try:
        while not (found := has_msg()):
            left = deadline - time.monotonic()
            if left <= 0 or conn.closed:
                break
            ev.clear()
            try:
                await asyncio.wait_for(ev.wait(), min(left, 0.5))
            except asyncio.TimeoutError:
                pass
    finally:
        _drop_waiters(broker, keys, ev)
    return cmd.response(R.SUCCESS, None, {"hasMsg": "true" if found else "false", "pollingFull": "false"})


@BROKER_PROCESSORS.register(RC.POLLING_INFO)
async def polling_info(broker: Any, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
    group = cmd.require_str("consumerGroup")
    topic = cmd.require_str("topic")
    queue_id = cmd.get_int("queueId", -1)
    bad = _check_topic(cmd, broker, topic, -1 if queue_id is None else queue_id, "peeking") or _check_group(cmd, broker, group)
    if bad is not None:
        return bad
    return cmd.response(R.SUCCESS, None, {"pollingNum": _POLLING.get((group, topic), 0)})


# ---------------------------------------------------------------------- assignment and mode
class RequestModes:
    """(topic, group) -> {"mode", "popShareQueueNum"}, saved in config/messageRequestMode.json
    (RocketMQ's ``MessageRequestModeManager``: ``{"messageRequestModeMap": {topic: {group: body}}}``)."""

    _lock = threading.Lock()

    def __init__(self, config_dir: Path):
        self.path = Path(config_dir) / "messageRequestMode.json"
        self.table: dict[str, dict[str, dict[str, Any]]] = {}
        try:
            self.table = json.loads(self.path.read_text()).get("messageRequestModeMap", {})
        except (OSError, ValueError):
            pass

    def get(self, topic: str, group: str) -> dict[str, Any] | None:
        return self.table.get(topic, {}).get(group)

    def set(self, topic: str, group: str, body: dict[str, Any]) -> None:
        with self._lock:
            self.table.setdefault(topic, {})[group] = body
            self.path.parent.mkdir(parents=True, exist_ok=True)
            tmp = self.path.with_suffix(".tmp")
            tmp.write_text(json.dumps({"messageRequestModeMap": self.table}, indent=2))
            os.replace(tmp, self.path)


def request_modes(broker: Any) -> RequestModes:
    modes = getattr(broker, "_request_modes", None)
    if modes is None:
        modes = broker._request_modes = RequestModes(broker.store.config_dir)
    return modes


def _allocate_averagely(mqs: list[int], cids: list[str], cid: str) -> list[int]:
    """RocketMQ's AllocateMessageQueueAveragely."""
    if cid not in cids or not mqs:
        return []
    index, n, m = cids.index(cid), len(cids), len(mqs)
    mod = m % n
    size = (m // n + 1 if mod > 0 and index < mod else m // n) if m > n else 1
    start = index * size if mod > 0 and index < mod else index * size + mod
    return [mqs[(start + i) % m] for i in range(min(size, m - start))] if start < m else []


@BROKER_PROCESSORS.register(RC.QUERY_ASSIGNMENT)
async def query_assignment(broker: Any, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
    try:
        req = json.loads(cmd.body or b"{}")
        topic, group = str(req["topic"]), str(req["consumerGroup"])
    except (ValueError, KeyError, TypeError) as exc:
        return cmd.response(R.SYSTEM_ERROR, f"QUERY_ASSIGNMENT body is not a QueryAssignmentRequestBody: {exc}")
    client_id = str(req.get("clientId") or "")
    model = str(req.get("messageModel") or "CLUSTERING")
    mode = request_modes(broker).get(topic, group)
    if mode is None:
        default = (broker.config.extra_str("default_message_request_mode", MODE_PULL) or MODE_PULL).upper()
        mode = {"mode": MODE_PULL if topic.startswith(RETRY_PREFIX) else default, "popShareQueueNum": 0}
    tc = broker.store.topic_config.get(topic)
    name = broker.broker_config.broker_name
    assignments: list[dict[str, Any]] | None
    if tc is None:
        assignments = None  # null: the client keeps its current assignment
    elif mode["mode"] == MODE_POP and model != "BROADCASTING":
        assignments = [{"messageQueue": {"topic": topic, "brokerName": name, "queueId": -1}, "mode": MODE_POP}]
    else:
        qids = list(range(tc.read_queue_nums))
        if model != "BROADCASTING":
            info = broker.consumers.groups.get(group)
            qids = _allocate_averagely(qids, info.client_ids() if info else [client_id], client_id)
        assignments = [{"messageQueue": {"topic": topic, "brokerName": name, "queueId": q}, "mode": mode["mode"]}
                       for q in qids]
    return cmd.response(R.SUCCESS, None, body=json.dumps({"messageQueueAssignments": assignments}).encode())


@BROKER_PROCESSORS.register(RC.SET_MESSAGE_REQUEST_MODE)
async def set_message_request_mode(broker: Any, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
    try:
        req = json.loads(cmd.body or b"{}")
        topic, group = str(req["topic"]), str(req["consumerGroup"])
        mode = str(req.get("mode") or MODE_PULL).upper()
        share = int(req.get("popShareQueueNum") or 0)
    except (ValueError, KeyError, TypeError) as exc:
        return cmd.response(R.SYSTEM_ERROR, f"SET_MESSAGE_REQUEST_MODE body is not a SetMessageRequestModeRequestBody: {exc}")
    if mode not in (MODE_PULL, MODE_POP):
        return cmd.response(R.INVALID_PARAMETER, f"mode {mode} is neither PULL nor POP")
    if topic.startswith(RETRY_PREFIX):
        return cmd.response(R.NO_PERMISSION, "retry topic is not allowed to set mode")
    if broker.store.topic_config.get(topic) is None:
        return cmd.response(R.TOPIC_NOT_EXIST, f"topic[{topic}] not exist")
    if broker.store.subscription_groups.find_or_create(group) is None:
        return cmd.response(R.SUBSCRIPTION_GROUP_NOT_EXIST, "subscription group does not exist")
    request_modes(broker).set(topic, group, {"topic": topic, "consumerGroup": group, "mode": mode,
                                             "popShareQueueNum": share})
    log.info("message_request_mode_set", topic=topic, group=group, mode=mode, pop_share_queue_num=share)
    return cmd.response(R.SUCCESS)
