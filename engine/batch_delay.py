"""Delayed Kafka records: the reserved headers ``rmq.delay.level`` and ``rmq.deliver.ms``.

A Kafka producer asks for a delay per record with a header (value as ASCII digits):

    rmq.delay.level   a delay level, 1..N of ``messageDelayLevel`` (above N -> N)
    rmq.deliver.ms    an absolute delivery time, epoch ms (a timer message, at most
                      ``timerMaxDelaySec`` away)

Owns the split done in ``MessageStore.put_record_batch``: a batch none of whose records carries
such a header is stored as it is (one INNER_BATCH unit, no per-record work). Detection is a
byte search for ``rmq.de`` over the batch (over its decompressed payload for compressed
batches, which costs one decompression per compressed batch; ``kafkaDelayHeadersEnable=false``
turns the feature and its cost off). A batch that has delayed records is split:

- every delayed record becomes a native message (the shared mapping of
  ``engine.batch_convert``: key -> KEYS, headers -> properties, reserved headers -> tags/keys),
  with DELAY or TIMER_DELIVER_MS instead of its delay header, staged by the store like any
  delayed message; when due it is appended to the same partition, gets its offset there and
  Kafka consumers read it as a one-record batch (the delay header is gone, the others remain);
- the batch's offsets are kept: each run of undelayed records is re-encoded (uncompressed,
  offset deltas from 0, producer id / epoch kept, base sequence advanced to the run's first
  record) as its own batch, and each delayed record's offset holds a placeholder, a control
  batch with one COMMIT marker and the record's sequence (``placeholder_batch``), which Kafka
  consumers skip like transaction markers and native consumers expand to nothing. All are stored
  together (``MessageStore.put_record_batches``), so the producer's base offset + index is
  right for every undelayed record; a delayed record's delivery report names its placeholder.

Transactional and control batches are never split (their records must stay together).
Invalid header values (not digits) leave the record undelayed, with the header kept, so a
producer can see what it sent.
"""

from __future__ import annotations

import re
from typing import Any

from . import batch_convert as bc
from . import record_batch as rb
from .message import (KEY_SEPARATOR, PROPERTY_DELAY_TIME_LEVEL, PROPERTY_KEYS, PROPERTY_TAGS,
                      PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX, Message, MessageExt)

HEADER_DELAY_LEVEL = bc.HEADER_DELAY_LEVEL
HEADER_DELIVER_MS = bc.HEADER_DELIVER_MS
_MARK = b"rmq.de"  # common prefix of both header names
_MEMMEM_MIN = 4096  # below this a call into libc costs more than Python's own search


def _libc_memmem() -> Any:
    """glibc's memmem through ctypes: 2-6x faster than ``bytes.__contains__`` on large batches,
    and it runs without the GIL. None where there is no such libc function."""
    try:
        import ctypes
        import ctypes.util

        fn = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6").memmem
    except (OSError, AttributeError):
        return None
    fn.restype = ctypes.c_void_p
    fn.argtypes = [ctypes.c_char_p, ctypes.c_size_t, ctypes.c_char_p, ctypes.c_size_t]
    return fn


_memmem = _libc_memmem()
_MARK_RE = re.compile(re.escape(_MARK))

try:  # the compiled search takes any buffer, read-only views too (engine/_recordwalk.c)
    from ._recordwalk import contains as _contains_compiled
except ImportError:  # built without a C compiler: the searches below
    _contains_compiled = None


def _contains_mark(data: Any) -> bool:
    """Whether the delay headers' common prefix occurs in ``data``: bytes, bytearray or a view
    (a produce request's batch arrives as a read-only view of the request: ``in`` on a
    memoryview compares single bytes, never a subsequence, so views are searched explicitly)."""
    if _contains_compiled is not None:
        return _contains_compiled(data, _MARK)
    if isinstance(data, bytes):
        if _memmem is not None and len(data) >= _MEMMEM_MIN:
            return _memmem(data, len(data), _MARK, len(_MARK)) is not None
        return _MARK in data
    return _MARK_RE.search(data) is not None  # re reads any buffer without copying it


def may_have_delay_headers(batch: bytes, header: rb.BatchHeader) -> bool:
    if header.is_transactional or header.is_control:
        return False
    if header.compression == rb.COMPRESSION_NONE:
        return _contains_mark(batch)
    payload = memoryview(batch)[rb.HEADER_SIZE:header.size]
    try:
        if _contains_compiled is not None:  # searches the thread's scratch buffer in place
            return _contains_compiled(rb.decompress_scratch(header.compression, payload), _MARK)
        return _contains_mark(rb.decompress(header.compression, payload))
    except (ValueError, rb.CorruptRecordError):
        return False  # stored as is; readers report the corruption as for any batch


def _delay_of(record: rb.Record) -> tuple[str, str] | None:
    """(property, value) the record's delay header asks for, or None."""
    for name, value in record.headers:
        if name in (HEADER_DELAY_LEVEL, HEADER_DELIVER_MS) and value is not None:
            text = bytes(value).decode("ascii", "replace").strip()
            if text.isdigit():
                return (PROPERTY_DELAY_TIME_LEVEL if name == HEADER_DELAY_LEVEL else "TIMER_DELIVER_MS"), text
    return None


