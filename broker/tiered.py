"""The remote tier as the gateways see it: one lookup per store, and the read fallback.

What it owns: which store has a remote tier (``attach`` at the node's start, ``tier_of``), the
node component that runs the tier's background passes (``TieredService``), and the two calls a
gateway makes (docs/design/tiered-storage.md): ``log_start_offset`` (the first readable offset:
the remote start when the oldest data is remote) and ``read_remote`` (the stored units of an
offset below the local start, read from the object store; awaited, never blocking the loop).

Invariants: with no remote tier (``tieredBackendServiceProvider=none``, the default) both calls
answer what the local store answers and import nothing of the object store; a remote read that
fails raises ``RemoteReadError`` (the caller answers its protocol's retriable storage error),
never returns partial or unchecked bytes.
"""

from __future__ import annotations

import weakref
from typing import Any

import structlog

from engine.tiered.tier import RemoteTier, RemoteUnit, is_tiered  # noqa: F401  (re-exported for gateways)

log = structlog.get_logger("rockafka.broker.tiered")

_TIERS: "weakref.WeakKeyDictionary[Any, RemoteTier]" = weakref.WeakKeyDictionary()


class RemoteReadError(Exception):
    """A read of the remote tier failed (object store down, slow, or bytes that do not check)."""


def prepare(store: Any, store_config: Any) -> RemoteTier | None:
    """Before the store starts: build the tier when the broker has one, and hold retention
    until its manifest is loaded. None when ``tieredBackendServiceProvider=none``."""
    from engine.tiered import object_store_from_config

    objects = object_store_from_config(store_config)
    if objects is None:
        return None
    tier = RemoteTier(store, objects,
                      segment_bytes=store_config.tiered_store_group_commit_size,
                      concurrency=store_config.tiered_store_upload_concurrency,
                      cache_bytes=store_config.tiered_store_read_cache_size,
                      interval_s=max(0.05, store_config.tiered_store_upload_interval / 1000),
                      file_reserved_hours=store_config.tiered_store_file_reserved_time,
                      bandwidth=store_config.tiered_store_upload_bandwidth)
    tier.guard()
    _TIERS[store] = tier
    return tier


def refusal(store_config: Any, topic: str, attributes: dict[str, str]) -> str | None:
    """Why a topic's attributes are refused by the tiering rules (docs/design/tiered-storage.md,
    "Refused"), whichever protocol sets them; None when they are acceptable."""
    if is_tiered(attributes):
        if getattr(store_config, "tiered_backend_service_provider", "none") == "none":
            return ("remote.storage.enable=true is refused: this broker has no remote tier "
                    "(set tieredBackendServiceProvider=s3 and the objectStore* keys)")
        if "compact" in str(attributes.get("cleanup.policy", "delete")):
            return "remote.storage.enable=true is refused on a compacted topic (cleanup.policy=compact)"
        if topic.startswith(("__", "rmq_sys_", "RMQ_SYS_", "%RETRY%", "%DLQ%")):
            return f"remote.storage.enable=true is refused on the internal topic {topic!r}"
    for local, whole in (("local.retention.ms", "retention.ms"), ("local.retention.bytes", "retention.bytes")):
        try:
            lo, hi = int(attributes.get(local, -2)), int(attributes.get(whole, -1))
        except (TypeError, ValueError):
            return f"{local} and {whole} must be integers"
        if lo >= 0 and hi >= 0 and lo > hi:
            return f"{local}={lo} is larger than {whole}={hi}: the local tier cannot keep more than the whole log"
    return None


def tier_of(store: Any) -> RemoteTier | None:
    return _TIERS.get(store)


def log_start_offset(store: Any, topic: str, queue_id: int) -> int:
    """The first offset a reader may ask for (ListOffsets earliest, Fetch's log start)."""
    tier = _TIERS.get(store)
    if tier is None:
        return store.get_min_offset_in_queue(topic, queue_id)
    return tier.log_start(topic, queue_id)


