"""Message trace written by the broker, in RocketMQ's trace format (docs/design/grpc-proxy.md,
"Message trace").

RocketMQ's remoting clients with ``enableMsgTrace`` write their own trace records to
``RMQ_SYS_TRACE_TOPIC``. Kafka clients and RocketMQ 5's gRPC clients have no such switch, so with
the broker key ``brokerTraceEnable=true`` the node writes them: a ``Pub`` record for every
message stored through the Kafka or gRPC front, and ``SubBefore`` / ``SubAfter`` records for
what a gRPC consumer receives and acknowledges. ``mqadmin queryMsgTraceById`` finds them like
the clients' own.

Record format (RocketMQ's ``TraceDataEncoder``; fields separated by 0x01, records ended by 0x02):

    Pub       timestamp regionId group topic msgId tags keys storeHost bodyLength costMs msgType offsetMsgId success
    SubBefore timestamp regionId group requestId msgId retryTimes keys
    SubAfter  requestId msgId costMs success keys contextCode timestamp group

``msgType`` is the ordinal of RocketMQ's ``MessageType``: 0 normal, 1 transactional half,
2 transactional commit, 3 delay, 4 FIFO. A trace message carries up to ``BATCH`` records; its
KEYS are every traced message id and key (what ``queryMsgTraceById`` looks up by), its born
host the client's address (shown as ``#ClientHost``).

Cost: nothing on the send path while the key is off (one flag read per request). When on, the
front hands the stored commitlog offsets to one writer thread through a bounded queue (as the
clients' ``AsyncTraceDispatcher``: a full queue drops the trace, counted in
``rockafka_trace_dropped_total``, never slows a send); the thread reads each unit back (Kafka
batches expanded to their records, so a record's id is the one consumers see) and stores the
trace messages.
"""

from __future__ import annotations

import queue
import threading
import time
from typing import Any, Iterable

import structlog
from prometheus_client import Counter

from engine import metrics
from engine.message import INNER_BATCH_FLAG, Message

log = structlog.get_logger("rockafka.broker.trace")

TRACE_TOPIC = "RMQ_SYS_TRACE_TOPIC"
REGION = "DefaultRegion"
C1, C2 = "\x01", "\x02"
BATCH = 64  # records per trace message
QUEUE_SIZE = 4096  # pending jobs before traces are dropped

NORMAL, HALF, COMMIT, DELAY, FIFO = 0, 1, 2, 3, 4

TRACE_RECORDS = Counter("rockafka_trace_records", "Trace records the broker wrote, by type.", ["type"],
                        registry=metrics.REGISTRY)
TRACE_DROPPED = Counter("rockafka_trace_dropped", "Trace jobs dropped because the trace writer's queue was full.",
                        registry=metrics.REGISTRY)


def enabled(config: Any) -> bool:
    """``brokerTraceEnable`` (runtime-updatable with ``mqadmin updateBrokerConfig``)."""
    return config.extra_bool("broker_trace_enable", False)


def _msg_type(props: dict[str, str]) -> int:
    if props.get("TRAN_MSG") == "true":
        return HALF
    if "TIMER_DELIVER_MS" in props or "DELAY" in props or "TIMER_DELAY_SEC" in props or "TIMER_DELAY_MS" in props:
        return DELAY
    if props.get("SHARDING_KEY"):
        return FIFO
    return NORMAL


def _keys(m: Any) -> str:
    return " ".join(m.keys)


def pub_record(m: Any, group: str, cost_ms: int, store_host: str) -> str:
    """A Pub record of stored message ``m`` (an ``engine.message.MessageExt``)."""
    return C1.join(["Pub", str(m.store_timestamp or int(time.time() * 1000)), REGION, group, m.topic,
                    m.uniq_key or m.msg_id, m.tags or "", _keys(m), store_host, str(len(m.body)), str(cost_ms),
                    str(_msg_type(m.properties)), m.msg_id, "true"]) + C2


def sub_before_record(m: Any, group: str, request_id: str, timestamp: int) -> str:
    return C1.join(["SubBefore", str(timestamp), REGION, group, request_id, m.uniq_key or m.msg_id,
                    str(m.reconsume_times), _keys(m)]) + C2


def sub_after_record(msg_id: str, keys: str, group: str, request_id: str, cost_ms: int, success: bool,
                     timestamp: int) -> str:
    # contextCode 0 = SUCCESS (RocketMQ's ConsumeReturnType ordinal)
    return C1.join(["SubAfter", request_id, msg_id, str(cost_ms), "true" if success else "false", keys,
                    "0" if success else "2", str(timestamp), group]) + C2


