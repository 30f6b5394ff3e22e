"""Fetch sessions (KIP-227) and topic ids in Fetch (v13+): the request side of Fetch.

Owns the node's fetch-session cache. ``FetchSessions.open(body, version)`` turns a Fetch
request into a ``FetchContext``: the full list of partitions to read (by topic name) and how to
shape the answer; ``FetchContext.respond(responses)`` then keeps, for an incremental fetch, only
the partitions the client must hear about, updates the session, and gives the top-level
``session_id``. Reading the partitions stays in ``apis/fetch.py``.

Kafka's rules, by (session_id, session_epoch) of the request:
- epoch -1 (final): a full fetch without a session; a session named by the id is closed first.
  Response session id 0.
- epoch 0 (initial): a full fetch that opens a new session holding the request's partitions
  (an old session named by the id is closed first). Response session id = the new session's
  id, or 0 when the cache has no room (the client goes on with full fetches).
- epoch > 0: an incremental fetch on session ``session_id``: FETCH_SESSION_ID_NOT_FOUND (70)
  when the cache does not hold it (evicted, never created, node restarted),
  INVALID_FETCH_SESSION_EPOCH (71) when the epoch is not the one the session expects next,
  FETCH_SESSION_TOPIC_ID_ERROR (106) when the request addresses topics differently (by id vs by
  name) from the request that created it. Otherwise the request's partitions are added or
  updated (fetch offset, max bytes, log start offset), ``forgotten_topics_data`` removed, the
  expected epoch moves to the next (1 after 2^31-1), and the answer holds only partitions with
  records, an error, a preferred read replica, or a high watermark / last stable offset / log
  start offset different from what this session last told the client. Partitions that returned
  records move to the end of the session's order, so every partition gets its turn at the
  response's byte limit.
Errors in an incremental fetch are top-level with no partitions (Kafka's).

Topic ids (v13+): each requested topic id is resolved to its topic (``_common.topic_by_id``);
an id no topic has answers its partitions with UNKNOWN_TOPIC_ID (100), and the partition stays
in the session (the client drops it once its metadata no longer has the topic).

The cache (Kafka's ``FetchSessionCache``): at most ``max_incremental_fetch_session_cache_slots``
sessions (Kafka's default 1000). A new session takes a free slot, else evicts the least recently
used session idle for at least ``min_incremental_fetch_session_eviction_ms`` (120000), else the
least recently used session with fewer partitions than the new one, else none is created.
Sessions are not persisted (a restarted node answers FETCH_SESSION_ID_NOT_FOUND, and clients
start a new session, as against a restarted Kafka broker).

Invariants: used on the event loop only; a session is changed only by a request carrying its
id and expected epoch; the response never omits a partition whose state the client has not seen.
"""

from __future__ import annotations

import itertools
import random
import time
import uuid
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

import structlog
from prometheus_client import Counter, Gauge

from engine.metrics import REGISTRY
from gateway_kafka import error_codes as E
from gateway_kafka.apis._common import topic_by_id, topic_id

log = structlog.get_logger("rockafka.kafka.fetch_sessions")

INVALID_SESSION_ID = 0
INITIAL_EPOCH, FINAL_EPOCH = 0, -1
TOPIC_ID_VERSION = 13
ZERO_UUID = uuid.UUID(int=0)

SESSIONS = Gauge("rockafka_kafka_fetch_sessions", "Incremental fetch sessions in the cache (Kafka's "
                 "NumIncrementalFetchSessions).", registry=REGISTRY)
FETCHES = Counter("rockafka_kafka_fetch_session_requests", "Fetch requests by kind: full (no session), "
                  "session_opened, incremental, refused (FETCH_SESSION_ID_NOT_FOUND, INVALID_FETCH_SESSION_EPOCH, "
                  "FETCH_SESSION_TOPIC_ID_ERROR).", ["kind"], registry=REGISTRY)
EVICTIONS = Counter("rockafka_kafka_fetch_session_evictions", "Sessions evicted from a full cache to make room "
                    "for a new one.", registry=REGISTRY)

FULL, OPENED = FETCHES.labels("full"), FETCHES.labels("session_opened")
INCREMENTAL, REFUSED = FETCHES.labels("incremental"), FETCHES.labels("refused")

PartKey = tuple[str, uuid.UUID, int]    # (topic name or "", topic id or zero, partition)


def next_epoch(epoch: int) -> int:
    return 1 if epoch >= 0x7FFFFFFF else epoch + 1


@dataclass
class CachedPartition:
    request: dict                      # the partition as last requested (fetch offset, max bytes, ...)
    high_watermark: int = -2           # what the session last told the client (-2: nothing yet)
    last_stable_offset: int = -2
    log_start_offset: int = -2


