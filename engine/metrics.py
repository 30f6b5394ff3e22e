"""The node's Prometheus metrics: one registry, the metric objects, and the store's scrape-time view.

Owns ``REGISTRY`` (served at the admin listener's ``/metrics``) and every metric a component
updates while it works. Names follow Prometheus conventions: a ``rockafka_`` prefix, base units
in the name (``_seconds``, ``_bytes``), counters end in ``_total`` (prometheus-client adds it),
ratios are 0..1. Labels stay bounded: ``listener`` is one of the node's listeners (``kafka``,
``broker``, ``namesrv``), ``api`` a Kafka API name or a remoting request code name, ``topic`` a
topic that exists.

Invariants:
- Nothing here runs per record. Components call it once per request, per produced or fetched
  batch (per partition of a request) and per flush; everything that can be read off the store
  (offsets, lag, backlog, disk) is computed when Prometheus scrapes (``StoreCollector``), so
  idle queues cost nothing between scrapes.
- What a request or a produced or fetched batch updates (requests, errors, versions, latency,
  topic bytes and messages, store appends) is per-thread cells summed at scrape
  (``engine/metric_cells.py``: no lock per update, none lost between threads); the rarer
  series (flushes, failover) are prometheus_client's own objects.
- Protocol neutral: the gateways turn their own outcomes into names (a Kafka error code name,
  a remoting response code name) before they call ``RequestStats.observe``; this module never
  imports a gateway.
- One node per process, so the metrics are module level; ``StoreCollector`` is registered by
  whoever serves ``/metrics`` for the store it serves and unregistered when it stops.

Replication and controller metrics go beside the store ones below when those subsystems land
(a collector of their own registered on ``REGISTRY``, labels ``broker_name``/``broker_id``).
"""

from __future__ import annotations

import time
from threading import get_ident
from typing import Any, Callable, Iterable

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, disable_created_metrics
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.gc_collector import GCCollector
from prometheus_client.platform_collector import PlatformCollector
from prometheus_client.process_collector import ProcessCollector

from .metric_cells import CellCounter, CellHistogram, CellHistogramCount, Series, Table

disable_created_metrics()  # *_created series double a scrape and no dashboard here uses them
REGISTRY = CollectorRegistry()
ProcessCollector(registry=REGISTRY)
PlatformCollector(registry=REGISTRY)
GCCollector(registry=REGISTRY)

# 0.5 ms .. 30 s: a memory-mapped append is well under a millisecond, a held long poll 30 s
LATENCY_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
DISK_BUCKETS = (0.0001, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)

# The per-request and per-batch series are lock-free cells (engine/metric_cells.py): one request
# is one cell update of its (listener, api), which its count and its histogram both read.
_REQUEST_TABLE = Table(["listener", "api"], buckets=LATENCY_BUCKETS)
REQUESTS = CellHistogramCount("rockafka_requests", "Requests handled, by listener and API (Kafka API or remoting "
                              "request code).", _REQUEST_TABLE, REGISTRY)
REQUEST_ERRORS = CellCounter("rockafka_request_errors", "Error answers, by listener, API and error (a Kafka error "
                             "code counts once per partition or resource that carries it; a remoting response code "
                             "once per request).", Table(["listener", "api", "error"]), REGISTRY)
REQUEST_VERSIONS = CellCounter("rockafka_kafka_request_versions", "Kafka requests handled, by API and the version "
                               "the client sent (Kafka's RequestsPerSec{request,version}).",
                               Table(["api", "version"]), REGISTRY)
REQUEST_SECONDS = CellHistogram("rockafka_request_duration_seconds", "Time from a decoded request to its answer "
                                "(long-polling fetches and pulls include the time they were held).", _REQUEST_TABLE,
                                REGISTRY)
