"""The store's put path: checks, encoding and the append of units to the commitlog under the put
lock, and the write refusals (slave, lease, disk full, page-cache busy). Part of
``engine.store.MessageStore`` (a mixin: every method runs on the store itself; the lock, the
invariants and the facade are documented in engine/store.py).

A Kafka batch of ``SPLIT_MIN`` bytes or more is never copied here: it may be a read-only view of
the request it arrived in, and its unit is a ``commitlog.SplitUnit`` whose small head (fixed
fields and the batch header) is the only part patched; the bytes written equal a contiguous
unit's.
"""

from __future__ import annotations

import struct
import time

import structlog

from . import batch_delay, metrics, record_batch
from .commitlog import SplitUnit
from .disk_space import is_disk_full
from .message import INNER_BATCH_FLAG, crc32, Message, PROPERTY_DELAY_TIME_LEVEL, PROPERTY_TAGS, body_crc, encode_properties, encode_unit, parse_host, patch_unit, tags_code
from .state_log import INTERNAL_TOPICS
from .store_types import PUT_LOCK_MAX_WAIT_FACTOR, PutMessageResult, PutMessageStatus, _I32, _MAX_QUEUE_ID, _body_pos, _now_ms, _tail_len, _unit_msg_id
from .timer_message import TIMER_PROPERTIES, TimerMessageError
from .topic_config import topic_name_error

log = structlog.get_logger("rockafka.engine.store")  # the store's events, one logger

# properties that send a message to a staging topic first (a delay level, a timer)
_STAGING_PROPERTIES = frozenset((PROPERTY_DELAY_TIME_LEVEL, *TIMER_PROPERTIES))

# A Kafka batch of this many bytes or more is not copied into its unit: the unit is written as
# a ``SplitUnit`` (fixed fields + the batch header, then the rest of the batch as it arrived,
# then topic and properties) with one ``pwritev`` (commitlog segments: file_io.PWRITE_MIN).
SPLIT_MIN = 4096


def _head(unit):
    """The buffer holding a unit's fixed fields (the whole unit unless it is split)."""
    return unit.head if type(unit) is SplitUnit else unit


def _unit_body(unit) -> memoryview | bytes:
    """A unit's body: a view of it, or (split) the body joined (small control batches only are
    ever split this way in practice: read for transaction markers)."""
    if type(unit) is SplitUnit:
        head = unit.head
        return bytes(memoryview(head)[_body_pos(head):]) + bytes(unit.rest)
    body_pos = _body_pos(unit)
    return memoryview(unit)[body_pos:len(unit) - _tail_len(unit, body_pos)]


def _unit_body_crc(unit, body_pos: int) -> int:
    """BODYCRC of a unit (engine.message.body_crc), across a split unit's pieces."""
    if type(unit) is SplitUnit:
        return crc32(unit.rest, crc32(memoryview(unit.head)[body_pos:])) & 0x7FFFFFFF
    return body_crc(memoryview(unit)[body_pos:len(unit) - _tail_len(unit, body_pos)])


