"""ListOffsets (key 2), versions 1-10.

Per partition, by the requested timestamp:
- -2 (earliest): the log start offset (the remote start of a tiered partition whose oldest data
  left the disk, docs/design/tiered-storage.md); -4 (earliest local): the local start; -1 (latest): the high
  watermark, or with isolation level 1 (read_committed, v2+) the last stable offset (the first
  offset of the oldest open transaction, the engine's producer state); -5 (latest tiered): the
  last offset uploaded to the remote tier, -1 when none.
- -3 (max timestamp, v7+): the offset and timestamp of the record with the largest
  timestamp; -1/-1 when the partition is empty.
- On a tiered topic, t >= 0 first searches the offsets that left the disk
  (``remote_offset_for_time``, reading the remote tier; KAFKA_STORAGE_ERROR when it fails).
- t >= 0: the first offset whose *record* timestamp (CreateTime as produced, not the store
  time) is >= t, with that record's timestamp; -1/-1 when no record is at or after t.

Timestamp lookup reads batch headers (max timestamp) and decodes only the batch that holds
the answer. It starts at the store's time index for ``t - list_offsets_time_skew_ms`` (store
times are at or after the CreateTime of a producer whose clock is at most that far ahead),
rather than at the log start, so it does not usually read the whole partition; when nothing
is found from there it scans the skipped head too, so the answer is exact whatever the
producers' clocks (a "no record at or after t" answer therefore reads the partition).
"""

from __future__ import annotations

from gateway_kafka import authz
from gateway_kafka import error_codes as E
from gateway_kafka.apis import RequestContext, api
from gateway_kafka.apis._common import batch_of_unit, blocking, local_queue
from engine.record_batch import decode_batch, parse_header
from broker import tiered

EARLIEST, LATEST, MAX_TIMESTAMP, EARLIEST_LOCAL, LATEST_TIERED = -2, -1, -3, -4, -5
SCAN_BYTES = 1 << 20


def _scan(store, topic: str, index: int, start: int, end: int):
    """Yield (header, batch) for each stored batch from logical offset ``start`` to ``end``."""
    offset = start
    guard = 0
    while offset < end and guard < 10_000_000:
        res = store.get_message("", topic, index, offset, 100_000, max_bytes=SCAN_BYTES)
        if not res.messages:
            return
        for unit in res.messages:
            batch = batch_of_unit(unit)
            yield parse_header(batch), batch
        if res.next_begin_offset <= offset:
            return
        offset = res.next_begin_offset
        guard += 1


def offset_for_time(store, topic: str, index: int, target: int, skew_ms: int) -> tuple[int, int]:
    lo = store.get_min_offset_in_queue(topic, index)
    hi = store.get_max_offset_in_queue(topic, index)
    if lo >= hi:
        return -1, -1
    start = lo
    if skew_ms >= 0:
        start = min(hi, max(lo, store.get_offset_in_queue_by_time(topic, index, max(0, target - skew_ms))))
    found = _first_at_or_after(store, topic, index, start, hi, lo, target)
    if found is None and start > lo:
        # a producer clock further ahead than the skew: fall back to the part skipped
        found = _first_at_or_after(store, topic, index, lo, start, lo, target)
    return found or (-1, -1)


def _first_at_or_after(store, topic: str, index: int, start: int, end: int, lo: int,
                       target: int) -> tuple[int, int] | None:
    for header, batch in _scan(store, topic, index, start, end):
        if header.max_timestamp < target:
            continue
        h, records = decode_batch(batch)
        for rec in records:
            ts = rec.absolute_timestamp(h)
            off = rec.absolute_offset(h)
            if ts >= target and off >= lo:
                return off, ts
    return None


def max_timestamp_offset(store, topic: str, index: int) -> tuple[int, int]:
    lo = store.get_min_offset_in_queue(topic, index)
    hi = store.get_max_offset_in_queue(topic, index)
    best = None
    for header, batch in _scan(store, topic, index, lo, hi):
        if best is None or header.max_timestamp > best[0].max_timestamp:
            best = (header, batch)
    if best is None:
        return -1, -1
    h, records = decode_batch(best[1])
    top = max(records, key=lambda r: r.absolute_timestamp(h), default=None)
    if top is None:
        return -1, -1
    return top.absolute_offset(h), top.absolute_timestamp(h)


