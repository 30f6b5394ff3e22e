"""Fetch (key 1), versions 4-17 (v13+ address topics by id).

Serves stored batches as they are: a unit produced as a Kafka batch is sliced out of the
commitlog bytes without decoding its records; a natively produced unit becomes a one-record
batch built on read (``batch_of_unit``). Offsets inside a stored batch return the whole batch
(Kafka clients skip records before their position, as with a Kafka broker).

- Limits: per partition ``partition_max_bytes``, per response ``max_bytes``, except the first
  batch of the first non-empty partition, which is returned whole even when larger, so a
  consumer can always make progress (KIP-74).
- Long poll: while fewer than ``min_bytes`` are available the request waits up to
  ``max_wait_ms``, woken by the store's arrival listener for the partitions it reads. An
  errored partition answers at once.
- Per partition: high watermark = next offset, last stable offset = first offset of the oldest
  open transaction (the engine's producer state) or the high watermark, log start offset = first
  readable offset. With isolation level 1 (read_committed) no batch at or past the last stable
  offset is returned, and ``aborted_transactions`` lists the aborted transactions (producer id,
  first offset) overlapping what is returned, so the client drops their records (it also sees
  the ABORT markers); a fetch offset outside
  [log start, high watermark] gets OFFSET_OUT_OF_RANGE; unknown topic or partition
  UNKNOWN_TOPIC_OR_PARTITION.
- Fetch sessions (KIP-227) and topic ids: ``gateway_kafka/fetch_sessions.py`` turns the request
  into the partitions to read (a session's for an incremental fetch) and keeps in the answer
  only what an incremental fetch must carry; its errors are top-level with no partitions.
- Follower fetching (KIP-392): a master asked by a client with a ``rack_id`` (v11+) answers a
  partition with no records and ``preferred_read_replica`` = an in-sync slave whose
  ``brokerRack`` is that rack (``ClusterView.preferred_read_replica``), when there is one and
  the master itself is elsewhere; the client then fetches from the slave. A slave serves what
  it has replicated; asked past its end (its master is ahead) it answers no records, no error.
- Remote tier (docs/design/tiered-storage.md): an offset below the local start that a remote
  segment holds is read from the object store before the local reads (``read_remote_parts``,
  through ``broker/tiered.py``; awaited) and served as the same batches; the log start offset is
  the remote start. The object store down or bytes that do not check: KAFKA_STORAGE_ERROR
  (retriable), never other bytes and never OFFSET_OUT_OF_RANGE.
- A group whose master is down: Metadata names its lowest live slave leader, which serves its
  partitions here from its replica (high watermark = its log end, LSO from its own producer
  state) until the master returns (docs/design/cluster.md, "Groups down").
"""

from __future__ import annotations

import asyncio
import struct

from engine import metrics
from engine.message import BORNHOST_V6_FLAG, INNER_BATCH_FLAG, STOREHOST_V6_FLAG
from engine.record_batch import iter_batches, record_count
from broker import store_view, tiered
from broker.read_path import Wakeup
from gateway_kafka import authz
from gateway_kafka import error_codes as E
from gateway_kafka.apis import RequestContext, api
from gateway_kafka.apis._common import batch_of_unit, local_queue
from gateway_kafka.protocol.primitives import ZERO_COPY_THRESHOLD
from gateway_kafka.wire_out import FileRun

# Records per store read. The store counts logical offsets but returns whole batch units, so
# this only bounds natively produced (one record per unit) reads; bytes bound the rest.
MAX_RECORDS_PER_READ = 100_000
UNIT_OVERHEAD_ALLOWANCE = 4096
# bytes of a unit read when its batch may be sent from the file: the fixed header (IPv6 hosts
# included) and the batch header after it
_HEAD = 256
_SYSFLAG_POS = 36
_I32 = struct.Struct(">i")


