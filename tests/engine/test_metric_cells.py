"""The per-request series as per-thread cells (engine/metric_cells.py): ``/metrics`` renders them
byte for byte as the prometheus_client objects they replaced, no increment is lost between
threads (threads that exit included), a counter never goes down between scrapes, and a deleted
topic's series go.

Each test drives a fresh copy of ``engine.metrics`` (its own registry and tables), so what the
node's module saw before does not matter.
"""

from __future__ import annotations

import importlib.util
import sys
import threading
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest

import engine.metrics
from engine.metric_cells import CellCounter, Table

_copies = 0


@pytest.fixture
def m():
    """A fresh ``engine.metrics``: same source, its own REGISTRY and series."""
    global _copies
    _copies += 1
    spec = importlib.util.spec_from_file_location(f"engine._metrics_copy{_copies}", Path(engine.metrics.__file__))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# what engine/metrics.py declared before the cells, verbatim
LATENCY = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
DISK = (0.0001, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)


class Before:
    """The families as prometheus_client objects, updated as the old helpers did."""

    def __init__(self):
        r = self.registry = CollectorRegistry()
        self.requests = Counter("rockafka_requests", "Requests handled, by listener and API (Kafka API or remoting "
                                "request code).", ["listener", "api"], registry=r)
        self.errors = Counter("rockafka_request_errors", "Error answers, by listener, API and error (a Kafka error "
                              "code counts once per partition or resource that carries it; a remoting response code "
                              "once per request).", ["listener", "api", "error"], registry=r)
        self.versions = Counter("rockafka_kafka_request_versions", "Kafka requests handled, by API and the version "
                                "the client sent (Kafka's RequestsPerSec{request,version}).", ["api", "version"],
                                registry=r)
        self.seconds = Histogram("rockafka_request_duration_seconds", "Time from a decoded request to its answer "
                                 "(long-polling fetches and pulls include the time they were held).",
                                 ["listener", "api"], buckets=LATENCY, registry=r)
        self.bytes_in = Counter("rockafka_topic_bytes_in", "Bytes produced to a topic (Kafka record batches, native "
                                "message bodies).", ["listener", "topic"], registry=r)
        self.messages_in = Counter("rockafka_topic_messages_in", "Records or messages produced to a topic.",
                                   ["listener", "topic"], registry=r)
        self.bytes_out = Counter("rockafka_topic_bytes_out", "Bytes served to consumers of a topic.",
                                 ["listener", "topic"], registry=r)
        self.messages_out = Counter("rockafka_topic_messages_out", "Records or messages served to consumers of a "
                                    "topic.", ["listener", "topic"], registry=r)
        self.append = Histogram("rockafka_store_append_duration_seconds", "Time to append one put (a message, a "
                                "native batch or a Kafka record batch) to the commitlog and its consume queue, "
                                "without waiting for a flush.", buckets=DISK, registry=r)

    def request(self, listener, api, seconds, errors=()):
        self.requests.labels(listener, api).inc()
        self.seconds.labels(listener, api).observe(seconds)
        for error in errors:
            self.errors.labels(listener, api, error).inc()

    def topic_in(self, listener, topic, nbytes, messages):
        self.bytes_in.labels(listener, topic).inc(nbytes)
        self.messages_in.labels(listener, topic).inc(messages)

    def topic_out(self, listener, topic, nbytes, messages):
        self.bytes_out.labels(listener, topic).inc(nbytes)
        self.messages_out.labels(listener, topic).inc(messages)

    def forget_topic(self, listener_topics):
        for key in listener_topics:
            for metric in (self.bytes_in, self.messages_in, self.bytes_out, self.messages_out):
                metric.remove(*key)

    def text(self) -> bytes:
        return generate_latest(self.registry)


def after_text(m) -> bytes:
    """The new families alone, in the order engine.metrics registers them."""
    r = CollectorRegistry()
    for family in (m.REQUESTS, m.REQUEST_ERRORS, m.REQUEST_VERSIONS, m.REQUEST_SECONDS, m.TOPIC_BYTES_IN,
                   m.TOPIC_MESSAGES_IN, m.TOPIC_BYTES_OUT, m.TOPIC_MESSAGES_OUT, m.STORE_APPEND_SECONDS):
        r.register(family)
    return generate_latest(r)


ODD_SECONDS = [0, 0.0, *LATENCY, 30.000001, 31, 1e9, 1e-9, 0.1 + 0.2, 2.5000000001, 7, 10**18, float("inf")]
ODD_DISK = [0, 0.0, *DISK, 5.000001, 6, 1e-12, 0.1 + 0.2, 10**12]


