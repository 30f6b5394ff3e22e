"""Reading a topic: batch (``spark.read.format("rockafka")``) and streaming (``readStream``).

Batch: ``partitions()`` snapshots each selected queue's [start, end) on the driver (``startingOffsets``
earliest / latest / group, narrowed by a pushed store-time range through offset-by-time) and
splits it into ranges of at most ``maxOffsetsPerPartition``; each task pulls its range with the
subscription (TAG or SQL92) in the request, so the broker sends only matching messages. A pushed
key filter plans one task per key that asks the broker's index (QUERY_MESSAGE) instead.

Streaming: offsets are ``{"<broker>:<queue>": next offset}``; Spark checkpoints them, so a query
restarted from its checkpoint re-reads exactly the ranges it had not committed (exactly-once
reads with an idempotent or transactional sink). ``commit(end)`` — called by Spark after the
micro-batch is committed — stores ``end`` as the consumer group's offsets on the broker, so the
group's lag is visible to operators; the checkpoint, not the group offset, is what a restart
trusts.

Invariants: a row is returned only if it matches every filter the reader accepted (see
``pushdown``); every broker call is bounded; no client outlives the call that opened it, except
the streaming reader's driver client, closed in ``stop()``.
"""

from __future__ import annotations

import uuid
from datetime import datetime, timezone
from typing import Any, Iterator

from pyspark.sql.datasource import DataSourceReader, DataSourceStreamReader, InputPartition

from .pushdown import ScanPlan, push
from .schema import Options, message_row

try:  # Spark 4.2+: read limits and availableNow for Python streaming sources
    from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxRows, SupportsTriggerAvailableNow
except ImportError:  # pragma: no cover - older Spark: plain latestOffset()
    ReadAllAvailable = ReadMaxRows = None  # type: ignore[assignment,misc]

    class SupportsTriggerAvailableNow:  # type: ignore[no-redef]
        pass


class RangePartition(InputPartition):
    def __init__(self, broker_name: str, queue_id: int, start: int, end: int):
        super().__init__((broker_name, queue_id, start, end))
        self.broker_name, self.queue_id, self.start, self.end = broker_name, queue_id, start, end


class KeyPartition(InputPartition):
    def __init__(self, key: str, ranges: dict[str, tuple[int, int]]):  # "<broker>:<queue>" -> [start, end)
        super().__init__((key, ranges))
        self.key, self.ranges = key, ranges


def _client(options: Options, group: str | None = None):
    from .broker import BrokerClient

    return BrokerClient(options.namesrv, group or options.group, options.timeout_ms)


def _mq_name(mq: Any) -> str:
    return f"{mq.broker_name}:{mq.queue_id}"


def _read_partition(options: Options, plan: ScanPlan, partition: Any, group: str) -> Iterator[tuple]:
    from gateway_native.client import MessageQueue
    from gateway_native.remoting.subscription import SubscriptionData

    etype, expression = plan.subscription()
    fields = options.prop_fields
    with _client(options, group) as client:
        if isinstance(partition, KeyPartition):
            lo, hi = plan.time_window_ms()
            end_ms = hi if hi is not None else int(datetime.now(timezone.utc).timestamp() * 1000) + 60_000
            sub = SubscriptionData.build(options.topic, expression, etype)
            seen = set()
            found = []
            for m in client.query_by_key(options.topic, partition.key, lo or 0, end_ms):
                rng = partition.ranges.get(f"{m.broker_name}:{m.queue_id}")
                if (m.topic != options.topic or rng is None or not rng[0] <= m.queue_offset < rng[1]
                        or not m.keys or m.keys[0] != partition.key or not plan.time_matches(m.store_timestamp)
                        or not sub.matches_properties(m.properties)
                        or (m.broker_name, m.queue_id, m.queue_offset) in seen):
                    continue
                seen.add((m.broker_name, m.queue_id, m.queue_offset))
                found.append(m)
            for m in sorted(found, key=lambda m: (m.broker_name, m.queue_id, m.queue_offset)):
                yield message_row(m, fields)
            return
        mq = MessageQueue(options.topic, partition.broker_name, partition.queue_id)
        for m in client.pull_range(mq, partition.start, partition.end, etype, expression):
            if plan.time_bounds and not plan.time_matches(m.store_timestamp):
                continue
            yield message_row(m, fields)


def _option_plan(options: Options) -> ScanPlan:
    plan = ScanPlan()
    if options.tags:
        plan.tags = frozenset(t.strip() for t in options.tags.split("||") if t.strip())
        plan.pushed.append(f"tags IN {sorted(plan.tags)} (option tags)")
    if options.sql:
        plan.sql.append(options.sql)
        plan.pushed.append(f"SQL92 {options.sql} (option sql)")
    return plan


