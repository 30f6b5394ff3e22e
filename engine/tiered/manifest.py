"""The remote tier's manifest: which remote segments exist for readers, kept in the log.

What it owns: the records of a remote segment's life (``started`` -> ``committed`` ->
``delete_marked`` -> ``deleted``, docs/design/tiered-storage.md "The manifest"), their place in
the internal state topic ``__rockafka_tiered_manifest`` (through ``engine/state_log.py``;
compacted, key = ``topic/queue/base``, so the log alone always holds the whole manifest), and
the in-memory view replayed from it: per queue, the committed segments in offset order.

Invariants:
- One ordered writer (the master's uploader); every change is appended to the log *before* it
  is applied in memory, so the memory view is never ahead of what a replay rebuilds.
- A segment is readable only once ``committed``; ``started`` without ``committed`` is an orphan
  (its objects may exist and are deleted by the sweep, never read).
- Committed segments of one queue never overlap: ``commit`` refuses a range that overlaps a
  live one (``ManifestConflict``), so a reader's bisect finds at most one segment per offset.
- ``remote_start`` is the base of the first live (committed, not delete-marked) segment;
  ``remote_end`` the end of the last one: the uploader resumes there, the retention guard
  releases local data below it.
"""

from __future__ import annotations

import bisect
import dataclasses
import json
import threading
from typing import Any, Iterator

import structlog

from engine.state_log import StateLog

log = structlog.get_logger("rockafka.engine.tiered")

MANIFEST_TOPIC = "__rockafka_tiered_manifest"
STARTED, COMMITTED, DELETE_MARKED, DELETED = "started", "committed", "delete_marked", "deleted"
_STATES = (STARTED, COMMITTED, DELETE_MARKED, DELETED)


class ManifestConflict(ValueError):
    """A change the manifest refuses (overlapping range, unknown segment, wrong order)."""


@dataclasses.dataclass(frozen=True, slots=True)
class RemoteSegment:
    topic: str
    queue_id: int
    base: int                   # first queue offset in the segment
    end: int                    # one past the last queue offset
    upload_id: str
    state: str
    log_key: str = ""           # object keys of the data and the index
    idx_key: str = ""
    log_size: int = 0
    log_crc32c: int = 0
    idx_crc32c: int = 0
    first_timestamp: int = -1
    last_timestamp: int = -1
    commitlog_end: int = -1     # commitlog offset just past the segment's last record
    keys_key: str = ""          # object key of the keys (empty: a segment without one)
    keys_crc32c: int = 0

    @property
    def key(self) -> str:
        return f"{self.topic}/{self.queue_id}/{self.base}"

    def to_json(self) -> bytes:
        return json.dumps(dataclasses.asdict(self), separators=(",", ":"), sort_keys=True).encode()

    @classmethod
    def from_json(cls, raw: bytes) -> "RemoteSegment":
        doc = json.loads(raw)
        if doc.get("state") not in _STATES:
            raise ValueError(f"unknown manifest state {doc.get('state')!r}")
        return cls(**{f.name: doc[f.name] for f in dataclasses.fields(cls) if f.name in doc})