def test_exposition_is_byte_identical_to_prometheus_client(m):
    before = Before()
    assert after_text(m) == before.text()  # nothing used yet: HELP/TYPE and the unlabelled histogram's zeros
    m.RequestStats("kafka", "NeverCalled")  # bound on first use only: no series
    produce, send = m.RequestStats("kafka", "Produce"), m.RequestStats("broker", "SEND_MESSAGE_V2")
    for i, seconds in enumerate(ODD_SECONDS):
        errors = ("NOT_LEADER_OR_FOLLOWER", "UNKNOWN_TOPIC_OR_PARTITION") if i % 3 == 0 else ()
        produce.observe(seconds, errors)
        before.request("kafka", "Produce", seconds, errors)
        send.observe(seconds / 7, ["SYSTEM_BUSY"] if i % 5 == 0 else [])
        before.request("broker", "SEND_MESSAGE_V2", seconds / 7, ["SYSTEM_BUSY"] if i % 5 == 0 else [])
    for api, version in (("Produce", "9"), ("Fetch", 12), ("Produce", 9), ("Metadata", "0")):
        m.REQUEST_VERSIONS.labels(api, version).inc()
        before.versions.labels(api, version).inc()
    # 0, large ints, rounding past 2**53 (a float counter stops at 2**53 + 1 -> 2**53), floats
    amounts = [(0, 0), (1, 1), (2**53, 10), (1, 1), (1, 1), (1, 1), (10**18, 7), (123456789, 3), (0.5, 2.25)]
    for nbytes, messages in amounts:
        for listener, topic in (("kafka", "orders"), ("broker", "Orders"), ("kafka", "gone")):
            m.topic_in(listener, topic, nbytes, messages)
            before.topic_in(listener, topic, nbytes, messages)
        m.topic_out("kafka", "orders", nbytes, messages)
        before.topic_out("kafka", "orders", nbytes, messages)
        m.topic_out("kafka", "gone", messages, 1)
        before.topic_out("kafka", "gone", messages, 1)
    for nbytes in (2**53, 1, 1, 1, 0.25):  # no larger amount after: the rounding shows
        m.topic_out("broker", "edge", nbytes, nbytes)
        before.topic_out("broker", "edge", nbytes, nbytes)
    for seconds in ODD_DISK:
        m.STORE_APPEND_SECONDS.observe(seconds)
        before.append.observe(seconds)
    assert after_text(m) == before.text()
    # a deleted topic's series go; a topic made again under the name starts from zero, rendered last
    m.forget_topic("gone")
    m.forget_topic("never-seen")
    before.forget_topic([("kafka", "gone")])
    assert after_text(m) == before.text()
    assert b'topic="gone"' not in after_text(m)
    m.topic_in("kafka", "gone", 5, 1)
    before.topic_in("kafka", "gone", 5, 1)
    assert after_text(m) == before.text()
    # the whole /metrics still carries every family once
    whole = generate_latest(m.REGISTRY)
    assert whole.count(b"# TYPE rockafka_requests_total counter") == 1
    assert whole.count(b"# TYPE rockafka_request_duration_seconds histogram") == 1


def test_readers_of_the_metric_objects_still_work(m):
    """What the console's history and ``REGISTRY.get_sample_value`` read off the families."""
    from rockafka.history import _per_topic, _total

    m.topic_in("kafka", "a", 100, 4)
    m.topic_in("broker", "a", 50, 1)
    m.topic_in("kafka", "b", 10, 2)
    assert _total(m.TOPIC_MESSAGES_IN) == 7.0 and _total(m.TOPIC_BYTES_IN) == 160.0
    assert _per_topic(m.TOPIC_MESSAGES_IN) == {"a": 5.0, "b": 2.0}
    assert _total(m.TOPIC_MESSAGES_OUT) == 0
    m.RequestStats("kafka", "Fetch").observe(0.01, ("OFFSET_OUT_OF_RANGE",))
    get = m.REGISTRY.get_sample_value
    assert get("rockafka_requests_total", {"listener": "kafka", "api": "Fetch"}) == 1.0
    assert get("rockafka_request_duration_seconds_bucket", {"listener": "kafka", "api": "Fetch", "le": "0.005"}) == 0
    assert get("rockafka_request_duration_seconds_bucket", {"listener": "kafka", "api": "Fetch", "le": "0.01"}) == 1
    assert get("rockafka_request_errors_total", {"listener": "kafka", "api": "Fetch",
                                                 "error": "OFFSET_OUT_OF_RANGE"}) == 1.0
    assert get("rockafka_store_append_duration_seconds_count") == 0


