"""The uploader: closed data of tiered queues copied to the object store and recorded.

What it owns: one upload pass (``upload_pass``) and the retention guard it registers
(``retention_floor``), docs/design/tiered-storage.md.

A queue is tiered when its topic's attribute ``remote.storage.enable`` is ``true``. A pass
walks each tiered queue from the end of its committed remote range: builds a segment of closed
data (units whose bytes lie below the active commitlog segment), records ``started``, PUTs
``.log``, ``.idx`` and ``.keys``, and records ``committed``. Uploads run at most
``concurrency`` at once, paced to ``bandwidth`` bytes/s over all of them (0: unlimited).

Invariants:
- ``retention_floor()`` is the lowest commitlog offset of a tiered record not yet committed
  remotely; registered with ``MessageStore.add_retention_guard``, retention never deletes it,
  so a store that is down or slow delays deletion, never loses data.
- A failed upload leaves a ``started`` record whose objects are swept (deleted, then
  ``forget_orphan``) at the start of the next pass, before that range is uploaded again.
"""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
import os
import time
from typing import Any
from urllib.parse import quote

import structlog

from .manifest import Manifest, RemoteSegment
from .object_store import ObjectNotFound, ObjectStore, ObjectStoreError
from .segment import build_segment

log = structlog.get_logger("rockafka.engine.tiered")

REMOTE_STORAGE_ENABLE = "remote.storage.enable"


async def delete_segment_objects(objects: ObjectStore, seg: RemoteSegment) -> None:
    """Delete a remote segment's objects (.log, .idx, .keys); one already gone is fine.
    Raises ObjectStoreError when the store fails."""
    for key in (seg.log_key, seg.idx_key, seg.keys_key):
        if not key:
            continue
        try:
            await objects.delete(key)
        except ObjectNotFound:
            pass


def object_key(topic: str, queue_id: int, base: int, upload_id: str, ext: str, group: str = "") -> str:
    """``[<brokerName>/]<topic>/<queueId>/<base>-<uploadId>.<ext>``: queue ids are per broker
    group (a Kafka topic spread over groups has a queue 0 in each), so the group names them."""
    path = f"{quote(topic, safe='')}/{queue_id}/{base:020d}-{upload_id}.{ext}"
    return f"{quote(group, safe='')}/{path}" if group else path


