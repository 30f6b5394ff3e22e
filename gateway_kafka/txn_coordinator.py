"""Kafka transaction coordinator: transactional ids, their open transactions, markers, timeouts.

Owns ``<store.config_dir>/kafka_transactions.json`` (format version 1, atomic with ``.bak``):
per transactional id its producer id and epoch (mirrored from ``producer_state``, which fences
stale epochs), state (Empty, Ongoing, CompleteCommit, CompleteAbort), transaction timeout, the
time the open transaction started, its partitions, its consumer groups and the offsets
TxnOffsetCommit staged for them.

How a transaction maps onto the engine (the same queues RocketMQ clients read):
- records are appended to their queues as they are produced (transactional batches);
  ``engine.txn_index`` keeps, per queue, the first offset of each open transaction (so the last
  stable offset holds committed-only readers back) and the aborted ranges;
- EndTxn writes one control batch (COMMIT or ABORT marker, ``engine.record_batch``) to each
  partition of the transaction, records the outcome in the index, and on commit applies the
  staged offsets to the engine's consumer offsets (shared with RocketMQ groups);
- a transaction open longer than its ``transaction.timeout.ms`` is aborted by the coordinator
  and the producer's epoch bumped, so the stale producer is fenced (as Kafka does);
- InitProducerId for a transactional id with an open transaction aborts it first.

Invariants: every state change is persisted before it is answered; markers are written before
the state says Complete, so a crash in between re-runs the completion at the next start
(``recover``), never loses it; a marker the store refuses (full disk, stopping) leaves the state
Prepare*, EndTxn answers CONCURRENT_TRANSACTIONS (retriable) and the completion is retried by
the client's next EndTxn or the timeout loop. A partition whose topic was deleted meanwhile
gets no marker and its open entry is dropped, so a re-created topic is not held back. Runs on the gateway's event loop; store writes go through an
executor.
"""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import dataclass, field
from typing import Any, Callable

import structlog

from engine import record_batch as rb
from engine.config_manager import write_atomic
from engine.txn_index import for_store
from gateway_kafka import error_codes as E

log = structlog.get_logger("rockafka.kafka.txn")

FORMAT_VERSION = 1
FILE_NAME = "kafka_transactions.json"
EMPTY, ONGOING, PREPARE_COMMIT, PREPARE_ABORT, COMPLETE_COMMIT, COMPLETE_ABORT = (
    "Empty", "Ongoing", "PrepareCommit", "PrepareAbort", "CompleteCommit", "CompleteAbort")


@dataclass
class TxnMetadata:
    producer_id: int
    epoch: int
    timeout_ms: int
    state: str = EMPTY
    started_ms: int = 0
    partitions: set[tuple[str, int]] = field(default_factory=set)
    groups: set[str] = field(default_factory=set)
    offsets: dict[str, dict[tuple[str, int], tuple[int, str | None]]] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {"producer_id": self.producer_id, "epoch": self.epoch, "timeout_ms": self.timeout_ms,
                "state": self.state, "started_ms": self.started_ms,
                "partitions": sorted([t, p] for t, p in self.partitions), "groups": sorted(self.groups),
                "offsets": {g: [[t, p, o, m] for (t, p), (o, m) in v.items()] for g, v in self.offsets.items()}}

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> "TxnMetadata":
        return cls(int(d["producer_id"]), int(d["epoch"]), int(d["timeout_ms"]), d.get("state", EMPTY),
                   int(d.get("started_ms", 0)), {(t, int(p)) for t, p in d.get("partitions", [])},
                   set(d.get("groups", [])),
                   {g: {(t, int(p)): (int(o), m) for t, p, o, m in v} for g, v in (d.get("offsets") or {}).items()})


