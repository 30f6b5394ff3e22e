"""Client quotas: ``kafka-configs --entity-type users|clients`` (DescribeClientQuotas 48 /
AlterClientQuotas 49) and the throttling they ask for (docs/design/kafka-gateway.md, "Client
quotas").

Owns the quota table and the rate sensors. The table is one record of ``__consumer_offsets`` per
quota entity (``log_table.LogTable``, key version ``CLIENT_QUOTA_KIND``; record name = the entity
as canonical JSON ``[["client-id", name|null], ["user", name|null]]``, null = the default;
value ``{"v": 1, "doc": {key: number}}``), stored before the change is answered, replicated and
replayed like the coordinators' state.

Entities (Kafka's): ``user``, ``client-id`` and (user, client-id), each by name or default. A
request's user is its principal's name (``ANONYMOUS`` without a login). For each quota key the
entity that applies is Kafka's first match of: user+client, user+default client, user,
default user+client, default user+default client, default user, client, default client.

Keys: ``producer_byte_rate`` (bytes/s of Produce requests), ``consumer_byte_rate`` (bytes/s of
Fetch responses), ``request_percentage`` (time spent answering requests, in percent of one
request thread per quota window; requests that park waiting for data or a rebalance count
nothing: Fetch, JoinGroup, SyncGroup), ``controller_mutation_rate`` (partitions created or
deleted per second by CreateTopics, CreatePartitions and DeleteTopics, KIP-599).

Throttling (Kafka's, KIP-219): rates are measured over ``WINDOW_SAMPLES`` samples of
``SAMPLE_MS`` (Kafka's quota.window.num=11, quota.window.size.seconds=1), per the applying
entity (a default quota applies to every user / client id on its own). Over the quota, the
request is still answered, with ``throttle_time_ms`` = (rate - quota) / quota * window, and the
connection then reads nothing for that long (the client also waits before its next request to
that broker).

Controller mutations (KIP-599, Kafka's ControllerMutationQuotaManager): a token bucket per
applying entity holding at most quota * ``WINDOW_SAMPLES`` * ``SAMPLE_MS`` / 1000 partitions (the
burst), refilled at the quota per second, starting full. Each topic of a CreateTopics /
CreatePartitions / DeleteTopics request takes the partitions it creates or deletes, in request
order. A strict request (CreateTopics v6+, CreatePartitions v3+, DeleteTopics v5+) refuses a topic
with THROTTLING_QUOTA_EXCEEDED while the bucket is in debt (below zero): the topic that takes the
bucket below zero is still done, the ones after it are not. Older versions are lenient: every
topic is done and only throttled. Either way the answer's ``throttle_time_ms`` is the time the
debt needs to be paid back (-tokens / quota), and the connection reads nothing for that long.
``validate_only`` requests take nothing.

Invariants: no quota set -> ``active`` is False and requests pay nothing; all methods run on the
event loop.
"""

from __future__ import annotations

import json
import math
from collections import deque
from typing import Any, Callable

import structlog

from gateway_kafka import error_codes as E
from gateway_kafka.log_table import LogTable

log = structlog.get_logger("rockafka.kafka.quotas")

CLIENT_QUOTA_KIND = 32101    # group-record key version (engine.consumer_offset.store_group_record)
USER, CLIENT_ID, IP = "user", "client-id", "ip"
PRODUCER_BYTE_RATE, CONSUMER_BYTE_RATE = "producer_byte_rate", "consumer_byte_rate"
REQUEST_PERCENTAGE, CONTROLLER_MUTATION_RATE = "request_percentage", "controller_mutation_rate"
QUOTA_KEYS = {PRODUCER_BYTE_RATE: int, CONSUMER_BYTE_RATE: int, REQUEST_PERCENTAGE: float,
              CONTROLLER_MUTATION_RATE: float}
WINDOW_SAMPLES, SAMPLE_MS = 11, 1000
PRODUCE, FETCH = 0, 1
MAX_SENSORS = 10_000                    # then idle ones are forgotten before a new one is made
PARKING_APIS = frozenset({1, 11, 14})   # Fetch, JoinGroup, SyncGroup: their time is mostly waiting

