"""Slave-side replication in the store: appending the master's commitlog bytes as they arrive,
making them visible, dispatching them, and truncating / restarting the log on an epoch change
(docs/design/replication.md, failover.md). Part of ``engine.store.MessageStore`` (a mixin).
"""

from __future__ import annotations

import struct

import structlog

from .compaction import dispatch_copy, is_copy
from .dispatcher import batch_record_count, queue_tags_code
from .ha.errors import ReplicationError
from .message import BLANK_MAGIC_CODE, INNER_BATCH_FLAG, MAGIC_CODE_V1, MAGIC_CODE_V2, MessageFormatError, UnitHeader
from .state_log import CONSUMER_OFFSETS

log = structlog.get_logger("rockafka.engine.store")  # the store's events, one logger


class ReplicaLog:
    # ------------------------------------------------------------------ replication (slave side)
    def append_replicated(self, offset: int, data, visible: bool = True) -> int:
        """A slave writes bytes of its master's commitlog at the master's offset ``offset`` (which
        must be where its own log ends), then (``visible``; else ``make_replicated_visible``
        later) makes every complete unit visible: consume-queue units, the Kafka transaction
        index, ``confirmed_offset``, long-poll wake-ups (the dispatcher then indexes them). Bytes
        of a unit cut off at the end wait for the rest. Returns the new end of the log (what the
        slave acknowledges: the bytes are in its commitlog). Raises ``ReplicationError`` when the
        bytes do not continue the log."""

        cl = self.commitlog
        n = len(data)
        new_first = False
        with self._put_lock:
            end = cl.max_offset if cl.mfq.last() is not None else offset
            if offset != end:
                raise ReplicationError(f"data at offset {offset} does not continue the log, which ends at {end}")
            pos = 0
            while pos < n:
                f = cl.mfq.last()
                at = offset + pos
                if f is None or f.is_full:
                    if at % cl.file_size:
                        raise ReplicationError(f"a new commitlog segment cannot start at {at} "
                                               f"(not a multiple of mappedFileSizeCommitLog {cl.file_size})")
                    f = cl.mfq.create(at)
                    if len(cl.mfq.files) == 1:
                        new_first = True
                k = min(f.remaining, n - pos)
                f.write_at(f.wrote_position, data[pos:pos + k] if (pos or k < n) else data)
                f.wrote_position += k
                pos += k
            new_end = cl.max_offset
        if new_first:  # queue units older than the log's new start expire now
            self.correct_min_offsets()
        if visible:
            self.make_replicated_visible()
        return new_end

    def make_replicated_visible(self) -> None:
        """A slave: consume-queue units (and the rest) for the complete replicated units; the
        consumer offset table follows the ``__consumer_offsets`` records among them."""
        grown: dict[tuple[str, int], int] = {}
        try:
            with self._put_lock:
                self._dispatch_replicated(grown)
                follow, self._offsets_replicated = self._offsets_replicated, False
        finally:  # what became visible before a bad unit still wakes its readers
            dispatcher = self.dispatcher
            if dispatcher is not None:
                for (topic, queue_id), max_offset in grown.items():  # long polls on this slave: now
                    dispatcher.appended(topic, queue_id, max_offset)
        if follow:
            self.consumer_offsets.catch_up()

    def _dispatch_replicated(self, grown: dict[tuple[str, int], int]) -> None:
        """Under the put lock: consume-queue units for the complete units past ``confirmed_offset``;
        the queues that grew go into ``grown`` with their new max offsets."""
        cl = self.commitlog
        off = self.confirmed_offset
        while True:
            f = cl.mfq.find(off)
            if f is None:
                first = cl.mfq.first()
                if first is not None and off < first.file_from_offset:  # the log was restarted further on
                    off = first.file_from_offset
                    continue
                break
            pos = off - f.file_from_offset
            written = f.wrote_position
            if pos + 8 > written:
                break
            total, magic = struct.unpack_from(">ii", f.buf, pos)
            if magic == BLANK_MAGIC_CODE:
                if total != f.file_size - pos:
                    raise ReplicationError(f"BLANK unit at {off} of size {total} does not end its segment")
                if written < f.file_size:
                    break
                off = f.end_offset
                continue
            if magic not in (MAGIC_CODE_V1, MAGIC_CODE_V2) or total <= 0:
                raise ReplicationError(f"no unit at commitlog offset {off} (magic {magic & 0xFFFFFFFF:#x})")
            if pos + total > written:
                break
            try:
                h = UnitHeader(f.buf, pos)
            except (MessageFormatError, struct.error, IndexError) as exc:
                raise ReplicationError(f"unit at {off} is malformed: {exc}") from None
            if h.physical_offset != off:
                raise ReplicationError(f"unit at {off} says it is at {h.physical_offset}")
            is_batch = h.sys_flag & INNER_BATCH_FLAG
            count = batch_record_count(f.buf, h.body_pos) if is_batch else 1
            props = h.properties(f.buf) if h.props_len else {}
            if props and is_copy(props):  # a compacted record copied forward: repoints, adds nothing
                dispatch_copy(self, h, off, queue_tags_code(self, h, props))
                off += total
                self.confirmed_offset = off
                continue
            cq = self.find_consume_queue(h.topic, h.queue_id, create=True)
            cq.put(h.queue_offset, off, total, queue_tags_code(self, h, props) if props else 0, count)
            if h.topic not in self.topic_config.table:
                seen = self.replicated_unknown_topics
                seen[h.topic] = max(seen.get(h.topic, 0), h.queue_id + 1)
            self._queue_offsets[(h.topic, h.queue_id)] = grown[(h.topic, h.queue_id)] = h.queue_offset + count
            if is_batch:  # idempotence and transactions follow the log, as on the master's put path
                self.producer_state.apply_stored(f.buf, h)
            if h.topic == CONSUMER_OFFSETS:
                self._offsets_replicated = True
            off += total
            self.confirmed_offset = off

    def truncate_log(self, offset: int) -> int:
        """A slave cuts its log at ``offset`` (its master's log differs from there): commitlog,
        consume queues and the Kafka transaction index drop everything at or past it. Returns
        how many commitlog bytes were dropped."""
        cl = self.commitlog
        with self._put_lock:
            old_end = cl.max_offset
            if offset >= old_end:
                return 0
            if self.dispatcher is not None:
                self.dispatcher.rewind(offset)
            cl.truncate(offset, zero=True)
            with self._cq_lock:
                for cq in self._cqs.values():
                    cq.truncate_dirty(offset)
                self._queue_offsets = {k: cq.max_offset for k, cq in self._cqs.items()}
            self.confirmed_offset = min(self.confirmed_offset, offset)
            # idempotence and transaction state as of the new end: from the snapshot when it is
            # not past the cut, else from the whole log
            self.producer_state.recover(cl, offset)
            self.log_cuts += 1
        self.consumer_offsets.rebuild()  # offsets whose records were cut go back to what the log says
        if self.checkpoint is not None:
            self._flush_logics_and_checkpoint()
        log.warning("commitlog_truncated", offset=offset, dropped_bytes=old_end - offset)
        return old_end - offset

    def restart_log_at(self, offset: int) -> None:
        """A slave whose log ends before its master's oldest segment: the commitlog is dropped and
        continues at ``offset`` (a segment start). Consume queues keep their offsets; their units
        pointing at dropped bytes expire as after retention."""
        cl = self.commitlog
        with self._put_lock:
            with cl.mfq.lock:
                for f in list(cl.mfq.files):
                    f.destroy()
                cl.mfq.files = []
                cl.mfq._starts = []
                cl.mfq.flushed_where = offset
            self.confirmed_offset = offset
            self.log_cuts += 1
        log.warning("commitlog_restarted", offset=offset)
