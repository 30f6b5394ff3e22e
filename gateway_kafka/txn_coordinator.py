"""Kafka transaction coordinator: transactional ids, their transactions, markers, timeouts, and
the producer ids every idempotent or transactional producer gets.

State lives in the internal topic ``__transaction_state`` (``docs/design/coordinator-state.md``):
every change of a transactional id — its producer id and epoch, state (Empty, Ongoing,
PrepareCommit, PrepareAbort, CompleteCommit, CompleteAbort), timeout, start time, partitions —
is one TransactionLogValue record (Kafka's format) in the id's partition
(``abs(hash(id)) % transaction_state_log_num_partitions``), appended and stored before memory
changes and before the client is answered. Producer ids are handed out from blocks of
``ID_BLOCK`` whose end is recorded in partition 0 before any id of the block is used. At start
the last checkpoint (``config/transactionState.json``, with the queue offsets it covers) is
loaded and the topic replayed from there.

One ordered writer per transactional id: every change of an id happens under its asyncio lock
(check, append, apply, in that order), so the records of an id are in the log in the order memory
went through them. Store writes run on the loop under ASYNC_FLUSH (a copy into the mapped
commitlog) and through the executor under SYNC_FLUSH.

How a transaction maps onto the engine (the same queues RocketMQ clients read):
- records are appended to their queues as they are produced (transactional batches); the
  engine's producer state (``engine/producer_state.py``) opens the transaction in each queue at
  its first batch and holds committed-only readers back at it (last stable offset);
- TxnOffsetCommit stages offsets as transactional records of ``__consumer_offsets`` (in the
  group's partition, which AddOffsetsToTxn added to the transaction, as in Kafka);
- EndTxn: PrepareCommit/PrepareAbort is recorded, one COMMIT or ABORT marker (a control batch)
  goes to every partition of the transaction — data queues and ``__consumer_offsets`` partitions,
  where the marker applies or drops the staged offsets; partitions another broker group holds
  get theirs by WriteTxnMarkers to that group's master (docs/design/cluster.md) — then
  CompleteCommit/CompleteAbort is recorded and the client answered (already once Prepare* is
  stored when only other groups' markers are missing: they are retried with a backoff until the
  group takes them). A marker the store refuses leaves the state Prepare*:
  EndTxn answers CONCURRENT_TRANSACTIONS (retriable) and the client's retry or the timeout loop
  finishes it; a crash in between is finished at the next start (``recover``). Writing a marker
  twice is harmless. A partition whose topic was deleted meanwhile gets no marker;
- a transaction open longer than its ``transaction.timeout.ms`` is aborted by the coordinator
  and the producer's epoch bumped, so the stale producer is fenced (as Kafka does);
- InitProducerId for a transactional id with an open transaction aborts it first;
- at start, a transaction open in a data queue (or with staged offsets) whose producer id no
  Ongoing transactional id holds is aborted, so no last stable offset stays stuck;
- a transactional id without an open transaction and unused for ``transactional_id_expiration_ms``
  (Kafka's transactional.id.expiration.ms, 7 days) is deleted (a tombstone record), so the
  state does not grow with every short-lived transactional id.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from dataclasses import dataclass, field
from typing import Any, Callable

import structlog

from engine import record_batch as rb
from engine.consumer_offset import name_problem
from engine.state_log import (CONSUMER_OFFSETS, TRANSACTION_STATE, StateLog, is_internal, load_checkpoint,
                              positions_from, save_checkpoint)
from gateway_kafka import error_codes as E
from gateway_kafka.protocol import records

log = structlog.get_logger("rockafka.kafka.txn")

# Store refusals that pass by themselves (the next attempt may be stored), retried by ``_put``.
TRANSIENT_PUT_STATUSES = frozenset({"OS_PAGE_CACHE_BUSY", "CREATE_MAPPED_FILE_FAILED", "UNKNOWN_ERROR"})
STATE_WRITE_RETRY_S = 10.0


def _transient_refusal(res: Any) -> bool:
    status = getattr(res, "status", None)
    return (status is not None and not getattr(res, "stored", True)
            and getattr(status, "name", None) in TRANSIENT_PUT_STATUSES)

CHECKPOINT_FILE = "transactionState.json"
RELAY_CLIENT_ID = "rockafka-producer-id-relay"  # a slave asking its master (never relayed again)
MARKER_CLIENT_ID = "rockafka-txn-markers"  # a coordinator writing markers on another broker group
CHECKPOINT_VERSION = 1
ID_BLOCK = 1000
PRODUCER_ID_SPACE_BITS = 40  # ids of broker group space k: k << 40 .. (k + 1) << 40 - 1
EMPTY, ONGOING, PREPARE_COMMIT, PREPARE_ABORT, COMPLETE_COMMIT, COMPLETE_ABORT = (
    "Empty", "Ongoing", "PrepareCommit", "PrepareAbort", "CompleteCommit", "CompleteAbort")
# Kafka's TransactionState ids, as TransactionLogValue.transaction_status stores them
STATUS_IDS = {EMPTY: 0, ONGOING: 1, PREPARE_COMMIT: 2, PREPARE_ABORT: 3, COMPLETE_COMMIT: 4, COMPLETE_ABORT: 5}
STATUS_NAMES = {v: k for k, v in STATUS_IDS.items()}
PREPARING = (PREPARE_COMMIT, PREPARE_ABORT)


@dataclass(frozen=True)
class TxnMetadata:
    producer_id: int
    epoch: int
    timeout_ms: int
    state: str = EMPTY
    started_ms: int = -1
    updated_ms: int = -1
    partitions: frozenset[tuple[str, int]] = field(default_factory=frozenset)

    def to_value(self) -> bytes:
        by_topic: dict[str, list[int]] = {}
        for topic, partition in sorted(self.partitions):
            by_topic.setdefault(topic, []).append(partition)
        return records.encode("TransactionLogValue", {
            "producer_id": self.producer_id, "producer_epoch": self.epoch,
            "transaction_timeout_ms": self.timeout_ms, "transaction_status": STATUS_IDS[self.state],
            "transaction_partitions": [{"topic": t, "partition_ids": ps} for t, ps in by_topic.items()],
            "transaction_last_update_timestamp_ms": self.updated_ms,
            "transaction_start_timestamp_ms": self.started_ms})

    @classmethod
    def from_value(cls, value: bytes) -> "TxnMetadata":
        v = records.decode("TransactionLogValue", value)
        state = STATUS_NAMES.get(v["transaction_status"])
        if state is None:
            raise records.RecordDecodeError(f"transaction status {v['transaction_status']} is not known")
        parts = frozenset((t["topic"], int(pid)) for t in v["transaction_partitions"] or () for pid in t["partition_ids"])
        return cls(v["producer_id"], v["producer_epoch"], v["transaction_timeout_ms"], state,
                   v["transaction_start_timestamp_ms"], v["transaction_last_update_timestamp_ms"], parts)

    def to_json(self) -> dict[str, Any]:
        return {"producerId": self.producer_id, "epoch": self.epoch, "timeoutMs": self.timeout_ms,
                "state": self.state, "startedMs": self.started_ms, "updatedMs": self.updated_ms,
                "partitions": sorted([t, p] for t, p in self.partitions)}

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> "TxnMetadata":
        return cls(int(d["producerId"]), int(d["epoch"]), int(d["timeoutMs"]), d["state"], int(d["startedMs"]),
                   int(d["updatedMs"]), frozenset((t, int(p)) for t, p in d["partitions"]))


def _now() -> int:
    return int(time.time() * 1000)


class TransactionCoordinator:
    def __init__(self, gateway: Any):
        self.gw = gateway
        self.store = gateway.store
        cfg = gateway.config
        self.log = StateLog(self.store, TRANSACTION_STATE, cfg.extra_int("transaction_state_log_num_partitions", 50),
                            compacted=True)
        # markers of Prepare* transactions other broker groups acknowledged (memory only: a
        # restart sends them again, a marker written twice is harmless), and when to retry the rest
        self._marked: dict[str, set[tuple[str, int]]] = {}
        self._retry: dict[str, tuple[float, float]] = {}  # tid -> (next attempt, backoff s)
        # a node of a cluster (NameServer) completes no transaction before its view names the
        # groups holding the partitions (at a start the view is empty: every partition looks local)
        self.needs_view = False
        self.checkpoint_path = self.store.config_dir / CHECKPOINT_FILE
        self.checkpoint_interval_s = max(cfg.store.state_checkpoint_interval, 100) / 1000
        self.txns: dict[str, TxnMetadata] = {}
        self._by_pid: dict[int, str] = {}
        self._block_end = 0
        self._next_pid = 0
        # producer ids are unique over the cluster: each broker group hands out ids of its own
        # space (its blocks count within it), as Kafka's controller hands out disjoint blocks.
        # The default follows the node id convention (100 * group index + broker id), so every
        # member of a group, a promoted slave included, uses the same space (docs/design/cluster.md)
        space = cfg.extra_int("producer_id_space", gateway.settings.node_id // 100)
        self._id_base = max(space, 0) << PRODUCER_ID_SPACE_BITS
        self.max_timeout_ms = cfg.extra_int("transaction_max_timeout_ms", 900_000)
        self.abort_check_ms = cfg.extra_int("transaction_abort_timed_out_transaction_cleanup_interval_ms", 1000)
        self.id_expiration_ms = cfg.extra_int("transactional_id_expiration_ms", 604_800_000)
        self._tasks: list[asyncio.Task] = []
        self._locks: dict[str, asyncio.Lock] = {}
        self._id_lock = asyncio.Lock()
        self._positions: dict[int, int] = {}
        self._applied: dict[int, int] = {}  # per partition: the next queue offset memory has applied
        self._cuts = self.store.log_cuts  # truncations of the log memory has seen
        self._changed = False
        # False while a promoted broker replays the log (failover): requests answer
        # COORDINATOR_LOAD_IN_PROGRESS, which every Kafka client retries
        self.ready = True
        self._recover_pending = False
        self._timeout_task: asyncio.Task | None = None

    # -- lifecycle -------------------------------------------------------------------------------
    async def start(self) -> None:
        await asyncio.get_running_loop().run_in_executor(None, self._load_and_replay)
        self.store.add_retention_guard(self._needed_commitlog_offset)
        await self.recover()
        self._tasks = [asyncio.create_task(self._checkpoint_loop())]
        if not self.store.is_slave:
            self._start_timeout_loop()

    def not_serving(self) -> int:
        """Why this node coordinates no transaction now (0 = it does): a slave answers
        NOT_COORDINATOR, so clients ask FindCoordinator again (it names the master); a promoted
        master still replaying its log COORDINATOR_LOAD_IN_PROGRESS. Both are retriable."""
        if self.store.is_slave:
            return E.NOT_COORDINATOR
        return 0 if self.ready else E.COORDINATOR_LOAD_IN_PROGRESS

    def _start_timeout_loop(self) -> None:
        if self._timeout_task is None or self._timeout_task.done():
            self._timeout_task = asyncio.create_task(self._timeout_loop())
            self._tasks.append(self._timeout_task)

    def role_changing(self, master: bool) -> None:
        """Called in the store's role change, before the new master takes writes: a promoted
        coordinator refuses requests until ``follow_role`` has replayed what replication brought."""
        if master:
            self.ready = False

    async def follow_role(self, master: bool) -> None:
        """The store changed role (failover, a manual switch; docs/design/failover.md). Promoted:
        apply the ``__transaction_state`` records replication brought since memory last followed
        the log (all of them again when the log was cut meanwhile), hand out producer ids from
        the recorded block end (ids below it may have been handed out by the former master), then
        — once the store takes writes — finish completions and abort orphans as at a start, and
        time transactions out. Demoted: the master-only loop stops (the new master's does it)."""
        if not master:
            task, self._timeout_task = self._timeout_task, None
            if task is not None:
                task.cancel()
                self._tasks = [t for t in self._tasks if t is not task]
            self._recover_pending = False
            return
        self.ready = False
        try:
            await asyncio.get_running_loop().run_in_executor(None, self._catch_up)
        finally:
            self.ready = True
        self._recover_pending = True
        self._start_timeout_loop()

    def _catch_up(self) -> None:
        cut = self.store.log_cuts != self._cuts
        if cut:  # records memory applied may be gone: the state is what the log says now
            self.txns, self._positions, self._applied = {}, {}, {}
            self._block_end = _legacy_block_end(self.store.config_dir)
            self._cuts = self.store.log_cuts
        replayed = self._replay(self._applied)
        self._next_pid = self._block_end
        self._changed = True
        log.info("transaction_state_taken_over", transactional_ids=len(self.txns), records_replayed=replayed,
                 producer_id_block_end=self._block_end, full_replay=cut)

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            try:
                await task
            except (asyncio.CancelledError, Exception):
                pass
        self._tasks = []
        self.store.remove_retention_guard(self._needed_commitlog_offset)
        await self.checkpoint(force=True)

    def _load_and_replay(self) -> None:
        self.log.ensure_topic()
        doc = load_checkpoint(self.checkpoint_path)
        if doc is not None and doc.get("version") == CHECKPOINT_VERSION:
            self._positions = positions_from(doc)
            self._block_end = int(doc.get("blockEnd", 0))
            self.txns = {tid: TxnMetadata.from_json(d) for tid, d in (doc.get("transactions") or {}).items()}
        self._block_end = max(self._block_end, _legacy_block_end(self.store.config_dir))
        replayed = self._replay(self._positions)
        self._next_pid = self._block_end  # ids below the recorded end may have been handed out
        log.info("transaction_state_recovered", transactional_ids=len(self.txns), records_replayed=replayed,
                 producer_id_block_end=self._block_end)

    def _replay(self, start: dict[int, int]) -> int:
        """Apply every partition's records from ``start`` on; memory then follows the log's end."""
        replayed = 0
        for p in range(self.log.partitions):
            next_offset = start.get(p, 0)
            for rec in self.log.read(p, next_offset):
                self._apply_record(p, rec)
                next_offset = rec.offset + 1
                replayed += 1
            self._applied[p] = next_offset
        self._by_pid = {m.producer_id: tid for tid, m in self.txns.items()}
        return replayed

    def _apply_record(self, partition: int, rec: Any) -> None:
        if rec.key is None or rec.marker is not None:
            return
        try:
            version = records.key_version(rec.key)
            if version == records.PRODUCER_ID_BLOCK_KEY_VERSION:
                if rec.value is not None:
                    self._block_end = max(self._block_end, records.decode("ProducerIdBlockValue", rec.value)["block_end"])
                return
            tid = records.decode("TransactionLogKey", rec.key)["transactional_id"]
            if rec.value is None:
                self.txns.pop(tid, None)
            else:
                self.txns[tid] = TxnMetadata.from_value(rec.value)
        except records.RecordDecodeError as exc:
            log.error("transaction_record_unreadable", partition=partition, offset=rec.offset, error=str(exc))

    async def recover(self) -> bool:
        """Finish completions a crash interrupted; abort transactions nobody owns any more. A
        slave does neither: its log is its master's, whose coordinator does both. False when a
        write was refused (a promoted master retries from its timeout loop)."""
        if self.store.is_slave:
            return False
        ok = True
        for tid, m in list(self.txns.items()):
            if m.state in PREPARING:
                async with self.lock(tid):
                    m = self.txns[tid]
                    if m.state in PREPARING:
                        ok &= await self._complete(tid, m, m.state == PREPARE_COMMIT, reason="recovered")
        # a Prepare* transaction not finished yet (its markers wait for the cluster view or for
        # another group) owns its queues as an Ongoing one: its marker ends them, not an abort
        owned = {(t, p, m.producer_id) for m in self.txns.values() if m.state in (ONGOING, *PREPARING)
                 for t, p in m.partitions}
        for topic, queue_id, pid, _first in self.store.producer_state.open_transactions():
            # another space's producer: its coordinator (another group) ends it with its markers
            if (topic, queue_id, pid) not in owned and not is_internal(topic) and not self.foreign(pid):
                entry = self.store.producer_state.entry(topic, queue_id, pid)
                res = await self._put(self.store.put_record_batch, topic, queue_id, rb.build_control_batch(
                    rb.CONTROL_TYPE_ABORT, producer_id=pid, producer_epoch=entry.epoch if entry else 0,
                    timestamp=_now()), delay_headers=False)
                log.warning("txn_orphan_aborted", topic=topic, partition=queue_id, producer_id=pid,
                            stored=res.stored)
                ok &= res.stored
        for partition, pid in self.store.consumer_offsets.pending_producers():
            if (CONSUMER_OFFSETS, partition, pid) not in owned and not self.foreign(pid):
                res = await self._put(self.store.consumer_offsets.complete_transaction, partition, pid, 0, False)
                log.warning("txn_orphan_offsets_dropped", partition=partition, producer_id=pid)
                ok &= bool(getattr(res, "stored", True))
        return ok

    def lock(self, tid: str) -> asyncio.Lock:
        lk = self._locks.get(tid)
        if lk is None:
            lk = self._locks[tid] = asyncio.Lock()
        return lk

    # -- writing ---------------------------------------------------------------------------------
    async def _put(self, fn: Callable, *args: Any, **kwargs: Any) -> Any:
        """A store write of coordinator state, retried with a growing pause (up to
        ``STATE_WRITE_RETRY_S``) while the store refuses it for a passing reason (the put lock
        busy, a segment not yet created): nothing of a refused put was stored, so writing it
        again is safe, and the client gets a slower answer instead of an error it did not
        cause."""
        res = await self.gw.put(fn, *args, **kwargs)
        deadline = None
        pause = 0.02
        while _transient_refusal(res):
            now = time.monotonic()
            if deadline is None:
                deadline = now + STATE_WRITE_RETRY_S
            if now >= deadline:
                break
            log.info("txn_state_write_retried", status=res.status.name, pause_ms=int(pause * 1000))
            await asyncio.sleep(pause)
            pause = min(pause * 2, 0.5)
            res = await self.gw.put(fn, *args, **kwargs)
        return res

    async def _write(self, tid: str, new: TxnMetadata | None) -> bool:
        """Record ``new`` as the state of ``tid`` (None: delete it), then make it the state;
        False (memory unchanged) when the store did not take the record."""
        p = self.log.partition_for(tid)
        with self.log.writing(p):
            res = await self._put(self.log.append, p, [(records.encode("TransactionLogKey", {"transactional_id": tid}),
                                                        None if new is None else new.to_value())])
            if not res.stored:
                log.error("txn_state_not_stored", transactional_id=tid, status=res.status.name, error=res.error)
                return False
            old = self.txns.pop(tid, None)
            if old is not None and self._by_pid.get(old.producer_id) == tid:
                del self._by_pid[old.producer_id]
            if new is not None:
                self.txns[tid] = new
                self._by_pid[new.producer_id] = tid
            self._changed = True
        return res.ok

    async def allocate_producer_id(self) -> int | None:
        """A producer id never handed out before (None when its block could not be recorded)."""
        if self.store.is_slave:  # its view of the blocks trails the master's
            return None
        async with self._id_lock:
            if self._next_pid >= self._block_end:
                end = self._next_pid + ID_BLOCK
                with self.log.writing(0):
                    res = await self._put(self.log.append, 0, [(records.PRODUCER_ID_BLOCK_KEY,
                                                                records.encode("ProducerIdBlockValue", {"block_end": end}))])
                    # ok, not only stored: a SYNC_MASTER's block must be on its slaves (the
                    # SyncStateSet under a failover controller) before any id of it is used, so
                    # a promoted slave never hands out an id of it again
                    if not res.ok:
                        log.error("producer_id_block_not_stored", status=res.status.name, error=res.error)
                        return None
                    self._block_end = end
                    self._changed = True
            pid = self._next_pid
            self._next_pid += 1
            return self._id_base + pid

    # -- validation ------------------------------------------------------------------------------
    def foreign(self, producer_id: int) -> bool:
        """A producer id of another broker group's space (its coordinator owns its transactions)."""
        return producer_id >= 0 and producer_id >> PRODUCER_ID_SPACE_BITS != self._id_base >> PRODUCER_ID_SPACE_BITS

    def _check(self, tid: str, producer_id: int, epoch: int) -> tuple[int, TxnMetadata | None]:
        m = self.txns.get(tid)
        if m is None or m.producer_id != producer_id:
            return E.INVALID_PRODUCER_ID_MAPPING, m
        if epoch < m.epoch:
            return E.PRODUCER_FENCED, m
        if epoch > m.epoch:
            return E.INVALID_PRODUCER_EPOCH, m
        if m.state in PREPARING:
            return E.CONCURRENT_TRANSACTIONS, m
        return E.NONE, m

    def check_produce(self, producer_id: int, epoch: int, topic: str, partition: int) -> int:
        """Verdict for a transactional batch: the producer's current epoch, partition in its open
        transaction."""
        if self.foreign(producer_id):
            # coordinated by another broker group, which checked AddPartitionsToTxn (Kafka's
            # leaders before KIP-890 verify nothing either); its markers end the transaction here
            return E.NONE
        tid = self._by_pid.get(producer_id)
        m = self.txns.get(tid) if tid is not None else None
        if m is None or m.producer_id != producer_id:
            return E.INVALID_PRODUCER_ID_MAPPING
        if epoch != m.epoch:
            return E.INVALID_PRODUCER_EPOCH
        if m.state != ONGOING or (topic, partition) not in m.partitions:
            return E.INVALID_TXN_STATE
        return E.NONE

    # -- APIs ------------------------------------------------------------------------------------
    async def init_producer_id(self, tid: str | None, timeout_ms: int, producer_id: int,
                               epoch: int, relay: bool = True) -> tuple[int, int, int]:
        """InitProducerId: (error code, producer id, epoch)."""
        code = self.not_serving()
        if code == E.NOT_COORDINATOR and tid is None:
            if producer_id < 0 and relay:
                # an idempotent producer asks any node (librdkafka: the one it is connected to) and
                # the id blocks are recorded by the master: ask it, as Kafka brokers ask the controller
                return await self._producer_id_from_master(timeout_ms)
            code = 0 if producer_id >= 0 else E.COORDINATOR_NOT_AVAILABLE  # an epoch bump needs no state
        if code:
            return code, -1, -1
        if tid is None:
            if producer_id >= 0:  # KIP-360: an idempotent producer bumps its own epoch
                if epoch < 0:
                    return E.INVALID_REQUEST, -1, -1
                if epoch < 32766:
                    return E.NONE, producer_id, epoch + 1
            pid = await self.allocate_producer_id()
            return (E.NONE, pid, 0) if pid is not None else (E.COORDINATOR_NOT_AVAILABLE, -1, -1)
        if not 0 < timeout_ms <= self.max_timeout_ms:
            return E.INVALID_TRANSACTION_TIMEOUT, -1, -1
        async with self.lock(tid):
            m = self.txns.get(tid)
            if m is not None and m.state in PREPARING:
                if not await self._complete(tid, m, m.state == PREPARE_COMMIT, reason="retried"):
                    return E.CONCURRENT_TRANSACTIONS, -1, -1
            m = self.txns.get(tid)
            if m is not None and m.state == ONGOING:
                # a new incarnation: whatever the old one left open is aborted
                if not await self._complete(tid, m, committed=False, reason="producer_reinitialised"):
                    return E.CONCURRENT_TRANSACTIONS, -1, -1
            m = self.txns.get(tid)
            if m is None:
                pid, new_epoch = await self.allocate_producer_id(), 0
            else:
                if producer_id >= 0 and (producer_id, epoch) != (m.producer_id, m.epoch):
                    return E.PRODUCER_FENCED, -1, -1
                pid, new_epoch = m.producer_id, m.epoch + 1
                if new_epoch >= 32767:  # epoch exhausted: a new id, as Kafka does
                    pid, new_epoch = await self.allocate_producer_id(), 0
            if pid is None:
                return E.COORDINATOR_NOT_AVAILABLE, -1, -1
            if not await self._write(tid, TxnMetadata(pid, new_epoch, timeout_ms, EMPTY, -1, _now())):
                return E.COORDINATOR_NOT_AVAILABLE, -1, -1
            log.info("txn_producer_initialised", transactional_id=tid, producer_id=pid, epoch=new_epoch)
            return E.NONE, pid, new_epoch

    async def _producer_id_from_master(self, timeout_ms: int) -> tuple[int, int, int]:
        """InitProducerId (idempotent) relayed to the group's master over its Kafka listener;
        COORDINATOR_NOT_AVAILABLE (retriable) when there is none or it does not answer in time."""
        from gateway_kafka.protocol.codec import decode_response, encode_request

        node = self.gw.cluster.master_node() if self.gw.cluster is not None else None
        if node is None or not self.store.is_slave:
            return E.COORDINATOR_NOT_AVAILABLE, -1, -1
        writer = None
        try:
            async with asyncio.timeout(5):
                reader, writer = await self.gw.connect_node(node.host, node.port)
                writer.write(encode_request(22, 1, 1, {"transactional_id": None, "transaction_timeout_ms": timeout_ms},
                                            RELAY_CLIENT_ID))
                size = int.from_bytes(await reader.readexactly(4), "big")
                _corr, resp = decode_response(22, 1, await reader.readexactly(size))
            return resp["error_code"], resp["producer_id"], resp["producer_epoch"]
        except (OSError, asyncio.TimeoutError, asyncio.IncompleteReadError, ValueError, PermissionError) as exc:
            log.info("producer_id_from_master_failed", master=f"{node.host}:{node.port}", error=str(exc))
            return E.COORDINATOR_NOT_AVAILABLE, -1, -1
        finally:
            if writer is not None:
                writer.close()

    async def add_partitions(self, tid: str, producer_id: int, epoch: int,
                             partitions: list[tuple[str, int]]) -> int:
        return await self._add_to_txn(tid, producer_id, epoch, set(partitions))

    async def add_offsets(self, tid: str, producer_id: int, epoch: int, group: str) -> int:
        """The group's ``__consumer_offsets`` partition joins the transaction (as in Kafka)."""
        return await self._add_to_txn(tid, producer_id, epoch,
                                      {(CONSUMER_OFFSETS, self.store.consumer_offsets.partition_of(group))})

    async def _add_to_txn(self, tid: str, producer_id: int, epoch: int, partitions: set[tuple[str, int]]) -> int:
        """Check the producer, begin its transaction if none is open, record what it adds."""
        if self.not_serving():
            return self.not_serving()
        async with self.lock(tid):
            code, m = self._check(tid, producer_id, epoch)
            if code != E.NONE:
                return code
            assert m is not None
            if m.state == ONGOING and partitions <= m.partitions:
                return E.NONE
            now = _now()
            if m.state == ONGOING:
                new = dataclasses.replace(m, partitions=m.partitions | partitions, updated_ms=now)
            else:
                new = dataclasses.replace(m, state=ONGOING, started_ms=now, updated_ms=now,
                                          partitions=frozenset(partitions))
            return E.NONE if await self._write(tid, new) else E.CONCURRENT_TRANSACTIONS

    async def stage_offsets(self, tid: str, producer_id: int, epoch: int, group: str,
                            offsets: dict[tuple[str, int], Any]) -> int:
        """TxnOffsetCommit: the offsets become transactional records of the group's partition."""
        if self.not_serving():
            return self.not_serving()
        if name_problem("group id", group) is not None:  # no offset record can hold it
            return E.INVALID_GROUP_ID
        if self.foreign(producer_id):
            # the group's coordinator is here, the transaction's on another broker group (which
            # added the group's partition in AddOffsetsToTxn): staged, its marker decides
            if self.store.is_slave:
                return E.NOT_COORDINATOR
            res = await self._put(self.store.consumer_offsets.stage_transactional, group, producer_id, epoch, offsets)
            if not res.stored:
                return E.COORDINATOR_NOT_AVAILABLE
            return E.NONE if res.ok else E.REQUEST_TIMED_OUT
        async with self.lock(tid):
            code, m = self._check(tid, producer_id, epoch)
            if code != E.NONE:
                return code
            assert m is not None
            p = self.store.consumer_offsets.partition_of(group)
            if m.state != ONGOING or (CONSUMER_OFFSETS, p) not in m.partitions:
                return E.INVALID_TXN_STATE
            res = await self._put(self.store.consumer_offsets.stage_transactional, group, producer_id, epoch, offsets)
            if not res.stored:
                return E.COORDINATOR_NOT_AVAILABLE
            return E.NONE if res.ok else E.REQUEST_TIMED_OUT

    async def end_txn(self, tid: str, producer_id: int, epoch: int, committed: bool) -> int:
        if self.not_serving():
            return self.not_serving()
        async with self.lock(tid):
            code, m = self._check(tid, producer_id, epoch)
            if code == E.CONCURRENT_TRANSACTIONS and m is not None and m.state == (PREPARE_COMMIT if committed else PREPARE_ABORT):
                # an earlier completion could not write every marker: the client's retry finishes it
                status = await self._complete_status(tid, m, committed)
                return E.NONE if status in ("done", "remote_pending") else E.CONCURRENT_TRANSACTIONS
            if code != E.NONE:
                return code
            assert m is not None
            if m.state != ONGOING:
                # a retried EndTxn after it completed is answered as it was
                if (m.state == COMPLETE_COMMIT and committed) or (m.state == COMPLETE_ABORT and not committed):
                    return E.NONE
                return E.INVALID_TXN_STATE  # an empty (or unknown) transaction, as Kafka answers
            # committed (or aborted) once Prepare* is stored: markers other groups have not taken
            # yet are retried from the timeout loop. Not stored (store full or stopping), or a
            # local marker refused: retriable, the client sends EndTxn again
            status = await self._complete_status(tid, m, committed)
            return E.NONE if status in ("done", "remote_pending") else E.CONCURRENT_TRANSACTIONS

    # -- internals -------------------------------------------------------------------------------
    async def _complete(self, tid: str, m: TxnMetadata, committed: bool, reason: str = "end_txn",
                        bump_epoch: bool = False) -> bool:
        return await self._complete_status(tid, m, committed, reason, bump_epoch) == "done"

    async def _complete_status(self, tid: str, m: TxnMetadata, committed: bool, reason: str = "end_txn",
                               bump_epoch: bool = False) -> str:
        """Record Prepare*, write every marker (this group's through the store, other groups' by
        WriteTxnMarkers to their master), record Complete*: "done". Otherwise the state stays
        Prepare* and is retried later: "remote_pending" when only other groups' markers are
        missing, "" when a record or a local marker could not be stored."""
        prepare_state = PREPARE_COMMIT if committed else PREPARE_ABORT
        if m.state != prepare_state:
            m = dataclasses.replace(m, state=prepare_state, updated_ms=_now())
            if not await self._write(tid, m):
                return ""
        cluster = self.gw.cluster
        if self.needs_view and (cluster is None or not getattr(cluster, "synced", True)) \
                and not self._all_local(m):
            return ""  # wait for the view: which group holds each partition
        failed = pending = 0
        marked = self._marked.setdefault(tid, set())
        remote: dict[str, list[tuple[str, int]]] = {}
        for topic, partition in sorted(m.partitions):
            if (topic, partition) in marked:
                continue
            owner = self._remote_owner(topic, partition)
            if owner is not None:
                remote.setdefault(owner, []).append((topic, partition))
                continue
            if self._unplaced(topic, partition):
                pending += 1  # its group is not in the view now (down long enough to expire)
                continue
            code = await self.write_local_marker(topic, partition, m.producer_id, m.epoch, committed)
            if code in (E.NONE, E.UNKNOWN_TOPIC_OR_PARTITION):
                marked.add((topic, partition))  # not again while other groups' markers are retried
            else:
                failed += 1
        if failed:
            return ""
        for owner, parts in sorted(remote.items()):
            done = await self._send_markers(owner, m, committed, parts)
            marked.update(done)
            pending += len(parts) - len(done)
        if pending:
            log.info("txn_markers_pending", transactional_id=tid, producer_id=m.producer_id, committed=committed,
                     partitions=pending, groups=sorted(remote))
            return "remote_pending"
        done_m = dataclasses.replace(m, state=COMPLETE_COMMIT if committed else COMPLETE_ABORT, updated_ms=_now(),
                                     partitions=frozenset(), epoch=m.epoch + 1 if bump_epoch else m.epoch)
        if not await self._write(tid, done_m):
            return ""
        self._marked.pop(tid, None)
        self._retry.pop(tid, None)
        log.info("txn_completed", transactional_id=tid, producer_id=m.producer_id, epoch=done_m.epoch,
                 committed=committed, partitions=len(m.partitions), remote_groups=sorted(remote), reason=reason)
        return "done"

    def _remote_owner(self, topic: str, partition: int) -> str | None:
        """The other broker group holding ``partition`` (its ``__consumer_offsets`` partition: the
        group coordinating it), None when it is this node's group or nobody's."""
        cluster = self.gw.cluster
        if cluster is None or not getattr(cluster, "others", None):
            return None
        if topic == CONSUMER_OFFSETS:
            owner = cluster.coordinator_owner(CONSUMER_OFFSETS, partition)
        else:
            owner = cluster.owner(topic, partition)
        return owner if owner is not None and owner != cluster.broker_name else None

    def _all_local(self, m: TxnMetadata) -> bool:
        """Every partition of ``m`` is this group's by its own tables (no view needed): a data
        partition among its topic's local ids, an offsets partition holding the producer's
        staged offsets."""
        from gateway_kafka.cluster_view import local_partition_ids

        staged = set(self.store.consumer_offsets.pending_producers())
        for topic, partition in m.partitions:
            if topic == CONSUMER_OFFSETS:
                if (partition, m.producer_id) not in staged:
                    return False
                continue
            tc = self.store.topic_config.get(topic)
            if tc is None or partition not in local_partition_ids(tc):
                return False
        return True

    def _unplaced(self, topic: str, partition: int) -> bool:
        """A partition of a topic the cluster still has that no group of the view holds now."""
        cluster = self.gw.cluster
        if cluster is None or not hasattr(cluster, "others") or topic == CONSUMER_OFFSETS:
            return False
        return cluster.owner(topic, partition) is None and bool(cluster.partition_ids(topic))

    async def write_local_marker(self, topic: str, partition: int, producer_id: int, epoch: int,
                                 committed: bool) -> int:
        """The COMMIT/ABORT marker of one partition this node's group holds (the local path of
        EndTxn and the WriteTxnMarkers handler): NONE once stored; UNKNOWN_TOPIC_OR_PARTITION for
        a deleted topic (the engine forgot its transactions), NOT_LEADER_OR_FOLLOWER for a
        partition of another group, KAFKA_STORAGE_ERROR when the store refused it."""
        if topic == CONSUMER_OFFSETS:
            res = await self._put(self.store.consumer_offsets.complete_transaction, partition, producer_id, epoch,
                                  committed)
        elif self.store.topic_config.get(topic) is None:
            return E.UNKNOWN_TOPIC_OR_PARTITION
        else:
            cluster = self.gw.cluster
            if cluster is not None:
                queue = cluster.local_queue(topic, partition)
            else:  # at start, before the view: the topic's own partition ids
                from gateway_kafka.cluster_view import local_partition_ids

                ids = local_partition_ids(self.store.topic_config.get(topic))
                queue = ids.index(partition) if partition in ids else None
            if queue is None:
                return E.NOT_LEADER_OR_FOLLOWER
            marker = rb.build_control_batch(rb.CONTROL_TYPE_COMMIT if committed else rb.CONTROL_TYPE_ABORT,
                                            producer_id=producer_id, producer_epoch=epoch, timestamp=_now())
            async with self.gw.partition_locks[(topic, partition)]:
                res = await self._put(self.store.put_record_batch, topic, queue, marker, delay_headers=False)
        if not getattr(res, "stored", True):
            log.error("txn_marker_failed", topic=topic, partition=partition, producer_id=producer_id,
                      status=res.status.name, error=res.error)
            return E.KAFKA_STORAGE_ERROR
        return E.NONE

    async def _send_markers(self, owner: str, m: TxnMetadata, committed: bool,
                            parts: list[tuple[str, int]]) -> set[tuple[str, int]]:
        """WriteTxnMarkers (key 27, v1) to the master of broker group ``owner`` (the one the view
        names now, so a failover's new master gets them): the partitions it acknowledged (a
        deleted partition counts as done). Nothing when the group has no master or does not answer."""
        from gateway_kafka.protocol.codec import decode_response, encode_request

        g = self.gw.cluster.others.get(owner)
        node = g.master.node if g is not None and g.master is not None else None
        if node is None:
            return set()
        by_topic: dict[str, list[int]] = {}
        for topic, partition in parts:
            by_topic.setdefault(topic, []).append(partition)
        body = {"markers": [{"producer_id": m.producer_id, "producer_epoch": m.epoch, "transaction_result": committed,
                             "topics": [{"name": t, "partition_indexes": ps} for t, ps in by_topic.items()],
                             "coordinator_epoch": 0}]}
        writer = None
        done: set[tuple[str, int]] = set()
        try:
            async with asyncio.timeout(5):
                reader, writer = await self.gw.connect_node(node.host, node.port)
                writer.write(encode_request(27, 1, 1, body, MARKER_CLIENT_ID))
                size = int.from_bytes(await reader.readexactly(4), "big")
                _corr, resp = decode_response(27, 1, await reader.readexactly(size))
            codes = {}
            for marker in resp.get("markers") or ():
                for t in marker.get("topics") or ():
                    for p in t.get("partitions") or ():
                        codes[(t["name"], p["partition_index"])] = p["error_code"]
                        if p["error_code"] in (E.NONE, E.UNKNOWN_TOPIC_OR_PARTITION):
                            done.add((t["name"], p["partition_index"]))
            if len(done) < len(parts):
                log.info("txn_markers_refused", group=owner, producer_id=m.producer_id,
                         errors={f"{t}-{p}": E.NAMES.get(c, c) for (t, p), c in codes.items() if (t, p) not in done})
        except (OSError, asyncio.TimeoutError, asyncio.IncompleteReadError, ValueError, PermissionError) as exc:
            log.info("txn_markers_not_sent", group=owner, master=f"{node.host}:{node.port}", error=str(exc))
        finally:
            if writer is not None:
                writer.close()
        return done

    async def _timeout_loop(self) -> None:
        interval = max(self.abort_check_ms, 50) / 1000
        while True:
            await asyncio.sleep(interval)
            if self.store.is_slave:  # the master's coordinator times transactions out
                continue
            if self._recover_pending:  # promoted: what a start does, once the store takes writes
                try:
                    self._recover_pending = not await self.recover()
                except Exception:
                    log.exception("txn_recover_failed")
            now = _now()
            for tid, m in list(self.txns.items()):
                try:
                    if m.state in PREPARING:  # a completion that could not finish
                        at, backoff = self._retry.get(tid, (0.0, 0.0))
                        if time.monotonic() < at:
                            continue
                        async with self.lock(tid):
                            m = self.txns[tid]
                            if m.state in PREPARING and not await self._complete(tid, m, m.state == PREPARE_COMMIT,
                                                                                 reason="retried"):
                                # another group down: 100 ms .. 5 s between attempts (as Kafka's
                                # marker channel), until its master or a new one takes them
                                backoff = min(max(backoff * 2, 0.1), 5.0)
                                self._retry[tid] = (time.monotonic() + backoff, backoff)
                    elif m.state == ONGOING and now - m.started_ms > m.timeout_ms:
                        async with self.lock(tid):
                            m = self.txns[tid]
                            if m.state == ONGOING:
                                # the epoch bump fences the producer that let it time out (as Kafka)
                                await self._complete(tid, m, committed=False, reason="timed_out", bump_epoch=True)
                    elif m.state in (EMPTY, COMPLETE_COMMIT, COMPLETE_ABORT) and now - m.updated_ms > self.id_expiration_ms:
                        async with self.lock(tid):
                            m = self.txns.get(tid)
                            if m is not None and m.state in (EMPTY, COMPLETE_COMMIT, COMPLETE_ABORT) \
                                    and now - m.updated_ms > self.id_expiration_ms and await self._write(tid, None):
                                log.info("transactional_id_expired", transactional_id=tid, producer_id=m.producer_id)
                except Exception:
                    log.exception("txn_timeout_check_failed", transactional_id=tid)

    # -- checkpoint ------------------------------------------------------------------------------
    async def _checkpoint_loop(self) -> None:
        while True:
            await asyncio.sleep(self.checkpoint_interval_s)
            try:
                await self.checkpoint()
            except Exception:
                log.exception("txn_checkpoint_failed")

    async def checkpoint(self, force: bool = False) -> None:
        """State and the log positions it covers, captured together on the loop (no await in
        between), written off it."""
        if not (self._changed or force) or self.store.is_slave or not self.ready:
            return  # a slave (or a master still replaying) writes none: its memory may trail its log
        positions = self.log.positions()
        doc = {"version": CHECKPOINT_VERSION, "positions": {str(p): o for p, o in positions.items()},
               "blockEnd": self._block_end, "transactions": {tid: m.to_json() for tid, m in self.txns.items()}}
        self._changed = False
        await asyncio.get_running_loop().run_in_executor(None, save_checkpoint, self.checkpoint_path, doc)
        self._positions = positions

    def _needed_commitlog_offset(self) -> int | None:
        return self.log.needed_commitlog_offset(self._positions)


def _legacy_block_end(config_dir: Any) -> int:
    """Producer ids a data directory from before ``__transaction_state`` may have handed out."""
    doc = load_checkpoint(config_dir / "kafka_producer_state.json")
    try:
        return int((doc or {}).get("reserved_until", 0))
    except (TypeError, ValueError):
        return 0