def _to_message(topic: str, queue_id: int, record: rb.Record, header: rb.BatchHeader, prop: tuple[str, str],
                born_host: Any, store_host: Any) -> Message:
    kept = [(n, v) for n, v in record.headers if n not in (HEADER_DELAY_LEVEL, HEADER_DELIVER_MS)]
    plain = rb.Record(0, record.timestamp_delta, record.key, record.value, kept, record.attributes)
    stub = MessageExt(topic=topic, body=b"", queue_id=queue_id, store_host=store_host or ("127.0.0.1", 0))
    props = bc.record_properties(plain, stub, 0)
    props.pop(bc.PROPERTY_KAFKA_PARTITION, None)
    props.pop(bc.PROPERTY_KAFKA_OFFSET, None)
    if not any(n == bc.HEADER_UNIQ_KEY for n, _ in kept):
        props.pop(PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX, None)  # derived from a stub: the stored offset id serves
    tags = props.pop(PROPERTY_TAGS, None)
    keys = props.pop(PROPERTY_KEYS, None)
    props[prop[0]] = prop[1]
    return Message(topic=topic, body=bytes(record.value) if record.value is not None else b"", tags=tags,
                   keys=keys.split(KEY_SEPARATOR) if keys else None, properties=props, queue_id=queue_id,
                   born_timestamp=record.absolute_timestamp(header), born_host=born_host, store_host=store_host)


def put_split_batch(store: Any, topic: str, queue_id: int, batch: bytes, *, born_host: Any = None,
                    store_host: Any = None, properties: dict | None = None, sync_replicas: bool | None = None,
                    max_size: int | None = None) -> Any:
    """Stage the delayed records; store the batch's offsets as runs of undelayed records and one
    placeholder per delayed record, so every record keeps the offset its producer computes.
    Returns a PutMessageResult whose queue offset is the batch's base offset."""
    try:
        header, records = rb.decode_batch(batch)
    except (ValueError, rb.CorruptRecordError) as exc:
        return store._refuse(store_status("MESSAGE_ILLEGAL"), f"invalid record batch: {exc}")
    delays = [_delay_of(rec) for rec in records]
    if not any(delays):
        return store.put_record_batch(topic, queue_id, batch, born_host=born_host, store_host=store_host,
                                      properties=properties, delay_headers=False, sync_replicas=sync_replicas,
                                      max_size=max_size)
    for rec, d in zip(records, delays):
        if d:
            res = store.put_message(_to_message(topic, queue_id, rec, header, d, born_host, store_host))
            if not res.stored:
                return res
    parts: list[bytes] = []
    run: list[int] = []

    def close_run() -> None:
        if run:
            parts.append(_sub_batch(header, [records[i] for i in run], run[0]))
            run.clear()

    for i, d in enumerate(delays):
        if d:
            close_run()
            parts.append(placeholder_batch(records[i].absolute_timestamp(header), header, i))
        else:
            run.append(i)
    close_run()
    return store.put_record_batches(topic, queue_id, parts, born_host=born_host, store_host=store_host,
                                    properties=properties, sync_replicas=sync_replicas, max_size=max_size,
                                    producer_batch=header)


def placeholder_batch(timestamp: int, header: rb.BatchHeader | None = None, index: int = 0) -> bytes:
    """What stands at a delayed record's offset: a control batch holding one COMMIT marker.
    Kafka consumers skip control batches (as they skip transaction markers), native consumers
    expand them to nothing; the record itself appears at a later offset when due. It carries
    the producer id, epoch and the delayed record's sequence number (``index`` in its batch) of
    an idempotent producer, so idempotence state rebuilt from the log after a crash ends where
    the producer's batch ended (transaction markers carry no sequence; that tells them apart)."""
    pid, epoch, seq = rb.NO_PRODUCER_ID, rb.NO_PRODUCER_EPOCH, rb.NO_SEQUENCE
    if header is not None and header.producer_id >= 0 and header.base_sequence >= 0:
        pid, epoch, seq = header.producer_id, header.producer_epoch, (header.base_sequence + index) % (1 << 31)
    return rb.build_batch([rb.Record(0, 0, rb.control_key(rb.CONTROL_TYPE_COMMIT), rb.control_value(0), [])],
                          producer_id=pid, producer_epoch=epoch, base_sequence=seq, is_control=True,
                          base_timestamp=timestamp)


def _sub_batch(header: rb.BatchHeader, records: list[rb.Record], first_index: int) -> bytes:
    """Records ``first_index``.. of a batch as their own uncompressed batch, offset deltas from 0
    and the sequence number the first of them had (so idempotence state rebuilt from the log
    matches what the producer sent)."""
    renumbered = [rb.Record(i, r.timestamp_delta, r.key, r.value, r.headers, r.attributes)
                  for i, r in enumerate(records)]
    seq = header.base_sequence
    if seq >= 0:
        seq = (seq + first_index) % (1 << 31)  # sequences wrap at Int32.MAX_VALUE, as Kafka's
    return rb.build_batch(renumbered, base_timestamp=header.base_timestamp, producer_id=header.producer_id,
                          producer_epoch=header.producer_epoch, base_sequence=seq,
                          timestamp_type=header.timestamp_type, partition_leader_epoch=header.partition_leader_epoch)


def store_status(name: str) -> Any:
    from .store_types import PutMessageStatus

    return PutMessageStatus[name]
