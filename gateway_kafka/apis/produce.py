"""Produce (key 0), versions 3-11 (v3 is the first with RecordBatch v2, the only format stored).

Per partition: split the records field into batches, validate each batch's header and CRC-32C
(never touching the records: no per-record Python), check idempotence (producer id, epoch,
sequence) and append each batch with ``store.put_record_batch`` as ONE commitlog unit; the
store assigns and patches the base offset. The response carries the first batch's base
offset, ``log_append_time_ms`` -1 (CreateTime is kept) and the log start offset.

- acks 0: no response at all (an error closes the connection, as Kafka does, so the producer
  refreshes its metadata); 1 and -1 (all): answered once the store accepted the batch
  (durable as ``flushDiskType`` promises; a single node is its own full ISR). Other acks
  values: INVALID_REQUIRED_ACKS.
- Errors: CORRUPT_MESSAGE (bad magic/length/CRC, with the reason in ``error_message``),
  MESSAGE_TOO_LARGE (a batch above the topic's ``max.message.bytes``, or the broker's
  ``message_max_bytes`` when the topic sets none; a topic may allow more than the broker
  default), UNKNOWN_TOPIC_OR_PARTITION, INVALID_TOPIC_EXCEPTION (also for the internal topics
  ``__consumer_offsets`` / ``__transaction_state``: clients cannot append to them, as in Kafka),
  OUT_OF_ORDER_SEQUENCE_NUMBER / DUPLICATE_SEQUENCE_NUMBER / INVALID_PRODUCER_EPOCH
  (idempotence), KAFKA_STORAGE_ERROR / REQUEST_TIMED_OUT from the store.
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
- Not implemented: LogAppendTime topics.
"""

from __future__ import annotations

from gateway_kafka import error_codes as E
from gateway_kafka.apis import RequestContext, api
from gateway_kafka.apis._common import blocking, find_topic, is_internal, message_limit, partition_count, topic_name_error
from gateway_kafka.producer_state import check_sequence
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


async def produce_partition(ctx: RequestContext, topic: str, index: int, records, max_bytes: int) -> dict:
    gw = ctx.gateway
    store = gw.store
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
    ps = store.producer_state
    sync_put = gw.settings.direct_put
    born = (ctx.conn.peer_host, ctx.conn.peer_port)
    first_offset = -1
    async with gw.partition_locks[(topic, index)]:
        for view, h in batches:
            if h.is_transactional:
                txn_code = gw.txn.check_produce(h.producer_id, h.producer_epoch, topic, index)
                if txn_code != E.NONE:
                    return _result(index, txn_code, message=f"transactional batch of producer {h.producer_id} epoch "
                                                            f"{h.producer_epoch} refused: {E.NAMES.get(txn_code)}")
            verdict = check_sequence(ps.entry(topic, index, h.producer_id) if h.producer_id >= 0 else None,
                                     h.producer_id, h.producer_epoch, h.base_sequence, h.last_offset_delta)
            if verdict.error_code != E.NONE:
                return _result(index, verdict.error_code, message=verdict.message)
            if verdict.duplicate_of is not None:
                if first_offset < 0:
                    first_offset = verdict.duplicate_of.base_offset
                continue
            if sync_put:
                res = store.put_record_batch(topic, index, bytes(view), born_host=born, max_size=max_bytes)
            else:
                res = await blocking(store.put_record_batch, topic, index, bytes(view), born_host=born,
                                     max_size=max_bytes)
            if not res.ok:
                code = _STORE_ERRORS.get(res.status.name, E.KAFKA_STORAGE_ERROR)
                gw.log.warning("produce_failed", topic=topic, partition=index, status=res.status.name,
                               error=res.error)
                return _result(index, code, message=res.error or res.status.name)
            if first_offset < 0:
                first_offset = res.queue_offset
    return _result(index, E.NONE, first_offset, store.get_min_offset_in_queue(topic, index))


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
        elif is_internal(name):
            out = [_result(p.get("index", -1), E.INVALID_TOPIC_EXCEPTION,
                           message=f"cannot append to internal topic {name}") for p in parts]
        else:
            count = partition_count(tc)
            limit = message_limit(gw, tc)
            for p in parts:
                index = p.get("index", -1)
                if not 0 <= index < count:
                    out.append(_result(index, E.UNKNOWN_TOPIC_OR_PARTITION))
                else:
                    out.append(await produce_partition(ctx, name, index, p.get("records"), limit))
        responses.append({"name": name, "partition_responses": out})
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
