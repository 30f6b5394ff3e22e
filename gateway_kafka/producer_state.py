"""Idempotence checks of Produce (Kafka's ProducerAppendInfo.checkSequence).

The facts live in the engine: ``store.producer_state`` (``engine/producer_state.py``) keeps, per
partition and producer id, the epoch and the last five batches, derived from the batches in the
log as they are stored, checkpointed with the commitlog offset it describes and rebuilt from the
log after a crash — so what these rules see after a restart is exactly what was stored before it.
Producer ids themselves are handed out by the transaction coordinator (``txn_coordinator.py``),
from blocks recorded in ``__transaction_state``.

Rules:
- a batch without a producer id is not checked;
- an epoch lower than the known one is INVALID_PRODUCER_EPOCH;
- a new epoch must start at sequence 0 (unless the producer was unknown);
- same epoch: the batch must start at last sequence + 1 (int32 wraps to 0); an exact repeat of
  one of the cached batches is a duplicate, answered with its original offset and not stored
  again; any other overlap is DUPLICATE_SEQUENCE_NUMBER, a gap OUT_OF_ORDER_SEQUENCE_NUMBER;
- a producer with no state at all (never seen, or expired after producer_id_expiration_ms, or
  its records deleted) may start at any sequence.

The Produce handler serialises check -> append per partition, so two connections of one
producer cannot interleave their checks.
"""

from __future__ import annotations

from typing import NamedTuple

from engine.producer_state import INT32_MAX, BatchMeta, ProducerEntry, last_sequence
from gateway_kafka import error_codes as E


class Verdict(NamedTuple):
    error_code: int  # E.NONE: append (or duplicate when duplicate_of is set)
    duplicate_of: BatchMeta | None = None
    message: str | None = None


APPEND = Verdict(E.NONE)


def _next_seq(seq: int) -> int:
    return 0 if seq == INT32_MAX else seq + 1


def check_sequence(entry: ProducerEntry | None, producer_id: int, epoch: int, base_seq: int,
                   last_offset_delta: int) -> Verdict:
    """The verdict for one batch against the producer's entry in its partition (None: the
    producer is unknown there)."""
    if producer_id < 0 or entry is None:
        return APPEND
    if epoch < entry.epoch:
        return Verdict(E.INVALID_PRODUCER_EPOCH, None,
                       f"producer {producer_id} epoch {epoch} is older than current epoch {entry.epoch}")
    last_seq = last_sequence(base_seq, last_offset_delta)
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
    if entry.batches[0].first_seq <= base_seq <= entry.batches[-1].last_seq:
        return Verdict(E.DUPLICATE_SEQUENCE_NUMBER, None,
                       f"producer {producer_id} sequence {base_seq}..{last_seq} overlaps appended batches")
    return Verdict(E.OUT_OF_ORDER_SEQUENCE_NUMBER, None,
                   f"producer {producer_id} expected sequence {expected}, got {base_seq}")
