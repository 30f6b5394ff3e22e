"""Produce (key 0), versions 3-11 (v3 is the first with RecordBatch v2, the only format stored).

Per partition: split the records field into batches, validate each batch's header and CRC-32C
(never touching the records: no per-record Python), check idempotence (producer id, epoch,
sequence) and append each batch with ``store.put_record_batch`` as ONE commitlog unit; the
store assigns and patches the base offset. The response carries the first batch's base
offset, ``log_append_time_ms`` -1 (CreateTime is kept) and the log start offset.

- acks 0: no response at all (an error closes the connection, as Kafka does, so the producer
  refreshes its metadata); 1: answered once the master stored the batch (durable as
  ``flushDiskType`` promises), whatever ``brokerRole`` says; -1 (all): also waits until every
  in-sync slave of the broker group acknowledged it (``store.ha.wait_replicated``; a lone node
  is its own full ISR). With fewer in-sync replicas (master included) than the topic's
  ``min.insync.replicas`` (else the broker's): NOT_ENOUGH_REPLICAS before anything is stored,
  NOT_ENOUGH_REPLICAS_AFTER_APPEND when the ISR shrank below it during the wait (the batch is
  stored on the master; an idempotent retry is recognised as a duplicate and waited for again),
  REQUEST_TIMED_OUT when the slaves did not answer within the request's ``timeout_ms``. A
  slave, or a master whose failover lease expired, answers NOT_LEADER_OR_FOLLOWER before any
  sequence check (docs/design/failover.md). Other acks values: INVALID_REQUIRED_ACKS.
- Errors: CORRUPT_MESSAGE (bad magic/length/CRC, with the reason in ``error_message``),
  MESSAGE_TOO_LARGE (a batch above ``message_max_bytes``), UNKNOWN_TOPIC_OR_PARTITION,
  INVALID_TOPIC_EXCEPTION, OUT_OF_ORDER_SEQUENCE_NUMBER / DUPLICATE_SEQUENCE_NUMBER /
  INVALID_PRODUCER_EPOCH (idempotence), KAFKA_STORAGE_ERROR / REQUEST_TIMED_OUT from the store.
- An exact duplicate of a recent batch (producer retry) is not stored again; it is answered
  with the offset it got the first time.
- Check, append and record run under a per-partition lock so two connections of one producer
  cannot interleave their sequence checks.
- Transactional batches: the producer id and epoch must be the transactional id's current
  ones (else INVALID_PRODUCER_EPOCH) and the partition part of its open transaction (else
  INVALID_TXN_STATE); the first one of a transaction in a partition opens it in
  ``engine.txn_index`` (which holds the last stable offset back).
- Not implemented: LogAppendTime topics.
"""

from __future__ import annotations

import asyncio

from gateway_kafka import error_codes as E
from gateway_kafka.apis import RequestContext, api
from gateway_kafka.apis._common import blocking, find_topic, partition_count, topic_name_error
from engine import metrics
from engine.record_batch import CorruptRecordError, iter_batches, validate_batch

_STORE_ERRORS = {
    "MESSAGE_ILLEGAL": E.CORRUPT_MESSAGE,
    "PROPERTIES_SIZE_EXCEEDED": E.MESSAGE_TOO_LARGE,
    "FLUSH_DISK_TIMEOUT": E.REQUEST_TIMED_OUT,
    "FLUSH_SLAVE_TIMEOUT": E.REQUEST_TIMED_OUT,
    "SLAVE_NOT_AVAILABLE": E.NOT_ENOUGH_REPLICAS,
    "SERVICE_NOT_AVAILABLE": E.NOT_LEADER_OR_FOLLOWER,
    "OS_PAGE_CACHE_BUSY": E.REQUEST_TIMED_OUT,
}


def _result(index: int, code: int, base_offset: int = -1, log_start: int = -1, message: str | None = None) -> dict:
    return {"index": index, "error_code": code, "base_offset": base_offset, "log_append_time_ms": -1,
            "log_start_offset": log_start, "record_errors": [], "error_message": message}


def min_insync_replicas(gw, tc) -> int:
    raw = (tc.attributes or {}).get("min.insync.replicas") if tc is not None else None
    try:
        return max(1, int(raw)) if raw is not None else max(1, gw.settings.min_insync_replicas)
    except ValueError:
        return max(1, gw.settings.min_insync_replicas)