def topic_summary(store: Any, topic: str) -> dict[str, int] | None:
    """What an operator sees of a tiered topic's remote tier (the admin API, console, CLI):
    remote bytes and segments, upload lag in bytes, failed upload passes; None when the topic
    is not tiered on this store (the numbers of /metrics' rockafka_tiered_* gauges)."""
    tier = _TIERS.get(store)
    if tier is None:
        return None
    return tier.topic_stats().get(topic)


def remote_covers(store: Any, topic: str, queue_id: int, offset: int) -> bool:
    """True when ``offset`` is below the local start and a remote segment holds it or follows it."""
    tier = _TIERS.get(store)
    return tier is not None and tier.covers(topic, queue_id, offset)


async def read_remote(store: Any, topic: str, queue_id: int, offset: int, max_bytes: int) -> list[RemoteUnit]:
    """The stored units from ``offset`` on, read from the remote tier (at least one, then at
    most ``max_bytes``); [] when the remote tier does not reach ``offset``."""
    tier = _TIERS.get(store)
    if tier is None:
        return []
    from engine.tiered.object_store import ObjectStoreError

    try:
        return await tier.read(topic, queue_id, offset, max_bytes)
    except ObjectStoreError as exc:
        log.warning("tiered_read_failed", topic=topic, queue_id=queue_id, offset=offset, error=str(exc))
        raise RemoteReadError(f"the remote tier could not serve offset {offset} of {topic}-{queue_id}: "
                              f"{exc}; retry") from exc


class TieredService:
    """Node component: loads the manifest, then runs upload / retention passes until stopped."""

    name = "tiered"

    def __init__(self, tier: RemoteTier):
        self.tier = tier
        self.collector: Any = None

    async def start(self) -> None:
        await self.tier.start()
        from engine import metrics
        from engine.tiered.tier import TieredCollector

        self.collector = TieredCollector(self.tier)
        metrics.REGISTRY.register(self.collector)
        log.info("tiered_started", master=self.tier.is_master(), interval_s=self.tier.interval_s)

    async def stop(self) -> None:
        if self.collector is not None:
            from engine import metrics

            metrics.REGISTRY.unregister(self.collector)
            self.collector = None
        await self.tier.stop()


async def query_by_key(store: Any, topic: str, key: str, max_num: int, begin_ms: int, end_ms: int) -> list[bytes]:
    """Units carrying ``key`` in the remote tier (native QUERY_MESSAGE beyond the disk)."""
    tier = _TIERS.get(store)
    if tier is None or max_num <= 0:
        return []
    from engine.tiered.object_store import ObjectStoreError

    try:
        return await tier.query_by_key(topic, key, max_num, begin_ms, end_ms)
    except ObjectStoreError as exc:
        log.warning("tiered_query_failed", topic=topic, error=str(exc))
        raise RemoteReadError(f"the remote tier could not be searched for key {key!r}: {exc}; retry") from exc


async def offset_by_time(store: Any, topic: str, queue_id: int, timestamp_ms: int) -> int:
    """The first offset stored at or after ``timestamp_ms``, the remote tier included (native
    SEARCH_OFFSET_BY_TIMESTAMP); the local answer when the time is past the remote data."""
    local = store.get_offset_in_queue_by_time(topic, queue_id, timestamp_ms)
    tier = _TIERS.get(store)
    if tier is None or local > store.get_min_offset_in_queue(topic, queue_id):
        return local
    from engine.tiered.object_store import ObjectStoreError

    try:
        remote = await tier.offset_for_store_time(topic, queue_id, timestamp_ms)
    except ObjectStoreError as exc:
        log.warning("tiered_search_failed", topic=topic, queue_id=queue_id, error=str(exc))
        raise RemoteReadError(f"the remote tier could not be searched by time: {exc}; retry") from exc
    return local if remote is None else min(remote, local)