def test_negative_amounts_are_refused_as_prometheus_client_does(m):
    with pytest.raises(ValueError):
        m.topic_in("kafka", "t", -1, 1)
    with pytest.raises(ValueError):
        m.REQUEST_VERSIONS.labels("Produce", "9").inc(-1)
    with pytest.raises(ValueError):
        m.REQUEST_VERSIONS.labels("Produce")  # label count
    with pytest.raises(TypeError):  # bytes and messages share one cell: only topic_in updates them
        m.TOPIC_MESSAGES_IN.labels("kafka", "t")


def test_no_increment_is_lost_between_threads(m):
    """4 threads x 50,000 updates of the same series, the GIL switching as often as it can,
    a scraper reading all along (never a counter going down); the threads have exited by the
    last scrape, and a second round of threads (which may get their thread ids) adds to theirs."""
    threads_n, per_thread = 4, 50_000
    stats = m.RequestStats("kafka", "Produce")  # one per API, shared by every thread as in the node
    version = m.REQUEST_VERSIONS.labels("Produce", "9")
    start = threading.Barrier(threads_n)

    def work(i: int) -> None:
        start.wait()
        for n in range(per_thread):
            stats.observe(0.0003 if n % 2 else 0.2, ("E",) if n % 10 == 0 else ())
            m.topic_in("kafka", "t", 3, 1)
            version.inc()
            m.STORE_APPEND_SECONDS.observe(0.0002)

    seen: list[float] = []
    stop = threading.Event()

    def scrape() -> None:
        get = m.REGISTRY.get_sample_value
        while not stop.is_set():
            seen.append(get("rockafka_requests_total", {"listener": "kafka", "api": "Produce"}) or 0.0)

    switch = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        for round_ in (1, 2):
            scraper = threading.Thread(target=scrape)
            scraper.start()
            workers = [threading.Thread(target=work, args=(i,)) for i in range(threads_n)]
            for t in workers:
                t.start()
            for t in workers:
                t.join()
            stop.set()
            scraper.join()
            stop.clear()
            n = round_ * threads_n * per_thread
            get = m.REGISTRY.get_sample_value
            assert get("rockafka_requests_total", {"listener": "kafka", "api": "Produce"}) == n
            assert get("rockafka_request_duration_seconds_count", {"listener": "kafka", "api": "Produce"}) == n
            assert get("rockafka_request_duration_seconds_bucket", {"listener": "kafka", "api": "Produce",
                                                                    "le": "0.0005"}) == n // 2
            assert get("rockafka_request_duration_seconds_sum", {"listener": "kafka", "api": "Produce"}) == \
                pytest.approx(n // 2 * 0.2 + n // 2 * 0.0003)
            assert get("rockafka_request_errors_total", {"listener": "kafka", "api": "Produce", "error": "E"}) == n // 10
            assert get("rockafka_topic_messages_in_total", {"listener": "kafka", "topic": "t"}) == n
            assert get("rockafka_topic_bytes_in_total", {"listener": "kafka", "topic": "t"}) == 3 * n
            assert get("rockafka_kafka_request_versions_total", {"api": "Produce", "version": "9"}) == n
            assert get("rockafka_store_append_duration_seconds_bucket", {"le": "0.0005"}) == n
            # each thread wrote a cell of its own (on 3.11 a shared ``cell[0] += 1`` happens not to
            # lose updates: the GIL is only released at calls and backward jumps; later versions and
            # free threading do not promise that)
            assert threads_n <= len(stats._series) <= round_ * threads_n
    finally:
        sys.setswitchinterval(switch)
    assert len(seen) > 2 and seen == sorted(seen)


def test_forget_topic_drops_both_directions_on_every_listener(m):
    for listener in ("kafka", "broker"):
        m.topic_in(listener, "deleted", 10, 1)
        m.topic_in(listener, "kept", 10, 1)
    m.topic_out("kafka", "deleted", 10, 1)
    m.forget_topic("deleted")
    text = after_text(m).decode()
    assert 'topic="deleted"' not in text
    assert text.count('topic="kept"') == 4  # bytes and messages in, on two listeners
    m.topic_out("kafka", "deleted", 7, 2)  # a topic created again under the name counts from zero
    get = m.REGISTRY.get_sample_value
    assert get("rockafka_topic_messages_out_total", {"listener": "kafka", "topic": "deleted"}) == 2
    assert get("rockafka_topic_messages_in_total", {"listener": "kafka", "topic": "deleted"}) is None


def test_an_unlabelled_counter_updates_its_one_series():
    registry = CollectorRegistry()
    c = CellCounter("rockafka_test_things", "Things.", Table(), registry)
    c.inc()
    c.inc(2.5)
    assert generate_latest(registry).endswith(b"rockafka_test_things_total 3.5\n")