async def produce_partition(ctx: RequestContext, topic: str, index: int, records, acks: int = 1,
                            timeout_ms: int = 30_000, min_isr: int = 1) -> dict:
    gw = ctx.gateway
    store = gw.store
    ha = store.ha
    if not ha.is_master or not ha.lease_valid():
        # before any sequence check (Kafka's order): a retry must find the new leader, not an
        # OUT_OF_ORDER_SEQUENCE_NUMBER from a replica that refused the batch before it
        return _result(index, E.NOT_LEADER_OR_FOLLOWER,
                       message="not the master of this partition's broker group" + (
                           "" if not ha.is_master else " (its lease expired: cut off from the failover controller)"))
    replicate = acks == -1 and ha.is_master and (min_isr > 1 or bool(ha.connections()) or bool(ha.sync_state_set))
    if replicate and 1 + ha.in_sync_count() < min_isr:
        return _result(index, E.NOT_ENOUGH_REPLICAS,
                       message=f"{1 + ha.in_sync_count()} in-sync replica(s), min.insync.replicas is {min_isr}")
    if not records:
        return _result(index, E.CORRUPT_MESSAGE, message="produce request carries no record batch")
    max_bytes = gw.settings.message_max_bytes
    try:
        batches = []
        for view in iter_batches(records):
            if len(view) > max_bytes:
                return _result(index, E.MESSAGE_TOO_LARGE,
                               message=f"record batch of {len(view)} bytes exceeds message_max_bytes {max_bytes}")
            batches.append((view, validate_batch(view)))
    except CorruptRecordError as exc:
        return _result(index, E.CORRUPT_MESSAGE, message=str(exc))
    ps = gw.producer_state
    sync_put = gw.settings.direct_put
    born = (ctx.conn.peer_host, ctx.conn.peer_port)
    first_offset = -1
    end_offset = -1
    async with gw.partition_locks[(topic, index)]:
        for view, h in batches:
            if h.is_transactional:
                txn_code = gw.txn.check_produce(h.producer_id, h.producer_epoch, topic, index)
                if txn_code != E.NONE:
                    return _result(index, txn_code, message=f"transactional batch of producer {h.producer_id} epoch "
                                                            f"{h.producer_epoch} refused: {E.NAMES.get(txn_code)}")
            verdict = ps.check(topic, index, h.producer_id, h.producer_epoch, h.base_sequence, h.last_offset_delta)
            if verdict.error_code != E.NONE:
                return _result(index, verdict.error_code, message=verdict.message)
            if verdict.duplicate_of is not None:
                if first_offset < 0:
                    first_offset = verdict.duplicate_of.base_offset
                end_offset = max(end_offset, store.confirmed_offset)  # it is at or below the log's end
                continue
            if sync_put:
                res = store.put_record_batch(topic, index, bytes(view), born_host=born, sync_replicas=False)
            else:
                res = await blocking(store.put_record_batch, topic, index, bytes(view), born_host=born,
                                     sync_replicas=False)
            if not res.ok:
                code = _STORE_ERRORS.get(res.status.name, E.KAFKA_STORAGE_ERROR)
                gw.log.warning("produce_failed", topic=topic, partition=index, status=res.status.name,
                               error=res.error)
                return _result(index, code, message=res.error or res.status.name)
            if h.is_transactional:
                await blocking(gw.txn.index.begin, topic, index, h.producer_id, res.queue_offset)
            if h.producer_id >= 0:
                ps.record(topic, index, h.producer_id, h.producer_epoch, h.base_sequence, h.last_offset_delta,
                          res.queue_offset, h.max_timestamp)
            if first_offset < 0:
                first_offset = res.queue_offset
            end_offset = max(end_offset, res.end_offset)
    metrics.topic_in("kafka", topic, sum(len(v) for v, _h in batches), sum(h.last_offset_delta + 1 for _v, h in batches))
    result = _result(index, E.NONE, first_offset, store.get_min_offset_in_queue(topic, index))
    if replicate and end_offset >= 0:  # waited for by ``handle`` after every partition appended
        result[_WAIT] = ha.wait_replicated(end_offset, min_isr - 1, timeout_ms / 1000)
    return result


_WAIT = "_replication_wait"


async def _await_replication(gw, topic: str, result: dict) -> None:
    status, error = await asyncio.wrap_future(result.pop(_WAIT))
    if status != "PUT_OK":
        result["error_code"] = (E.NOT_ENOUGH_REPLICAS_AFTER_APPEND if status == "SLAVE_NOT_AVAILABLE"
                                else E.REQUEST_TIMED_OUT)
        result["error_message"] = error
        gw.log.warning("produce_not_replicated", topic=topic, partition=result["index"], status=status, error=error)


@api(key=0, min=3, max=11)
async def handle(ctx: RequestContext, body: dict) -> dict | None:
    gw = ctx.gateway
    acks = body.get("acks", 1)
    responses = []
    for t in body.get("topic_data") or ():
        name = t.get("name")
        parts = t.get("partition_data") or ()
        tc = find_topic(gw, name)
        out = []
        if acks not in (0, 1, -1):
            out = [_result(p.get("index", -1), E.INVALID_REQUIRED_ACKS) for p in parts]
        elif tc is None:
            code = E.INVALID_TOPIC_EXCEPTION if topic_name_error(name) else E.UNKNOWN_TOPIC_OR_PARTITION
            out = [_result(p.get("index", -1), code) for p in parts]
        else:
            count = partition_count(tc)
            min_isr = min_insync_replicas(gw, tc)
            timeout_ms = max(0, body.get("timeout_ms", 30_000) or 0)
            for p in parts:
                index = p.get("index", -1)
                if not 0 <= index < count:
                    out.append(_result(index, E.UNKNOWN_TOPIC_OR_PARTITION))
                else:
                    out.append(await produce_partition(ctx, name, index, p.get("records"), acks, timeout_ms,
                                                       min_isr))
        responses.append({"name": name, "partition_responses": out})
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
    return {"responses": responses, "throttle_time_ms": 0}