class Manifest:
    def __init__(self, store: Any):
        self.log = StateLog(store, MANIFEST_TOPIC, 1, compacted=True)
        self._lock = threading.Lock()
        self._segments: dict[str, RemoteSegment] = {}              # key -> latest record
        self._live: dict[tuple[str, int], list[RemoteSegment]] = {}  # committed, sorted by base
        self._next = 0                                               # next log offset to replay

    # -- start-up ---------------------------------------------------------------------------
    def load(self) -> int:
        """Create the topic if missing and replay it; returns the number of records read."""
        self.log.ensure_topic()
        with self._lock:
            self._segments.clear()
            self._live.clear()
            self._next = 0
            n = self._replay()
        log.info("manifest_loaded", records=n, segments=len(self._segments))
        return n

    def catch_up(self) -> int:
        """Apply the records appended since the last replay (a slave following its master's
        manifest, replicated with the commitlog); returns how many were read."""
        with self._lock:
            n = self._replay()
        if n:
            log.info("manifest_caught_up", records=n, segments=len(self._segments))
        return n

    def _replay(self) -> int:
        n = 0
        end = self.log.end_offset(0)
        if self._next >= end:
            return 0
        for rec in self.log.read(0, self._next, end):
            self._next = rec.offset + 1
            if rec.key is None or rec.marker is not None:
                continue
            n += 1
            key = rec.key.decode()
            if rec.value is None:
                self._segments.pop(key, None)
                continue
            try:
                self._apply(RemoteSegment.from_json(rec.value))
            except (ValueError, TypeError, KeyError) as exc:
                log.warning("manifest_record_skipped", key=key, offset=rec.offset, error=str(exc))
        self._next = max(self._next, end)
        self._rebuild_live()
        return n

    # -- changes (one writer) -------------------------------------------------------------
    def start(self, seg: RemoteSegment) -> RemoteSegment:
        seg = dataclasses.replace(seg, state=STARTED)
        with self._lock:
            if seg.end <= seg.base:
                raise ManifestConflict(f"empty range [{seg.base}, {seg.end}) of {seg.key}")
            prior = self._segments.get(seg.key)
            if prior is not None:  # an orphan is swept (forget_orphan) before its range is redone
                raise ManifestConflict(f"{seg.key} is already {prior.state} (upload {prior.upload_id})")
            self._check_no_overlap(seg)
            self._write(seg)
        return seg

    def commit(self, seg: RemoteSegment) -> RemoteSegment:
        with self._lock:
            prior = self._segments.get(seg.key)
            if prior is None or prior.state != STARTED or prior.upload_id != seg.upload_id:
                raise ManifestConflict(f"{seg.key} upload {seg.upload_id} was not started")
            seg = dataclasses.replace(seg, state=COMMITTED, base=prior.base, end=prior.end)
            self._check_no_overlap(seg)
            self._write(seg)
        return seg

    def mark_deleted(self, key: str) -> RemoteSegment:
        return self._move(key, COMMITTED, DELETE_MARKED)

    def deleted(self, key: str) -> None:
        with self._lock:
            if key not in self._segments:
                raise ManifestConflict(f"{key} is not in the manifest")
            self.log.append(0, [(key.encode(), None)])   # a tombstone: compaction drops the key
            self._segments.pop(key)
            self._rebuild_live()

    def forget_orphan(self, key: str) -> None:
        """Drop a ``started`` record whose upload will never be committed (its objects are gone)."""
        with self._lock:
            seg = self._segments.get(key)
            if seg is None or seg.state != STARTED:
                raise ManifestConflict(f"{key} is not an unfinished upload")
            self.log.append(0, [(key.encode(), None)])
            self._segments.pop(key)

    # -- reads ----------------------------------------------------------------------------
    def segment_for(self, topic: str, queue_id: int, offset: int) -> RemoteSegment | None:
        """The live segment holding ``offset``, or None."""
        with self._lock:
            segs = self._live.get((topic, queue_id), [])
            i = bisect.bisect_right([s.base for s in segs], offset) - 1
            if i >= 0 and segs[i].base <= offset < segs[i].end:
                return segs[i]
            return None

    def segments(self, topic: str, queue_id: int) -> list[RemoteSegment]:
        with self._lock:
            return list(self._live.get((topic, queue_id), []))

    def remote_start(self, topic: str, queue_id: int) -> int | None:
        with self._lock:
            segs = self._live.get((topic, queue_id))
            return segs[0].base if segs else None

    def remote_end(self, topic: str, queue_id: int) -> int | None:
        with self._lock:
            segs = self._live.get((topic, queue_id))
            return segs[-1].end if segs else None

    def remote_bytes(self, topic: str) -> int:
        with self._lock:
            return sum(s.log_size for (t, _), segs in self._live.items() if t == topic for s in segs)

    def orphans(self) -> list[RemoteSegment]:
        """Uploads started and never committed: their objects are to be deleted, never read."""
        with self._lock:
            return [s for s in self._segments.values() if s.state == STARTED]

    def delete_marked(self) -> list[RemoteSegment]:
        with self._lock:
            return [s for s in self._segments.values() if s.state == DELETE_MARKED]

    def __iter__(self) -> Iterator[RemoteSegment]:
        with self._lock:
            return iter(list(self._segments.values()))

    # -- internals (under the lock) -------------------------------------------------------
    def _move(self, key: str, want: str, to: str) -> RemoteSegment:
        with self._lock:
            prior = self._segments.get(key)
            if prior is None or prior.state != want:
                raise ManifestConflict(f"{key} is {prior.state if prior else 'absent'}, not {want}")
            seg = dataclasses.replace(prior, state=to)
            self._write(seg)
            return seg

    def _write(self, seg: RemoteSegment) -> None:
        with self.log.writing(0):
            self.log.append(0, [(seg.key.encode(), seg.to_json())])
            self._apply(seg)
            self._rebuild_live()
        log.info("manifest_record", key=seg.key, state=seg.state, upload_id=seg.upload_id,
                 base=seg.base, end=seg.end)

    def _apply(self, seg: RemoteSegment) -> None:
        self._segments[seg.key] = seg

    def _rebuild_live(self) -> None:
        live: dict[tuple[str, int], list[RemoteSegment]] = {}
        for s in self._segments.values():
            if s.state == COMMITTED:
                live.setdefault((s.topic, s.queue_id), []).append(s)
        for segs in live.values():
            segs.sort(key=lambda s: s.base)
        self._live = live

    def _check_no_overlap(self, seg: RemoteSegment) -> None:
        for other in self._segments.values():
            if (other.topic, other.queue_id) != (seg.topic, seg.queue_id) or other.key == seg.key:
                continue
            if other.state in (STARTED, COMMITTED) and other.base < seg.end and seg.base < other.end:
                raise ManifestConflict(f"{seg.key} [{seg.base}, {seg.end}) overlaps {other.key} "
                                       f"[{other.base}, {other.end}) ({other.state})")