def _empty(index: int, code: int, hw: int = -1, lso: int = -1, log_start: int = -1) -> dict:
    return {"partition_index": index, "error_code": code, "high_watermark": hw, "last_stable_offset": lso,
            "log_start_offset": log_start, "aborted_transactions": [], "preferred_read_replica": -1,
            "records": b""}


def read_partition(gw, topic: str, index: int, fetch_offset: int, limit: int, min_one: bool,
                   isolation: int = 0, rack: str | None = None, files: dict | None = None,
                   remote: dict | None = None) -> tuple[dict, int]:
    """(partition response, record bytes in it). ``files`` (a dict, one per response): serve
    stored Kafka batches of ``ZERO_COPY_THRESHOLD`` bytes or more as ``FileRun`` s, sent from
    the segment files by the connection (plain TCP only); None: as bytes read from the store.
    ``remote``: (topic, partition) -> the units read from the remote tier for this request
    (``read_remote_parts``), or the error that read raised."""
    queue, code = local_queue(gw, topic, index)
    if queue is None:
        return _empty(index, code), 0
    partition, index = index, queue  # the store knows the local queue; the answer names the partition
    store = gw.store
    local_lo = store.get_min_offset_in_queue(topic, index)
    lo = tiered.log_start_offset(store, topic, index) if remote is not None else local_lo
    hi = store.get_max_offset_in_queue(topic, index)
    if rack:
        preferred = gw.cluster.preferred_read_replica(topic, partition, rack)
        if preferred >= 0:  # KIP-392: no records, the client fetches from that replica instead
            resp = _empty(partition, E.NONE, hi, store.producer_state.last_stable_offset(topic, index, hi), lo)
            resp["preferred_read_replica"] = preferred
            return resp, 0
    if fetch_offset > hi and not gw.cluster.is_master:
        # a slave behind its master: the client's position came from the master; nothing yet
        return _empty(partition, E.NONE, hi, hi, lo), 0
    if fetch_offset < lo or fetch_offset > hi:
        return _empty(partition, E.OFFSET_OUT_OF_RANGE, hi, hi, lo), 0
    txn = store.producer_state
    lso = txn.last_stable_offset(topic, index, hi)
    end = lso if isolation == 1 else hi
    if fetch_offset >= end or (limit <= 0 and not min_one):
        return _empty(partition, E.NONE, hi, lso, lo), 0
    from_remote = remote.get((topic, partition)) if remote is not None and fetch_offset < local_lo else None
    if isinstance(from_remote, Exception):
        return _empty(partition, E.KAFKA_STORAGE_ERROR, hi, lso, lo), 0  # retriable; logged by the tier
    if from_remote:
        return _remote_response(partition, from_remote, limit, min_one, end, hi, lso, lo, txn, topic, index,
                                fetch_offset, isolation)
    if remote is not None and fetch_offset < local_lo:
        if tiered.remote_covers(store, topic, index, fetch_offset):
            # the local start moved past it after this request's remote reads: the next fetch reads it remotely
            return _empty(partition, E.NONE, hi, lso, lo), 0
        fetch_offset = local_lo  # a gap between the tiers (nothing remote reaches it)
    # The store counts whole units (batch + ~100 bytes of unit header, topic, properties); ask
    # for a little more and trim by batch bytes below, so the limit is about what is sent.
    res = store.get_message("", topic, index, fetch_offset, MAX_RECORDS_PER_READ,
                            max_bytes=max(limit, 1) + limit // 4 + UNIT_OVERHEAD_ALLOWANCE,
                            head=_HEAD if files is not None else 0)
    parts = []
    size = 0
    last_offset = fetch_offset
    for unit, ref in zip(res.messages, res.units):
        if ref.queue_offset >= end:
            break  # read_committed: nothing at or past the last stable offset
        if len(unit) < ref.size:  # only the head was read: serve the batch from the file
            batch = _file_batch(store, unit, ref, files)
            if batch is None:
                break  # gone meanwhile (retention): the client asks again from here
        else:
            batch = batch_of_unit(unit)
        n = len(batch)
        if size + n > limit and not (min_one and not parts):
            break
        parts.append(batch)
        size += n
        last_offset = ref.queue_offset + ref.record_count
    hi = max(hi, res.max_offset) if res.max_offset is not None else hi
    resp = _empty(partition, E.NONE, hi, lso if lso < hi else hi, lo)
    if parts:
        # several batches stay separate buffers: the response writer sends them without joining
        resp["records"] = parts[0] if len(parts) == 1 and type(parts[0]) is not FileRun else parts
        if isolation == 1 and txn.has_aborted(topic, index):
            resp["aborted_transactions"] = [{"producer_id": pid, "first_offset": first}
                                            for pid, first in txn.aborted_between(topic, index, fetch_offset, last_offset)]
    return resp, size