class StorePuts:
    # ------------------------------------------------------------------ validation
    def _check_topic(self, topic: str) -> str | None:
        return topic_name_error(topic, self.config.max_topic_length)

    def _refuse(self, status: PutMessageStatus, error: str) -> PutMessageResult:
        return PutMessageResult(status=status, error=error)

    def _check_writable(self, topic: str | None = None) -> PutMessageResult | None:
        """Why a put must be refused now, or None. Records of the internal state topics
        (coordinator state: offsets, group and transaction records, a few hundred bytes each)
        are not held to diskSpaceWarningLevelRatio, only to the space really left (reserved
        before writing), so consumer groups keep working while a full disk refuses messages."""
        if not self.running:
            return self._refuse(PutMessageStatus.SERVICE_NOT_AVAILABLE, "message store is not running")
        if self.is_slave:
            return self._refuse(PutMessageStatus.SERVICE_NOT_AVAILABLE,
                                "this broker is a slave (brokerRole=SLAVE): its log is written by replication only; "
                                "write to the master of the group")
        if not self.ha.lease_valid():
            return self._refuse(PutMessageStatus.SERVICE_NOT_AVAILABLE,
                                "master lease expired: the failover controller has not confirmed this broker as "
                                "master recently (cut off, or another broker was elected); write to the current master")
        if topic not in INTERNAL_TOPICS and not self.disk.writable(self.confirmed_offset):
            return self._refuse_disk_full()
        return None

    def _refuse_disk_full(self) -> PutMessageResult:
        self.disk.puts_refused += 1
        return PutMessageResult(status=PutMessageStatus.SERVICE_NOT_AVAILABLE, error=self.disk.refuse_message(),
                                disk_full=True)

    @property
    def disk_full(self) -> bool:
        return self.disk.full

    def is_os_page_cache_busy(self) -> bool:
        """A put has held the commitlog lock longer than osPageCacheBusyTimeOutMills (RocketMQ's check)."""
        begin = self._begin_time_in_lock
        return bool(begin) and time.monotonic() - begin > self.config.os_page_cache_busy_time_out_mills / 1000.0

    @property
    def put_would_wait(self) -> bool:
        """Another put holds the commitlog now: a caller that must not block (an event loop)
        hands its put to a thread instead."""
        return self._put_lock.locked()

    def _lock_for_put(self) -> bool:
        """Take the put lock, waiting at most ``PUT_LOCK_MAX_WAIT_FACTOR`` x
        osPageCacheBusyTimeOutMills; False = busy. RocketMQ refuses a put as soon as the holder
        has had the lock for one window; on a machine short of CPU the holder is merely slow
        (descheduled), and a refusal there is an error the client did not cause, so the wait
        is longer, still well inside a client's send timeout (3 s for RocketMQ's producer at
        the default 1 s window)."""
        lock = self._put_lock
        if not lock.acquire(False):
            limit = self.config.os_page_cache_busy_time_out_mills / 1000.0
            if not lock.acquire(timeout=limit * PUT_LOCK_MAX_WAIT_FACTOR):
                return False
        self._begin_time_in_lock = time.monotonic()
        return True

    def _unlock_for_put(self) -> None:
        self._begin_time_in_lock = 0.0
        self._put_lock.release()

    def _topic_bytes(self, topic: str) -> tuple[bytes | None, str | None]:
        cached = self._topic_cache.get(topic)
        if cached is None:
            err = self._check_topic(topic)
            cached = (None if err else topic.encode("utf-8"), err)
            if len(self._topic_cache) > 10_000:
                self._topic_cache.clear()
            self._topic_cache[topic] = cached
        return cached

    def _encode(self, msg: Message, sys_flag: int | None = None, crc: int | None = None,
                max_size: int | None = None) -> tuple[bytearray | None, PutMessageResult | None, int]:
        if not isinstance(msg.topic, str):
            return None, self._refuse(PutMessageStatus.MESSAGE_ILLEGAL, f"topic must be a string, not {type(msg.topic).__name__}"), 0
        topic_bytes, err = self._topic_bytes(msg.topic)
        if err:
            return None, self._refuse(PutMessageStatus.MESSAGE_ILLEGAL, err), 0
        if not isinstance(msg.queue_id, int) or not 0 <= msg.queue_id <= _MAX_QUEUE_ID:
            return None, self._refuse(PutMessageStatus.MESSAGE_ILLEGAL, f"queue id {msg.queue_id!r} is outside 0..{_MAX_QUEUE_ID}"), 0
        body = msg.body
        if not isinstance(body, (bytes, bytearray)):
            if not isinstance(body, memoryview):
                return None, self._refuse(PutMessageStatus.MESSAGE_ILLEGAL, f"message body must be bytes, not {type(body).__name__}"), 0
            body = bytes(body)
        limit = self.config.max_message_size if max_size is None else max_size
        if len(body) > limit:
            what = f"maxMessageSize {limit}" if max_size is None else f"the topic's limit {limit}"
            return None, self._refuse(PutMessageStatus.MESSAGE_ILLEGAL,
                                      f"message body is {len(body)} bytes, more than {what}"), 0
        if msg.properties or msg.tags or msg.keys:
            # no copy when there are no tags and keys to add (a native send's usual message)
            props_in = msg.properties
            all_props = props_in if type(props_in) is dict and not (msg.tags or msg.keys) else msg.all_properties()
            try:
                props = encode_properties(all_props)
            except UnicodeEncodeError as exc:
                return None, self._refuse(PutMessageStatus.MESSAGE_ILLEGAL, f"properties are not encodable as UTF-8: {exc}"), 0
            if props.count(b"\x01") != len(all_props) or props.count(b"\x02") != len(all_props):
                return None, self._refuse(PutMessageStatus.MESSAGE_ILLEGAL,
                                          "a property name or value contains \\x01 or \\x02, the properties separators"), 0
        else:
            props = b""
        if len(props) > self.config.max_properties_length or len(props) > 32767:
            return None, self._refuse(PutMessageStatus.PROPERTIES_SIZE_EXCEEDED,
                                      f"properties are {len(props)} bytes, more than the limit {min(self.config.max_properties_length, 32767)}"), 0
        try:
            unit = encode_unit(
                topic=topic_bytes, body=body, props=props, queue_id=msg.queue_id, flag=msg.flag,
                sys_flag=msg.sys_flag if sys_flag is None else sys_flag,
                born_timestamp=_now_ms() if msg.born_timestamp is None else msg.born_timestamp,
                born_host=parse_host(msg.born_host),
                store_host=parse_host(msg.store_host) if msg.store_host is not None else self.store_host,
                reconsume_times=msg.reconsume_times, prepared_transaction_offset=msg.prepared_transaction_offset,
                crc=crc)
        except (ValueError, struct.error) as exc:
            return None, self._refuse(PutMessageStatus.MESSAGE_ILLEGAL, f"message cannot be encoded: {exc}"), 0
        if not self.commitlog.fits_in_segment(len(unit)):
            return None, self._refuse(PutMessageStatus.MESSAGE_ILLEGAL,
                                      f"message unit is {len(unit)} bytes, larger than a commitlog segment "
                                      f"(mappedFileSizeCommitLog {self.config.mapped_file_size_commit_log})"), 0
        return unit, None, tags_code(msg.tags)

    # ------------------------------------------------------------------ writes
    def put_message(self, msg: Message, sync_replicas: bool | None = None) -> PutMessageResult:
        """Store one message. ``sync_replicas`` as in ``put_record_batch`` (None: SYNC_MASTER
        waits for the slaves here; False: the caller waits with ``ha.wait_replicated``)."""
        refused = self._check_writable()
        if refused:
            return refused
        staged_tcode = None
        props = msg.properties
        if props and not _STAGING_PROPERTIES.isdisjoint(props):  # not a generator per message
            # RocketMQ's put path: a delayed message is stored in its staging topic, with the
            # delivery time as its consume-queue tags code; half and rollback messages never are
            if msg.sys_flag & 0xC not in (0x4, 0xC):
                try:
                    staged = self.schedule.rewrite(msg) or self.timer.rewrite(msg)
                except TimerMessageError as exc:
                    return self._refuse(PutMessageStatus.MESSAGE_ILLEGAL, str(exc))
                if staged is not None:
                    msg, staged_tcode = staged
        unit, refused, tcode = self._encode(msg)
        if refused:
            return refused
        if staged_tcode is not None:
            tcode = staged_tcode
        return self._append(msg.topic, msg.queue_id, [(unit, tcode, 1)], wait=self._wants_wait(msg),
                            sync_replicas=sync_replicas)

    def put_messages(self, msgs: list[Message], sync_replicas: bool | None = None) -> PutMessageResult:
        """RocketMQ batch: one unit per message, same topic and queue, contiguous offsets."""
        refused = self._check_writable()
        if refused:
            return refused
        if not msgs:
            return self._refuse(PutMessageStatus.MESSAGE_ILLEGAL, "empty message batch")
        topic, qid = msgs[0].topic, msgs[0].queue_id
        encoded = []
        total = 0
        for m in msgs:
            if m.topic != topic or m.queue_id != qid:
                return self._refuse(PutMessageStatus.MESSAGE_ILLEGAL, "all messages of a batch must have the same topic and queue id")
            unit, refused, tcode = self._encode(m)
            if refused:
                return refused
            total += len(unit)
            encoded.append((unit, tcode, 1))
        if total > self.config.max_message_size:
            return self._refuse(PutMessageStatus.MESSAGE_ILLEGAL,
                                f"batch is {total} bytes, more than maxMessageSize {self.config.max_message_size}")
        return self._append(topic, qid, encoded, wait=self._wants_wait(msgs[0]), sync_replicas=sync_replicas)

    def put_record_batch(self, topic: str, queue_id: int, batch, *, born_host=None, store_host=None,
                         properties: dict | None = None, delay_headers: bool = True,
                         sync_replicas: bool | None = None, max_size: int | None = None) -> PutMessageResult:
        """Store one Kafka RecordBatch v2 as one INNER_BATCH unit with N queue offsets.

        Records with a delay header (``rmq.delay.level`` / ``rmq.deliver.ms``) are split off and
        staged (``engine.batch_delay``) unless ``delay_headers`` is False. ``sync_replicas``:
        None waits for the slaves as ``brokerRole`` says (SYNC_MASTER), False never (the caller
        waits itself with ``ha.wait_replicated``, e.g. Kafka's acks), True always. ``max_size``
        replaces maxMessageSize as the largest batch taken (a Kafka topic's max.message.bytes)."""
        refused = self._check_writable(topic)
        if refused:
            return refused
        try:
            header = record_batch.validate_batch(batch)  # header fields and CRC-32C; records untouched
        except (ValueError, struct.error) as exc:
            return self._refuse(PutMessageStatus.MESSAGE_ILLEGAL, f"invalid record batch: {exc}")
        if delay_headers and self.config.kafka_delay_headers_enable and batch_delay.may_have_delay_headers(batch, header):
            return batch_delay.put_split_batch(self, topic, queue_id, batch, born_host=born_host,
                                               store_host=store_host, properties=properties, max_size=max_size,
                                               sync_replicas=sync_replicas)
        unit, refused = self._batch_unit(topic, queue_id, batch, header, born_host, store_host, properties, max_size)
        if refused:
            return refused
        return self._append(topic, queue_id, [unit], wait=True, batch=True, headers=[header],
                            sync_replicas=sync_replicas)

    def put_record_batches(self, topic: str, queue_id: int, batches: list[bytes], *, born_host=None,
                           store_host=None, properties: dict | None = None, max_size: int | None = None,
                           producer_batch=None, sync_replicas: bool | None = None) -> PutMessageResult:
        """Store several record batches at consecutive offsets of one queue, all or none (one
        unit each; no delay-header split). The result's queue offset is the first batch's.
        ``producer_batch``: the header of the one producer batch these parts came from (a batch
        split around delayed records), recorded in the producer state as that batch, so its
        retry is recognised whole."""
        refused = self._check_writable(topic)
        if refused:
            return refused
        units = []
        headers = []
        for batch in batches:
            try:
                header = record_batch.validate_batch(batch)
            except (ValueError, struct.error) as exc:
                return self._refuse(PutMessageStatus.MESSAGE_ILLEGAL, f"invalid record batch: {exc}")
            unit, refused = self._batch_unit(topic, queue_id, batch, header, born_host, store_host, properties,
                                             max_size)
            if refused:
                return refused
            units.append(unit)
            headers.append(header)
        if producer_batch is not None and producer_batch.producer_id >= 0:
            headers = [producer_batch] + [None] * (len(units) - 1)
        return self._append(topic, queue_id, units, wait=True, batch=True, headers=headers,
                            sync_replicas=sync_replicas)

    def _batch_unit(self, topic: str, queue_id: int, batch, header, born_host, store_host, properties: dict | None,
                    max_size: int | None = None) -> tuple[tuple[bytearray, int, int] | None, PutMessageResult | None]:
        count = header.last_offset_delta + 1
        if count <= 0:
            return None, self._refuse(PutMessageStatus.MESSAGE_ILLEGAL,
                                      f"record batch has lastOffsetDelta {header.last_offset_delta}")
        born_ts = header.max_timestamp if header.max_timestamp > 0 else None
        n = len(batch)
        split = n >= SPLIT_MIN
        if split:
            limit = self.config.max_message_size if max_size is None else max_size
            if n > limit:
                what = f"maxMessageSize {limit}" if max_size is None else f"the topic's limit {limit}"
                return None, self._refuse(PutMessageStatus.MESSAGE_ILLEGAL,
                                          f"message body is {n} bytes, more than {what}")
            view = memoryview(batch)
            if view.ndim != 1 or view.itemsize != 1:
                view = view.cast("B")
            body = view[:record_batch.HEADER_SIZE]  # encoded as the body, the rest joined on write
            max_size = None
        else:
            body = batch
        msg = Message(topic=topic, body=body, properties=properties, queue_id=queue_id, born_host=born_host,
                      store_host=store_host, born_timestamp=born_ts)
        unit, refused, _ = self._encode(msg, sys_flag=INNER_BATCH_FLAG, crc=0,  # BODYCRC set once offsets are known
                                        max_size=max_size)
        if refused:
            return None, refused
        if split:
            body_end = _body_pos(unit) + record_batch.HEADER_SIZE
            rest = view[record_batch.HEADER_SIZE:]
            _I32.pack_into(unit, 0, len(unit) + len(rest))  # TOTALSIZE and BODYLEN of the whole batch
            _I32.pack_into(unit, body_end - record_batch.HEADER_SIZE - 4, n)
            if not self.commitlog.fits_in_segment(len(unit) + len(rest)):
                return None, self._refuse(PutMessageStatus.MESSAGE_ILLEGAL,
                                          f"message unit is {len(unit) + len(rest)} bytes, larger than a commitlog "
                                          f"segment (mappedFileSizeCommitLog {self.config.mapped_file_size_commit_log})")
            unit = SplitUnit(unit[:body_end], rest, bytes(memoryview(unit)[body_end:]))
        return (unit, tags_code((properties or {}).get(PROPERTY_TAGS)), count), None

    @staticmethod
    def _wants_wait(msg: Message) -> bool:
        return not (msg.properties and msg.properties.get("WAIT") == "false")

    def _append(self, topic: str, queue_id: int, units: list[tuple[bytearray, int, int]], wait: bool,
                batch: bool = False, headers: list | None = None,
                sync_replicas: bool | None = None) -> PutMessageResult:
        started = metrics.now()
        key = (topic, queue_id)
        cl = self.commitlog
        first_phy = -1
        first_qoff = -1
        ids = []
        records = 0
        wrote = 0
        if batch:
            unit = units[0][0]
            guess = self._queue_offsets.get(key, 0)
            head = _head(unit)
            body_pos = _body_pos(head)
            record_batch.set_base_offset(memoryview(head)[body_pos:], guess)
            if self.broker_config.enable_controller_mode:  # as Kafka brokers stamp the leader epoch
                for u, _t, _c in units:
                    h = _head(u)
                    record_batch.set_partition_leader_epoch(memoryview(h)[_body_pos(h):], self.ha.master_epoch)
            _I32.pack_into(head, 8, _unit_body_crc(unit, body_pos))
        if not self._lock_for_put():
            self.page_cache_busy_refused += 1
            return self._refuse(PutMessageStatus.OS_PAGE_CACHE_BUSY,
                                f"[PC_SYNCHRONIZED]broker busy, start flow control for a while: the commitlog has been "
                                f"locked by another put for more than osPageCacheBusyTimeOutMills "
                                f"{self.config.os_page_cache_busy_time_out_mills} ms")
        try:
            if not self.running:
                return self._refuse(PutMessageStatus.SERVICE_NOT_AVAILABLE, "message store is not running")
            cq = self.find_consume_queue(topic, queue_id, create=True)
            if not cq.mfq.files and self._queue_files is not None:  # a new queue: its topic's others
                self._queue_files.request(topic, queue_id, cq)   # get their files off this path
            qoff = self._queue_offsets.get(key)
            if qoff is None:
                qoff = cq.max_offset
            now = _now_ms()
            if now < self._last_store_ts:  # wall clock stepped back: keep store times ordered,
                now = self._last_store_ts  # time search (binary) relies on it
            self._last_store_ts = now
            if len(units) > 1:
                # several units are stored all or none: reserve their space (and their queue
                # units') in one segment first, so a full disk refuses before the first is written
                total = sum(len(u[0]) for u in units)
                if cl.fits_in_segment(total):
                    try:
                        f = cl.segment_for(total)
                        f.segment.reserve(f.wrote_position, total)
                        cq.reserve(qoff, sum(u[2] for u in units))
                    except OSError as exc:
                        return self._refuse_write_error(exc, cl.mfq.store_path)
            for n, (unit, tcode, count) in enumerate(units):
                size = len(unit)
                try:
                    f = cl.segment_for(size)
                except OSError as exc:
                    return self._refuse_write_error(exc, cl.mfq.store_path)
                phy = f.file_from_offset + f.wrote_position
                head = _head(unit)
                patch_unit(head, qoff, phy, now)
                if batch and (n or qoff != guess):  # only the first was patched ahead, with a guess
                    body_pos = _body_pos(head)
                    record_batch.set_base_offset(memoryview(head)[body_pos:], qoff)
                    _I32.pack_into(head, 8, _unit_body_crc(unit, body_pos))
                pos = f.wrote_position
                try:
                    cl.write_unit(f, unit)
                except OSError as exc:  # no space could be reserved: nothing was written
                    return self._refuse_write_error(exc, cl.mfq.store_path)
                try:
                    cq.put(qoff, phy, size, tcode, count)
                except OSError as exc:
                    # undo the unit so the log and the queue stay consistent
                    f.write_at(pos, bytes(size))
                    f.wrote_position = pos
                    cq.mfq.truncate_dirty(qoff * 20)
                    return self._refuse_write_error(exc, f"consume queue {topic}/{queue_id}")
                if headers is not None and headers[n] is not None and headers[n].producer_id >= 0:
                    self.producer_state.apply(topic, queue_id, headers[n], qoff, now,
                                              _unit_body(unit) if headers[n].is_control else None)
                if first_phy < 0:
                    first_phy, first_qoff = phy, qoff
                ids.append(_unit_msg_id(head, phy))
                qoff += count
                records += count
                wrote += size
                self._queue_offsets[key] = qoff
                self.confirmed_offset = phy + size
            end = self.confirmed_offset
        finally:
            self._unlock_for_put()
        # the slaves first; a SYNC_MASTER put that reached them holds its arrival (long-poll
        # wake-ups) until whoever completes the wait releases it (HAService.wake_dispatcher)
        sent_to_slaves = self.ha.notify_append()
        self.dispatcher.appended(topic, queue_id, qoff, sent_to_slaves and self.config.broker_role == "SYNC_MASTER")
        metrics.STORE_APPEND_SECONDS.observe(metrics.now() - started)
        status = PutMessageStatus.PUT_OK
        error = None
        if self._sync and wait:
            if not self._group_commit.wait_flushed(end, self.config.sync_flush_timeout / 1000.0):
                status = PutMessageStatus.FLUSH_DISK_TIMEOUT
                error = f"flush to disk did not finish within syncFlushTimeout {self.config.sync_flush_timeout} ms"
                log.warning("flush_disk_timeout", topic=topic, queue_id=queue_id, offset=end)
        if status is PutMessageStatus.PUT_OK and wait and (
                sync_replicas or (sync_replicas is None and self.config.broker_role == "SYNC_MASTER")):
            name, error = self.ha.wait_replicated_blocking(end, self.ha.min_sync_slaves(),
                                                          self.config.sync_flush_timeout / 1000.0)
            self.ha.wake_dispatcher()
            status = PutMessageStatus[name]
        # positional (status, msg_id, queue_offset, commitlog_offset, wrote_bytes, record_count,
        # store_timestamp, error, end_offset): a dataclass's keyword call costs twice as much
        return PutMessageResult(status, ids[0] if len(ids) == 1 else ",".join(ids), first_qoff, first_phy, wrote,
                                records, now, error, end)

    def _refuse_write_error(self, exc: OSError, where: str) -> PutMessageResult:
        if is_disk_full(exc):
            self.disk.out_of_space(self.confirmed_offset)
            return self._refuse_disk_full()
        return self._refuse(PutMessageStatus.CREATE_MAPPED_FILE_FAILED,
                            f"cannot write to {where}: {exc.strerror or exc}")
