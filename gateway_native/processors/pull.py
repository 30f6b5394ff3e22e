"""PULL_MESSAGE (11) and LITE_PULL_MESSAGE (361), with long polling.

Behaviour (RocketMQ's ``PullMessageProcessor``):
- the subscription comes from the request when the SUBSCRIPTION sysflag is set (TAG or
  SQL92; a bad expression -> SUBSCRIPTION_PARSE_FAILED), else from the group's last heartbeat
  (SUBSCRIPTION_NOT_EXIST / SUBSCRIPTION_NOT_LATEST otherwise);
- tags are filtered by hash at the consume queue, SQL92 on the stored properties; the body is
  the stored commitlog units as they are. A Kafka batch unit (INNER_BATCH) is expanded by
  ``engine.batch_convert.expand_batch_unit`` into one regular unit per record, records before
  the requested offset dropped, and each record filtered by the subscription;
- Kafka transactions (``engine.txn_index``): reads stop at the queue's last stable offset (a
  pull at it answers PULL_NOT_FOUND and is held until the transaction ends), and records of
  aborted transactions and transaction markers are never handed out;
- store statuses map to FOUND -> SUCCESS, NO_MATCHED_MESSAGE -> PULL_RETRY_IMMEDIATELY,
  OFFSET_TOO_SMALL / OFFSET_OVERFLOW_BADLY -> PULL_OFFSET_MOVED, empty queue at a non-zero
  offset -> PULL_OFFSET_MOVED, otherwise PULL_NOT_FOUND;
- PULL_NOT_FOUND with the SUSPEND flag is held up to ``suspendTimeoutMillis`` (long polling,
  or ``shortPollingTimeMills`` when long polling is disabled) and answered as soon as the store
  reports an arrival on that queue; the held request is re-run without committing again;
- an offset below the local start that the remote tier holds (a tiered topic,
  ``broker/tiered.py``) is read from the object store: the same units, expanded and filtered the
  same way; the object store failing answers SYSTEM_ERROR (the client pulls again later);
- the COMMIT_OFFSET flag commits ``commitOffset`` for the group on a master, once per request,
  in the connection's arrival order (``commit_in_order``, before the held pull's own task), so a
  later UPDATE_CONSUMER_OFFSET on the same connection is never overwritten by it;
- ``suggestWhichBrokerId`` (RocketMQ's rule): 0 (the master) unless ``slaveReadEnable``; with it,
  1 (``whichBrokerWhenConsumeSlowly``) when the pull is further behind the log's end than
  ``accessMessageInMemoryMaxRatio``% of RAM, else the group's ``brokerId`` (0). A slave serves
  pulls whatever it suggests, so consumers keep reading from it while the master is down; the
  COMMIT_OFFSET flag is honoured on a master only.
"""

from __future__ import annotations

import asyncio
import struct
import time
from typing import Any

import structlog

from broker import tiered
from engine import metrics, txn_index
from engine.sql92 import Sql92Error
from engine.topic_config import PERM_READ

from .. import broker_stats
from ..dispatch import ProcessorError
from ..remoting.codes import (
    PULL_FLAG_COMMIT_OFFSET, PULL_FLAG_SUBSCRIPTION, PULL_FLAG_SUSPEND, RequestCode as RC, ResponseCode as R,
)
from ..remoting.command import RemotingCommand
from ..remoting.message_codec import SYSFLAG_INNER_BATCH, decode_unit
from ..subscription import SubscriptionData, message_filter
from ..transport import Connection
from . import BROKER_PROCESSORS

log = structlog.get_logger("rockafka.native.pull")

_SYSFLAG = struct.Struct(">i")
_QOFF = struct.Struct(">q")
MAX_SUSPEND_MS = 60_000
REMOTE_PULL_BYTES = 1 << 20
# Subscriptions sent with each pull (the SUBSCRIPTION flag: a lite pull consumer sends it every
# time), parsed once per (topic, expression, type, version); never changed once built
_SUBSCRIPTIONS: dict[tuple[Any, ...], SubscriptionData] = {}
_SUBSCRIPTIONS_MAX = 4096


def _status(result: Any) -> str:
    return getattr(result.status, "name", str(result.status))