@dataclass
class FetchSession:
    id: int
    uses_ids: bool
    epoch: int                          # the epoch the next incremental request must carry
    partitions: "OrderedDict[PartKey, CachedPartition]" = field(default_factory=OrderedDict)
    last_used: float = 0.0


@dataclass
class FetchContext:
    """One Fetch request resolved against the cache."""
    topics: list[dict]                  # what to read: [{"topic": name, "partitions": [...]}]
    unknown: list[dict]                 # responses for topic ids no topic has
    error: int = E.NONE
    session: FetchSession | None = None
    incremental: bool = False
    uses_ids: bool = False
    _keys: dict[tuple[str, int], PartKey] = field(default_factory=dict)

    def respond(self, responses: list[dict]) -> tuple[int, list[dict]]:
        """(response session id, the responses to send) from the partitions read."""
        session = self.session
        if session is None:   # sessionless: everything read is answered as it is
            out = responses + self.unknown
            if self.uses_ids:
                for t in out:
                    t.setdefault("topic_id", topic_id(t["topic"]))
            return INVALID_SESSION_ID, out
        out = []
        for t in responses + self.unknown:
            parts = []
            for p in t["partitions"]:
                key = self._keys.get((t["topic"], p["partition_index"]))
                cached = session.partitions.get(key) if session is not None and key is not None else None
                if cached is not None:
                    changed = (p.get("records") or p["error_code"] != E.NONE or p.get("preferred_read_replica", -1) >= 0
                               or p["high_watermark"] != cached.high_watermark
                               or p["last_stable_offset"] != cached.last_stable_offset
                               or p["log_start_offset"] != cached.log_start_offset)
                    cached.high_watermark = p["high_watermark"]
                    cached.last_stable_offset = p["last_stable_offset"]
                    cached.log_start_offset = p["log_start_offset"]
                    if p.get("records"):   # its turn was used: to the end of the order
                        session.partitions.move_to_end(key)
                    if self.incremental and not changed:
                        continue
                parts.append(p)
            if parts or not self.incremental:
                entry = dict(t, partitions=parts)
                if self.uses_ids:
                    entry["topic_id"] = t.get("topic_id") or topic_id(t["topic"])
                out.append(entry)
        return (session.id if session is not None else INVALID_SESSION_ID), out


