"""Share groups (KIP-932) on the POP machinery: acquiring records of a partition for a member
(record locks with a delivery count), acknowledge / release / reject, the dead letters of
records delivered too often, and the state rebuilt from the POP checkpoint log. Part of
``engine.pop.PopService`` (a mixin: every method runs on the service itself; its lock and
invariants are documented in engine/pop.py).
"""

from __future__ import annotations

import time
from typing import Any

import structlog

from .message import decode_message
from .pop_types import Checkpoint, CkKey, INIT_MODE_MAX, INIT_MODE_MIN, PopError, _MAX_INVISIBLE_MS

log = structlog.get_logger("rockafka.engine.pop")  # the POP service's events, one logger


class SharePop:
    def share_acquire(self, group: str, topic: str, queue_id: int, member: str, max_records: int, lock_ms: int, *,
                      delivery_limit: int, init_mode: int = INIT_MODE_MAX, dlq_topic: str = "",
                      max_locks: int = 2000, committed: bool = True, redelivery_level: int = 0,
                      now_ms: int | None = None) -> list[tuple[int, int]]:
        """Acquire up to ``max_records`` records of the share-partition for ``member``: first the
        released / expired ones (lowest offset first) whose redelivery delay has passed, then new
        ones from the group's offset (``committed``: read_committed, else read_uncommitted).
        ``redelivery_level`` > 0: a record these acquisitions hold that is released or expires
        waits the engine's delay level ``redelivery_level + deliveries - 1`` (capped at the last
        level) before it can be acquired again, as RocketMQ's retries climb the levels. Returns
        (offset, delivery count) sorted by offset."""
        if not 0 < lock_ms <= _MAX_INVISIBLE_MS:
            raise PopError("ILLEGAL_INVISIBLE_TIME", f"lock duration {lock_ms} ms is outside 1..{_MAX_INVISIBLE_MS}")
        key = (group, topic, queue_id)
        with self._lock:
            locked = len(self._share_owner.get(key, ()))
            room = max(0, min(int(max_records), max_locks - locked if max_locks > 0 else int(max_records), 1024))
            if room == 0:
                return []
            taken: list[int] = []
            avail = self._share_avail.get(key)
            now = int(time.time() * 1000) if now_ms is None else now_ms
            if avail:
                low = self.store.get_min_offset_in_queue(topic, queue_id)
                not_before = self._share_not_before
                for o in sorted(avail):
                    if len(taken) >= room:
                        break
                    if not_before and not_before.get((group, topic, queue_id, o), 0) > now:
                        continue  # its redelivery delay has not passed
                    not_before.pop((group, topic, queue_id, o), None)
                    avail.discard(o)
                    if o < low:  # gone from the log (retention, DeleteRecords): nothing to deliver
                        not_before.pop((group, topic, queue_id, o), None)
                        self._attempts.pop((group, topic, queue_id, o), None)
                        self._attempt_pins.pop((group, topic, queue_id, o), None)
                        continue
                    taken.append(o)
            new: list[int] = []
            next_offset = -1
            if len(taken) < room:
                offset = self._share_offset(group, topic, queue_id, init_mode)
                new, nxt = self._share_read(group, topic, queue_id, offset, room - len(taken), committed)
                if nxt != offset:
                    next_offset = nxt
            offsets = sorted(taken + new)
            if not offsets:
                if next_offset >= 0:  # filtered out (aborted, markers): consumed, as with a pull
                    self.store.consumer_offsets.commit(group, topic, queue_id, next_offset)
                return []
            pop_time = now
            ck = Checkpoint(group, topic, queue_id, offsets[0], pop_time, lock_ms, offsets, next_offset, False,
                            delivery_limit, share=True, member=member, dlq_topic=dlq_topic,
                            redelivery_level=max(0, int(redelivery_level)))
            while ck.key in self._pending:
                ck.pop_time += 1
            ck.remaining = set(offsets)
            try:
                ck.log_offset = self._append("ck", ck.to_json())
            except PopError:
                if taken:
                    self._share_avail.setdefault(key, set()).update(taken)
                raise
            self._pending[ck.key] = ck
            owners = self._share_owner.setdefault(key, {})
            for o in offsets:
                owners[o] = ck.key
            if next_offset >= 0:
                self.store.consumer_offsets.commit(group, topic, queue_id, next_offset)
            return [(o, self._attempts.get((group, topic, queue_id, o), 0) + 1) for o in offsets]

    def _share_read(self, group: str, topic: str, queue_id: int, offset: int, max_records: int,
                    committed: bool) -> tuple[list[int], int]:
        """Offsets of the records from ``offset`` (up to ``max_records``) and the next offset, as
        ``_read`` finds them but from batch headers only: a Kafka batch of contiguous offsets is a
        range, never decoded record by record (control batches and, when ``committed``, aborted
        ones skipped; nothing at or past the last stable offset)."""
        from . import record_batch as rb
        from . import txn_index
        from .batch_convert import expand_batch_unit

        txn = txn_index.for_store(self.store)
        res, end, nxt = self._get(group, topic, queue_id, offset, max_records, None, committed)
        if res is None:
            return [], nxt
        check = committed and txn.has_aborted(topic, queue_id)
        out: list[int] = []
        for unit, ref in zip(res.messages, res.units):
            if not ref.is_batch:
                out.append(ref.queue_offset)
                continue
            ext = decode_message(bytes(unit))  # the unit's header only; the batch stays bytes
            try:
                h = rb.parse_header(ext.body)
            except Exception:
                log.warning("share_batch_unreadable", topic=topic, queue_id=queue_id, offset=ref.queue_offset)
                continue
            if h.is_control or (check and h.is_transactional and txn.is_aborted(topic, queue_id, h.producer_id,
                                                                                 ext.queue_offset)):
                continue
            if h.last_offset_delta + 1 == h.records_count:
                offs: Any = range(ext.queue_offset, ext.queue_offset + h.records_count)
            else:  # offsets with gaps (a compacted batch): read them from the records
                offs = [decode_message(r).queue_offset for r in expand_batch_unit(bytes(unit))]
            out.extend(o for o in offs if offset <= o < end)
        if len(out) > max_records:
            out = out[:max_records]
            return out, out[-1] + 1
        return out, min(res.next_begin_offset, end) if out else res.next_begin_offset

    def _share_offset(self, group: str, topic: str, queue_id: int, init_mode: int) -> int:
        """The next offset the group never acquired; a new share-partition starts at the log's
        start (earliest) or end (latest) and that start is recorded at once (Kafka's SPSO)."""
        store = self.store
        off = store.consumer_offsets.query(group, topic, queue_id)
        low = store.get_min_offset_in_queue(topic, queue_id)
        if off < 0:
            off = low if init_mode == INIT_MODE_MIN else store.get_max_offset_in_queue(topic, queue_id)
            store.consumer_offsets.commit(group, topic, queue_id, off)
        return max(off, low)

    def share_acknowledge(self, group: str, topic: str, queue_id: int, member: str, acks: list[tuple[int, int]],
                          now_ms: int | None = None) -> str | None:
        """Apply (offset, type) acknowledgements of ``member`` (Kafka's types: 0 gap and 1 accept
        finish the record, 2 release makes it available again with one delivery more, 3 reject
        sends it to the dead-letter topic, 4 renew restarts its lock). All or nothing: returns why
        not when any offset is not locked by ``member`` (Kafka's INVALID_RECORD_STATE), else None."""
        with self._lock:
            now = int(time.time() * 1000) if now_ms is None else now_ms
            by_ck: dict[CkKey, list[tuple[int, int]]] = {}
            for o, kind in acks:
                if kind not in (0, 1, 2, 3, 4):
                    return f"acknowledge type {kind} is not one of 0 (gap), 1 (accept), 2 (release), 3 (reject), 4 (renew)"
                k = self._share_owner.get((group, topic, queue_id), {}).get(o)
                ck = self._pending.get(k) if k is not None else None
                if ck is None or o not in ck.remaining or ck.member != member or now >= ck.revive_at:
                    return f"the record at offset {o} is not acquired by member {member} (lock expired or never held)"
                by_ck.setdefault(k, []).append((o, kind))
            for k, items in by_ck.items():
                ck = self._pending[k]
                done = [o for o, kind in items if kind in (0, 1, 3)]
                released = [o for o, kind in items if kind == 2]
                renewed = [o for o, kind in items if kind == 4]
                for o, kind in items:
                    if kind == 3:
                        ext = self._message_at(ck.topic, ck.queue_id, o)
                        if ext is not None:
                            self._to_dlq(ck.group, ck.topic, ext, "rejected", ck.dlq_topic, ck.queue_id)
                if done:
                    self._ack_record(ck, done)
                    self._share_done(ck, done)
                if released:
                    self._share_dead_letters(ck, released, "max_deliveries")
                    self._ack_record(ck, released, flag="rel")
                    self._share_release(ck, released)
                if renewed:
                    self._share_renew(ck, renewed, now)
        return None

    def share_release_member(self, group: str, member: str) -> int:
        """The member left: every record it holds becomes available again (one delivery more)."""
        n = 0
        with self._lock:
            for ck in [c for c in self._pending.values() if c.share and c.group == group and c.member == member]:
                offsets = sorted(ck.remaining)
                if offsets:
                    self._share_dead_letters(ck, offsets, "max_deliveries")
                    self._ack_record(ck, offsets, flag="rel")
                    self._share_release(ck, offsets)
                    n += len(offsets)
        return n

    def _share_dead_letters(self, ck: Checkpoint, offsets: list[int], reason: str) -> None:
        """Before a release is logged: records whose delivery ends their last allowed one go to
        the dead-letter topic (replay recognises them by the same count)."""
        for o in offsets:
            if self._attempts.get((ck.group, ck.topic, ck.queue_id, o), 0) + 1 >= ck.max_attempts:
                ext = self._message_at(ck.topic, ck.queue_id, o)
                if ext is not None:
                    self._to_dlq(ck.group, ck.topic, ext, reason, ck.dlq_topic, ck.queue_id)

    def _share_unlock(self, ck: Checkpoint, o: int) -> None:
        ck.remaining.discard(o)
        owners = self._share_owner.get((ck.group, ck.topic, ck.queue_id))
        if owners is not None and owners.get(o) == ck.key:
            del owners[o]

    def _share_done(self, ck: Checkpoint, offsets: list[int]) -> None:
        for o in offsets:
            self._share_unlock(ck, o)
            self._attempts.pop((ck.group, ck.topic, ck.queue_id, o), None)
            self._attempt_pins.pop((ck.group, ck.topic, ck.queue_id, o), None)
            self._share_not_before.pop((ck.group, ck.topic, ck.queue_id, o), None)
        if not ck.remaining:
            self._finish(ck)

    def _share_release(self, ck: Checkpoint, offsets: list[int]) -> None:
        """Released or expired (also when replayed: a replayed delay counts from the replay, so
        it is never shorter than asked)."""
        self._count_attempts(ck, offsets)
        avail = self._share_avail.setdefault((ck.group, ck.topic, ck.queue_id), set())
        now = int(time.time() * 1000)
        for o in offsets:
            self._share_unlock(ck, o)
            k = (ck.group, ck.topic, ck.queue_id, o)
            if self._attempts.get(k, 0) >= ck.max_attempts:  # dead-lettered: the record is done
                self._attempts.pop(k, None)
                self._attempt_pins.pop(k, None)
                self._share_not_before.pop(k, None)
            else:
                avail.add(o)
                if ck.redelivery_level > 0:
                    self._share_not_before[k] = now + self._redelivery_delay_ms(
                        ck.redelivery_level + max(1, self._attempts.get(k, 1)) - 1)
        if not ck.remaining:
            self._finish(ck)

    def _redelivery_delay_ms(self, level: int) -> int:
        """The engine's delay level ``level`` (``messageDelayLevel``; capped at the last one)."""
        if self._delay_levels is None:
            from .schedule_message import parse_delay_levels

            self._delay_levels = parse_delay_levels(self.store.config.message_delay_level)
        levels = self._delay_levels
        return levels[min(max(level, 1), len(levels)) - 1]

    def _share_renew(self, ck: Checkpoint, offsets: list[int], now: int) -> None:
        new = Checkpoint(ck.group, ck.topic, ck.queue_id, min(offsets), now, ck.invisible_ms, sorted(offsets), -1,
                         False, ck.max_attempts, share=True, member=ck.member, dlq_topic=ck.dlq_topic)
        while new.key in self._pending:
            new.pop_time += 1
        new.remaining = set(offsets)
        new.log_offset = self._append("ck", new.to_json())
        self._pending[new.key] = new
        owners = self._share_owner.setdefault((ck.group, ck.topic, ck.queue_id), {})
        for o in offsets:
            owners[o] = new.key
        self._ack_record(ck, offsets, flag="rn")
        for o in offsets:
            ck.remaining.discard(o)
        if not ck.remaining:
            self._finish(ck)

    def _share_replay_ck(self, ck: Checkpoint) -> None:
        avail = self._share_avail.get((ck.group, ck.topic, ck.queue_id))
        owners = self._share_owner.setdefault((ck.group, ck.topic, ck.queue_id), {})
        for o in ck.offsets:
            owners[o] = ck.key
            if avail:
                avail.discard(o)
        if ck.next_offset > self.store.consumer_offsets.query(ck.group, ck.topic, ck.queue_id):
            # the CK is in the log before the offset moved: a crash in between never re-acquires
            self.store.consumer_offsets.commit(ck.group, ck.topic, ck.queue_id, ck.next_offset)

    def _share_replay_ack(self, ck: Checkpoint, offsets: list[int], doc: dict[str, Any]) -> None:
        offsets = [o for o in offsets if o in ck.remaining]
        if doc.get("rn"):
            for o in offsets:
                ck.remaining.discard(o)
            if not ck.remaining:
                self._finish(ck)
        elif doc.get("r") or doc.get("rel"):
            self._share_release(ck, offsets)
        else:
            self._share_done(ck, offsets)

    def share_state(self, group: str, topic: str, queue_id: int) -> dict[str, Any]:
        """What the share-partition holds: next offset never acquired, locked and available
        offsets and the start offset (lowest offset not yet finished)."""
        with self._lock:
            nxt = self.store.consumer_offsets.query(group, topic, queue_id)
            locked = sorted(self._share_owner.get((group, topic, queue_id), ()))
            avail = sorted(self._share_avail.get((group, topic, queue_id), ()))
            start = min(locked[:1] + avail[:1] + ([nxt] if nxt >= 0 else [])) if (locked or avail or nxt >= 0) else -1
            return {"next_offset": nxt, "start_offset": start, "locked": locked, "available": avail}

    def share_reset(self, group: str, topic: str, queue_id: int, offset: int | None) -> None:
        """AlterShareGroupOffsets (``offset``) / DeleteShareGroupOffsets (None): the
        share-partition starts again, its available records and delivery counts forgotten (the
        caller checks that the group has no members)."""
        with self._lock:
            self._share_avail.pop((group, topic, queue_id), None)
            for k in [k for k in self._share_not_before if k[:3] == (group, topic, queue_id)]:
                del self._share_not_before[k]
            for k in [k for k in self._attempts if k[:3] == (group, topic, queue_id)]:
                self._attempts.pop(k, None)
                self._attempt_pins.pop(k, None)
            offsets = self.store.consumer_offsets
            if offset is None:
                res = offsets.delete(group, topic, queue_id)
            else:
                from .consumer_offset import OffsetEntry

                res = offsets.commit_durable(group, {(topic, queue_id): OffsetEntry(offset, commit_timestamp=int(
                    time.time() * 1000))})
            if res is not None and not res.stored:
                raise PopError("PUT_FAILED", f"share-partition offset not stored: {res.status.name}")
