"""SEND_MESSAGE (10), SEND_MESSAGE_V2 (310, one-letter header names), SEND_BATCH_MESSAGE (320).

Behaviour: decodes the header (V2's ``a``..``n`` map to producerGroup, topic, defaultTopic,
defaultTopicQueueNums, queueId, sysFlag, bornTimestamp, flag, properties, reconsumeTimes,
unitMode, maxReconsumeTimes, batch, brokerName), auto-creates the topic from TBW102 when
enabled, picks a queue when queueId < 0, stores through the engine (bodies and sysflag as the
client sent them, so a compressed body stays compressed), and answers msgId (the offset id),
queueId, queueOffset plus MSG_REGION / TRACE_ON. Put statuses map to RocketMQ's response codes
(FLUSH_DISK_TIMEOUT, FLUSH_SLAVE_TIMEOUT, SLAVE_NOT_AVAILABLE keep the stored message's ids).
Under SYNC_MASTER a send is stored at once and its answer deferred until the in-sync slaves
have it (``ReplyWhenDone``: built when the HA ack reader resolves the wait), so the next request on the connection is not held up.
A batch body is ``MessageDecoder.encodeMessages``; all of it lands contiguously in one queue.

Prepared (transactional) messages go to ``transaction.py``'s service (stored in the half topic,
with the sending producer group in PGROUP); a prepared batch is refused with MESSAGE_ILLEGAL.
"""

from __future__ import annotations

import random
from typing import Any

from broker.put_path import PutStatus, put_status
from engine import metrics
from engine.message import Message, PROPERTY_KEYS, PROPERTY_TAGS, PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX
from engine.topic_config import PERM_WRITE

from ..dispatch import ProcessorError, ReplyWhenDone
from ..remoting.codes import DISK_FULL_FIELD, RequestCode as RC, ResponseCode as R
from ..remoting.command import RemotingCommand
from ..remoting.message_codec import (
    SYSFLAG_TRANSACTION_PREPARED, MessageDecodeError, decode_batch_body, string_to_properties,
)
from ..transport import Connection
from . import BROKER_PROCESSORS
from .common import PUT_STATUS as _STATUS, check_topic_name, topic_for_send

V2_NAMES = {"a": "producerGroup", "b": "topic", "c": "defaultTopic", "d": "defaultTopicQueueNums", "e": "queueId",
            "f": "sysFlag", "g": "bornTimestamp", "h": "flag", "i": "properties", "j": "reconsumeTimes",
            "k": "unitMode", "l": "maxReconsumeTimes", "m": "batch", "n": "brokerName"}

_V2, _BATCH = int(RC.SEND_MESSAGE_V2), int(RC.SEND_BATCH_MESSAGE)


def normalize_header(cmd: RemotingCommand) -> None:
    code = cmd.code
    if code == _V2 or (code == _BATCH and "b" in cmd.ext_fields):
        cmd.ext_fields = {V2_NAMES.get(k, k): v for k, v in cmd.ext_fields.items()}


def _message(broker: Any, conn: Connection, topic: str, queue_id: int, body: bytes, props: dict[str, str],
             flag: int, sys_flag: int, born_ts: int | None, reconsume: int) -> Message:
    tags = props.pop(PROPERTY_TAGS, None)
    keys_raw = props.pop(PROPERTY_KEYS, None)
    # positional (a dataclass's keyword call costs twice as much): topic, body, tags, keys,
    # properties, queue_id, flag, sys_flag, born_timestamp, born_host, store_host, reconsume_times
    return Message(topic, body, tags or None, keys_raw.split(" ") if keys_raw else None, props, queue_id, flag,
                   sys_flag, born_ts, conn.remote_addr, broker.addr, reconsume)