class FetchSessions:
    def __init__(self, gateway: Any):
        config = gateway.config
        self.gateway = gateway
        self.max_slots = max(0, config.extra_int("max_incremental_fetch_session_cache_slots", 1000))
        self.eviction_ms = config.extra_int("min_incremental_fetch_session_eviction_ms", 120_000)
        self.sessions: "OrderedDict[int, FetchSession]" = OrderedDict()   # least recently used first
        self._ids = itertools.count(random.randint(1, 1 << 20))
        self.created = self.evicted = 0

    # -- the request -----------------------------------------------------------------------
    def _resolve(self, t: dict, uses_ids: bool) -> tuple[str | None, uuid.UUID]:
        if not uses_ids:
            return t.get("topic"), ZERO_UUID
        tid = t.get("topic_id") or ZERO_UUID
        return topic_by_id(self.gateway, tid), tid

    def open(self, body: dict, version: int) -> FetchContext:
        uses_ids = version >= TOPIC_ID_VERSION
        session_id = body.get("session_id", INVALID_SESSION_ID) if version >= 7 else INVALID_SESSION_ID
        epoch = body.get("session_epoch", FINAL_EPOCH) if version >= 7 else FINAL_EPOCH
        now = time.monotonic()
        if epoch == FINAL_EPOCH or version < 7:   # sessionless (librdkafka, kafka-python, aiokafka)
            if session_id != INVALID_SESSION_ID and self.sessions.pop(session_id, None) is not None:
                SESSIONS.set(len(self.sessions))
            FULL.inc()
            return self._sessionless(body.get("topics") or [], uses_ids)
        if epoch == INITIAL_EPOCH:
            if session_id != INVALID_SESSION_ID:
                self.sessions.pop(session_id, None)
            requested = self._requested(body.get("topics") or [], uses_ids)
            session = self._create(uses_ids, len(requested), now)
            if session is not None:
                session.partitions = OrderedDict((k, CachedPartition(p)) for k, p in requested.items())
            (OPENED if session is not None else FULL).inc()
            SESSIONS.set(len(self.sessions))
            return self._context(requested, session, incremental=False, uses_ids=uses_ids)
        session = self.sessions.get(session_id)
        error = E.NONE
        if session is None:
            error = E.FETCH_SESSION_ID_NOT_FOUND
        elif session.epoch != epoch:
            error = E.INVALID_FETCH_SESSION_EPOCH
        elif session.uses_ids != uses_ids:
            error = E.FETCH_SESSION_TOPIC_ID_ERROR
        if error != E.NONE:
            REFUSED.inc()
            return FetchContext([], [], error, uses_ids=uses_ids)
        INCREMENTAL.inc()
        for t in body.get("forgotten_topics_data") or []:
            name, tid = self._resolve(t, uses_ids)
            for index in t.get("partitions") or []:
                session.partitions.pop((name or "", tid, index), None)
        for key, p in self._requested(body.get("topics") or [], uses_ids).items():
            cached = session.partitions.get(key)
            if cached is None:
                session.partitions[key] = CachedPartition(p)
            else:
                cached.request = p
        session.epoch = next_epoch(epoch)
        session.last_used = now
        self.sessions.move_to_end(session.id)
        return self._context(session.partitions, session, incremental=True, uses_ids=uses_ids)

    def _sessionless(self, topics: list[dict], uses_ids: bool) -> FetchContext:
        """A full fetch without a session: the request's topics as they are (resolved by id)."""
        if not uses_ids:
            return FetchContext(topics, [])
        named, unknown = [], []
        for t in topics:
            name, tid = self._resolve(t, True)
            if name:
                named.append({"topic": name, "topic_id": tid, "partitions": t.get("partitions") or []})
            else:
                unknown.append({"topic": "", "topic_id": tid, "partitions": [
                    _unknown_topic_id(p.get("partition", -1)) for p in t.get("partitions") or []]})
        return FetchContext(named, unknown, uses_ids=True)

    def _requested(self, topics: list[dict], uses_ids: bool) -> "OrderedDict[PartKey, dict]":
        out: OrderedDict[PartKey, dict] = OrderedDict()
        for t in topics:
            name, tid = self._resolve(t, uses_ids)
            for p in t.get("partitions") or []:
                out[(name or "", tid, p.get("partition", -1))] = p
        return out

    @staticmethod
    def _context(partitions: Any, session: FetchSession | None, incremental: bool, uses_ids: bool) -> FetchContext:
        topics: dict[tuple[str, uuid.UUID], dict] = {}
        unknown: dict[uuid.UUID, dict] = {}
        keys: dict[tuple[str, int], PartKey] = {}
        for key, item in partitions.items():
            name, tid, index = key
            p = item.request if isinstance(item, CachedPartition) else item
            if uses_ids and not name:
                unknown.setdefault(tid, {"topic": "", "topic_id": tid, "partitions": []})["partitions"].append(
                    _unknown_topic_id(index))
                continue
            topics.setdefault((name, tid), {"topic": name, "topic_id": tid, "partitions": []})["partitions"].append(p)
            keys[(name, index)] = key
        return FetchContext(list(topics.values()), list(unknown.values()), E.NONE, session, incremental, uses_ids,
                            keys)

    # -- the cache -------------------------------------------------------------------------
    def _create(self, uses_ids: bool, size: int, now: float) -> FetchSession | None:
        if self.max_slots <= 0:
            return None
        if len(self.sessions) >= self.max_slots and not self._evict_one(size, now):
            return None
        sid = next(self._ids) & 0x7FFFFFFF or next(self._ids)
        while sid in self.sessions or sid == INVALID_SESSION_ID:
            sid = next(self._ids) & 0x7FFFFFFF
        session = FetchSession(sid, uses_ids, next_epoch(INITIAL_EPOCH), last_used=now)
        self.sessions[sid] = session
        self.created += 1
        return session

    def _evict_one(self, size: int, now: float) -> bool:
        """Make room (Kafka's order): a stale session, else a smaller one; False when neither."""
        victim = None
        for sid, s in self.sessions.items():          # least recently used first
            if (now - s.last_used) * 1000 >= self.eviction_ms:
                victim = sid
                break
        if victim is None:
            for sid, s in self.sessions.items():
                if len(s.partitions) < size:
                    victim = sid
                    break
        if victim is None:
            return False
        del self.sessions[victim]
        self.evicted += 1
        EVICTIONS.inc()
        log.debug("fetch_session_evicted", session=victim)
        return True


def _unknown_topic_id(index: int) -> dict:
    return {"partition_index": index, "error_code": E.UNKNOWN_TOPIC_ID, "high_watermark": -1,
            "last_stable_offset": -1, "log_start_offset": -1, "aborted_transactions": [],
            "preferred_read_replica": -1, "records": b""}