class TransactionCoordinator:
    def __init__(self, gateway: Any):
        self.gw = gateway
        self.store = gateway.store
        self.index = for_store(gateway.store)
        self.path = self.store.config_dir / FILE_NAME
        self.txns: dict[str, TxnMetadata] = {}
        self.max_timeout_ms = gateway.config.extra_int("transaction_max_timeout_ms", 900_000)
        self.abort_check_ms = gateway.config.extra_int("transaction_abort_timed_out_transaction_cleanup_interval_ms", 1000)
        self._task: asyncio.Task | None = None
        self._locks: dict[str, asyncio.Lock] = {}
        self._by_pid: dict[int, TxnMetadata] = {}

    # -- persistence -----------------------------------------------------------------------------
    def load(self) -> None:
        for path in (self.path, self.path.with_name(self.path.name + ".bak")):
            try:
                doc = json.loads(path.read_text("utf-8"))
            except FileNotFoundError:
                continue
            except (OSError, ValueError) as exc:
                log.error("txn_state_unreadable", path=str(path), error=str(exc))
                continue
            if doc.get("version") != FORMAT_VERSION:
                raise ValueError(f"{path}: unsupported format version {doc.get('version')}")
            self.txns = {tid: TxnMetadata.from_json(d) for tid, d in (doc.get("transactions") or {}).items()}
            return

    def persist(self) -> None:
        doc = {"version": FORMAT_VERSION, "transactions": {tid: m.to_json() for tid, m in self.txns.items()}}
        write_atomic(self.path, json.dumps(doc, sort_keys=True).encode())

    async def start(self) -> None:
        await asyncio.get_running_loop().run_in_executor(None, self.load)
        await self.recover()
        self._task = asyncio.create_task(self._timeout_loop())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except (asyncio.CancelledError, Exception):
                pass

    async def recover(self) -> None:
        """Finish completions a crash interrupted (state Prepare*: markers may be missing)."""
        for tid, m in list(self.txns.items()):
            if m.state in (PREPARE_COMMIT, PREPARE_ABORT):
                await self._complete(tid, m, m.state == PREPARE_COMMIT)

    def lock(self, tid: str) -> asyncio.Lock:
        lk = self._locks.get(tid)
        if lk is None:
            lk = self._locks[tid] = asyncio.Lock()
        return lk

    # -- validation ------------------------------------------------------------------------------
    def _check(self, tid: str, producer_id: int, epoch: int) -> tuple[int, TxnMetadata | None]:
        m = self.txns.get(tid)
        if m is None or m.producer_id != producer_id:
            return E.INVALID_PRODUCER_ID_MAPPING, m
        if epoch < m.epoch:
            return E.PRODUCER_FENCED, m
        if epoch > m.epoch:
            return E.INVALID_PRODUCER_EPOCH, m
        if m.state in (PREPARE_COMMIT, PREPARE_ABORT):
            return E.CONCURRENT_TRANSACTIONS, m
        return E.NONE, m

    # -- APIs ------------------------------------------------------------------------------------
    async def init_producer_id(self, tid: str, timeout_ms: int, producer_id: int, epoch: int) -> tuple[int, int, int]:
        if not 0 < timeout_ms <= self.max_timeout_ms:
            return E.INVALID_TRANSACTION_TIMEOUT, -1, -1
        async with self.lock(tid):
            m = self.txns.get(tid)
            if m is not None and m.state in (PREPARE_COMMIT, PREPARE_ABORT):
                if not await self._complete(tid, m, m.state == PREPARE_COMMIT, reason="retried"):
                    return E.CONCURRENT_TRANSACTIONS, -1, -1
            if m is not None and m.state == ONGOING:
                # a new incarnation: whatever the old one left open is aborted
                if not await self._complete(tid, m, committed=False, reason="producer_reinitialised"):
                    return E.CONCURRENT_TRANSACTIONS, -1, -1
            from gateway_kafka.apis._common import blocking

            code, pid, new_epoch = await blocking(self.gw.producer_state.init_producer_id, tid, producer_id, epoch)
            if code != E.NONE:
                return code, -1, -1
            self.txns[tid] = self._by_pid[pid] = TxnMetadata(pid, new_epoch, timeout_ms)
            await self._persist()
            log.info("txn_producer_initialised", transactional_id=tid, producer_id=pid, epoch=new_epoch)
            return E.NONE, pid, new_epoch

    async def add_partitions(self, tid: str, producer_id: int, epoch: int,
                             partitions: list[tuple[str, int]]) -> int:
        return await self._add_to_txn(tid, producer_id, epoch, lambda m: m.partitions.update(partitions))

    async def add_offsets(self, tid: str, producer_id: int, epoch: int, group: str) -> int:
        return await self._add_to_txn(tid, producer_id, epoch, lambda m: m.groups.add(group))

    async def _add_to_txn(self, tid: str, producer_id: int, epoch: int, add: Callable[[TxnMetadata], Any]) -> int:
        """Check the producer, begin its transaction if none is open, record what it adds."""
        async with self.lock(tid):
            code, m = self._check(tid, producer_id, epoch)
            if code != E.NONE:
                return code
            assert m is not None
            self._begin(m)
            add(m)
            await self._persist()
            return E.NONE

    async def stage_offsets(self, tid: str, producer_id: int, epoch: int, group: str,
                            offsets: dict[tuple[str, int], tuple[int, str | None]]) -> int:
        async with self.lock(tid):
            code, m = self._check(tid, producer_id, epoch)
            if code != E.NONE:
                return code
            assert m is not None
            if m.state != ONGOING or group not in m.groups:
                return E.INVALID_TXN_STATE
            m.offsets.setdefault(group, {}).update(offsets)
            await self._persist()
            return E.NONE

    async def end_txn(self, tid: str, producer_id: int, epoch: int, committed: bool) -> int:
        async with self.lock(tid):
            code, m = self._check(tid, producer_id, epoch)
            if code == E.CONCURRENT_TRANSACTIONS and m is not None and m.state == (PREPARE_COMMIT if committed else PREPARE_ABORT):
                # an earlier completion could not write every marker: the client's retry finishes it
                return E.NONE if await self._complete(tid, m, committed) else E.CONCURRENT_TRANSACTIONS
            if code != E.NONE:
                return code
            assert m is not None
            if m.state != ONGOING:
                # a retried EndTxn after it completed is answered as it was
                if (m.state == COMPLETE_COMMIT and committed) or (m.state == COMPLETE_ABORT and not committed):
                    return E.NONE
                return E.INVALID_TXN_STATE
            # not stored yet (store full or stopping): retriable, the client sends EndTxn again
            return E.NONE if await self._complete(tid, m, committed) else E.CONCURRENT_TRANSACTIONS

    def check_produce(self, producer_id: int, epoch: int, topic: str, partition: int) -> int:
        """Verdict for a transactional batch: the producer's current epoch, partition in its open
        transaction."""
        m = self._by_pid.get(producer_id)
        if m is None or m.producer_id != producer_id:
            m = next((x for x in self.txns.values() if x.producer_id == producer_id), None)
            if m is None:
                return E.INVALID_PRODUCER_ID_MAPPING
            self._by_pid[producer_id] = m
        if epoch != m.epoch:
            return E.INVALID_PRODUCER_EPOCH
        if m.state != ONGOING or (topic, partition) not in m.partitions:
            return E.INVALID_TXN_STATE
        return E.NONE

    # -- internals -------------------------------------------------------------------------------
    @staticmethod
    def _begin(m: TxnMetadata) -> None:
        if m.state != ONGOING:
            m.state = ONGOING
            m.started_ms = int(time.time() * 1000)
            m.partitions.clear()
            m.groups.clear()
            m.offsets.clear()

    async def _persist(self) -> None:
        await asyncio.get_running_loop().run_in_executor(None, self.persist)

    async def _complete(self, tid: str, m: TxnMetadata, committed: bool, reason: str = "end_txn") -> bool:
        """Write the markers and finish; False (state left Prepare*, retried later) when a
        marker could not be stored. Writing a marker twice is harmless."""
        from gateway_kafka.apis._common import blocking

        m.state = PREPARE_COMMIT if committed else PREPARE_ABORT
        await self._persist()
        control = rb.CONTROL_TYPE_COMMIT if committed else rb.CONTROL_TYPE_ABORT
        failed = 0
        for topic, partition in sorted(m.partitions):
            if self.store.topic_config.get(topic) is None:
                # deleted meanwhile: nothing to mark, but no open entry may hold a re-created topic back
                self.index.complete(topic, partition, m.producer_id, 0, True, persist=False)
                continue
            batch = rb.build_control_batch(control, producer_id=m.producer_id, producer_epoch=m.epoch,
                                           timestamp=int(time.time() * 1000))
            async with self.gw.partition_locks[(topic, partition)]:
                res = await blocking(self.store.put_record_batch, topic, partition, batch)
                if not res.ok:
                    log.error("txn_marker_failed", transactional_id=tid, topic=topic, partition=partition,
                              status=res.status.name, error=res.error)
                    failed += 1
                    continue
                # aborted ranges whose records retention already deleted are no longer needed
                self.index.forget_before(topic, partition, self.store.get_min_offset_in_queue(topic, partition))
                self.index.complete(topic, partition, m.producer_id, res.queue_offset, committed, persist=False)
        await blocking(self.index.persist_if_dirty)  # one write for all partitions, before Complete
        if failed:
            return False
        if committed:
            offsets = self.store.consumer_offsets
            for group, staged in m.offsets.items():
                for (topic, partition), (offset, meta) in staged.items():
                    offsets.commit(group, topic, partition, offset, meta)
        m.state = COMPLETE_COMMIT if committed else COMPLETE_ABORT
        partitions = len(m.partitions)
        m.partitions.clear()
        m.groups.clear()
        m.offsets.clear()
        await self._persist()
        log.info("txn_completed", transactional_id=tid, producer_id=m.producer_id, epoch=m.epoch,
                 committed=committed, partitions=partitions, reason=reason)
        return True

    async def _timeout_loop(self) -> None:
        interval = max(self.abort_check_ms, 50) / 1000
        while True:
            await asyncio.sleep(interval)
            now = int(time.time() * 1000)
            for tid, m in list(self.txns.items()):
                if m.state in (PREPARE_COMMIT, PREPARE_ABORT):  # a completion that could not finish
                    try:
                        async with self.lock(tid):
                            if m.state in (PREPARE_COMMIT, PREPARE_ABORT):
                                await self._complete(tid, m, m.state == PREPARE_COMMIT, reason="retried")
                    except Exception:
                        log.exception("txn_complete_retry_failed", transactional_id=tid)
                    continue
                if m.state != ONGOING or now - m.started_ms <= m.timeout_ms:
                    continue
                try:
                    async with self.lock(tid):
                        if m.state != ONGOING:
                            continue
                        if not await self._complete(tid, m, committed=False, reason="timed_out"):
                            continue
                        # fence the producer that let it time out (Kafka bumps the epoch too)
                        code, pid, epoch = self.gw.producer_state.init_producer_id(tid, m.producer_id, m.epoch)
                        if code == E.NONE:
                            m.producer_id, m.epoch = pid, epoch
                            await self._persist()
                except Exception:
                    log.exception("txn_timeout_abort_failed", transactional_id=tid)
