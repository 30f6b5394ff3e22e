"""Scrape-time metrics of the node's resources (``docs/design/resources.md``): disk space
thresholds and refusals, listener limits, request memory, flow control.

A ``prometheus_client`` collector registered on ``engine.metrics.REGISTRY`` by whoever serves
``/metrics``; it only reads counters the store, the ``ListenerGuard`` and the ``SendQueue`` keep
anyway, so nothing runs between scrapes. The disk's usage ratio and ``rockafka_disk_full``
come from ``engine.metrics.StoreCollector``; open connections per listener from the node's
views.
"""

from __future__ import annotations

from typing import Any, Iterator

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

_REFUSAL_REASONS = ("max_connections", "max_connections_per_ip", "open_files")
_CLOSE_REASONS = ("idle", "request_receive_timeout", "shed")


class ResourceCollector:
    def __init__(self, store: Any, guard: Any = None, send_queue: Any = None):
        self.store = store
        self.guard = guard
        self.send_queue = send_queue

    def collect(self) -> Iterator[Any]:
        store = self.store
        disk, cfg = store.disk, store.config
        yield GaugeMetricFamily("rockafka_disk_space_warning_level_ratio", "diskSpaceWarningLevelRatio (0..1): "
                                "above it puts are refused.", value=cfg.disk_space_warning_level_ratio / 100)
        yield GaugeMetricFamily("rockafka_disk_space_clean_forcibly_ratio", "diskSpaceCleanForciblyRatio (0..1): "
                                "above it the oldest commitlog segments are deleted when cleanFileForciblyEnable.",
                                value=cfg.disk_space_clean_forcibly_ratio / 100)
        yield CounterMetricFamily("rockafka_puts_refused_disk_full", "Puts refused because the data disk was full.",
                                  value=disk.puts_refused)
        yield CounterMetricFamily("rockafka_disk_enospc", "Space reservations that failed with ENOSPC.",
                                  value=disk.enospc_count)
        yield CounterMetricFamily("rockafka_commitlog_segments_deleted_forcibly", "Commitlog segments deleted "
                                  "unexpired because the disk passed diskSpaceCleanForciblyRatio.",
                                  value=disk.segments_deleted_forcibly)
        yield CounterMetricFamily("rockafka_commitlog_segments_deleted_expired", "Commitlog segments deleted after "
                                  "fileReservedTime.", value=disk.segments_deleted_expired)
        yield CounterMetricFamily("rockafka_index_keys_not_indexed", "Units whose keys a full disk kept out of the "
                                  "index (still stored and readable).", value=store.index_service.keys_not_indexed)
        yield CounterMetricFamily("rockafka_puts_refused_os_page_cache_busy", "Puts refused because another put "
                                  "held the commitlog longer than osPageCacheBusyTimeOutMills.",
                                  value=store.page_cache_busy_refused)
        if self.send_queue is not None:
            q = self.send_queue
            yield CounterMetricFamily("rockafka_send_queue_refused", "Sends refused after waiting longer than "
                                      "waitTimeMillsInSendQueue ([TIMEOUT_CLEAN_QUEUE]).", value=q.refused)
            yield GaugeMetricFamily("rockafka_send_queue_size", "Sends waiting for a store writer thread.",
                                    value=q.queued)
        if self.guard is not None:
            yield from self._listener_metrics(self.guard.metrics())

    @staticmethod
    def _listener_metrics(m: dict[str, Any]) -> Iterator[Any]:
        refused = CounterMetricFamily("rockafka_connections_refused", "Connections closed as soon as they were "
                                      "accepted, by the limit they hit.", labels=["reason"])
        for reason in _REFUSAL_REASONS:
            refused.add_metric([reason], m["connections_refused"].get(reason, 0))
        yield refused
        closed = CounterMetricFamily("rockafka_connections_closed", "Connections closed for a limit: idle, or a "
                                     "request slower than request_receive_timeout_ms.", labels=["reason"])
        for reason in _CLOSE_REASONS:
            closed.add_metric([reason], m["connections_closed"].get(reason, 0))
        yield closed
        yield GaugeMetricFamily("rockafka_request_bytes_in_flight", "Bytes of requests read and not yet answered, "
                                "all listeners.", value=m["request_bytes_in_flight"])
        yield GaugeMetricFamily("rockafka_request_bytes_in_flight_peak", "Most request bytes held at once since "
                                "the node started.", value=m["request_bytes_in_flight_peak"])
        yield CounterMetricFamily("rockafka_request_budget_waits", "Requests that waited for request budget (their "
                                  "socket not read meanwhile).", value=m["request_budget_waits"])
        yield GaugeMetricFamily("rockafka_requests_waiting_for_budget", "Requests waiting for request budget now.",
                                value=m["requests_waiting_for_budget"])
        for name, help_text in (
                ("max_connections", "max_connections: node-wide connection limit."),
                ("max_connections_per_ip", "max_connections_per_ip."),
                ("queued_max_request_bytes", "queued_max_request_bytes: the request budget (-1: none)."),
                ("open_files_limit", "The process's open-files (descriptor) limit."),
                ("open_files_reserve", "Descriptors kept free for the store: connections refused past it.")):
            yield GaugeMetricFamily(f"rockafka_{name}", help_text, value=m[name])
        yield GaugeMetricFamily("rockafka_request_receive_timeout_seconds", "Time a request may take to arrive "
                                "after its length prefix (request_receive_timeout_ms).",
                                value=m["request_receive_timeout_ms"] / 1000)