class Uploader:
    def __init__(self, store: Any, manifest: Manifest, objects: ObjectStore, *,
                 segment_bytes: int = 64 << 20, concurrency: int = 2, bandwidth: int = 0, group: str = ""):
        self.store = store
        self.manifest = manifest
        self.objects = objects
        self.segment_bytes = segment_bytes
        self._sem = asyncio.Semaphore(max(1, concurrency))
        self._ids = itertools.count()
        self._epoch = f"{int(time.time() * 1000):x}{os.getpid():x}"
        self.group = group                     # the broker group's name: the first part of object keys
        self.bandwidth = max(0, bandwidth)    # bytes/s over all uploads; 0: unlimited
        self._next_slot = 0.0                  # loop time from which the next PUT may start
        self.paced_s = 0.0                     # time PUTs waited for the bandwidth limit, in all
        self.last_error: str | None = None     # of the last pass that failed (None: it did not)
        self.failed_topics: set[str] = set()

    # -- which queues --------------------------------------------------------------------
    def tiered_queues(self) -> list[tuple[str, int]]:
        tiered = {t for t, tc in self.store.topic_config.all().items()
                  if str((tc.attributes or {}).get(REMOTE_STORAGE_ENABLE, "")).lower() == "true"}
        if not tiered:
            return []
        return sorted(k for k in list(self.store._cqs) if k[0] in tiered)

    def _closed_limit(self) -> int:
        """Commitlog offset below which data is closed: the start of the active segment."""
        files = self.store.commitlog.mfq.files
        return files[-1].file_from_offset if files else 0

    async def _pace(self, nbytes: int) -> None:
        """Bandwidth limit: each upload reserves ``nbytes / bandwidth`` seconds of the link, in
        the order they ask, and waits for its slot (a paced sender: the average rate over any
        run of uploads stays at or below ``bandwidth``)."""
        if self.bandwidth <= 0:
            return
        now = asyncio.get_running_loop().time()
        start = max(now, self._next_slot)
        self._next_slot = start + nbytes / self.bandwidth
        if start > now:
            self.paced_s += start - now
            await asyncio.sleep(start - now)

    # -- the guard -------------------------------------------------------------------------
    def retention_floor(self) -> int | None:
        floor = None
        for topic, queue_id in self.tiered_queues():
            cq = self.store.find_consume_queue(topic, queue_id)
            if cq is None:
                continue
            start = max(self.manifest.remote_end(topic, queue_id) or 0, cq.min_offset)
            units = cq.read_units(start, 64) if start < cq.max_offset else []
            phy = next((u[0] for u in units if u[0] >= 0 and u[1] > 0), None)
            if phy is not None and (floor is None or phy < floor):
                floor = phy
        return floor

    # -- a pass ----------------------------------------------------------------------------
    async def upload_pass(self) -> int:
        """Sweep orphans, then upload every closed, unrecorded range; returns segments committed.
        Raises nothing for a store that is down: the next pass retries (``last_error`` says
        why it failed, ``failed_topics`` which topics' uploads did)."""
        self.last_error = None
        self.failed_topics = set()
        for orphan in self.manifest.orphans():
            try:
                await delete_segment_objects(self.objects, orphan)
                self.manifest.forget_orphan(orphan.key)
                log.info("tiered_orphan_swept", key=orphan.key, upload_id=orphan.upload_id)
            except ObjectStoreError as exc:
                log.warning("tiered_orphan_sweep_failed", key=orphan.key, error=str(exc))
                self.last_error = str(exc)
                self.failed_topics.add(orphan.topic)
                return 0
        queues = self.tiered_queues()
        done = await asyncio.gather(*(self._upload_queue(t, q) for t, q in queues))
        return sum(done)

    async def _upload_queue(self, topic: str, queue_id: int) -> int:
        committed = 0
        limit = self._closed_limit()
        while True:
            cq = self.store.find_consume_queue(topic, queue_id)
            base = max(self.manifest.remote_end(topic, queue_id) or 0, cq.min_offset if cq else 0)
            built = await asyncio.to_thread(build_segment, self.store, topic, queue_id, base,
                                            max_bytes=self.segment_bytes, commitlog_limit=limit)
            if built is None:
                return committed
            upload_id = f"{self._epoch}-{next(self._ids)}"
            group = self.group
            seg = RemoteSegment(topic=topic, queue_id=queue_id, base=built.base, end=built.end,
                                upload_id=upload_id, state="",
                                log_key=object_key(topic, queue_id, built.base, upload_id, "log", group),
                                idx_key=object_key(topic, queue_id, built.base, upload_id, "idx", group),
                                keys_key=object_key(topic, queue_id, built.base, upload_id, "keys", group))
            seg = self.manifest.start(seg)
            try:
                async with self._sem:
                    await self._pace(len(built.log) + len(built.idx) + len(built.keys))
                    put_log = await self.objects.put(seg.log_key, built.log)
                    put_idx = await self.objects.put(seg.idx_key, built.idx)
                    put_keys = await self.objects.put(seg.keys_key, built.keys)
            except ObjectStoreError as exc:
                log.warning("tiered_upload_failed", key=seg.key, error=str(exc))
                self.last_error = str(exc)
                self.failed_topics.add(topic)
                return committed
            self.manifest.commit(dataclasses.replace(
                seg, log_size=len(built.log), log_crc32c=put_log.crc32c, idx_crc32c=put_idx.crc32c, keys_crc32c=put_keys.crc32c,
                first_timestamp=built.first_timestamp, last_timestamp=built.last_timestamp,
                commitlog_end=built.commitlog_end))
            committed += 1
            log.info("tiered_segment_uploaded", topic=topic, queue_id=queue_id, base=built.base,
                     end=built.end, log_bytes=len(built.log))