Entity = tuple[tuple[str, str | None], ...]   # sorted (type, name or None for the default)


def entity_key(entity: Entity) -> str:
    return json.dumps([list(pair) for pair in sorted(entity)], separators=(",", ":"))


def entity_of(key: str) -> Entity:
    return tuple(sorted((str(t), n if n is None else str(n)) for t, n in json.loads(key)))


class Rate:
    """Kafka's sampled rate: the sum of the samples in the window over the window's length, the
    window counted as at least (samples - 1) sample lengths (a new sensor is not over its quota
    for its first burst)."""

    __slots__ = ("samples",)

    def __init__(self) -> None:
        self.samples: deque[list] = deque()   # [sample start ms, value]

    def record(self, value: float, now_ms: float) -> None:
        start = now_ms - now_ms % SAMPLE_MS
        samples = self.samples
        if not samples or samples[-1][0] != start:
            samples.append([start, 0.0])
        samples[-1][1] += value
        horizon = now_ms - WINDOW_SAMPLES * SAMPLE_MS
        while samples and samples[0][0] + SAMPLE_MS <= horizon:
            samples.popleft()

    def window_ms(self, now_ms: float) -> float:
        elapsed = now_ms - self.samples[0][0] if self.samples else 0.0
        full = int(elapsed // SAMPLE_MS)
        if full < WINDOW_SAMPLES - 1:
            elapsed += (WINDOW_SAMPLES - 1 - full) * SAMPLE_MS
        return elapsed

    def per_second(self, now_ms: float) -> float:
        return sum(v for _s, v in self.samples) * 1000.0 / self.window_ms(now_ms)


class TokenBucket:
    """Kafka's token bucket of controller mutations: ``tokens`` may go below zero (debt)."""

    __slots__ = ("tokens", "last_ms")

    def __init__(self) -> None:
        self.tokens: float | None = None   # full on first use
        self.last_ms = 0.0

    def refill(self, quota: float, now_ms: float) -> float:
        burst = quota * WINDOW_SAMPLES * SAMPLE_MS / 1000.0
        if self.tokens is None:
            self.tokens = burst
        else:
            self.tokens = min(burst, self.tokens + quota * max(0.0, now_ms - self.last_ms) / 1000.0)
        self.last_ms = now_ms
        return self.tokens


class MutationQuota:
    """One request's view of its entity's controller-mutation bucket (see the module docstring)."""

    __slots__ = ("bucket", "quota", "strict", "_clock")

    def __init__(self, bucket: TokenBucket, quota: float, strict: bool, clock: Callable[[], float]):
        self.bucket, self.quota, self.strict, self._clock = bucket, quota, strict, clock

    def take(self, partitions: int) -> bool:
        """Record ``partitions`` mutated; False (nothing recorded) when a strict request must
        refuse the topic with THROTTLING_QUOTA_EXCEEDED."""
        tokens = self.bucket.refill(self.quota, self._clock() * 1000.0)
        if self.strict and tokens < 0:
            return False
        self.bucket.tokens = tokens - max(0, partitions)
        return True

    def throttle_ms(self) -> int:
        """The time the bucket's debt needs to be paid back (0 when it has none)."""
        tokens = self.bucket.refill(self.quota, self._clock() * 1000.0)
        return int(math.ceil(-tokens / self.quota * 1000.0)) if tokens < 0 else 0


THROTTLED_MESSAGE = "The throttling quota has been exceeded."


class ClientQuotas:
    def __init__(self, store: Any, put: Callable[..., Any] | None = None, clock: Callable[[], float] | None = None):
        import time

        self.table = LogTable(store, CLIENT_QUOTA_KIND, put)
        self._clock = clock or time.monotonic
        self._resolved: dict[tuple[str, str, str], tuple[float, tuple] | None] = {}
        self._resolved_for: Any = None
        self._sensors: dict[tuple, Rate] = {}

    def restore(self) -> None:
        self.table.restore()

    @property
    def active(self) -> bool:
        return bool(self.table.table)

    # -- which quota applies -------------------------------------------------------------------
    def quota(self, user: str, client_id: str, key: str) -> tuple[float, tuple] | None:
        """(quota, sensor tags) of ``key`` for this user and client id, None when no entity sets
        it. The tags name the sensor: the matched entity's types with the request's names."""
        table = self.table.table
        if self._resolved_for is not table:
            self._resolved, self._resolved_for = {}, table
            self._sensors.clear()
        cache_key = (user, client_id, key)
        if cache_key in self._resolved:
            return self._resolved[cache_key]
        found = None
        for entity in ((((CLIENT_ID, client_id), (USER, user))), ((CLIENT_ID, None), (USER, user)), ((USER, user),),
                       ((CLIENT_ID, client_id), (USER, None)), ((CLIENT_ID, None), (USER, None)), ((USER, None),),
                       ((CLIENT_ID, client_id),), ((CLIENT_ID, None),)):
            value = table.get(entity_key(entity), {}).get(key)
            if value is not None:
                tags = tuple((t, user if t == USER else client_id) for t, _n in entity)
                found = (float(value), tags)
                break
        if len(self._resolved) > 10_000:
            self._resolved.clear()
        self._resolved[cache_key] = found
        return found

    def throttle_ms(self, principal: str, client_id: str | None, api_key: int, request_bytes: int,
                    response_bytes: int, busy_ms: float) -> int:
        """Record one answered request; the time its connection must stay muted (0: none)."""
        user = principal.split(":", 1)[1] if ":" in principal else principal
        client = client_id or ""
        now = self._clock() * 1000.0
        worst = 0.0
        measures = [(REQUEST_PERCENTAGE, 0.0 if api_key in PARKING_APIS else busy_ms / 10.0)]
        if api_key == PRODUCE:
            measures.append((PRODUCER_BYTE_RATE, float(request_bytes)))
        elif api_key == FETCH:
            measures.append((CONSUMER_BYTE_RATE, float(response_bytes)))
        for key, value in measures:
            found = self.quota(user, client, key)
            if found is None:
                continue
            bound, tags = found
            sensor = self._sensors.get((key, tags))
            if sensor is None:
                if len(self._sensors) >= MAX_SENSORS:
                    self._expire_sensors(now)
                sensor = self._sensors[(key, tags)] = Rate()
            sensor.record(value, now)
            rate = sensor.per_second(now)
            if rate > bound > 0:
                window = sensor.window_ms(now)
                worst = max(worst, min((rate - bound) / bound * window, WINDOW_SAMPLES * SAMPLE_MS))
        return int(worst)

    def mutation_quota(self, principal: str, client_id: str | None, strict: bool) -> MutationQuota | None:
        """The controller-mutation quota of a CreateTopics / CreatePartitions / DeleteTopics
        request (None when no entity sets ``controller_mutation_rate`` for it)."""
        if not self.active:
            return None
        user = principal.split(":", 1)[1] if ":" in principal else principal
        found = self.quota(user, client_id or "", CONTROLLER_MUTATION_RATE)
        if found is None:
            return None
        bound, tags = found
        bucket = self._sensors.get((CONTROLLER_MUTATION_RATE, tags))
        if bucket is None:
            if len(self._sensors) >= MAX_SENSORS:
                self._expire_sensors(self._clock() * 1000.0)
            bucket = self._sensors[(CONTROLLER_MUTATION_RATE, tags)] = TokenBucket()
        return MutationQuota(bucket, bound, strict, self._clock)

    def _expire_sensors(self, now_ms: float) -> None:
        """Forget sensors with nothing in their window (a default quota makes one per client id);
        a token bucket out of debt once it has had a window's time to fill up again."""
        horizon = now_ms - WINDOW_SAMPLES * SAMPLE_MS
        for k in [k for k, r in self._sensors.items()
                  if (r.last_ms < horizon and (r.tokens or 0.0) >= 0.0 if isinstance(r, TokenBucket)
                      else not r.samples or r.samples[-1][0] < horizon)]:
            del self._sensors[k]

    # -- DescribeClientQuotas / AlterClientQuotas ----------------------------------------------
    def describe(self, components: list[dict], strict: bool) -> tuple[int, str | None, list[dict] | None]:
        """(error code, message, entries) for a DescribeClientQuotas filter."""
        wanted: dict[str, tuple[int, str | None]] = {}
        for c in components:
            etype, match_type, match = c.get("entity_type", ""), c.get("match_type", 0), c.get("match")
            if etype not in (USER, CLIENT_ID, IP):
                return E.INVALID_REQUEST, f"unknown entity type {etype!r}", None
            if etype in wanted:
                return E.INVALID_REQUEST, f"entity type {etype!r} given more than once", None
            if match_type not in (0, 1, 2):
                return E.INVALID_REQUEST, f"unknown match type {match_type}", None
            if match_type == 0 and match is None:
                return E.INVALID_REQUEST, f"an exact match of {etype!r} needs a name", None
            wanted[etype] = (match_type, match)
        entries = []
        for key, values in sorted(self.table.items()):
            entity = dict(entity_of(key))
            if strict and set(entity) != set(wanted):
                continue
            ok = True
            for etype, (match_type, match) in wanted.items():
                if etype not in entity:
                    ok = False
                elif match_type == 0:
                    ok = entity[etype] == match
                elif match_type == 1:
                    ok = entity[etype] is None
                else:
                    ok = entity[etype] is not None
                if not ok:
                    break
            if ok:
                entries.append({"entity": [{"entity_type": t, "entity_name": n} for t, n in sorted(entity.items())],
                                "values": [{"key": k, "value": float(v)} for k, v in sorted(values.items())]})
        return E.NONE, None, entries

    @staticmethod
    def validate(entity: list[dict], ops: list[dict]) -> tuple[Entity | None, str | None]:
        """The entity of an AlterClientQuotas entry and why it (or one of its ops) is refused."""
        pairs: dict[str, str | None] = {}
        for e in entity:
            etype, name = e.get("entity_type", ""), e.get("entity_name")
            if etype not in (USER, CLIENT_ID, IP):
                return None, f"unknown entity type {etype!r}"
            if etype in pairs:
                return None, f"entity type {etype!r} given more than once"
            pairs[etype] = name
        if not pairs:
            return None, "the entity names no entity type"
        if IP in pairs:
            return None, "ip quotas (connection_creation_rate) are not offered: the node's connection limits " \
                         "are max.connections / max.connections.per.ip"
        seen = set()
        for op in ops:
            key = op.get("key", "")
            if key not in QUOTA_KEYS:
                return None, f"unknown quota key {key!r} for a {'/'.join(sorted(pairs))} entity " \
                             f"(known: {', '.join(sorted(QUOTA_KEYS))})"
            if key in seen:
                return None, f"quota key {key!r} given more than once"
            seen.add(key)
            if op.get("remove"):
                continue
            value = float(op.get("value", 0.0))
            if not math.isfinite(value):
                return None, f"quota {key!r} must be a finite number, not {value}"
            if QUOTA_KEYS[key] is int and value != int(value):
                return None, f"quota {key!r} must be a whole number, not {value}"
            if not value > 0:
                return None, f"quota {key!r} must be above 0, not {value}"
        return tuple(sorted(pairs.items())), None

    async def alter(self, entity: Entity, ops: list[dict]) -> None:
        key = entity_key(entity)
        values = self.table.get(key)
        for op in ops:
            if op.get("remove"):
                values.pop(op["key"], None)
            else:
                value = float(op["value"])
                values[op["key"]] = int(value) if QUOTA_KEYS[op["key"]] is int else value
        await self.table.replace(key, values)
        log.info("client_quotas_altered", entity=key, quotas=values)
