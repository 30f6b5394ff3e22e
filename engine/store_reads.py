"""The store's reads: consume-queue lookups, get_message, offsets by time, messages by id / key /
commitlog offset, leader-epoch ends and the logical low watermark (DeleteRecords). Part of
``engine.store.MessageStore`` (a mixin; see engine/store.py for the invariants).
"""

from __future__ import annotations

import structlog

from .dispatcher import batch_record_count, record_keys
from .message import INNER_BATCH_FLAG, MessageExt, MessageFormatError, UnitHeader, decode_message, decode_message_id
from .store_types import GetMessageResult, GetMessageStatus, QueryMessageResult, UnitRef, _I32, _I64, _body_pos

log = structlog.get_logger("rockafka.engine.store")  # the store's events, one logger


class StoreReads:
    # ------------------------------------------------------------------ reads
    def get_max_offset_in_queue(self, topic: str, queue_id: int) -> int:
        cq = self._cqs.get((topic, queue_id))
        return cq.max_offset if cq else 0

    def get_min_offset_in_queue(self, topic: str, queue_id: int) -> int:
        cq = self._cqs.get((topic, queue_id))
        if cq is None:
            return 0
        return min(cq.min_offset, cq.max_offset)

    def get_message(self, group: str, topic: str, queue_id: int, offset: int, max_msgs: int,
                    message_filter=None, max_bytes: int | None = None, head: int = 0) -> GetMessageResult:
        """Units from ``offset`` on. ``head`` > 0 (without a filter): each message is only the
        first ``head`` bytes of its unit (header and batch header, enough to serve it from the
        file with ``CommitLog.file_run``); the refs carry where the whole unit is."""
        cq = self._cqs.get((topic, queue_id))
        if cq is None:  # as RocketMQ, whose findConsumeQueue creates the (empty) queue
            return GetMessageResult(GetMessageStatus.NO_MESSAGE_IN_QUEUE, next_begin_offset=0)
        min_off, max_off = min(cq.min_offset, cq.max_offset), cq.max_offset
        res = GetMessageResult(GetMessageStatus.NO_MESSAGE_IN_QUEUE, min_offset=min_off, max_offset=max_off)
        if max_off == 0:
            res.next_begin_offset = 0
            return res
        if offset < min_off:
            res.status, res.next_begin_offset = GetMessageStatus.OFFSET_TOO_SMALL, min_off
            return res
        if offset == max_off:
            res.status, res.next_begin_offset = GetMessageStatus.OFFSET_OVERFLOW_ONE, offset
            return res
        if offset > max_off:
            res.status, res.next_begin_offset = GetMessageStatus.OFFSET_OVERFLOW_BADLY, max_off
            return res
        max_msgs = max(1, max_msgs)
        cl = self.commitlog
        cl_min = cl.min_offset
        index = offset
        records = 0
        total_bytes = 0
        filtered = False
        messages, refs = res.messages, res.units
        # Units to read ahead: few at first, since a Kafka batch's records share one unit and
        # the walk then jumps past the rest (a 1,000-record batch would waste 511 of 512 units);
        # more while units follow one another (one message per unit; a native pull asks 32).
        ahead = 32
        # the written span of the commitlog segment the last message came from: the next ones of
        # a queue mostly sit in it, and are read without looking the segment up again
        win_lo = win_hi = 0
        win_read = None
        while index < max_off and records < max_msgs:
            chunk_start = index
            chunk = cq.read_units(index, min(max(max_msgs - records, 16), ahead))
            if not chunk:
                break
            stop = False
            n_chunk = len(chunk)
            ahead = min(512, ahead * 4)
            while True:
                i = index - chunk_start  # jumps over the further records of a batch unit
                if i >= n_chunk:
                    break
                cur = index
                phy, size, tcode = chunk[i]
                if size <= 0 or phy < cl_min:
                    index = cur + 1
                    continue
                if message_filter is not None and not message_filter.is_matched_by_consume_queue(tcode):
                    filtered = True
                    index = cur + 1
                    continue
                if max_bytes is not None and messages and total_bytes + size > max_bytes:
                    stop = True
                    break
                want = size if not head or message_filter is not None or size <= head else head
                if not win_lo <= phy <= phy + want <= win_hi:  # not in the segment the last read used
                    win_lo, win_hi, win_read = cl.read_window(phy)
                data = None
                if win_read is not None and win_lo <= phy and phy + want <= win_hi:
                    try:
                        data = win_read(phy - win_lo, want)
                    except ValueError:  # unmapped by retention meanwhile
                        pass
                if data is None or len(data) != want:
                    index = cur + 1
                    continue
                sys_flag = _I32.unpack_from(data, 36)[0]
                if sys_flag & INNER_BATCH_FLAG:
                    base = _I64.unpack_from(data, 20)[0]
                    n = batch_record_count(data, _body_pos(data))
                else:
                    base, n = cur, 1
                index = max(cur + 1, base + n)
                if index - chunk_start > n_chunk:
                    ahead = 32  # jumped past the chunk: the next read starts small again
                if message_filter is not None and not message_filter.is_matched_by_commit_log(data):
                    filtered = True
                    continue
                ts = _I64.unpack_from(data, 48 + (20 if sys_flag & 0x10 else 8))[0]
                messages.append(data)
                refs.append(UnitRef(base, n, phy, size, tcode, ts, bool(sys_flag & INNER_BATCH_FLAG)))
                total_bytes += size
                records += index - cur
                if records >= max_msgs:
                    stop = True
                    break
            if stop:
                break
        res.next_begin_offset = min(index, max_off) if index > offset else offset
        res.buffer_total_size = total_bytes
        if refs:
            # RocketMQ's rule: a reader further behind the log's end than accessMessageInMemoryMaxRatio
            # of RAM reads what the page cache no longer holds; a slave should serve it instead
            res.suggest_pulling_from_slave = self.confirmed_offset - refs[-1].commitlog_offset > self._in_memory_bytes
        if messages:
            res.status = GetMessageStatus.FOUND
        elif filtered:
            res.status = GetMessageStatus.NO_MATCHED_MESSAGE
        else:
            res.status = GetMessageStatus.OFFSET_FOUND_NULL
        return res

    def _unit_store_timestamp(self, phy: int, size: int) -> int:
        data = self.commitlog.read(phy, min(size, 96))
        if data is None:
            return -1
        sys_flag = _I32.unpack_from(data, 36)[0]
        return _I64.unpack_from(data, 48 + (20 if sys_flag & 0x10 else 8))[0]

    def get_message_store_timestamp(self, topic: str, queue_id: int, offset: int) -> int:
        cq = self._cqs.get((topic, queue_id))
        u = cq.unit(offset) if cq else None
        return -1 if u is None else self._unit_store_timestamp(u[0], u[1])

    def get_earliest_message_time(self, topic: str, queue_id: int) -> int:
        cq = self._cqs.get((topic, queue_id))
        if cq is None or cq.max_offset <= cq.min_offset:
            return -1
        return self.get_message_store_timestamp(topic, queue_id, cq.min_offset)

    def get_offset_in_queue_by_time(self, topic: str, queue_id: int, timestamp_ms: int) -> int:
        """First offset whose store timestamp >= ``timestamp_ms``; the max offset when none."""
        cq = self._cqs.get((topic, queue_id))
        if cq is None:
            return 0
        lo, hi = min(cq.min_offset, cq.max_offset), cq.max_offset
        while lo < hi:
            mid = (lo + hi) // 2
            u = cq.unit(mid)
            ts = self._unit_store_timestamp(u[0], u[1]) if u else -1
            if ts < 0:  # unreadable (deleted meanwhile): look later
                lo = mid + 1
            elif ts < timestamp_ms:
                lo = mid + 1
            else:
                hi = mid
        return lo

    def look_message_by_offset(self, commitlog_offset: int, size: int | None = None) -> MessageExt | None:
        data = self.commitlog.read(commitlog_offset, size) if size else self.commitlog.read_unit(commitlog_offset)
        if data is None:
            return None
        try:
            return decode_message(data)
        except MessageFormatError:
            return None

    def look_message_by_id(self, msg_id: str) -> MessageExt | None:
        try:
            _host, offset = decode_message_id(msg_id)
        except MessageFormatError:
            return None
        return self.look_message_by_offset(offset)

    def query_message(self, topic: str, key: str, max_num: int, begin_ts: int, end_ts: int) -> QueryMessageResult:
        """Messages with ``key`` (KEYS, UNIQ_KEY or a Kafka record key), newest first.

        Read-your-writes: waits (up to 1 s) for the index to cover every put that returned
        before the call, since the dispatcher builds the index just behind the put path."""
        if self.dispatcher is not None and self.running:
            self.dispatcher.wait_dispatched(self.confirmed_offset, 1.0)
        res = QueryMessageResult(index_last_update_phyoffset=self.index_service.end_phy_offset)
        files = self.index_service.files
        if files:
            res.index_last_update_timestamp = files[-1].end_timestamp
        for phy in self.index_service.query(topic, key, max(max_num, 1) * 2, begin_ts, end_ts):
            if len(res.messages) >= max_num:
                break
            data = self.commitlog.read_unit(phy)
            if data is None:
                continue
            try:
                h = UnitHeader(data, 0)
            except MessageFormatError:
                continue
            if h.topic != topic or h.physical_offset != phy:
                continue
            # the index matches hashes only: check the key itself (Java hashes collide easily)
            props = h.properties(data)
            if key not in (props.get("KEYS") or "").split(" ") and props.get("UNIQ_KEY") != key:
                if not (h.sys_flag & INNER_BATCH_FLAG and key in record_keys(data, h.body_pos, h.body_len)):
                    continue
            res.messages.append(data)
        return res

    # ------------------------------------------------------------------ admin
    def queue_offset_at(self, topic: str, queue_id: int, commitlog_offset: int) -> int:
        """The first logical offset of the queue whose unit lies at or after ``commitlog_offset``
        (the queue's max offset when none does)."""
        cq = self._cqs.get((topic, queue_id))
        if cq is None:
            return 0
        lo, hi = cq.min_offset, cq.max_offset
        while lo < hi:
            mid = (lo + hi) // 2
            unit = cq.unit(mid)
            if unit is None or unit[0] >= commitlog_offset:
                hi = mid
            else:
                lo = mid + 1
        return lo

    def epoch_end_offset(self, topic: str, queue_id: int, epoch: int) -> tuple[int, int]:
        """(epoch, end offset) for a follower or consumer that last saw ``epoch`` (Kafka's
        OffsetForLeaderEpoch on the epoch file): the newest epoch <= ``epoch`` this log holds
        and the queue offset where it ends — the queue's max offset for the current epoch;
        (-1, -1) when the log holds no epoch that old."""
        entries = self.ha.epochs.all()
        older = [i for i, e in enumerate(entries) if e.epoch <= epoch]
        if not older:
            return -1, -1
        i = older[-1]
        if i + 1 >= len(entries):
            return entries[i].epoch, self.get_max_offset_in_queue(topic, queue_id)
        return entries[i].epoch, self.queue_offset_at(topic, queue_id, entries[i + 1].start_offset)

    def delete_records(self, topic: str, queue_id: int, before_offset: int) -> int:
        cq = self._cqs.get((topic, queue_id))
        if cq is None:
            return 0
        target = max(min(before_offset, cq.max_offset), 0)
        with self._put_lock:
            cq.raise_min_offset(target)
            new_min = cq.min_offset
        with self.min_offsets.lock:  # the fsync happens outside the put lock
            self.min_offsets.table[f"{topic}@{queue_id}"] = max(new_min, self.min_offsets.table.get(f"{topic}@{queue_id}", 0))
            self.min_offsets.persist()
        log.info("records_deleted", topic=topic, queue_id=queue_id, low_watermark=new_min)
        return new_min