def _remote_response(partition, units, limit, min_one, end, hi, lso, lo, txn, topic, index, fetch_offset,
                     isolation) -> tuple[dict, int]:
    """The answer built from units the remote tier returned: the same batches the local path
    would have served for them."""
    parts, size, last_offset = [], 0, fetch_offset
    for u in units:
        if u.queue_offset >= end:
            break
        batch = batch_of_unit(u.data)
        if size + len(batch) > limit and not (min_one and not parts):
            break
        parts.append(batch)
        size += len(batch)
        last_offset = u.queue_offset + u.record_count
    resp = _empty(partition, E.NONE, hi, lso if lso < hi else hi, lo)
    if parts:
        resp["records"] = parts[0] if len(parts) == 1 else parts
        if isolation == 1 and txn.has_aborted(topic, index):
            resp["aborted_transactions"] = [{"producer_id": pid, "first_offset": first}
                                            for pid, first in txn.aborted_between(topic, index, fetch_offset, last_offset)]
    return resp, size


async def read_remote_parts(gw, topics: list[dict]) -> dict | None:
    """For a store with a remote tier: the partitions whose fetch offset left the disk, read from
    the object store now (awaited: the loop keeps serving); None when the store has no remote tier."""
    if tiered.tier_of(gw.store) is None:
        return None
    out: dict = {}
    for t in topics:
        name = t.get("topic")
        for p in t.get("partitions") or ():
            partition, offset = p.get("partition", -1), p.get("fetch_offset", 0)
            queue, _ = local_queue(gw, name, partition)
            if queue is None or not tiered.remote_covers(gw.store, name, queue, offset):
                continue
            try:
                out[(name, partition)] = await tiered.read_remote(
                    gw.store, name, queue, offset, max(1, p.get("partition_max_bytes", 0)))
            except tiered.RemoteReadError as exc:
                out[(name, partition)] = exc
    return out


def _file_batch(store, head, ref, files: dict):
    """The batch of a unit of which only ``head`` was read: a ``FileRun`` when it is a stored
    Kafka batch large enough, else its bytes (read now); None when the unit is gone."""
    sys_flag = _I32.unpack_from(head, _SYSFLAG_POS)[0]
    if sys_flag & INNER_BATCH_FLAG:
        body_pos = 72 + (20 if sys_flag & BORNHOST_V6_FLAG else 8) + (20 if sys_flag & STOREHOST_V6_FLAG else 8)
        body_len = _I32.unpack_from(head, body_pos - 4)[0]
        if body_len >= ZERO_COPY_THRESHOLD:
            run = store_view.file_run(store, ref.commitlog_offset + body_pos, body_len, files)
            if run is not None:
                return FileRun(run[0], run[1], body_len, ref.record_count)
    unit = store_view.read_unit(store, ref.commitlog_offset, ref.size)
    return None if unit is None else batch_of_unit(unit)