async def _store(broker: Any, cmd: RemotingCommand, put: Any, arg: Any, queue_id: int) -> RemotingCommand | ReplyWhenDone:
    """Store ``arg`` with ``put`` (``put_message`` / ``put_messages``) and answer. Under
    SYNC_MASTER the message is stored in arrival order and the answer deferred until the slaves
    acknowledged it (the put path's ``replicated``), so one connection has many sends in flight
    as with RocketMQ; the statuses are the store's own (SEND_OK, SLAVE_NOT_AVAILABLE,
    FLUSH_SLAVE_TIMEOUT)."""
    store = broker.store
    writes = broker.writes
    single = type(arg) is Message
    first = arg if single else arg[0]
    sync_master = store.config.broker_role == "SYNC_MASTER"
    if sync_master:
        refusal = writes.in_sync_refusal()  # RocketMQ's IN_SYNC_REPLICAS_NOT_ENOUGH: nothing stored
        if refusal is not None:
            return cmd.response(R.SYSTEM_ERROR, refusal)
        if writes.may_run_inline(False):  # the put path's rule, called here without two coroutines
            result = put(arg, sync_replicas=False)
        else:
            result = await broker.put(put, arg, sync_replicas=False)
    elif writes.may_run_inline(True):
        result = put(arg)
    else:
        result = await broker.put(put, arg)
    if result.stored:
        if single:
            metrics.topic_in("broker", first.topic, len(first.body), 1)
        else:
            metrics.topic_in("broker", first.topic, sum(len(m.body) for m in arg), len(arg))
    if not sync_master:
        return _response(cmd, broker, result, queue_id, None)
    if not result.ok or (first.properties or {}).get("WAIT") == "false":  # waitStoreMsgOK=false: no wait
        return _response(cmd, broker, result, queue_id, None)
    waiting = broker.writes.wait_replicated(result.end_offset, broker.writes.min_sync_slaves(),
                                            store.config.sync_flush_timeout / 1000)

    def answer(outcome: tuple[str, str | None]) -> RemotingCommand:
        status_name, error = outcome
        status = put_status(status_name)
        if status is not PutStatus.OK:
            return _response(cmd, broker, result, queue_id, None, status=status, error=error)
        if not broker.replication.lease_valid():
            # decided while the lease ran, answered after it ended (the process was stopped in
            # between): a fenced master answers no SEND_OK; "possibly stored" is still true
            return _response(cmd, broker, result, queue_id, None, status=PutStatus.FLUSH_SLAVE_TIMEOUT,
                             error="master lease expired before the answer left; not acknowledged")
        return _response(cmd, broker, result, queue_id, None)
    # answered on the loop right after the HA ack reader resolved the wait, without a task
    return ReplyWhenDone(waiting, answer, broker.replication.wake_dispatcher)


_ANSWERED_WITH_IDS = frozenset({R.SUCCESS, R.FLUSH_DISK_TIMEOUT, R.FLUSH_SLAVE_TIMEOUT, R.SLAVE_NOT_AVAILABLE})


def _response(cmd: RemotingCommand, broker: Any, result: Any, queue_id: int, txn_id: str | None,
              status: PutStatus | None = None, error: str | None = None) -> RemotingCommand:
    if status is None:
        status = put_status(result)
    code, remark = _STATUS.get(status, (R.SYSTEM_ERROR, status.value))
    if code in _ANSWERED_WITH_IDS:
        fields = {"msgId": str(result.msg_id), "queueId": str(queue_id), "queueOffset": str(result.queue_offset),
                  "MSG_REGION": "DefaultRegion", "TRACE_ON": "true"}
        if txn_id:
            fields["transactionId"] = str(txn_id)
        return cmd.response_with(code, error or remark, fields)  # every value a str already
    if status is PutStatus.DISK_FULL:  # not a role change: a client waiting for a new master need not
        return cmd.response(code, result.error or remark, {DISK_FULL_FIELD: "true"})
    return cmd.response(code, result.error or remark)


async def _prepare(broker: Any, cmd: RemotingCommand) -> tuple[str, int, int, int]:
    # the usual case, an existing topic, without a coroutine
    return _prepare_known(broker, cmd) or await _prepare_created(broker, cmd)


async def _prepare_created(broker: Any, cmd: RemotingCommand) -> tuple[str, int, int, int]:
    """``_prepare_known`` for a topic that does not exist yet (header already normalized)."""
    topic = cmd.ext_fields["topic"]
    tc = await topic_for_send(broker, topic, cmd.get_str("defaultTopic"), cmd.get_int("defaultTopicQueueNums"),
                              cmd.get_int("topicSysFlag", 0) or 0)
    return _checked(cmd, topic, tc, cmd.get_int("sysFlag", 0) or 0)


