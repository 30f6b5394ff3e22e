"""Produce (key 0), versions 3-13 (v3 is the first with RecordBatch v2, the only format stored).

Version 13 (KIP-516) names each topic by its id instead of its name, in the request and the
answer; an id no topic has is answered UNKNOWN_TOPIC_ID for each of its partitions (with acks 0:
the connection is closed, so the producer refreshes its metadata). Version 12 is version 11 on
the wire; Kafka reads it as "the producer speaks transaction protocol v2" (KIP-890 part 2). The
node does not finalize ``transaction.version`` 2, so clients keep sending AddPartitionsToTxn and
cap their transactional produce requests at version 11, and a transactional batch of a partition
the transaction did not add is refused INVALID_TXN_STATE whatever the version.

Per partition: split the records field into batches, validate each batch's header and CRC-32C
(never touching the records: no per-record Python), check idempotence (producer id, epoch,
sequence) and append each batch with ``store.put_record_batch`` as ONE commitlog unit; the
store assigns and patches the base offset. The response carries the first batch's base
offset, ``log_append_time_ms`` -1 (CreateTime is kept) and the log start offset.

- acks 0: no response at all (an error closes the connection, as Kafka does, so the producer
  refreshes its metadata); 1: answered once the master stored the batch (durable as
  ``flushDiskType`` promises), whatever ``brokerRole`` says; -1 (all): also waits until every
  in-sync slave of the broker group acknowledged it (the put path's ``replicated``; a lone node
  is its own full ISR). With fewer in-sync replicas (master included) than the topic's
  ``min.insync.replicas`` (else the broker's): NOT_ENOUGH_REPLICAS before anything is stored,
  NOT_ENOUGH_REPLICAS_AFTER_APPEND when the ISR shrank below it during the wait (the batch is
  stored on the master; an idempotent retry is recognised as a duplicate and waited for again),
  REQUEST_TIMED_OUT when the slaves did not answer within the request's ``timeout_ms``. A
  slave, or a master whose failover lease expired, answers NOT_LEADER_OR_FOLLOWER before any
  sequence check (docs/design/failover.md). Other acks values: INVALID_REQUIRED_ACKS. A group
  whose write permission an operator wiped at the NameServer (``mqadmin wipeWritePerm``, the
  view's ``write_wiped``) answers NOT_LEADER_OR_FOLLOWER with the reason: retriable, so a
  producer's records wait for ``addWritePerm`` within their delivery timeout; Fetch goes on.
- Errors: CORRUPT_MESSAGE (bad magic/length/CRC, with the reason in ``error_message``),
  MESSAGE_TOO_LARGE (a batch above the topic's ``max.message.bytes``, or the broker's
  ``message_max_bytes`` when the topic sets none; a topic may allow more than the broker
  default), UNKNOWN_TOPIC_OR_PARTITION, INVALID_TOPIC_EXCEPTION (also for the internal topics
  ``__consumer_offsets`` / ``__transaction_state``: clients cannot append to them, as in Kafka),
  OUT_OF_ORDER_SEQUENCE_NUMBER / DUPLICATE_SEQUENCE_NUMBER / INVALID_PRODUCER_EPOCH
  (idempotence), KAFKA_STORAGE_ERROR / REQUEST_TIMED_OUT from the store (KAFKA_STORAGE_ERROR with the store's message when
  the data disk is full: retriable, so producers retry until space returns or their delivery
  timeout ends).
- An exact duplicate of a recent batch (producer retry) is not stored again; it is answered
  with the offset it got the first time.
- Check and append run under a per-partition lock so two connections of one producer cannot
  interleave their sequence checks. The producer state the check reads is the engine's
  (``store.producer_state``), updated by the store as it appends a batch, so it always equals
  what is in the log — also after a crash.
- Transactional batches: the producer id and epoch must be the transactional id's current
  ones (else INVALID_PRODUCER_EPOCH) and the partition part of its open transaction (else
  INVALID_TXN_STATE); the first one of a transaction in a partition opens it in the engine's
  producer state (which holds the last stable offset back).
- Flow control (the store's, as RocketMQ applies it to sends): a batch that waited in the
  node's send queue longer than ``waitTimeMillsInSendQueue``, or found the commitlog locked
  longer than ``osPageCacheBusyTimeOutMills``, is not stored and answered REQUEST_TIMED_OUT
  (retriable) with the reason in ``error_message``; the response then carries
  ``throttle_time_ms`` and the listener reads nothing more from that connection for that long
  (a Kafka broker's quota throttling, KIP-219), so producers slow down instead of requests
  queueing without bound.
- Timestamps: a topic with ``message.timestamp.type=LogAppendTime`` gets each batch stamped with
  the broker's time (attribute bit 3, maxTimestamp, CRC recomputed) as Kafka does; a CreateTime
  topic that sets ``message.timestamp.before.max.ms`` / ``after.max.ms`` refuses batches whose
  timestamps lie further in the past / future with INVALID_TIMESTAMP.
"""

