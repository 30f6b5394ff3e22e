"""Retention: expired and over-size commitlog segments deleted (fileReservedTime, disk ratios,
Kafka's retention.ms / retention.bytes per topic), held back by the guards readers register,
and the queues' low watermarks corrected after it. Part of ``engine.store.MessageStore`` (a mixin).
"""

from __future__ import annotations

import time
from datetime import datetime
from typing import Callable

import structlog

from .compaction import policy_of
from .progress import Progress
from .topic_config import TOPIC_RETENTION_BYTES, TOPIC_RETENTION_MS

log = structlog.get_logger("rockafka.engine.store")  # the store's events, one logger


class Retention:
    def disk_used_ratio(self) -> float:
        return self.disk.ratio if self.disk.total else self.disk.refresh(self.confirmed_offset)

    def stop_retention(self) -> None:
        """No retention pass runs from now until the next start (one under way finishes first).
        A shutdown calls it before the owners of retention guards stop: with their guards gone a
        pass could delete segments their replay at the next start still reads."""
        with self._clean_lock:
            self._retention_stopped = True

    def clean_expired_files(self, force: bool = False, now_ms: float | None = None) -> int:
        with self._clean_lock:
            if self._retention_stopped:
                return 0
            return self._clean_expired_files(force, now_ms)

    def _clean_expired_files(self, force: bool = False, now_ms: float | None = None) -> int:
        """Retention pass (RocketMQ's CleanCommitLogService + CleanConsumeQueueService).

        Expired commitlog segments (older than fileReservedTime) go when the hour is in
        deleteWhen, when disk usage is above diskMaxUsedSpaceRatio, or when ``force``; above
        diskSpaceCleanForciblyRatio the oldest segments go even unexpired. Consume queues and
        index files then drop what points below the new commitlog minimum, and queue min
        offsets move forward.
        """
        cfg = self.config
        disk = self.disk
        disk.clean_wanted.clear()
        ratio = disk.refresh(self.confirmed_offset)
        hours = {h.strip() for h in cfg.delete_when.split(";") if h.strip()}
        hour_now = datetime.now().strftime("%H")
        time_ok = hour_now in hours or str(int(hour_now)) in hours
        space_pressure = ratio > cfg.disk_max_used_space_ratio
        deleted = []
        # compacted topics: their live records below ``cut`` are copied forward first, and this
        # pass deletes nothing past ``cut`` (records written meanwhile were not looked at)
        cut = self._retention_cut(force or time_ok or space_pressure, now_ms) if self.compactor.active() else None
        if cut is not None:
            self.compactor.before_retention(cut, now_ms)
        if force or time_ok or space_pressure:
            deletable = self._segments_below_guards(cut)
            if deletable:
                deleted = self.commitlog.mfq.delete_expired_by_time(cfg.file_reserved_time * 3600 * 1000, now_ms,
                                                                    max_files=min(10, deletable))
            disk.segments_deleted_expired += len(deleted)
        if deleted:
            log.info("commitlog_segments_deleted", count=len(deleted), first=deleted[0].path,
                     new_min_offset=self.commitlog.min_offset, disk_used_percent=round(ratio, 1))
            ratio = disk.refresh(self.confirmed_offset)
        forced = 0
        # above diskSpaceCleanForciblyRatio: the oldest segments go, expired or not, one at a
        # time until usage is below it again (at most 10 a pass; never the segment written now,
        # never one whose bytes a state checkpoint still replays: the consumer offsets'
        # checkpoint is taken first, so only state changed since it holds segments back)
        if disk.forcibly and not self._segments_below_guards():
            self.consumer_offsets.checkpoint()
        while disk.forcibly and forced < 10:
            if self.compactor.active() and self.commitlog.mfq.files:
                first_end = self.commitlog.mfq.files[0].end_offset
                if cut is None or first_end > cut:
                    cut = first_end
                    self.compactor.before_retention(cut, now_ms)
            if not self._segments_below_guards(cut):
                break
            gone = self.commitlog.mfq.delete_first(1)
            if not gone:
                break
            forced += 1
            disk.segments_deleted_forcibly += 1
            before = disk.ratio
            self.correct_min_offsets()  # queue files pointing into it go too, before looking again
            disk.refresh(self.confirmed_offset)
            log.warning("commitlog_segment_deleted_forcibly", path=gone[0].path,
                        new_min_offset=self.commitlog.min_offset, disk_used_percent_before=round(before, 1),
                        disk_used_percent=round(disk.ratio, 1), clean_forcibly_ratio=cfg.disk_space_clean_forcibly_ratio)
        if forced == 10 and disk.forcibly:
            disk.clean_wanted.set()  # more next round, right away
            self._wake_background.set()
        else:  # done, or nothing left to delete: the next look above the ratio asks again
            disk.clean_wanted.clear()
        self.correct_min_offsets()
        self.apply_topic_retention(now_ms)
        return len(deleted) + forced

    def _retention_cut(self, expired_may_go: bool, now_ms: float | None) -> int | None:
        """The end of the segments this pass may delete (None: none): the expired ones when they
        may go, at least the first one under forcible cleaning."""
        files = self.commitlog.mfq.files[:-1][:10]
        now = time.time() * 1000 if now_ms is None else now_ms
        reserved = self.config.file_reserved_time * 3600 * 1000
        cut = None
        if expired_may_go:
            for f in files:
                if f.mtime() * 1000 + reserved > now:
                    break
                cut = f.end_offset
        if self.disk.forcibly and files:
            cut = max(cut or 0, files[0].end_offset)
        return cut

    # -- what state in the log still needs (engine/state_log.py) ------------------------------
    def add_retention_guard(self, needed: Callable[[], int | None]) -> None:
        """``needed()`` returns the lowest commitlog offset its owner's replay still reads (None:
        nothing); retention never deletes a segment holding bytes at or past it."""
        if needed not in self._retention_guards:  # a store started again keeps one guard per owner
            self._retention_guards.append(needed)

    def remove_retention_guard(self, needed: Callable[[], int | None]) -> None:
        self._retention_guards = [g for g in self._retention_guards if g is not needed]

    def _segments_below_guards(self, limit: int | None = None) -> int:
        """How many of the oldest segments retention may delete (never the last one, none past
        commitlog offset ``limit``)."""
        floor = limit
        for needed in list(self._retention_guards):
            try:
                offset = needed()
            except Exception:  # noqa: BLE001 - a broken guard keeps everything
                log.exception("retention_guard_failed")
                return 0
            if offset is not None and (floor is None or offset < floor):
                floor = offset
        files = self.commitlog.mfq.files[:-1]
        if floor is None:
            return len(files)
        return sum(1 for f in files if f.end_offset <= floor)

    def apply_topic_retention(self, now_ms: float | None = None) -> int:
        """Per-topic retention: a topic whose attributes set ``retention.ms`` (the Kafka config
        of that name, >= 0) stops serving records stored longer ago than that; one that sets
        ``retention.bytes`` (>= 0) keeps per partition only the newest records whose stored
        batches fit in that many bytes.

        The commitlog is shared by every topic, so nothing is deleted here: each queue's min
        (log start) offset moves to its first record stored at or after now - retention.ms, as
        DeleteRecords does, and the commitlog space goes with the store-wide retention. Returns
        the number of queues whose start moved.
        """
        now = time.time() * 1000 if now_ms is None else now_ms
        retention_of: dict[str, tuple[int, int]] = {}   # topic -> (retention.ms, retention.bytes)
        for topic, tc in list(self.topic_config.all().items()):
            try:
                retention = int(tc.attributes.get(TOPIC_RETENTION_MS, -1))
                max_bytes = int(tc.attributes.get(TOPIC_RETENTION_BYTES, -1))
            except ValueError:
                continue
            if (retention >= 0 or max_bytes >= 0) and policy_of(tc.attributes) != {"compact"}:  # compact: kept
                retention_of[topic] = (retention, max_bytes)
        moved: dict[tuple[str, int], int] = {}
        if not retention_of:
            return 0
        queues = list(self._cqs.items())
        progress = Progress("retention_progress", len(queues), "queues", phase="topic_retention")
        for n, ((topic, queue_id), cq) in enumerate(queues, 1):
            progress.update(n)
            limits = retention_of.get(topic)
            if limits is None or cq.min_offset >= cq.max_offset:
                continue
            retention, max_bytes = limits
            target = cq.min_offset
            if retention >= 0:
                target = self.get_offset_in_queue_by_time(topic, queue_id, int(now - retention))
            if max_bytes >= 0:   # per partition, as Kafka: the newest records that fit stay
                target = max(target, cq.start_keeping_bytes(max_bytes))
            if target > cq.min_offset:
                moved[(topic, queue_id)] = target
        progress.finish()
        return self.raise_queue_starts(moved, "topic_retention_applied")

    def raise_queue_starts(self, targets: dict[tuple[str, int], int], event: str = "queue_starts_raised") -> int:
        """Move each queue's min (log start) offset up to its target (never down, never past its
        max offset) and persist the table; returns the number of queues whose start moved."""
        moved: dict[str, int] = {}
        for (topic, queue_id), target in targets.items():
            cq = self._cqs.get((topic, queue_id))
            if cq is None or target <= cq.min_offset:
                continue
            with self._put_lock:
                cq.raise_min_offset(min(target, cq.max_offset))
                moved[f"{topic}@{queue_id}"] = cq.min_offset
        if moved:
            with self.min_offsets.lock:
                for key, low in moved.items():
                    self.min_offsets.table[key] = max(low, self.min_offsets.table.get(key, 0))
                self.min_offsets.persist()
            log.info(event, queues=len(moved), topics=sorted({k.rsplit("@", 1)[0] for k in moved}))
        return len(moved)

    def correct_min_offsets(self) -> None:
        self.compactor.mark_queues()
        cl_min = self.commitlog.min_offset
        queues = list(self._cqs.values())
        progress = Progress("retention_progress", len(queues), "queues", phase="consume_queues",
                            commitlog_min_offset=cl_min)
        for n, cq in enumerate(queues, 1):
            try:
                cq.delete_expired(cl_min)
            except ValueError:
                pass
            progress.update(n)
        progress.finish()
        self.index_service.delete_below(cl_min)
