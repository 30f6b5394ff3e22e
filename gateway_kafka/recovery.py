"""Producer-state snapshot and rebuild from the log (runs in a worker thread).

``save_producer_state`` records each Kafka-visible partition's next offset (``log_end``) with
the snapshot. ``restore_producer_state`` loads the snapshot and replays the batch headers
stored after those offsets (from the log start for partitions the snapshot does not know), so
sequence state written after the last snapshot — e.g. before a crash — is rebuilt from the
log itself and a producer's retry after a restart is still recognised as a duplicate.
Only headers are read; records are never decoded.
"""

from __future__ import annotations

import time
from typing import Any

import structlog

from engine.record_batch import CorruptRecordError, parse_header
from gateway_kafka.producer_state import ProducerStateManager

log = structlog.get_logger("rockafka.kafka.recovery")

SCAN_BYTES = 1 << 20


def _partitions(store: Any) -> list[tuple[str, int]]:
    """Every queue the topic table names, and every queue that holds data (a replicated log
    may hold queues whose topic settings have not arrived yet)."""
    out = set(store.consume_queues())
    for name, tc in store.topic_config.all().items():
        for q in range(max(tc.read_queue_nums, tc.write_queue_nums)):
            out.add((name, q))
    return sorted(out)


def save_producer_state(store: Any, ps: ProducerStateManager, expiration_ms: int | None = None) -> None:
    if expiration_ms is not None:
        ps.expire(int(time.time() * 1000), expiration_ms)
    log_end = {(t, q): store.get_max_offset_in_queue(t, q) for t, q in _partitions(store)}
    ps.save(log_end)


def rebuild_producer_state_on_promotion(store: Any, ps: ProducerStateManager, epoch: int,
                                        max_records: int = 100_000) -> None:
    """A slave became master (failover): its sequence state is rebuilt from the replicated log
    alone — its own snapshot predates the log it now serves and may describe batches a
    truncation removed. Producer ids it hands out from here start at ``epoch << 40``: the
    former master may have handed out ids of its reserved block that no batch shows yet, and
    each master epoch owning its own range keeps two producers from sharing an id."""
    ps.load()  # ids and transactional ids; partition state is rebuilt below
    ps.partitions = {}
    ps.log_end = {}
    restore_producer_state(store, ps, max_records, load=False)
    seen = max((pid for producers in ps.partitions.values() for pid in producers), default=-1)
    start = max(ps.next_producer_id, seen + 1, epoch << 40)
    ps.next_producer_id = ps._reserved_until = start
    ps.dirty = True
    log.info("producer_state_rebuilt_on_promotion", epoch=epoch, next_producer_id=start,
             partitions_with_producers=len(ps.partitions))


def restore_producer_state(store: Any, ps: ProducerStateManager, max_records: int = 100_000,
                           load: bool = True) -> None:
    """Load the snapshot, then replay batch headers stored after it — at most the last
    ``max_records`` offsets of a partition, so a first start over a large existing log stays
    quick; a producer whose batches all lie before that window counts as unknown (any
    sequence accepted), as in Kafka once a producer's state has expired."""
    from gateway_kafka.apis._common import stored_batch

    if load:
        ps.load()
    replayed = 0
    scanned: dict[str, int] = {}
    for topic, q in _partitions(store):
        lo = store.get_min_offset_in_queue(topic, q)
        hi = store.get_max_offset_in_queue(topic, q)
        offset = max(lo, hi - max_records, ps.log_end.get((topic, q), lo))
        for _ in range(1_000_000):
            if offset >= hi:
                break
            res = store.get_message("", topic, q, offset, 100_000, max_bytes=SCAN_BYTES)
            if not res.messages:
                break
            for unit in res.messages:
                batch = stored_batch(unit)
                if batch is None:
                    continue  # natively produced: no producer id
                try:
                    h = parse_header(batch)
                except (CorruptRecordError, ValueError):
                    continue
                # transaction markers carry no sequence; the placeholders of delayed records
                # (control batches too) carry the delayed record's
                if h.producer_id >= 0 and (not h.is_control or h.base_sequence >= 0):
                    ps.replay(topic, q, h.producer_id, h.producer_epoch, h.base_sequence, h.last_offset_delta,
                              h.base_offset, h.max_timestamp)
                    replayed += 1
                    scanned[f"{topic}/{q}"] = scanned.get(f"{topic}/{q}", 0) + 1
            if res.next_begin_offset <= offset:
                break
            offset = res.next_begin_offset
    log.info("producer_state_restored", path=str(ps.path), partitions_with_producers=len(ps.partitions),
             batches_replayed=replayed, replayed_by_partition=scanned if len(scanned) <= 32 else len(scanned))