from __future__ import annotations

import asyncio
import struct
import time

from broker.put_path import PutStatus
from broker.replication import Replication
from gateway_kafka import authz
from gateway_kafka import error_codes as E
from gateway_kafka.apis import RequestContext, api
from gateway_kafka.apis._common import (blocking, find_topic, is_internal, local_queue, message_limit,
                                        topic_by_id, topic_id, topic_name_error)
from gateway_kafka.producer_state import check_sequence
from broker import trace
from engine import metrics
from engine.compaction import is_compacted
from engine.record_batch import (ATTRIBUTES_OFFSET, CRC_OFFSET, MAX_TIMESTAMP_OFFSET, TIMESTAMP_TYPE_MASK,
                                 CorruptRecordError, compute_crc, decode_batch, iter_batches, validate_batch)

THROTTLE = "throttle_time_ms"  # ConnectionState.extra: answer with it, then mute the connection

# The put path's neutral statuses as Kafka error codes (the one table; anything else:
# KAFKA_STORAGE_ERROR). Batches are stored with sync_replicas=False, so the replica statuses
# only come from the replication wait after the append.
PUT_ERRORS = {
    PutStatus.OK: E.NONE,
    PutStatus.MESSAGE_ILLEGAL: E.CORRUPT_MESSAGE,
    PutStatus.PROPERTIES_SIZE_EXCEEDED: E.MESSAGE_TOO_LARGE,
    PutStatus.FLUSH_DISK_TIMEOUT: E.REQUEST_TIMED_OUT,
    PutStatus.FLUSH_SLAVE_TIMEOUT: E.REQUEST_TIMED_OUT,
    PutStatus.SLAVE_NOT_AVAILABLE: E.NOT_ENOUGH_REPLICAS_AFTER_APPEND,
    PutStatus.SERVICE_NOT_AVAILABLE: E.NOT_LEADER_OR_FOLLOWER,
    PutStatus.DISK_FULL: E.KAFKA_STORAGE_ERROR,  # retriable: producers retry until space returns
    PutStatus.OS_PAGE_CACHE_BUSY: E.REQUEST_TIMED_OUT,
    PutStatus.SEND_QUEUE_BUSY: E.REQUEST_TIMED_OUT,
}


def _result(index: int, code: int, base_offset: int = -1, log_start: int = -1, message: str | None = None) -> dict:
    return {"index": index, "error_code": code, "base_offset": base_offset, "log_append_time_ms": -1,
            "log_start_offset": log_start, "record_errors": [], "error_message": message}


def _keyless_records(topic: str, index: int, batches) -> dict | None:
    """A compacted topic takes only records with a key: INVALID_RECORD naming each keyless one
    (its index in the batch, as Kafka's record_errors do), else None."""
    errors = []
    for view, h in batches:
        if h.is_control:
            continue
        try:
            _, records = decode_batch(view)
        except CorruptRecordError as exc:
            return _result(index, E.CORRUPT_MESSAGE, message=str(exc))
        errors += [{"batch_index": n, "batch_index_error_message": "Compacted topic cannot accept message without key."}
                   for n, r in enumerate(records) if r.key is None]
    if not errors:
        return None
    res = _result(index, E.INVALID_RECORD, message=f"Compacted topic cannot accept message without key in topic "
                                                   f"partition {topic}-{index}.")
    res["record_errors"] = errors
    return res