def _expand(units: list[bytes], refs: list[Any], offset: int, sub: SubscriptionData | None,
            is_aborted: Any = None) -> list[bytes]:
    """Replace Kafka batch units by per-record units; filter records as the subscription says;
    records of aborted Kafka transactions and transaction markers are left out."""
    out: list[bytes] = []
    for i, unit in enumerate(units):
        if not _SYSFLAG.unpack_from(unit, 36)[0] & SYSFLAG_INNER_BATCH:
            out.append(unit)
            continue
        try:
            from engine.batch_convert import expand_batch_unit
        except ImportError:  # the converter ships with the engine; without it batches cannot be served natively
            log.warning("batch_convert_missing")
            continue
        for rec in expand_batch_unit(bytes(unit), is_aborted):
            if _QOFF.unpack_from(rec, 20)[0] < offset:
                continue
            if sub is not None and not sub.is_all:
                try:
                    if not sub.matches_properties(decode_unit(rec, decompress=False).properties):
                        continue
                except ValueError:
                    continue
            out.append(rec)
    return out


def _subscription(broker: Any, cmd: RemotingCommand, group: str, topic: str, sys_flag: int) -> SubscriptionData:
    if sys_flag & PULL_FLAG_SUBSCRIPTION:
        key = (topic, cmd.get_str("subscription"), cmd.get_str("expressionType"), cmd.get_int("subVersion"))
        sub = _SUBSCRIPTIONS.get(key)
        if sub is not None:
            return sub
        try:
            sub = SubscriptionData.build(*key)
            if key[3] is not None:  # without a version each build stamps its own
                if len(_SUBSCRIPTIONS) >= _SUBSCRIPTIONS_MAX:
                    _SUBSCRIPTIONS.clear()
                _SUBSCRIPTIONS[key] = sub
            return sub
        except Sql92Error as exc:
            raise ProcessorError(R.SUBSCRIPTION_PARSE_FAILED, f"parse the consumer's subscription failed: {exc}") from None
        except ValueError as exc:
            raise ProcessorError(R.SUBSCRIPTION_PARSE_FAILED, str(exc)) from None
    info = broker.consumers.groups.get(group)
    if info is None:
        raise ProcessorError(R.SUBSCRIPTION_NOT_EXIST, f"the consumer's group info not exist: {group}")
    sub = info.subscriptions.get(topic)
    if sub is None:
        raise ProcessorError(R.SUBSCRIPTION_NOT_EXIST, f"the consumer's subscription not exist: group {group} topic {topic}")
    sub_version = cmd.get_int("subVersion") or 0
    if sub.sub_version < sub_version:
        raise ProcessorError(R.SUBSCRIPTION_NOT_LATEST, "the consumer's subscription not latest")
    return sub


def _suggest_broker(broker: Any, group: str, result: Any) -> int:
    """RocketMQ's PullMessageProcessor: with slaveReadEnable a reader that fell behind (the store
    suggests it) goes to the group's whichBrokerWhenConsumeSlowly (1), else to its brokerId (0,
    the master); without it every reader is sent to the master. A slave serves what it is asked
    either way (with the master down, consumers read from it)."""
    if broker.is_master_only:
        return 0
    sg = broker.store.subscription_groups.get(group)
    if result.suggest_pulling_from_slave:
        return int(getattr(sg, "which_broker_when_consume_slowly", 1) or 1)
    return int(getattr(sg, "broker_id", 0) or 0)


def _has_batches(units: list[Any], refs: list[Any]) -> bool:
    """Some unit holds more than one record (a Kafka batch, an inner batch): it is expanded."""
    for r in refs:
        if getattr(r, "record_count", 1) > 1:
            return True
    unpack = _SYSFLAG.unpack_from
    for u in units:
        if unpack(u, 36)[0] & SYSFLAG_INNER_BATCH:
            return True
    return False


