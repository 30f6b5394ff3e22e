"""Idempotent-producer state: producer ids, epochs and per-partition sequence numbers.

Owns ``<store.config_dir>/kafka_producer_state.json`` (format version 1, written atomically:
temp file, fsync, rename). It holds

- ``next_producer_id``: the first id not yet handed out. Ids are reserved in blocks of
  ``ID_BLOCK`` and the block end is persisted before any id of it is used, so an id is never
  handed out twice, even after a crash.
- ``transactional``: transactional.id -> (producer id, epoch); InitProducerId bumps the epoch,
  fencing older incarnations (the transactions work builds on this).
- ``producers``: per (topic, partition, producer id) the epoch and the last ``MAX_BATCHES``
  appended batches (first sequence, last sequence, base offset), as Kafka's
  ProducerStateManager keeps them.
- ``log_end``: each partition's next offset when the snapshot was taken. After a restart the
  gateway replays batch headers from there to the end of the log (``replay``), so state lost
  between the last snapshot and a crash is rebuilt from the log itself.

Sequence rules (Kafka's ProducerAppendInfo.checkSequence):
- a batch without a producer id is not checked;
- an epoch lower than the known one is INVALID_PRODUCER_EPOCH;
- a new epoch must start at sequence 0 (unless the producer was unknown);
- same epoch: the batch must start at last sequence + 1 (int32 wraps to 0); an exact repeat
  of one of the cached batches is a duplicate and is answered with its original offset and
  no new append; any other overlap is DUPLICATE_SEQUENCE_NUMBER, a gap is
  OUT_OF_ORDER_SEQUENCE_NUMBER;
- a producer with no state at all (never seen, or its records deleted) may start at any sequence;
- producers idle longer than ``producer_id_expiration_ms`` (1 day, Kafka's default) are
  forgotten at the next snapshot.

Not thread-safe: used from the event loop; the Produce handler serialises check -> append ->
record per partition.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

import structlog

from gateway_kafka import error_codes as E

log = structlog.get_logger("rockafka.kafka.producer_state")

FORMAT_VERSION = 1
FILE_NAME = "kafka_producer_state.json"
MAX_BATCHES = 5  # Kafka's max.in.flight.requests.per.connection limit for idempotence
ID_BLOCK = 1000
INT32_MAX = 2**31 - 1


class BatchMeta(NamedTuple):
    first_seq: int
    last_seq: int
    base_offset: int
    timestamp: int


@dataclass
class ProducerEntry:
    epoch: int
    batches: list[BatchMeta] = field(default_factory=list)


class Verdict(NamedTuple):
    error_code: int  # E.NONE: append (or duplicate when duplicate_of is set)
    duplicate_of: BatchMeta | None = None
    message: str | None = None


APPEND = Verdict(E.NONE)


def _next_seq(seq: int) -> int:
    return 0 if seq == INT32_MAX else seq + 1


def _last_seq(base_seq: int, last_offset_delta: int) -> int:
    return (base_seq + last_offset_delta) % (INT32_MAX + 1)


class ProducerStateManager:
    def __init__(self, state_dir: Path | str):
        self.path = Path(state_dir) / FILE_NAME
        self.next_producer_id = 0
        self._reserved_until = 0
        self.transactional: dict[str, tuple[int, int]] = {}
        # (topic, partition) -> producer id -> entry
        self.partitions: dict[tuple[str, int], dict[int, ProducerEntry]] = {}
        self.log_end: dict[tuple[str, int], int] = {}
        self.dirty = False

    # -- persistence -----------------------------------------------------------------------
    def load(self) -> None:
        if not self.path.exists():
            return
        try:
            data = json.loads(self.path.read_text("utf-8"))
        except (OSError, ValueError) as exc:
            # A torn or unreadable snapshot: ids stay safe (block reserved from the file's
            # mtime is unknown, so skip far ahead) and sequences are rebuilt by replay.
            log.warning("producer_state_unreadable", path=str(self.path), error=str(exc))
            self.next_producer_id = self._reserved_until = 1 << 40
            return
        if data.get("version") != FORMAT_VERSION:
            log.warning("producer_state_version_unknown", path=str(self.path), version=data.get("version"))
            self.next_producer_id = self._reserved_until = 1 << 40
            return
        # Everything below the reserved block end may have been handed out before a crash.
        self.next_producer_id = self._reserved_until = int(data.get("reserved_until", 0))
        self.transactional = {k: (int(v[0]), int(v[1])) for k, v in data.get("transactional", {}).items()}
        for key, producers in data.get("producers", {}).items():
            topic, _, part = key.rpartition("/")
            self.partitions[(topic, int(part))] = {
                int(pid): ProducerEntry(int(e["epoch"]), [BatchMeta(*b) for b in e["batches"]])
                for pid, e in producers.items()}
        for key, end in data.get("log_end", {}).items():
            topic, _, part = key.rpartition("/")
            self.log_end[(topic, int(part))] = int(end)

    def expire(self, now_ms: int, expiration_ms: int) -> int:
        """Forget producers whose last batch is older than ``expiration_ms`` (Kafka's
        producer.id.expiration.ms), so state does not grow with every short-lived producer.
        A forgotten producer that comes back is treated as new (any sequence accepted)."""
        dropped = 0
        for key, producers in self.partitions.items():
            for pid in [pid for pid, e in producers.items()
                        if not e.batches or now_ms - e.batches[-1].timestamp > expiration_ms]:
                del producers[pid]
                dropped += 1
        if dropped:
            self.dirty = True
        return dropped

    def save(self, log_end: dict[tuple[str, int], int] | None = None) -> None:
        """Write the snapshot atomically; ``log_end`` = each partition's next offset now."""
        if log_end is not None:
            self.log_end = dict(log_end)
        data = {
            "version": FORMAT_VERSION,
            "reserved_until": self._reserved_until,
            "transactional": {k: list(v) for k, v in self.transactional.items()},
            "producers": {f"{t}/{p}": {str(pid): {"epoch": e.epoch, "batches": [list(b) for b in e.batches]}
                                      for pid, e in producers.items()}
                          for (t, p), producers in self.partitions.items() if producers},
            "log_end": {f"{t}/{p}": end for (t, p), end in self.log_end.items()},
        }
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(".tmp")
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump(data, f, separators=(",", ":"))
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self.path)
        self.dirty = False

    # -- producer ids ----------------------------------------------------------------------
    def _allocate_id(self) -> int:
        if self.next_producer_id >= self._reserved_until:
            self._reserved_until = self.next_producer_id + ID_BLOCK
            self.save()  # the block is durable before any id of it is used
        pid = self.next_producer_id
        self.next_producer_id += 1
        return pid

    def init_producer_id(self, transactional_id: str | None, producer_id: int = -1,
                         producer_epoch: int = -1) -> tuple[int, int, int]:
        """InitProducerId: (error_code, producer_id, producer_epoch)."""
        if transactional_id is None:
            if producer_id >= 0:
                # KIP-360: an idempotent producer bumps its own epoch to reset sequences.
                if producer_epoch < 0:
                    return E.INVALID_REQUEST, -1, -1
                if producer_epoch >= 32766:
                    return E.NONE, self._allocate_id(), 0
                return E.NONE, producer_id, producer_epoch + 1
            return E.NONE, self._allocate_id(), 0
        known = self.transactional.get(transactional_id)
        if known is None:
            pid, epoch = self._allocate_id(), 0
        else:
            pid, epoch = known
            if producer_id >= 0 and (producer_id, producer_epoch) != known:
                return E.PRODUCER_FENCED, -1, -1
            epoch += 1
            if epoch >= 32767:  # epoch exhausted: a new id, as Kafka does
                pid, epoch = self._allocate_id(), 0
        self.transactional[transactional_id] = (pid, epoch)
        self.save()
        return E.NONE, pid, epoch

    # -- sequence checks -------------------------------------------------------------------
    def check(self, topic: str, partition: int, producer_id: int, epoch: int, base_seq: int,
              last_offset_delta: int) -> Verdict:
        if producer_id < 0:
            return APPEND
        entry = self.partitions.get((topic, partition), {}).get(producer_id)
        if entry is None:
            return APPEND
        if epoch < entry.epoch:
            return Verdict(E.INVALID_PRODUCER_EPOCH, None,
                           f"producer {producer_id} epoch {epoch} is older than current epoch {entry.epoch}")
        last_seq = _last_seq(base_seq, last_offset_delta)
        if epoch > entry.epoch:
            if base_seq != 0:
                return Verdict(E.OUT_OF_ORDER_SEQUENCE_NUMBER, None,
                               f"producer {producer_id} new epoch {epoch} must start at sequence 0, got {base_seq}")
            return APPEND
        for b in entry.batches:
            if b.first_seq == base_seq and b.last_seq == last_seq:
                return Verdict(E.NONE, b)
        if not entry.batches:
            return APPEND
        expected = _next_seq(entry.batches[-1].last_seq)
        if base_seq == expected:
            return APPEND
        first_cached = entry.batches[0].first_seq
        if first_cached <= base_seq <= entry.batches[-1].last_seq:
            return Verdict(E.DUPLICATE_SEQUENCE_NUMBER, None,
                           f"producer {producer_id} sequence {base_seq}..{last_seq} overlaps appended batches")
        return Verdict(E.OUT_OF_ORDER_SEQUENCE_NUMBER, None,
                       f"producer {producer_id} expected sequence {expected}, got {base_seq}")

    def record(self, topic: str, partition: int, producer_id: int, epoch: int, base_seq: int,
               last_offset_delta: int, base_offset: int, timestamp: int) -> None:
        """Remember an appended batch (after the store accepted it)."""
        if producer_id < 0:
            return
        producers = self.partitions.setdefault((topic, partition), {})
        entry = producers.get(producer_id)
        if entry is None or epoch != entry.epoch:
            entry = producers[producer_id] = ProducerEntry(epoch)
        entry.batches.append(BatchMeta(base_seq, _last_seq(base_seq, last_offset_delta), base_offset, timestamp))
        if len(entry.batches) > MAX_BATCHES:
            del entry.batches[0]
        self.dirty = True

    replay = record  # rebuilding from the log applies stored batch headers the same way

    def forget_topic(self, topic: str) -> None:
        for key in [k for k in self.partitions if k[0] == topic]:
            del self.partitions[key]
        for key in [k for k in self.log_end if k[0] == topic]:
            del self.log_end[key]
        self.dirty = True