_TIMESTAMP_KEYS = frozenset({"message.timestamp.type", "message.timestamp.before.max.ms",
                             "message.timestamp.after.max.ms"})


def _timestamp_rules(attributes: dict, batches: list, now: int) -> tuple[list, str | None]:
    """LogAppendTime: batches stamped with ``now``; CreateTime: the topic's bounds checked."""
    if attributes.get("message.timestamp.type") == "LogAppendTime":
        stamped = []
        for view, h in batches:
            if h.is_control:
                stamped.append((view, h))
                continue
            buf = bytearray(view)
            attrs = struct.unpack_from(">h", buf, ATTRIBUTES_OFFSET)[0] | TIMESTAMP_TYPE_MASK
            struct.pack_into(">h", buf, ATTRIBUTES_OFFSET, attrs)
            struct.pack_into(">q", buf, MAX_TIMESTAMP_OFFSET, now)
            struct.pack_into(">I", buf, CRC_OFFSET, compute_crc(buf))
            stamped.append((memoryview(buf), h))
        return stamped, None
    try:
        before = int(attributes.get("message.timestamp.before.max.ms", -1))
        after = int(attributes.get("message.timestamp.after.max.ms", -1))
    except ValueError:
        return batches, None
    for _, h in batches:
        if h.is_control:
            continue
        if before >= 0 and now - h.base_timestamp > before:
            return batches, (f"timestamp {h.base_timestamp} of a record is more than {before} ms before the broker's "
                             f"time {now} (message.timestamp.before.max.ms)")
        if after >= 0 and h.max_timestamp - now > after:
            return batches, (f"timestamp {h.max_timestamp} of a record is more than {after} ms after the broker's "
                             f"time {now} (message.timestamp.after.max.ms)")
    return batches, None


def min_insync_replicas(gw, tc) -> int:
    raw = (tc.attributes or {}).get("min.insync.replicas") if tc is not None else None
    try:
        return max(1, int(raw)) if raw is not None else max(1, gw.settings.min_insync_replicas)
    except ValueError:
        return max(1, gw.settings.min_insync_replicas)