def request_id(handle: str) -> str:
    """What ties a delivery's SubBefore to its SubAfter: the POP handle's pop time, queue and
    offset (``engine.pop`` handle: startOffset popTime invisibleTime reviveQid topicType
    brokerName queueId queueOffset commitLogOffset)."""
    f = handle.split(" ")
    return f"{f[1]}-{f[6]}-{f[7]}" if len(f) >= 8 else handle[:48]


def sub_after_for_ack(msg_id: str, handle: str, group: str) -> str:
    """The SubAfter of an acknowledged delivery: consumed successfully, cost = pop to ack."""
    now = int(time.time() * 1000)
    f = handle.split(" ")
    try:
        cost = max(0, now - int(f[1]))
    except (IndexError, ValueError):
        cost = 0
    return sub_after_record(msg_id, "", group, request_id(handle), cost, True, now)


def _index_keys(record: str) -> list[str]:
    """What a record is found by: its message id and the message's keys."""
    f = record.rstrip(C2).split(C1)
    kind = f[0]
    if kind == "Pub":
        return [f[5], *f[7].split()]
    if kind == "SubBefore":
        return [f[5], *f[7].split()]
    return [f[2], *f[5].split()]  # SubAfter


class TraceWriter:
    """One per store: a daemon thread storing trace messages from a bounded job queue."""

    def __init__(self, store: Any):
        self.store = store
        self._jobs: queue.Queue = queue.Queue(QUEUE_SIZE)
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    # -- called by the fronts (event loop): never block -----------------------------------------
    def pub_stored(self, commitlog_offsets: list[int], group: str, client_host: Any, cost_ms: int) -> None:
        """Pub records for the units stored at ``commitlog_offsets`` (Kafka batches: one per record)."""
        self._submit(("pub", commitlog_offsets, group, client_host, cost_ms))

    def records(self, records: list[str], client_host: Any) -> None:
        """Ready-made records (SubBefore / SubAfter) to store."""
        if records:
            self._submit(("raw", records, client_host))

    def _submit(self, job: tuple) -> None:
        self._ensure_thread()
        try:
            self._jobs.put_nowait(job)
        except queue.Full:
            TRACE_DROPPED.inc()

    def _ensure_thread(self) -> None:
        if self._thread is not None:
            return
        with self._lock:
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="broker-trace", daemon=True)
                self._thread.start()

    # -- the writer thread -----------------------------------------------------------------------
    def _run(self) -> None:
        while True:
            job = self._jobs.get()
            try:
                if job[0] == "pub":
                    _kind, offsets, group, host, cost = job
                    self._write(self._pub_records(offsets, group, cost), host)
                else:
                    self._write(job[1], job[2])
            except Exception:
                log.exception("trace_write_failed")

    def _pub_records(self, offsets: Iterable[int], group: str, cost_ms: int) -> list[str]:
        from engine.batch_convert import expand_batch_unit
        from engine.message import decode_message

        out = []
        for offset in offsets:
            m = self.store.look_message_by_offset(offset)
            if m is None:
                continue
            host = f"{m.store_host[0]}:{m.store_host[1]}" if isinstance(m.store_host, tuple) else str(m.store_host)
            if m.sys_flag & INNER_BATCH_FLAG:
                unit = self.store.commitlog.read_unit(offset)
                msgs = [decode_message(u) for u in expand_batch_unit(unit)] if unit is not None else []
            else:
                msgs = [m]
            out += [pub_record(x, group, cost_ms, host) for x in msgs]
        return out

    def _write(self, records: list[str], client_host: Any) -> None:
        for i in range(0, len(records), BATCH):
            chunk = records[i:i + BATCH]
            keys: dict[str, None] = {}
            for r in chunk:
                keys.update(dict.fromkeys(k for k in _index_keys(r) if k))
            result = self.store.put_message(Message(topic=TRACE_TOPIC, body="".join(chunk).encode("utf-8"),
                                                    keys=list(keys), queue_id=0, born_host=client_host,
                                                    born_timestamp=int(time.time() * 1000)))
            if not result.stored:
                log.warning("trace_not_stored", status=result.status.name, error=result.error, records=len(chunk))
                continue
            for r in chunk:
                TRACE_RECORDS.labels(r.split(C1, 1)[0]).inc()


_writers: dict[int, TraceWriter] = {}
_writers_lock = threading.Lock()


def writer_for(store: Any) -> TraceWriter:
    with _writers_lock:
        w = _writers.get(id(store))
        if w is None or w.store is not store:
            w = _writers[id(store)] = TraceWriter(store)
        return w