def read_all(gw, topics: list[dict], max_bytes: int, isolation: int = 0,
             rack: str | None = None, sendfile: bool = False, remote: dict | None = None) -> tuple[list[dict], int, bool]:
    responses = []
    files = {} if sendfile else None
    total = 0
    errored = False
    for t in topics:
        name = t.get("topic")
        out = []
        for p in t.get("partitions") or ():
            budget = max_bytes - total
            limit = min(p.get("partition_max_bytes", 0), budget)
            resp, n = read_partition(gw, name, p.get("partition", -1), p.get("fetch_offset", 0), limit,
                                     min_one=total == 0, isolation=isolation, rack=rack, files=files,
                                     remote=remote)
            if resp["error_code"] != E.NONE or resp["preferred_read_replica"] >= 0:
                errored = True  # answer at once: the client has somewhere else to go
            total += n
            out.append(resp)
        responses.append({"topic": name, "partitions": out})
    return responses, total, errored


@api(key=1, min=4, max=17)
async def handle(ctx: RequestContext, body: dict) -> dict:
    gw = ctx.gateway
    fetch = gw.fetch_sessions.open(body, ctx.api_version)
    if fetch.error != E.NONE:
        return {"throttle_time_ms": 0, "error_code": fetch.error, "session_id": 0, "responses": []}
    topics = fetch.topics
    denied = []
    if authz.enabled(ctx) or any(t.get("topic") == "rmq_sys_SECURITY" for t in topics):
        _ok, names = authz.split_topics(ctx, authz.Op.READ, {t.get("topic") for t in topics})
        if names:
            denied = [{"topic": t.get("topic"), "partitions": [_empty(p.get("partition", -1), E.TOPIC_AUTHORIZATION_FAILED)
                                                              for p in t.get("partitions") or ()]}
                      for t in topics if t.get("topic") in names]
            topics = [t for t in topics if t.get("topic") not in names]
    max_wait_ms = max(0, body.get("max_wait_ms", 0))
    min_bytes = max(0, body.get("min_bytes", 1))
    max_bytes = body.get("max_bytes", 0x7FFFFFFF)
    if max_bytes <= 0:
        max_bytes = 0x7FFFFFFF
    # arrivals are reported by local queue (the partition id itself unless the topic spreads over groups)
    keys = [(t.get("topic"), q) for t in topics for p in t.get("partitions") or ()
            for q in [local_queue(gw, t.get("topic"), p.get("partition", -1))[0]] if q is not None]
    isolation = body.get("isolation_level", 0)
    rack = body.get("rack_id") or None
    sendfile = ctx.conn.extra.get("sendfile", False)
    remote = await read_remote_parts(gw, topics)
    if max_wait_ms == 0 or not keys or remote:
        responses, _, _ = read_all(gw, topics, max_bytes, isolation, rack, sendfile, remote)
    else:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + max_wait_ms / 1000.0
        woken = Wakeup(loop)
        # Register before reading so an arrival between the read and the wait is not missed.
        gw.arrivals.register(keys, woken)
        try:
            while True:
                woken.clear()
                responses, total, errored = read_all(gw, topics, max_bytes, isolation, rack, sendfile, remote)
                remaining = deadline - loop.time()
                if total >= min_bytes or errored or remaining <= 0:
                    break
                if not await woken.wait(remaining):
                    responses, _, _ = read_all(gw, topics, max_bytes, isolation, rack, sendfile, remote)
                    break
        finally:
            gw.arrivals.unregister(keys, woken)
    _count_out(responses)
    responses.extend(denied)
    session_id, responses = fetch.respond(responses)
    return {"throttle_time_ms": 0, "error_code": E.NONE, "session_id": session_id, "responses": responses}


def _count_out(responses: list[dict]) -> None:
    """Bytes and records served per topic (engine.metrics), from the batch headers only."""
    for t in responses:
        nbytes = records = 0
        for p in t["partitions"]:
            data = p["records"]
            for part in (data if isinstance(data, list) else (data,) if data else ()):
                nbytes += len(part)
                if type(part) is FileRun:
                    records += part.records
                else:
                    records += sum(record_count(b) for b in iter_batches(part))
        if nbytes:
            metrics.topic_out("kafka", t["topic"], nbytes, records)