async def produce_partition(ctx: RequestContext, topic: str, index: int, records, max_bytes: int, acks: int = 1,
                            timeout_ms: int = 30_000, min_isr: int = 1, compacted: bool = False,
                            attributes: dict | None = None, queue: int | None = None) -> dict:
    """Append to partition ``index``, stored in local queue ``queue`` (the same id unless the topic
    spreads over broker groups, docs/design/cluster.md)."""
    gw = ctx.gateway
    queue = index if queue is None else queue
    store = gw.store
    ha = Replication(store)
    if not ha.is_master or not ha.lease_valid():
        # before any sequence check (Kafka's order): a retry must find the new leader, not an
        # OUT_OF_ORDER_SEQUENCE_NUMBER from a replica that refused the batch before it
        stand_in = not ha.is_master and gw.cluster is not None and gw.cluster.leads_reads()
        return _result(index, E.NOT_LEADER_OR_FOLLOWER,
                       message="not the master of this partition's broker group" + (
                           " (its master is down: this replica serves reads only)" if stand_in else
                           "" if not ha.is_master else " (its lease expired: cut off from the failover controller)"))
    replicate = acks == -1 and ha.is_master and (min_isr > 1 or ha.has_replicas())
    if replicate and 1 + ha.in_sync_count() < min_isr:
        return _result(index, E.NOT_ENOUGH_REPLICAS,
                       message=f"{1 + ha.in_sync_count()} in-sync replica(s), min.insync.replicas is {min_isr}")
    if not records:
        return _result(index, E.CORRUPT_MESSAGE, message="produce request carries no record batch")
    try:
        batches = []
        for view in iter_batches(records):
            if len(view) > max_bytes:
                return _result(index, E.MESSAGE_TOO_LARGE,
                               message=f"record batch of {len(view)} bytes exceeds the topic's limit of {max_bytes} "
                                       "bytes (max.message.bytes, else message.max.bytes)")
            batches.append((view, validate_batch(view)))
    except CorruptRecordError as exc:
        return _result(index, E.CORRUPT_MESSAGE, message=str(exc))
    if compacted:
        refused = _keyless_records(topic, index, batches)
        if refused is not None:
            return refused
    if attributes and _TIMESTAMP_KEYS.intersection(attributes):
        batches, why = _timestamp_rules(attributes, batches, int(time.time() * 1000))
        if why:
            return _result(index, E.INVALID_TIMESTAMP, message=why)
    ps = store.producer_state
    born = (ctx.conn.peer_host, ctx.conn.peer_port)
    traced: list[int] | None = [] if trace.enabled(gw.config) else None  # brokerTraceEnable: Pub records
    started = time.monotonic()
    first_offset = -1
    end_offset = -1
    async with gw.partition_locks[(topic, index)]:
        for view, h in batches:
            if h.is_transactional:
                txn_code = gw.txn.check_produce(h.producer_id, h.producer_epoch, topic, index)
                if txn_code != E.NONE:
                    return _result(index, txn_code, message=f"transactional batch of producer {h.producer_id} epoch "
                                                            f"{h.producer_epoch} refused: {E.NAMES.get(txn_code)}")
            verdict = check_sequence(ps.entry(topic, queue, h.producer_id) if h.producer_id >= 0 else None,
                                     h.producer_id, h.producer_epoch, h.base_sequence, h.last_offset_delta)
            if verdict.error_code != E.NONE:
                return _result(index, verdict.error_code, message=verdict.message)
            if verdict.duplicate_of is not None:
                if first_offset < 0:
                    first_offset = verdict.duplicate_of.base_offset
                end_offset = max(end_offset, store.confirmed_offset)  # it is at or below the log's end
                continue
            # the put path: inline (direct_put) unless another writer holds the commitlog, else
            # the send queue, whose fast failure answers REQUEST_TIMED_OUT and throttles
            status, res = await gw.writes.put(store.put_record_batch, topic, queue, view, born_host=born,
                                              sync_replicas=False, max_size=max_bytes, inline=gw.settings.direct_put)
            if status is PutStatus.SEND_QUEUE_BUSY:
                _throttle(ctx, res.waited_ms)
                return _result(index, PUT_ERRORS[status], message=str(res))
            if status is PutStatus.OS_PAGE_CACHE_BUSY:
                _throttle(ctx, store.config.os_page_cache_busy_time_out_mills)
            if status is not PutStatus.OK:
                gw.log.warning("produce_failed", topic=topic, partition=index, status=status.value, error=res.error)
                return _result(index, PUT_ERRORS.get(status, E.KAFKA_STORAGE_ERROR), message=res.error or status.value)
            if first_offset < 0:
                first_offset = res.queue_offset
            end_offset = max(end_offset, res.end_offset)
            if traced is not None:
                traced.append(res.commitlog_offset)
    if end_offset >= 0 and gw.arrivals is not None:
        gw.arrivals.appended(topic, queue)
    if traced:
        trace.writer_for(store).pub_stored(traced, ctx.client_id or "", born, int((time.monotonic() - started) * 1000))
    metrics.topic_in("kafka", topic, sum(len(v) for v, _h in batches), sum(h.last_offset_delta + 1 for _v, h in batches))
    result = _result(index, E.NONE, first_offset, store.get_min_offset_in_queue(topic, queue))
    if replicate and end_offset >= 0:  # waited for by ``handle`` after every partition appended
        result[_WAIT] = gw.writes.wait_replicated(end_offset, min_isr - 1, timeout_ms / 1000)
    return result


_WAIT = "_replication_wait"


async def _await_replication(gw, topic: str, result: dict) -> None:
    status, error = await gw.writes.replicated(-1, 0, 0, waiting=result.pop(_WAIT))
    if status is not PutStatus.OK:
        result["error_code"] = PUT_ERRORS.get(status, E.REQUEST_TIMED_OUT)
        result["error_message"] = error
        gw.log.warning("produce_not_replicated", topic=topic, partition=result["index"], status=status.value,
                       error=error)


def _throttle(ctx: RequestContext, ms: int) -> None:
    ctx.conn.extra[THROTTLE] = max(int(ms), ctx.conn.extra.get(THROTTLE, 0))