def _prepare_known(broker: Any, cmd: RemotingCommand) -> tuple[str, int, int, int] | None:
    """(topic, queue id, sysFlag, flag) of a send to an existing topic; None when the topic
    does not exist yet (``_prepare`` creates it as RocketMQ's rule says)."""
    normalize_header(cmd)
    topic = cmd.require_str("topic")
    sys_flag = cmd.get_int("sysFlag", 0) or 0
    check_topic_name(topic)
    tc = broker.store.topic_config.get(topic)
    if tc is None:
        return None
    return _checked(cmd, topic, tc, sys_flag)


def _checked(cmd: RemotingCommand, topic: str, tc: Any, sys_flag: int) -> tuple[str, int, int, int]:
    if not tc.perm & PERM_WRITE:
        raise ProcessorError(R.NO_PERMISSION, f"the topic[{topic}] sending message is forbidden")
    queue_id = cmd.get_int("queueId", -1)
    if queue_id is None or queue_id < 0:
        queue_id = random.randrange(max(tc.write_queue_nums, 1))
    if queue_id >= tc.read_queue_nums and queue_id >= tc.write_queue_nums:
        raise ProcessorError(R.SYSTEM_ERROR, f"request queueId[{queue_id}] is illegal, {topic} "
                                             f"writeQueueNums {tc.write_queue_nums} readQueueNums {tc.read_queue_nums}")
    return topic, queue_id, sys_flag, cmd.get_int("flag", 0) or 0


@BROKER_PROCESSORS.register(RC.SEND_MESSAGE, RC.SEND_MESSAGE_V2)
async def send_message(broker: Any, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
    topic, queue_id, sys_flag, flag = _prepare_known(broker, cmd) or await _prepare_created(broker, cmd)
    props = string_to_properties(cmd.get_str("properties"))
    max_size = broker.config.store.max_message_size
    if len(cmd.body) > max_size:
        return cmd.response(R.MESSAGE_ILLEGAL, f"message body size {len(cmd.body)} exceeds the maximum {max_size}")
    msg = _message(broker, conn, topic, queue_id, bytes(cmd.body), props, flag, sys_flag,
                   cmd.get_int("bornTimestamp"), cmd.get_int("reconsumeTimes", 0) or 0)
    if sys_flag & SYSFLAG_TRANSACTION_PREPARED:  # a half message: stored in RMQ_SYS_TRANS_HALF_TOPIC
        from .transaction import service
        msg.properties = dict(msg.properties or {}, PGROUP=cmd.get_str("producerGroup") or "")
        result = await broker.put(service(broker).prepare, msg)
        return _response(cmd, broker, result, queue_id, props.get(PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX))
    if topic.startswith("%RETRY%"):  # a client's own retry send (its send-back failed): DLQ past the limit
        from .send_back import redirect_retry_send
        await redirect_retry_send(broker, cmd, msg)
    # sends in flight, received together: the slaves get them in one push, by the last one's put
    broker.replication.batch_pushes(conn.more_received())
    return await _store(broker, cmd, broker.store.put_message, msg, queue_id)


@BROKER_PROCESSORS.register(RC.SEND_BATCH_MESSAGE)
async def send_batch(broker: Any, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
    topic, queue_id, sys_flag, flag = await _prepare(broker, cmd)
    if topic.startswith("%RETRY%"):
        return cmd.response(R.MESSAGE_ILLEGAL, "batch messages cannot be sent to a retry topic")
    try:
        items = decode_batch_body(bytes(cmd.body))
    except MessageDecodeError as exc:
        return cmd.response(R.MESSAGE_ILLEGAL, f"bad batch body: {exc}")
    if not items:
        return cmd.response(R.MESSAGE_ILLEGAL, "the batch is empty")
    if sys_flag & SYSFLAG_TRANSACTION_PREPARED:
        return cmd.response(R.MESSAGE_ILLEGAL, "batch messages cannot be transactional (half) messages")
    born = cmd.get_int("bornTimestamp")
    msgs = [_message(broker, conn, topic, queue_id, it.body, it.properties, it.flag, sys_flag, born, 0) for it in items]
    broker.replication.batch_pushes(conn.more_received())
    return await _store(broker, cmd, broker.store.put_messages, msgs, queue_id)