def _read(broker: Any, group: str, topic: str, queue_id: int, offset: int, max_msgs: int, sub: SubscriptionData,
          max_bytes: int | None) -> tuple[int, dict[str, Any], bytes]:
    store = broker.store
    # Kafka transactions: native consumers read committed data only, so never at or past the
    # last stable offset (the first offset of the oldest open transaction in this queue)
    txn = txn_index.for_store(store)
    hw = store.get_max_offset_in_queue(topic, queue_id)
    lso = txn.last_stable_offset(topic, queue_id, hw)
    if lso < hw:
        if offset >= lso:
            return R.PULL_NOT_FOUND, {"nextBeginOffset": offset, "minOffset": store.get_min_offset_in_queue(topic, queue_id),
                                      "maxOffset": lso, "suggestWhichBrokerId": 0}, b""
        max_msgs = min(max_msgs, lso - offset)
    result = store.get_message(group, topic, queue_id, offset, max_msgs, message_filter(sub), max_bytes)
    status = _status(result)
    fields: dict[str, Any] = {"nextBeginOffset": result.next_begin_offset, "minOffset": result.min_offset,
                              "maxOffset": result.max_offset,
                              "suggestWhichBrokerId": _suggest_broker(broker, group, result)}
    body = b""
    if status == "FOUND":
        units = list(result.messages)
        refs = list(getattr(result, "units", []) or [])
        if _has_batches(units, refs):
            aborted = ((lambda pid, off: txn.is_aborted(topic, queue_id, pid, off))
                       if txn.has_aborted(topic, queue_id) else None)
            units = _expand(units, refs, offset, sub, aborted)
        if units:
            body = b"".join(units)  # one copy: join takes the views as they are
            metrics.topic_out("broker", topic, len(body), len(units))  # every SUCCESS read is sent
            broker_stats.for_broker(broker).got(group, topic, len(units))
            return R.SUCCESS, fields, body
        return R.PULL_RETRY_IMMEDIATELY, fields, body
    if status == "NO_MATCHED_MESSAGE":
        return R.PULL_RETRY_IMMEDIATELY, fields, body
    if status in ("NO_MESSAGE_IN_QUEUE", "NO_MATCHED_LOGIC_QUEUE"):
        return (R.PULL_OFFSET_MOVED if offset != 0 else R.PULL_NOT_FOUND), fields, body
    if status == "OFFSET_TOO_SMALL" and tiered.remote_covers(store, topic, queue_id, offset):
        # the local start moved past it meanwhile: the remote tier serves it on the next pull
        fields.update(nextBeginOffset=offset, minOffset=tiered.log_start_offset(store, topic, queue_id))
        return R.PULL_RETRY_IMMEDIATELY, fields, body
    if status in ("OFFSET_TOO_SMALL", "OFFSET_OVERFLOW_BADLY"):
        return R.PULL_OFFSET_MOVED, fields, body
    return R.PULL_NOT_FOUND, fields, body  # OFFSET_OVERFLOW_ONE, OFFSET_FOUND_NULL


async def _read_remote(broker: Any, group: str, topic: str, queue_id: int, offset: int, max_msgs: int,
                       sub: SubscriptionData, max_bytes: int | None) -> tuple[int, dict[str, Any], bytes]:
    """A pull below the local start, served from the remote tier (the same units, expanded and
    filtered as a local read; tags and SQL92 are checked on the units' properties)."""
    store = broker.store
    read = await tiered.read_remote(store, topic, queue_id, offset, max(1, max_bytes or REMOTE_PULL_BYTES))
    read = read[:max_msgs]
    hw = store.get_max_offset_in_queue(topic, queue_id)
    next_begin = read[-1].queue_offset + read[-1].record_count if read else store.get_min_offset_in_queue(topic, queue_id)
    fields: dict[str, Any] = {"nextBeginOffset": next_begin, "minOffset": tiered.log_start_offset(store, topic, queue_id),
                              "maxOffset": hw, "suggestWhichBrokerId": 0}
    units: list[Any] = [u.data for u in read]
    if any(u.record_count > 1 for u in read) or _has_batches(units, []):
        txn = txn_index.for_store(store)
        aborted = ((lambda pid, off: txn.is_aborted(topic, queue_id, pid, off))
                   if txn.has_aborted(topic, queue_id) else None)
        units = _expand(units, [], offset, sub, aborted)
    if not sub.is_all:
        units = [u for u in units if _matches(sub, u)]
    if not units:
        return R.PULL_RETRY_IMMEDIATELY, fields, b""
    body = b"".join(units)
    metrics.topic_out("broker", topic, len(body), len(units))
    broker_stats.for_broker(broker).got(group, topic, len(units))
    return R.SUCCESS, fields, body


def _matches(sub: SubscriptionData, unit: bytes) -> bool:
    try:
        return sub.matches_properties(decode_unit(unit, decompress=False).properties)
    except ValueError:
        return False