async def remote_offset_for_time(gw, topic: str, index: int, target: int) -> tuple[int, int] | None:
    """The first record at or after ``target`` among the offsets that left the disk of a tiered
    partition (docs/design/tiered-storage.md): from the remote segments' store times (minus the
    skew, as locally), then batch headers of the units read remotely; None when it is not there
    (the local lookup answers). Raises ``tiered.RemoteReadError``."""
    store = gw.store
    local_lo = store.get_min_offset_in_queue(topic, index)
    start = tiered.log_start_offset(store, topic, index)
    if start >= local_lo:
        return None
    skew = gw.settings.list_offsets_time_skew_ms
    if skew >= 0:
        start = max(start, await tiered.offset_by_time(store, topic, index, max(0, target - skew)))
    offset = start
    while offset < local_lo:
        units = await tiered.read_remote(store, topic, index, offset, SCAN_BYTES)
        if not units:
            return None
        for u in units:
            batch = batch_of_unit(u.data)
            if parse_header(batch).max_timestamp < target:
                continue
            h, records = decode_batch(batch)
            for rec in records:
                if rec.absolute_timestamp(h) >= target and rec.absolute_offset(h) >= start:
                    return rec.absolute_offset(h), rec.absolute_timestamp(h)
        offset = units[-1].queue_offset + units[-1].record_count
    return None


def lookup(gw, topic: str, index: int, timestamp: int, isolation: int = 0) -> tuple[int, int, int]:
    """(error_code, offset, timestamp)."""
    queue, code = local_queue(gw, topic, index)
    if queue is None:
        return code, -1, -1
    index = queue  # the store's queue id (cluster.md)
    store = gw.store
    if timestamp == EARLIEST:
        return E.NONE, tiered.log_start_offset(store, topic, index), -1
    if timestamp == EARLIEST_LOCAL:
        return E.NONE, store.get_min_offset_in_queue(topic, index), -1
    if timestamp == LATEST:
        hw = store.get_max_offset_in_queue(topic, index)
        if isolation == 1:
            return E.NONE, store.producer_state.last_stable_offset(topic, index, hw), -1
        return E.NONE, hw, -1
    if timestamp == LATEST_TIERED:
        tier = tiered.tier_of(store)
        end = tier.manifest.remote_end(topic, index) if tier is not None else None
        return E.NONE, -1 if end is None else end - 1, -1
    if timestamp == MAX_TIMESTAMP:
        off, ts = max_timestamp_offset(store, topic, index)
        return E.NONE, off, ts
    if timestamp < 0:
        return E.INVALID_REQUEST, -1, -1
    off, ts = offset_for_time(store, topic, index, timestamp, gw.settings.list_offsets_time_skew_ms)
    return E.NONE, off, ts


@api(key=2, min=1, max=10)
async def handle(ctx: RequestContext, body: dict) -> dict:
    gw = ctx.gateway
    topics = []
    for t in body.get("topics") or ():
        name = t.get("name")
        parts = []
        if not authz.topic(ctx, authz.Op.DESCRIBE, name):
            topics.append({"name": name, "partitions": [
                {"partition_index": p.get("partition_index", -1), "error_code": E.TOPIC_AUTHORIZATION_FAILED,
                 "timestamp": -1, "offset": -1, "leader_epoch": -1} for p in t.get("partitions") or ()]})
            continue
        for p in t.get("partitions") or ():
            index = p.get("partition_index", -1)
            ts = p.get("timestamp", LATEST)
            if ts in (EARLIEST, LATEST, EARLIEST_LOCAL, LATEST_TIERED):
                code, off, rts = lookup(gw, name, index, ts, body.get("isolation_level", 0))
            else:  # may read and decode batches: keep it off the event loop
                found = None
                queue = local_queue(gw, name, index)[0]
                if ts >= 0 and queue is not None and tiered.tier_of(gw.store) is not None:
                    try:
                        found = await remote_offset_for_time(gw, name, queue, ts)
                    except tiered.RemoteReadError:
                        found = (E.KAFKA_STORAGE_ERROR, -1, -1)
                if found is None:
                    code, off, rts = await blocking(lookup, gw, name, index, ts)
                elif len(found) == 3:
                    code, off, rts = found
                else:
                    code, (off, rts) = E.NONE, found
            parts.append({"partition_index": index, "error_code": code, "timestamp": rts, "offset": off,
                          "leader_epoch": gw.cluster.leader_epoch(name, index) if code == E.NONE else -1})
        topics.append({"name": name, "partitions": parts})
    return {"throttle_time_ms": 0, "topics": topics}