def _name_of(gw, tid) -> str | None:
    """The topic whose id is ``tid``: one of this node's, or one only other broker groups hold."""
    name = topic_by_id(gw, tid)
    if name is None and tid is not None and gw.cluster is not None:
        name = next((n for n in gw.cluster.topic_names() if topic_id(n) == tid), None)
    return name


@api(key=0, min=3, max=13)
async def handle(ctx: RequestContext, body: dict) -> dict | None:
    gw = ctx.gateway
    acks = body.get("acks", 1)
    responses = []
    txn = body.get("transactional_id")
    txn_denied = txn is not None and not authz.txn_id(ctx, authz.Op.WRITE, txn)
    by_id = ctx.api_version >= 13
    for t in body.get("topic_data") or ():
        tid = t.get("topic_id") if by_id else None
        name = _name_of(gw, tid) if by_id else t.get("name")
        parts = t.get("partition_data") or ()
        tc = find_topic(gw, name) if name is not None else None
        out = []
        if by_id and name is None:
            out = [_result(p.get("index", -1), E.UNKNOWN_TOPIC_ID, message=f"no topic has the id {tid}")
                   for p in parts]
        elif acks not in (0, 1, -1):
            out = [_result(p.get("index", -1), E.INVALID_REQUIRED_ACKS) for p in parts]
        elif txn_denied:
            out = [_result(p.get("index", -1), E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
                           message=f"{ctx.conn.principal} may not WRITE transactional id {txn}") for p in parts]
        elif not authz.topic(ctx, authz.Op.WRITE, name):
            out = [_result(p.get("index", -1), E.TOPIC_AUTHORIZATION_FAILED,
                           message=f"{ctx.conn.principal} may not WRITE topic {name}") for p in parts]
        elif tc is None and (topic_name_error(name) or gw.cluster is None or name not in gw.cluster.topic_names()):
            code = E.INVALID_TOPIC_EXCEPTION if topic_name_error(name) else E.UNKNOWN_TOPIC_OR_PARTITION
            out = [_result(p.get("index", -1), code) for p in parts]
        elif tc is None:  # held by other broker groups only
            out = [_result(p.get("index", -1), local_queue(gw, name, p.get("index", -1))[1]) for p in parts]
        elif is_internal(name):
            out = [_result(p.get("index", -1), E.INVALID_TOPIC_EXCEPTION,
                           message=f"cannot append to internal topic {name}") for p in parts]
        else:
            limit = message_limit(gw, tc)
            min_isr = min_insync_replicas(gw, tc)
            timeout_ms = max(0, body.get("timeout_ms", 30_000) or 0)
            for p in parts:
                index = p.get("index", -1)
                queue, code = local_queue(gw, name, index)
                if queue is None:
                    out.append(_result(index, code))
                elif gw.cluster is not None and gw.cluster.write_wiped(name):
                    out.append(_result(index, E.NOT_LEADER_OR_FOLLOWER, message=(
                        f"broker group {gw.cluster.broker_name} takes no writes: its write permission is wiped at "
                        "the NameServer (mqadmin wipeWritePerm; addWritePerm restores it); reads go on")))
                else:
                    out.append(await produce_partition(ctx, name, index, p.get("records"), limit, acks, timeout_ms,
                                                       min_isr, compacted=is_compacted(tc.attributes),
                                                       attributes=tc.attributes, queue=queue))
        responses.append({"name": name or "", "topic_id": tid, "partition_responses": out})
    # acks=all: every partition appended first, then all replication waits at once
    waits = [_await_replication(gw, t["name"], p) for t in responses for p in t["partition_responses"] if _WAIT in p]
    if waits:
        await asyncio.gather(*waits)
    if acks == 0:
        for t in responses:
            for p in t["partition_responses"]:
                if p["error_code"] != E.NONE:
                    gw.log.warning("produce_acks0_failed", topic=t["name"], partition=p["index"],
                                   error=E.NAMES.get(p["error_code"]), reason=p["error_message"])
                    # as Kafka does: the only way to tell an acks=0 producer is to drop the
                    # connection, which makes it refresh metadata and reconnect
                    ctx.conn.extra["close_now"] = True
        return None
    return {"responses": responses, "throttle_time_ms": ctx.conn.extra.get(THROTTLE, 0)}