def commit_in_order(broker: Any, conn: Connection, cmd: RemotingCommand) -> None:
    """The COMMIT_OFFSET flag's commit, in the connection's arrival order (before the pull's own
    task): a consumer that pulled with its then-current offset and right after persisted a
    newer one (UPDATE_CONSUMER_OFFSET, when it hands the queue over) must not have the older
    value land last, or the next owner consumes the difference again. Only on a master, for a
    readable topic and a valid queue; a bad request commits nothing (the pull answers why)."""
    sys_flag = cmd.get_int("sysFlag", 0) or 0
    if not sys_flag & PULL_FLAG_COMMIT_OFFSET or not broker.is_master:
        return
    commit = cmd.get_int("commitOffset", -1)
    if commit is None or commit < 0:
        return
    topic, queue_id = cmd.require_str("topic"), cmd.require_int("queueId")
    tc = broker.store.topic_config.get(topic)
    if tc is None or not tc.perm & PERM_READ or not 0 <= queue_id < tc.read_queue_nums:
        return
    broker.store.consumer_offsets.commit(cmd.require_str("consumerGroup"), topic, queue_id, commit)


@BROKER_PROCESSORS.register(RC.PULL_MESSAGE, RC.LITE_PULL_MESSAGE, suspends=True, in_order=commit_in_order)
async def pull_message(broker: Any, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
    group = cmd.require_str("consumerGroup")
    topic = cmd.require_str("topic")
    queue_id = cmd.require_int("queueId")
    offset = cmd.require_int("queueOffset")
    max_msgs = max(1, min(cmd.get_int("maxMsgNums", 32) or 32, 1024))
    sys_flag = cmd.get_int("sysFlag", 0) or 0
    suspend_ms = min(max(cmd.get_int("suspendTimeoutMillis", 0) or 0, 0), MAX_SUSPEND_MS)
    max_bytes = cmd.get_int("maxMsgBytes")
    tc = broker.store.topic_config.get(topic)
    if tc is None:
        return cmd.response(R.TOPIC_NOT_EXIST, f"topic[{topic}] not exist, apply first please!")
    if not tc.perm & PERM_READ:
        return cmd.response(R.NO_PERMISSION, f"the topic[{topic}] pulling message is forbidden")
    if queue_id < 0 or queue_id >= tc.read_queue_nums:
        return cmd.response(R.SYSTEM_ERROR, f"queueId[{queue_id}] is illegal, topic:[{topic}] "
                                            f"topicConfig.readQueueNums:[{tc.read_queue_nums}] consumer:[{conn.remote_addr}]")
    sub = _subscription(broker, cmd, group, topic, sys_flag)
    # the COMMIT_OFFSET flag was applied in arrival order already (``commit_in_order``)
    if tiered.remote_covers(broker.store, topic, queue_id, offset):   # the offset left the disk
        try:
            code, fields, body = await _read_remote(broker, group, topic, queue_id, offset, max_msgs, sub, max_bytes)
        except tiered.RemoteReadError as exc:
            return cmd.response(R.SYSTEM_ERROR, str(exc))
        return cmd.response(code, None if code == R.SUCCESS else _remark(code), fields, body)
    code, fields, body = _read(broker, group, topic, queue_id, offset, max_msgs, sub, max_bytes)
    if code == R.PULL_NOT_FOUND and sys_flag & PULL_FLAG_SUSPEND and suspend_ms > 0:
        hold_ms = suspend_ms if broker.broker_config.long_polling_enable else min(suspend_ms, broker.short_polling_ms)
        deadline = time.monotonic() + hold_ms / 1000
        ev = broker.pull_hold.waiter(topic, queue_id)
        try:
            while not conn.closed:
                if broker.store.get_max_offset_in_queue(topic, queue_id) > offset:
                    code, fields, body = _read(broker, group, topic, queue_id, offset, max_msgs, sub, max_bytes)
                    if code != R.PULL_NOT_FOUND:
                        break
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    break
                ev.clear()
                try:
                    await asyncio.wait_for(ev.wait(), remaining)
                except asyncio.TimeoutError:
                    code, fields, body = _read(broker, group, topic, queue_id, offset, max_msgs, sub, max_bytes)
                    break
        finally:
            broker.pull_hold.remove(topic, queue_id, ev)
    return cmd.response(code, None if code == R.SUCCESS else _remark(code), fields, body)


def _remark(code: int) -> str:
    return {R.PULL_NOT_FOUND: "no new message", R.PULL_RETRY_IMMEDIATELY: "no matched message, pull again",
            R.PULL_OFFSET_MOVED: "the offset moved"}.get(code, "")
