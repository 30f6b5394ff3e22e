"""The remote tier of one store: uploads in the background, reads of offsets that left the disk.

What it owns (docs/design/tiered-storage.md): the manifest replay at start, the uploader's
passes and their back-off, the retention guard (held at 0 until the manifest is loaded, so a
retention pass between the store's start and the tier's never deletes what is not uploaded),
local retention of tiered queues (``local.retention.ms`` / ``local.retention.bytes``: the
queue's local start moves up, never past the end of its last committed remote segment),
remote retention (``retention.ms``, else ``tieredStoreFileReservedTime``; ``retention.bytes``
over the whole log: remote segments plus the local bytes past them), the log start offset a reader sees (the first live remote
segment's base, or the local start), and remote reads with their caches.

Invariants:
- A reader never gets bytes that were not checked: every unit read from the object store has
  the size its index entry says, its own TOTALSIZE, queue offset and body CRC; a mismatch is
  ``ChecksumMismatch`` and is never served (the caller answers a retriable error).
- Every object-store call is bounded (``ObjectStore``); a store that is down makes passes fail
  and back off (0.5 s doubling to 30 s), never raises out of the background loop, and releases
  nothing to retention.
- Only a master uploads, deletes remote segments or moves local starts; a slave replays the
  manifest each pass (it is replicated with the commitlog) and serves reads from it.
- The read caches are bounded: parsed ``.idx`` objects by count, 1 MiB ``.log`` chunks by
  ``tieredStoreReadCacheSize`` bytes, in memory, dropped on restart.
- A read on the node's loop fetches its chunks at once and reads ahead as many more of the
  same segment (at least ``READ_AHEAD_CHUNKS``, at most ``READ_AHEAD_MAX``) in the background;
  a chunk being fetched is fetched once, whoever asks for it. A failed read-ahead only loses
  the head start: the reader that needs the chunk gets the error or fetches it again.
"""

from __future__ import annotations

import asyncio
import collections
import dataclasses
import functools
import threading
import time
from typing import Any

import structlog

from engine.message import MessageFormatError, UnitHeader

from .manifest import COMMITTED, Manifest, ManifestConflict, RemoteSegment
from .object_store import ChecksumMismatch, ObjectStore, ObjectStoreError
from .segment import SegmentIndex, parse_keys
from .uploader import REMOTE_STORAGE_ENABLE, Uploader, delete_segment_objects

log = structlog.get_logger("rockafka.engine.tiered")

LOCAL_RETENTION_MS = "local.retention.ms"
LOCAL_RETENTION_BYTES = "local.retention.bytes"
RETENTION_MS = "retention.ms"
RETENTION_BYTES = "retention.bytes"
CHUNK = 1 << 20          # read-ahead and cache unit of a .log object
READ_AHEAD_CHUNKS = 4    # chunks fetched ahead of a sequential reader, at least...
READ_AHEAD_MAX = 16      # ...and at most (a read of n chunks reads n ahead)
INDEX_CACHE_ENTRIES = 512


def is_tiered(attributes: dict[str, str] | None) -> bool:
    return str((attributes or {}).get(REMOTE_STORAGE_ENABLE, "")).lower() == "true"


@dataclasses.dataclass(frozen=True, slots=True)
class RemoteUnit:
    """One stored unit read from the remote tier: the bytes the local read path returns."""
    data: bytes
    queue_offset: int
    record_count: int
    store_timestamp: int
    tags_code: int = 0


