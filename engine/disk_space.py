"""Disk space as RocketMQ's store manages it: usage ratios checked on the put path.

Thresholds (percent of the data directory's file system in use, RocketMQ's keys):
- ``diskSpaceWarningLevelRatio`` (90): above it the disk counts as full and every put is
  refused (SERVICE_NOT_AVAILABLE, with the ratio in the message) until usage falls below it.
- ``diskSpaceCleanForciblyRatio`` (85): above it, with ``cleanFileForciblyEnable``, retention
  removes the oldest commitlog segments even if they have not expired, until usage is below it
  again ("磁盘满了：会删除最早的消息"); queue min offsets move past them.
- ``diskMaxUsedSpaceRatio`` (75): above it expired segments go at once, not only at
  ``deleteWhen``.

When it is checked: on the put path whenever the commitlog has grown by a step since the
last look (a quarter of the room left below the warning ratio, between 64 KiB and 16 MiB, so
a fast producer cannot run from "fine" to "full" between two looks), and every second from
the store's background thread (other writers, freed space). A put whose space reservation
fails with ENOSPC (``file_io``) also marks the disk full, so a file system too small for the
ratios to work still refuses cleanly; that mark is dropped at the next look that finds room.

Invariants: ``full`` only changes in ``refresh``/``out_of_space``; the counters only grow.
Owns no files; reads ``FileIO.disk_usage``.
"""

from __future__ import annotations

import errno
import threading

import structlog

from .config import MessageStoreConfig

log = structlog.get_logger("rockafka.engine.disk_space")

MIN_STEP = 64 * 1024
MAX_STEP = 16 * 1024 * 1024
# After an ENOSPC, puts are tried again once this much is free (a put reserves up to 1 MiB).
ENOSPC_RETRY_FREE = 4 * 1024 * 1024


def is_disk_full(exc: BaseException) -> bool:
    return isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT)


class DiskSpace:
    def __init__(self, fio, root: str, config: MessageStoreConfig, on_clean_wanted=None):
        self.fio = fio
        self.on_clean_wanted = on_clean_wanted  # called (any thread) when forcible cleaning becomes due
        self.root = root
        self.config = config
        self.full = False
        self.ratio = 0.0
        self.total = 0
        self.used = 0
        self._enospc = False
        self._next_check_offset = 0
        self._lock = threading.Lock()
        self.clean_wanted = threading.Event()  # forcible cleaning is due: the background thread acts at once
        # counters (exported by /metrics)
        self.puts_refused = 0
        self.enospc_count = 0
        self.segments_deleted_forcibly = 0
        self.segments_deleted_expired = 0

    # -- the put path --------------------------------------------------------------------
    def writable(self, written_offset: int) -> bool:
        """False when puts must be refused; looks at the disk again when due (cheap otherwise)."""
        if written_offset >= self._next_check_offset:
            self.refresh(written_offset)
        return not self.full

    def refuse_message(self) -> str:
        if self._enospc and self.ratio <= self.config.disk_space_warning_level_ratio:
            return (f"the disk of {self.root} is full (no space left to reserve, {self.ratio:.1f}% used); "
                    "puts are refused until space is freed")
        return (f"the disk of {self.root} is {self.ratio:.2f}% full, above diskSpaceWarningLevelRatio "
                f"{self.config.disk_space_warning_level_ratio}%; puts are refused until space is freed")

    def out_of_space(self, written_offset: int) -> None:
        """A reservation failed with ENOSPC: refuse puts until a look finds room again."""
        with self._lock:
            self.enospc_count += 1
            first = not self._enospc
            self._enospc = True
            self.full = True
        if first:
            log.error("disk_full", root=self.root, reason="no space left on device", commitlog_offset=written_offset)
        self.refresh(written_offset, log_change=False)

    # -- looking at the disk ---------------------------------------------------------------
    def refresh(self, written_offset: int = 0, log_change: bool = True) -> float:
        cfg = self.config
        try:
            total, used = self.fio.disk_usage(self.root)
        except OSError as exc:
            log.warning("disk_usage_unknown", root=self.root, error=str(exc))
            self._next_check_offset = written_offset + MIN_STEP
            return self.ratio
        ratio = 100.0 * used / total if total else 0.0
        with self._lock:
            was_full = self.full
            self.total, self.used, self.ratio = total, used, ratio
            if self._enospc and total - used >= ENOSPC_RETRY_FREE and ratio <= cfg.disk_space_warning_level_ratio:
                self._enospc = False
            self.full = self._enospc or ratio > cfg.disk_space_warning_level_ratio
            room = int(total * cfg.disk_space_warning_level_ratio / 100) - used
            self._next_check_offset = written_offset + max(MIN_STEP, min(MAX_STEP, room // 4))
            now_full = self.full
        if cfg.clean_file_forcibly_enable and ratio > cfg.disk_space_clean_forcibly_ratio \
                and not self.clean_wanted.is_set():
            self.clean_wanted.set()
            if self.on_clean_wanted is not None:
                self.on_clean_wanted()
        if log_change and now_full != was_full:
            if now_full:
                log.error("disk_full", root=self.root, used_percent=round(ratio, 1),
                          warning_ratio=cfg.disk_space_warning_level_ratio)
            else:
                log.info("disk_writable_again", root=self.root, used_percent=round(ratio, 1))
        return ratio

    @property
    def forcibly(self) -> bool:
        """Usage is above diskSpaceCleanForciblyRatio and forcible cleaning is on."""
        return self.config.clean_file_forcibly_enable and self.ratio > self.config.disk_space_clean_forcibly_ratio