# a produce or a fetch adds its bytes and messages to one (listener, topic) cell of two columns
_TOPICS_IN = Table(["listener", "topic"], columns=2)
_TOPICS_OUT = Table(["listener", "topic"], columns=2)
TOPIC_BYTES_IN = CellCounter("rockafka_topic_bytes_in", "Bytes produced to a topic (Kafka record batches, native "
                             "message bodies).", _TOPICS_IN, REGISTRY, column=0)
TOPIC_MESSAGES_IN = CellCounter("rockafka_topic_messages_in", "Records or messages produced to a topic.",
                                _TOPICS_IN, REGISTRY, column=1)
TOPIC_BYTES_OUT = CellCounter("rockafka_topic_bytes_out", "Bytes served to consumers of a topic.", _TOPICS_OUT,
                              REGISTRY, column=0)
TOPIC_MESSAGES_OUT = CellCounter("rockafka_topic_messages_out", "Records or messages served to consumers of a "
                                 "topic.", _TOPICS_OUT, REGISTRY, column=1)
STORE_APPEND_SECONDS = CellHistogram("rockafka_store_append_duration_seconds", "Time to append one put (a message, "
                                     "a native batch or a Kafka record batch) to the commitlog and its consume "
                                     "queue, without waiting for a flush.", Table(buckets=DISK_BUCKETS), REGISTRY)
STORE_FLUSH_SECONDS = Histogram("rockafka_store_flush_duration_seconds", "Time of one commitlog flush that wrote "
                                "data to disk.", buckets=DISK_BUCKETS, registry=REGISTRY)
# failover (docs/design/failover.md): the controller counts its decisions, brokers their role changes
CONTROLLER_ELECTIONS = Counter("rockafka_controller_elections", "Masters elected by this controller peer's "
                               "replicated state (every peer counts each election), by group and reason (auto, "
                               "manual, unclean: possible loss).", ["group", "reason"], registry=REGISTRY)
CONTROLLER_IS_LEADER = Gauge("rockafka_controller_is_leader", "1 while this NameServer's controller leads the "
                             "quorum.", registry=REGISTRY)
FAILOVER_ROLE_CHANGES = Counter("rockafka_failover_role_changes", "Role changes this broker made on the "
                                "controller's word, by the role it took (master, slave).", ["role"], registry=REGISTRY)
FAILOVER_LEASE_EXPIRED = Counter("rockafka_failover_lease_expired", "Times this master's lease ran out (it stopped "
                                 "acknowledging writes until the controller confirmed it again).", registry=REGISTRY)


class RequestStats:
    """The series of one (listener, api), bound on first use (an API never called adds no
    series) and then kept, so a request costs no label lookup."""

    __slots__ = ("listener", "api", "_series", "_errors")

    def __init__(self, listener: str, api: str):
        self.listener, self.api = listener, api
        self._series: Series | None = None
        self._errors: dict[str, Series] = {}

    def observe(self, seconds: float, errors: Iterable[str] = ()) -> None:
        series = self._series
        if series is None:
            series = self._series = _REQUEST_TABLE.labels(self.listener, self.api)
        series.observe(seconds)
        for error in errors:
            counter = self._errors.get(error)
            if counter is None:
                counter = self._errors[error] = REQUEST_ERRORS.labels(self.listener, self.api, error)
            counter.inc()


def _topic_counter(table: Table) -> Callable[[str, str, int, int], None]:
    """``topic_in``/``topic_out``: the bytes and messages of one produce or fetch (per partition
    of a request, thousands of calls for a large one), added to the (listener, topic) cell of
    ``table`` in place (``Series.inc``'s steps, for two columns at once)."""
    find, bind = table.series.get, table.labels

    def count(listener: str, topic: str, nbytes: int, messages: int) -> None:
        if nbytes < 0 or messages < 0:
            raise ValueError("Counters can only be incremented by non-negative amounts.")
        series = find((listener, topic))
        if series is None:
            series = bind(listener, topic)
        cell = series.get(get_ident())
        if cell is None:
            cell = series.cell()
        cell[0] += nbytes
        cell[1] += messages
    return count