class RockafkaReader(DataSourceReader):
    def __init__(self, options: Options):
        self.options = options
        self.plan = _option_plan(options)
        self.group = options.group_or(f"rockafka-spark-batch-{uuid.uuid4().hex[:12]}")

    def pushFilters(self, filters):  # noqa: N802 - Spark's name
        return push(self.plan, filters, self.options.prop_fields)

    def describe(self) -> str:
        return f"rockafka topic={self.options.topic} pushed: {self.plan.describe()}"

    def partitions(self):
        o, plan = self.options, self.plan
        if plan.matches_nothing():
            return [RangePartition("-", 0, 0, 0)]
        ranges: dict[str, tuple[int, int]] = {}
        with _client(o, self.group) as client:
            lo_ms, hi_ms = plan.time_window_ms()
            for mq in client.queues(o.topic):
                if plan.queues is not None and mq.queue_id not in plan.queues:
                    continue
                lo, hi = client.min_offset(mq), client.max_offset(mq)
                start = _starting(client, mq, o.starting_offsets, lo, hi)
                end = hi if o.ending_offsets == "latest" else min(hi, int(o.ending_offsets))
                if plan.keys is None:  # a key lookup is not a scan: the time index is not needed
                    if lo_ms is not None:
                        start = max(start, client.offset_at(mq, lo_ms))
                    if hi_ms is not None:
                        end = min(end, client.offset_at(mq, hi_ms))
                ranges[_mq_name(mq)] = (start, end)
        if plan.keys is not None:
            return [KeyPartition(k, ranges) for k in sorted(plan.keys)] or [RangePartition("-", 0, 0, 0)]
        step = max(1, o.max_offsets_per_partition)
        out = []
        for name, (start, end) in sorted(ranges.items()):
            broker, queue = name.rsplit(":", 1)
            for s in range(start, end, step):
                out.append(RangePartition(broker, int(queue), s, min(end, s + step)))
        return out or [RangePartition("-", 0, 0, 0)]

    def read(self, partition):
        if isinstance(partition, RangePartition) and partition.start >= partition.end:
            return iter(())
        return _read_partition(self.options, self.plan, partition, self.group)


def _starting(client: Any, mq: Any, how: str, lo: int, hi: int) -> int:
    if how == "latest":
        return hi
    if how == "group":
        committed = client.committed_offset(mq)
        return committed if committed >= 0 else lo
    if how == "earliest":
        return lo
    return max(lo, min(hi, int(how)))


class RockafkaStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    def __init__(self, options: Options):
        self.options = options
        self.plan = _option_plan(options)
        self.group = options.group_or(f"rockafka-spark-{options.topic}")
        self._client = None
        self._target: dict[str, int] | None = None

    def __getstate__(self) -> dict[str, Any]:  # executors get the options, never the driver's client
        state = dict(self.__dict__)
        state["_client"] = None
        return state

    def _driver(self):
        if self._client is None:
            self._client = _client(self.options, self.group)
        return self._client

    def _latest(self) -> dict[str, int]:
        client = self._driver()
        return {_mq_name(mq): client.max_offset(mq) for mq in client.queues(self.options.topic)}

    def initialOffset(self) -> dict:  # noqa: N802
        client = self._driver()
        out = {}
        for mq in client.queues(self.options.topic):
            lo, hi = client.min_offset(mq), client.max_offset(mq)
            out[_mq_name(mq)] = _starting(client, mq, self.options.stream_starting_offsets, lo, hi)
        return out

    def prepareForTriggerAvailableNow(self) -> None:  # noqa: N802
        self._target = self._latest()

    def getDefaultReadLimit(self):  # noqa: N802
        if ReadMaxRows is not None and self.options.max_messages_per_trigger:
            return ReadMaxRows(self.options.max_messages_per_trigger)
        return ReadAllAvailable() if ReadAllAvailable is not None else None

    def latestOffset(self, start: dict | None = None, limit: Any = None) -> dict:  # noqa: N802
        latest = self._target if self._target is not None else self._latest()
        start = start or {}
        end = {q: max(hi, start.get(q, 0)) for q, hi in latest.items()}
        for q, off in start.items():  # a queue that vanished keeps its place
            end.setdefault(q, off)
        if ReadMaxRows is not None and isinstance(limit, ReadMaxRows):
            budget = int(limit.max_rows if hasattr(limit, "max_rows") else limit.maxRows)
            for q in sorted(end):
                take = min(end[q] - start.get(q, 0), max(budget, 0))
                end[q] = start.get(q, 0) + take
                budget -= take
        return end

    def partitions(self, start: dict, end: dict):
        out = []
        for q, hi in sorted(end.items()):
            lo = start.get(q, 0)
            if hi > lo:
                broker, queue = q.rsplit(":", 1)
                out.append(RangePartition(broker, int(queue), lo, hi))
        return out

    def read(self, partition):
        return _read_partition(self.options, self.plan, partition, self.group)

    def commit(self, end: dict) -> None:
        if not self.options.commit_offsets:
            return
        from gateway_native.client import MessageQueue

        offsets = {}
        for q, off in end.items():
            broker, queue = q.rsplit(":", 1)
            offsets[MessageQueue(self.options.topic, broker, int(queue))] = int(off)
        self._driver().commit_offsets(offsets)

    def stop(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None
