"""Read-only figures of the commitlog a gateway reports or serves from, without touching
``store.commitlog`` or ``store.dispatcher`` itself.

Owns nothing: every function reads the store's current state. ``file_run`` and ``read_unit``
serve Kafka fetches straight from the segment files (zero copy) and are the only byte access a
gateway gets past ``store.get_message``.
"""

from __future__ import annotations

from typing import Any


def commitlog_min_offset(store: Any) -> int:
    """First commitlog byte still on disk (retention moves it)."""
    return store.commitlog.min_offset


def commitlog_max_offset(store: Any) -> int:
    """Commitlog byte just past the last unit written."""
    return store.commitlog.max_offset


def commitlog_figures(store: Any) -> dict[str, int]:
    """min / max offset, bytes not yet flushed and bytes not yet dispatched into consume queues."""
    cl = store.commitlog
    hi = cl.max_offset
    dispatcher = store.dispatcher
    reput = dispatcher.reput_offset if dispatcher is not None else hi
    return {"min_offset": cl.min_offset, "max_offset": hi, "unflushed_bytes": max(0, hi - cl.flushed_where),
            "dispatch_behind_bytes": max(0, hi - reput)}


def file_run(store: Any, offset: int, size: int, refs: dict) -> Any:
    """``(SegmentRef, position)`` of ``size`` bytes at commitlog ``offset`` lying in one segment
    file, ``refs`` keeping each segment it opened (engine.commitlog.CommitLog.file_run)."""
    return store.commitlog.file_run(offset, size, refs)


def read_unit(store: Any, offset: int, size: int) -> Any:
    """The ``size`` bytes of the unit at commitlog ``offset``; None when retention removed it."""
    return store.commitlog.read(offset, size)