topic_in = _topic_counter(_TOPICS_IN)
topic_out = _topic_counter(_TOPICS_OUT)


def forget_topic(topic: str) -> None:
    """Drop a deleted topic's series, so scrapes stop reporting a topic that is gone."""
    for table in (_TOPICS_IN, _TOPICS_OUT):
        for key in [k for k in table.series.copy() if k[1] == topic]:
            table.remove(*key)


def now() -> float:
    return time.perf_counter()


class StoreCollector:
    """Gauges read off the store at scrape time: per-queue offsets, consumer lag, commitlog and
    dispatcher position, delay and timer backlog, disk usage."""

    def __init__(self, store: Any):
        self.store = store

    def collect(self) -> Iterable[GaugeMetricFamily]:
        store = self.store
        max_off = GaugeMetricFamily("rockafka_queue_max_offset", "Next logical offset to be written, per queue.",
                                    labels=["topic", "queue"])
        min_off = GaugeMetricFamily("rockafka_queue_min_offset", "First readable logical offset, per queue.",
                                    labels=["topic", "queue"])
        ends: dict[tuple[str, int], int] = {}
        for (topic, qid), _cq in sorted(store.consume_queues().items()):
            hi = store.get_max_offset_in_queue(topic, qid)
            ends[(topic, qid)] = hi
            max_off.add_metric([topic, str(qid)], hi)
            min_off.add_metric([topic, str(qid)], store.get_min_offset_in_queue(topic, qid))
        yield max_off
        yield min_off
        lag = GaugeMetricFamily("rockafka_consumer_lag", "Messages between a group's committed offset and the end "
                                "of the queue (both protocols share the offsets).", labels=["group", "topic", "queue"])
        committed = GaugeMetricFamily("rockafka_consumer_committed_offset", "A group's committed offset, per queue.",
                                      labels=["group", "topic", "queue"])
        offsets = store.consumer_offsets
        for group in sorted(offsets.groups()):
            for (topic, qid), off in sorted(offsets.offsets_of(group).items()):
                hi = ends.get((topic, qid), store.get_max_offset_in_queue(topic, qid))
                lag.add_metric([group, topic, str(qid)], max(0, hi - max(off, 0)))
                committed.add_metric([group, topic, str(qid)], off)
        yield lag
        yield committed
        cl = store.commitlog
        yield GaugeMetricFamily("rockafka_commitlog_max_offset_bytes", "Commitlog position where the next message "
                                "is written.", value=cl.max_offset)
        yield GaugeMetricFamily("rockafka_commitlog_min_offset_bytes", "First commitlog position still on disk "
                                "(moves with retention).", value=cl.min_offset)
        dispatcher = store.dispatcher
        behind = max(0, store.confirmed_offset - dispatcher.reput_offset) if dispatcher is not None else 0
        yield GaugeMetricFamily("rockafka_dispatcher_lag_bytes", "Commitlog bytes the dispatcher has not yet "
                                "indexed and announced to waiting consumers.", value=behind)
        delay = GaugeMetricFamily("rockafka_delay_backlog_messages", "Messages staged for a delay level and not yet "
                                  "delivered to their topic.", labels=["level"])
        for level, pending in sorted(store.schedule.pending_by_level().items()):
            delay.add_metric([str(level)], pending)
        yield delay
        yield GaugeMetricFamily("rockafka_timer_backlog_messages", "Timer messages (a delivery time) accepted and "
                                "not yet placed in the timer wheel.", value=store.timer.pending())
        yield GaugeMetricFamily("rockafka_disk_used_ratio", "Fraction (0..1) of the data directory's disk in use.",
                                value=store.disk_used_ratio() / 100.0)
        yield GaugeMetricFamily("rockafka_disk_full", "1 while puts are refused because the disk is above "
                                "diskSpaceWarningLevelRatio.", value=1 if store.disk_full else 0)