class RemoteTier:
    def __init__(self, store: Any, objects: ObjectStore, *, segment_bytes: int = 64 << 20,
                 concurrency: int = 2, cache_bytes: int = 256 << 20, interval_s: float = 1.0,
                 file_reserved_hours: int = 72, bandwidth: int = 0):
        self.store = store
        self.objects = objects
        self.manifest = Manifest(store)
        broker_config = getattr(store, "broker_config", None)
        self.uploader = Uploader(store, self.manifest, objects, segment_bytes=segment_bytes,
                                 concurrency=concurrency, bandwidth=bandwidth,
                                 group=getattr(broker_config, "broker_name", "") if broker_config else "")
        self.interval_s = interval_s
        self.file_reserved_hours = file_reserved_hours
        self.cache_bytes = max(0, cache_bytes)
        self._loaded = False
        self._acting_master = False   # the manifest was replayed as master (creating its topic)
        self._cache_lock = threading.Lock()   # the caches are shared by the loop and POP's worker threads
        self._chunks: collections.OrderedDict[tuple[str, int], bytes] = collections.OrderedDict()
        self._chunk_bytes = 0
        self._indexes: collections.OrderedDict[str, SegmentIndex] = collections.OrderedDict()
        self._key_maps: collections.OrderedDict[str, dict[str, list[int]]] = collections.OrderedDict()
        self._inflight: dict[tuple[str, int], asyncio.Task] = {}   # chunk fetches under way
        self._task: asyncio.Task | None = None
        self.passes = 0
        self.upload_errors: collections.Counter[str] = collections.Counter()
        self.last_error: str | None = None

    # -- life ------------------------------------------------------------------------------
    def guard(self) -> None:
        """Before the store starts: hold every segment until the manifest is loaded; from
        then on the store's own blocking readers (POP) find the tier as ``store.remote_tier``."""
        self.store.add_retention_guard(self.retention_floor)
        self.store.remote_tier = self

    def retention_floor(self) -> int | None:
        if not self._loaded:
            return 0
        return self.uploader.retention_floor()

    def load(self) -> None:
        """After the store started: replay the manifest (a slave: what it has replicated)."""
        if self.is_master():
            self.manifest.load()
            self._acting_master = True
        else:
            self._replay_if_present()
        self._loaded = True

    def _replay_if_present(self) -> None:
        if self.store.topic_config.get(self.manifest.log.topic) is not None:
            self.manifest.catch_up()

    def is_master(self) -> bool:
        return str(getattr(self.store.config, "broker_role", "")).upper() != "SLAVE"

    async def start(self) -> None:
        self.guard()
        if not self._loaded:
            await asyncio.to_thread(self.load)
        self._task = asyncio.get_running_loop().create_task(self._run(), name="tiered-uploader")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except asyncio.CancelledError:
                pass
            self._task = None
        inflight = list(self._inflight.values())
        for task in inflight:
            task.cancel()
        await asyncio.gather(*inflight, return_exceptions=True)
        self.store.remove_retention_guard(self.retention_floor)
        await self.objects.close()

    async def _run(self) -> None:
        delay = self.interval_s
        while True:
            await asyncio.sleep(delay)
            ok = await self.run_pass()
            delay = self.interval_s if ok else min(30.0, max(0.5, delay * 2))

    async def run_pass(self, now_ms: float | None = None) -> bool:
        """One pass: upload (master), remote then local retention; False when the object store
        failed (the caller backs off). Never raises for a store that is down."""
        self.passes += 1
        try:
            if not self.is_master():
                self._acting_master = False
                await asyncio.to_thread(self._replay_if_present)
                return True
            if not self._acting_master:     # started as master, or promoted: replay to the end first
                await asyncio.to_thread(self.manifest.load)
                self._acting_master = True
            self.uploader.last_error = None
            await self.uploader.upload_pass()
            ok = self.uploader.last_error is None
            if not ok:
                self.last_error = self.uploader.last_error
                for topic in self.uploader.failed_topics:
                    self.upload_errors[topic] += 1
            ok = await self.remote_retention(now_ms) and ok
            await asyncio.to_thread(self.apply_local_retention, now_ms)
            return ok
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # noqa: BLE001 - the loop must survive; the next pass retries
            log.exception("tiered_pass_failed", error=str(exc))
            self.last_error = str(exc)
            return False

    # -- which queues ---------------------------------------------------------------------------
    def tiered_topics(self) -> dict[str, dict[str, str]]:
        return {t: dict(tc.attributes or {}) for t, tc in self.store.topic_config.all().items()
                if is_tiered(tc.attributes)}

    # -- local retention (moves local starts only; the store's retention frees the disk) --------
    def apply_local_retention(self, now_ms: float | None = None) -> int:
        now = time.time() * 1000 if now_ms is None else now_ms
        targets: dict[tuple[str, int], int] = {}
        for topic, attrs in self.tiered_topics().items():
            local_ms = _int(attrs.get(LOCAL_RETENTION_MS), -2)
            local_bytes = _int(attrs.get(LOCAL_RETENTION_BYTES), -2)
            if local_ms < 0 and local_bytes < 0:
                continue
            for (t, queue_id), cq in list(self.store._cqs.items()):
                if t != topic or cq.min_offset >= cq.max_offset:
                    continue
                remote_end = self.manifest.remote_end(topic, queue_id)
                if remote_end is None or remote_end <= cq.min_offset:
                    continue
                target = cq.min_offset
                if local_ms >= 0:
                    target = max(target, self.store.get_offset_in_queue_by_time(topic, queue_id, int(now - local_ms)))
                if local_bytes >= 0:
                    target = max(target, cq.start_keeping_bytes(local_bytes))
                target = min(target, remote_end)
                if target > cq.min_offset:
                    targets[(topic, queue_id)] = target
        return self.store.raise_queue_starts(targets, "tiered_local_retention_applied") if targets else 0

    # -- remote retention ------------------------------------------------------------------------
    async def remote_retention(self, now_ms: float | None = None) -> bool:
        """Whole remote segments past ``retention.ms`` (or ``tieredStoreFileReservedTime`` hours)
        or beyond ``retention.bytes`` of remote data per partition: delete-marked (readers stop
        using them), objects deleted, then a tombstone. False when the object store failed."""
        now = time.time() * 1000 if now_ms is None else now_ms
        ok = True
        for seg in self.manifest.delete_marked():       # finished first: a pass that failed
            ok = await self._delete_objects(seg) and ok
        tiered = self.tiered_topics()
        for seg in list(self.manifest):                 # topics deleted or no longer tiered
            if seg.state == COMMITTED and seg.topic not in tiered:
                try:
                    marked = self.manifest.mark_deleted(seg.key)
                except ManifestConflict:
                    continue
                self._forget(seg)
                log.info("tiered_segment_dropped", key=seg.key, reason="topic not tiered")
                ok = await self._delete_objects(marked) and ok
        for topic, attrs in tiered.items():
            ms = _int(attrs.get(RETENTION_MS), None)
            if ms is None:
                ms = self.file_reserved_hours * 3_600_000 if self.file_reserved_hours >= 0 else -1
            max_bytes = _int(attrs.get(RETENTION_BYTES), -1)
            queues = {q for (t, q) in list(self.store._cqs) if t == topic}
            for queue_id in sorted(queues):
                segs = self.manifest.segments(topic, queue_id)
                total = sum(s.log_size for s in segs)
                if max_bytes >= 0 and segs:       # the whole log: the local bytes not remote yet too
                    cq = self.store.find_consume_queue(topic, queue_id)
                    if cq is not None:
                        total += _bytes_between(cq, max(segs[-1].end, cq.min_offset), cq.max_offset)
                for seg in segs[:-1] if segs else []:   # the newest segment is never dropped here
                    expired = ms >= 0 and seg.last_timestamp >= 0 and seg.last_timestamp < now - ms
                    oversize = max_bytes >= 0 and total > max_bytes
                    if not (expired or oversize):
                        break
                    try:
                        marked = self.manifest.mark_deleted(seg.key)
                    except ManifestConflict:
                        continue
                    total -= seg.log_size
                    self._forget(seg)
                    log.info("tiered_segment_expired", key=seg.key, expired=expired, oversize=oversize)
                    ok = await self._delete_objects(marked) and ok
        return ok

    async def _delete_objects(self, seg: RemoteSegment) -> bool:
        try:
            await delete_segment_objects(self.objects, seg)
            self.manifest.deleted(seg.key)
            return True
        except ObjectStoreError as exc:
            log.warning("tiered_segment_delete_failed", key=seg.key, error=str(exc))
            return False

    # -- what readers see -------------------------------------------------------------------------
    def log_start(self, topic: str, queue_id: int) -> int:
        """The first readable offset: the first live remote segment's base, else the local start."""
        local = self.store.get_min_offset_in_queue(topic, queue_id)
        remote = self.manifest.remote_start(topic, queue_id)
        return local if remote is None or remote >= local else remote

    def remote_segment_at_or_after(self, topic: str, queue_id: int, offset: int) -> RemoteSegment | None:
        for seg in self.manifest.segments(topic, queue_id):
            if seg.end > offset:
                return seg
        return None

    async def read(self, topic: str, queue_id: int, offset: int, max_bytes: int,
                   read_ahead: bool = True) -> list[RemoteUnit]:
        """Units from the one holding ``offset`` (or the first after it) of the remote segment
        that holds it, at least one, then no more than ``max_bytes``; [] when no remote segment
        reaches ``offset``. Raises ``ObjectStoreError`` (incl. ``ChecksumMismatch``).
        ``read_ahead``: also start fetching the chunks that follow (only on a loop that
        outlives the call: not ``read_sync``'s)."""
        seg = self.remote_segment_at_or_after(topic, queue_id, offset)
        if seg is None:
            return []
        index = await self._index(seg)
        i = index.first_unit(max(offset, seg.base))
        if i is None:
            return []
        j, total = i + 1, index.sizes[i]
        while j < len(index.offsets) and total + index.sizes[j] <= max_bytes:
            total += index.sizes[j]
            j += 1
        start = index.positions[i]
        data = await self._log_range(seg, start, start + total, read_ahead)
        out, p = [], 0
        for k in range(i, j):
            unit = data[p:p + index.sizes[k]]
            p += index.sizes[k]
            _check_unit(seg, unit, index.offsets[k])
            out.append(RemoteUnit(unit, index.offsets[k], index.counts[k], index.timestamps[k],
                                  index.tags[k] if index.tags else 0))
        return out

    def covers(self, topic: str, queue_id: int, offset: int) -> bool:
        """``offset`` is below the local start and a remote segment holds it or follows it."""
        if offset >= self.store.get_min_offset_in_queue(topic, queue_id):
            return False
        return self.log_start(topic, queue_id) <= offset and \
            self.remote_segment_at_or_after(topic, queue_id, offset) is not None

    def read_sync(self, group: str, topic: str, queue_id: int, offset: int, max_msgs: int,
                  message_filter: Any = None, max_bytes: int = CHUNK, end: int | None = None) -> Any:
        """For the engine's blocking readers (POP, on a worker thread): a ``GetMessageResult``
        of the remote units from ``offset``, filtered as ``MessageStore.get_message`` filters;
        None on an event loop's thread (never blocks a loop) or when nothing remote reaches
        ``offset``. Raises ``ObjectStoreError``."""
        from engine.message import INNER_BATCH_FLAG
        from engine.store_types import GetMessageResult, GetMessageStatus, UnitRef

        try:
            asyncio.get_running_loop()
            return None
        except RuntimeError:
            pass
        units = asyncio.run(self.read(topic, queue_id, offset, max_bytes, read_ahead=False))
        if not units:
            return None
        res = GetMessageResult(GetMessageStatus.FOUND, min_offset=self.log_start(topic, queue_id),
                               max_offset=self.store.get_max_offset_in_queue(topic, queue_id))
        records = 0
        for u in units:
            if end is not None and u.queue_offset >= end:
                break
            res.next_begin_offset = u.queue_offset + u.record_count
            if message_filter is not None and not (message_filter.is_matched_by_consume_queue(u.tags_code)
                                                   and message_filter.is_matched_by_commit_log(u.data)):
                continue
            sys_flag = int.from_bytes(u.data[36:40], "big", signed=True)
            res.messages.append(u.data)
            res.units.append(UnitRef(u.queue_offset, u.record_count, int.from_bytes(u.data[28:36], "big"),
                                     len(u.data), u.tags_code, u.store_timestamp, bool(sys_flag & INNER_BATCH_FLAG)))
            records += u.record_count
            if records >= max_msgs:
                break
        if not res.messages:
            res.status = GetMessageStatus.NO_MATCHED_MESSAGE
        return res

    async def offset_for_store_time(self, topic: str, queue_id: int, timestamp_ms: int) -> int | None:
        """First remote offset whose store timestamp is >= ``timestamp_ms`` (None: none remote)."""
        for seg in self.manifest.segments(topic, queue_id):
            if seg.last_timestamp >= 0 and seg.last_timestamp < timestamp_ms:
                continue
            index = await self._index(seg)
            for off, ts in zip(index.offsets, index.timestamps):
                if ts >= timestamp_ms:
                    return off
        return None

    async def query_by_key(self, topic: str, key: str, max_num: int, begin_ms: int, end_ms: int) -> list[bytes]:
        """Stored units of ``topic`` carrying ``key`` (KEYS, UNIQ_KEY or a Kafka record key) whose
        store time is in [begin_ms, end_ms], newest segments first, at most ``max_num``; only
        segments whose time range overlaps are looked at (their ``.keys`` objects are cached)."""
        segs = [s for (t, _q) in self._queues_of(topic) for s in self.manifest.segments(t, _q)
                if s.keys_key and s.first_timestamp <= end_ms and s.last_timestamp >= begin_ms]
        out: list[bytes] = []
        for seg in sorted(segs, key=lambda s: s.last_timestamp, reverse=True):
            hits = (await self._keys(seg)).get(key)
            if not hits:
                continue
            index = await self._index(seg)
            for i in reversed(hits):
                if not begin_ms <= index.timestamps[i] <= end_ms:
                    continue
                start = index.positions[i]
                unit = await self._log_range(seg, start, start + index.sizes[i])
                _check_unit(seg, unit, index.offsets[i])
                out.append(unit)
                if len(out) >= max_num:
                    return out
        return out

    def _queues_of(self, topic: str) -> list[tuple[str, int]]:
        return sorted({k for k in list(self.store._cqs) if k[0] == topic})

    # -- caches -----------------------------------------------------------------------------------
    async def _index(self, seg: RemoteSegment) -> SegmentIndex:
        with self._cache_lock:
            cached = self._indexes.get(seg.idx_key)
            if cached is not None:
                self._indexes.move_to_end(seg.idx_key)
                return cached
        raw = await self.objects.get(seg.idx_key, expected_crc32c=seg.idx_crc32c or None)
        index = SegmentIndex.parse(raw)
        with self._cache_lock:
            self._indexes[seg.idx_key] = index
            while len(self._indexes) > INDEX_CACHE_ENTRIES:
                self._indexes.popitem(last=False)
        return index

    async def _keys(self, seg: RemoteSegment) -> dict[str, list[int]]:
        with self._cache_lock:
            cached = self._key_maps.get(seg.keys_key)
            if cached is not None:
                self._key_maps.move_to_end(seg.keys_key)
                return cached
        raw = await self.objects.get(seg.keys_key, expected_crc32c=seg.keys_crc32c or None)
        try:
            keys = parse_keys(raw)
        except (ValueError, IndexError) as exc:
            raise ChecksumMismatch("get", seg.keys_key, f"keys object does not parse: {exc}") from None
        with self._cache_lock:
            self._key_maps[seg.keys_key] = keys
            while len(self._key_maps) > INDEX_CACHE_ENTRIES // 4:
                self._key_maps.popitem(last=False)
        return keys

    async def _log_range(self, seg: RemoteSegment, start: int, end: int, read_ahead: bool = False) -> bytes:
        first, last = start // CHUNK, (end - 1) // CHUNK
        if read_ahead:
            self._read_ahead(seg, last + 1, min(READ_AHEAD_MAX, max(READ_AHEAD_CHUNKS, last - first + 1)))
        if first == last:
            parts = [await self._chunk(seg, first)]
        else:  # the chunks of one read are fetched at once, not one GET after the other
            parts = await asyncio.gather(*(self._chunk(seg, c) for c in range(first, last + 1)))
        data = parts[0] if len(parts) == 1 else b"".join(parts)
        return data[start - first * CHUNK:end - first * CHUNK]

    def _cached_chunk(self, key: tuple[str, int]) -> bytes | None:
        with self._cache_lock:
            cached = self._chunks.get(key)
            if cached is not None:
                self._chunks.move_to_end(key)
            return cached

    async def _chunk(self, seg: RemoteSegment, n: int) -> bytes:
        key = (seg.log_key, n)
        cached = self._cached_chunk(key)
        if cached is not None:
            return cached
        task = self._inflight.get(key)
        if task is not None and task.get_loop() is asyncio.get_running_loop():
            return await asyncio.shield(task)   # a reader that gives up leaves the fetch running
        return await self._fetch_chunk(seg, n)

    def _read_ahead(self, seg: RemoteSegment, first: int, count: int) -> None:
        """Start fetching chunks ``first``.. (``count`` of them, within the segment) that are
        neither cached nor being fetched, when the cache can hold them."""
        if self.cache_bytes < (count + 1) * CHUNK or seg.log_size <= 0:
            return
        loop = asyncio.get_running_loop()
        for n in range(first, min(first + count, (seg.log_size + CHUNK - 1) // CHUNK)):
            key = (seg.log_key, n)
            if key in self._inflight:
                continue
            with self._cache_lock:
                if key in self._chunks:
                    continue
            task = loop.create_task(self._fetch_chunk(seg, n), name="tiered-read-ahead")
            self._inflight[key] = task
            task.add_done_callback(functools.partial(self._read_ahead_done, key))

    def _read_ahead_done(self, key: tuple[str, int], task: asyncio.Task) -> None:
        if self._inflight.get(key) is task:
            del self._inflight[key]
        if not task.cancelled() and task.exception() is not None:
            log.info("tiered_read_ahead_failed", key=key[0], chunk=key[1], error=str(task.exception()))

    async def _fetch_chunk(self, seg: RemoteSegment, n: int) -> bytes:
        key = (seg.log_key, n)
        lo = n * CHUNK
        hi = min(lo + CHUNK, seg.log_size) if seg.log_size > 0 else lo + CHUNK
        data = await self.objects.get_range(seg.log_key, lo, hi)
        with self._cache_lock:
            if len(data) <= self.cache_bytes and key not in self._chunks:
                self._chunks[key] = data
                self._chunk_bytes += len(data)
                while self._chunk_bytes > self.cache_bytes and self._chunks:
                    _, old = self._chunks.popitem(last=False)
                    self._chunk_bytes -= len(old)
        return data

    def _forget(self, seg: RemoteSegment) -> None:
        with self._cache_lock:
            self._indexes.pop(seg.idx_key, None)
            self._key_maps.pop(seg.keys_key, None)
            for key in [k for k in self._chunks if k[0] == seg.log_key]:
                self._chunk_bytes -= len(self._chunks.pop(key))

    # -- numbers for /metrics -------------------------------------------------------------------
    def topic_stats(self) -> dict[str, dict[str, int]]:
        """Per tiered topic: remote bytes and segments, upload lag (bytes of data not yet
        uploaded, counted from the consume queues' unit sizes), upload errors."""
        out: dict[str, dict[str, int]] = {}
        for topic in self.tiered_topics():
            segs = remote = lag = 0
            for (t, queue_id), cq in list(self.store._cqs.items()):
                if t != topic:
                    continue
                live = self.manifest.segments(topic, queue_id)
                segs += len(live)
                remote += sum(s.log_size for s in live)
                start = max(self.manifest.remote_end(topic, queue_id) or 0, cq.min_offset)
                lag += _bytes_between(cq, start, cq.max_offset)
            out[topic] = {"remote_bytes": remote, "remote_segments": segs, "upload_lag_bytes": lag,
                          "upload_errors": self.upload_errors.get(topic, 0)}
        return out


class TieredCollector:
    """Prometheus gauges of the remote tier, read at scrape time (engine/metrics.py's rule):
    per tiered topic the remote bytes and segments, the upload lag in bytes, and the upload
    failures counted since the node started."""

    def __init__(self, tier: RemoteTier):
        self.tier = tier

    def collect(self):
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

        stats = self.tier.topic_stats()
        remote = GaugeMetricFamily("rockafka_tiered_remote_bytes", "Bytes of a tiered topic's records in the object "
                                   "store (live remote segments).", labels=["topic"])
        segments = GaugeMetricFamily("rockafka_tiered_remote_segments", "Live remote segments of a tiered topic.",
                                     labels=["topic"])
        lag = GaugeMetricFamily("rockafka_tiered_upload_lag_bytes", "Stored bytes of a tiered topic not yet "
                                "uploaded (closed or not): what a disk loss would cost.", labels=["topic"])
        errors = CounterMetricFamily("rockafka_tiered_upload_errors", "Upload passes of a tiered topic that failed "
                                     "(object store down, slow or refusing).", labels=["topic"])
        for topic, st in sorted(stats.items()):
            remote.add_metric([topic], st["remote_bytes"])
            segments.add_metric([topic], st["remote_segments"])
            lag.add_metric([topic], st["upload_lag_bytes"])
            errors.add_metric([topic], st["upload_errors"])
        yield remote
        yield segments
        yield lag
        yield errors


def _bytes_between(cq: Any, start: int, end: int, limit_units: int = 100_000) -> int:
    """Commitlog bytes of the queue's units at offsets [start, end) (the records of one batch
    share one unit: counted once); reads at most ``limit_units`` entries."""
    total, offset, prev = 0, start, -1
    while offset < end and limit_units > 0:
        units = cq.read_units(offset, min(4096, end - offset))
        if not units:
            break
        for cl_offset, size, _tags in units:
            if cl_offset >= 0 and size > 0 and cl_offset != prev:
                total += size
                prev = cl_offset
        offset += len(units)
        limit_units -= len(units)
    return total


def _check_unit(seg: RemoteSegment, unit: bytes, queue_offset: int) -> None:
    try:
        h = UnitHeader(unit)
    except (MessageFormatError, ValueError, IndexError) as exc:
        raise ChecksumMismatch("read", seg.log_key, f"unit at offset {queue_offset}: {exc}") from None
    if h.total_size != len(unit) or h.queue_offset != queue_offset or not h.crc_ok(unit):
        raise ChecksumMismatch("read", seg.log_key,
                               f"unit at offset {queue_offset} does not match its size, offset or body CRC")


def _int(raw: Any, default: Any) -> Any:
    if raw is None or raw == "":
        return default
    try:
        return int(raw)
    except (TypeError, ValueError):
        return default
