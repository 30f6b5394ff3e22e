"""MessageStore: the engine facade (RocketMQ's ``DefaultMessageStore``), synchronous and thread-safe.

Owns, under ``store_path_root_dir``: ``commitlog/``, ``consumequeue/<topic>/<queueId>/``,
``index/``, ``checkpoint``, ``abort``, ``lock`` and ``config/*.json``. See
``docs/design/storage.md`` for layouts, invariants, recovery and threads.

Write path (one put lock, like RocketMQ's putMessageLock): everything that does not depend on
the position (encoding, body CRC, validation) happens before the lock; under it the store
assigns the queue offset, writes the unit into the commitlog segment, writes the
consume-queue unit(s) and advances ``confirmed_offset``. So when a put returns the message is
readable through ``get_message`` and counted by ``get_max_offset_in_queue``. Then, under
SYNC_FLUSH, the put waits for the group commit to cover its bytes.

Invariants:
- Queue offsets of a queue are contiguous; a Kafka batch of N records takes N of them.
- ``confirmed_offset`` only grows; every unit below it is complete, with its queue units.
- The dispatcher (index, arrival listeners) never reads past ``confirmed_offset``.
- ``abort`` exists while the store runs; finding it at start means the last run crashed.
"""

from __future__ import annotations

import functools
import errno
import fcntl
import ipaddress
import os
import shutil
import threading
import time
from pathlib import Path
from typing import Any, Callable

import structlog

from . import metrics
from .checkpoint import StoreCheckpoint, checkpoint_path
from .commitlog import CommitLog, FlushRealTimeService, GroupCommitService, commitlog_dir
from .compaction import Compactor
from .config import BrokerConfig, MessageStoreConfig
from .config_manager import ConfigManager
from .consume_queue import ConsumeQueue, QueueFilePreparer
from .consumer_offset import ConsumerOffsetManager
from .disk_space import DiskSpace
from .dispatcher import Dispatcher, dispatch_for_recovery
from .errors import StoreError, StoreLockedError
from .progress import Progress
from .file_io import FileIO, MmapFileIO
from .ha import HAService
from .index_file import IndexService
from .producer_state import ProducerStateTable
from .state_log import is_internal
from .message import (
    PROPERTY_DELAY_TIME_LEVEL, PROPERTY_TAGS, UnitHeader, body_crc, decode_message, decode_message_id,
    encode_properties, encode_unit, parse_host, patch_unit, tags_code,
)
from .schedule_message import ScheduleMessageService
from .subscription_group import SubscriptionGroupManager
from .timer_message import TimerMessageStore
from .topic_config import TopicConfigManager

from .store_types import (  # noqa: F401  (the facade's result types, imported from engine.store by callers)
    PutMessageStatus, _STORED, PutMessageResult, GetMessageStatus, UnitRef, GetMessageResult, QueryMessageResult, _now_ms, _body_pos, _tail_len, _unit_msg_id, _I32, _I64, _MAX_QUEUE_ID,
)
from .retention import Retention
from .store_puts import StorePuts
from .store_reads import StoreReads
from .store_replica import ReplicaLog

log = structlog.get_logger("rockafka.engine.store")

_BATCH_ATTR_LOW = 22  # low byte of a Kafka RecordBatch's attributes (engine.record_batch layout)
_TXN_FLAG = 0x10  # attributes bit: transactional batch (data or marker)


class LogicalMinOffsetTable(ConfigManager):
    """``config/queueMinOffset.json``: low watermarks raised by Kafka DeleteRecords."""

    file_name = "queueMinOffset.json"

    def __init__(self, config_dir):
        super().__init__(config_dir)
        self.table: dict[str, int] = {}

    def encode(self) -> dict[str, Any]:
        return {"minOffsetTable": dict(self.table)}

    def decode(self, doc: dict[str, Any]) -> None:
        self.table = {str(k): int(v) for k, v in (doc.get("minOffsetTable") or {}).items()}


def _store_host(broker_config: BrokerConfig | None) -> tuple[str, int]:
    if broker_config is None:
        return ("127.0.0.1", 10911)
    ip = broker_config.broker_ip1 or "127.0.0.1"
    try:
        ipaddress.ip_address(ip)
    except ValueError:
        ip = "127.0.0.1"
    return (ip, broker_config.listen_port)


class MessageStore(StorePuts, StoreReads, ReplicaLog, Retention):
    def __init__(self, config: MessageStoreConfig, broker_config: BrokerConfig | None = None,
                 file_io: FileIO | None = None):
        self.config = config
        self.broker_config = broker_config or BrokerConfig()
        self.root = str(config.store_path_root_dir)
        # SYNC_FLUSH puts run on send-queue threads that wait on the disk anyway: their commitlog
        # writes go by pwrite, so a stalled disk blocks them and not the whole process (file_io)
        self.fio: FileIO = file_io or MmapFileIO(preallocate=config.warm_mapped_file_enable,
                                                 pwrite_all=config.flush_disk_type == "SYNC_FLUSH")
        self.store_host = _store_host(broker_config)
        self.commitlog = CommitLog(self.fio, commitlog_dir(self.root), config.mapped_file_size_commit_log)
        self.index_service = IndexService(self.fio, os.path.join(self.root, "index"),
                                          config.max_hash_slot_num, config.max_index_num)
        self.config_dir = Path(self.root) / "config"
        self.topic_config = TopicConfigManager(self.config_dir)
        self.consumer_offsets = ConsumerOffsetManager(self.config_dir, config.offsets_topic_num_partitions)
        self.subscription_groups = SubscriptionGroupManager(self.config_dir, self.broker_config.auto_create_subscription_group)
        self.min_offsets = LogicalMinOffsetTable(self.config_dir)
        # idempotence and Kafka transactions per queue, derived from the batches as they are put
        self.producer_state = ProducerStateTable(self.config_dir, config.producer_id_expiration_ms,
                                                 config.state_checkpoint_interval)
        self._retention_guards: list[Callable[[], int | None]] = []
        self.remote_tier: Any = None  # engine/tiered RemoteTier of a broker with one (its blocking readers ask it)
        self.compactor = Compactor(self)  # compacted topics: live records copied forward (compaction.md)
        # delayed delivery: delay levels and timer messages (delays-retry.md)
        self.schedule = ScheduleMessageService(self)
        self.timer = TimerMessageStore(self)
        self._cqs: dict[tuple[str, int], ConsumeQueue] = {}
        self._topic_cache: dict[str, tuple[bytes | None, str | None]] = {}
        self._queue_offsets: dict[tuple[str, int], int] = {}
        self._put_lock = threading.Lock()
        self._begin_time_in_lock = 0.0  # monotonic time the current put took the lock (0: free)
        self.page_cache_busy_refused = 0  # counter: puts refused with OS_PAGE_CACHE_BUSY
        self._cq_lock = threading.RLock()
        self.confirmed_offset = 0
        self._last_store_ts = 0
        self.checkpoint: StoreCheckpoint | None = None
        self.dispatcher: Dispatcher | None = None
        self._flush_service: FlushRealTimeService | None = None
        self._group_commit: GroupCommitService | None = None
        self._background: threading.Thread | None = None
        self._queue_files: QueueFilePreparer | None = None
        self._stop_event = threading.Event()
        # retention passes hold this; stop_retention() ends them before the owners of retention
        # guards (state logs replayed at start) stop and take their guards away
        self._clean_lock = threading.Lock()
        self._retention_stopped = False
        self._lock_fd: int | None = None
        self.running = False
        self._was_started = False
        self.last_exit_ok = True
        self._wake_background = threading.Event()
        self.disk = DiskSpace(self.fio, self.root, config, on_clean_wanted=self._wake_background.set)
        self._pending_listeners: list[tuple[Callable[[str, int, int], None], bool]] = []
        # called with the new role after change_role, before the caller lets writes in
        self.role_listeners: list[Callable[[str, int], None]] = []
        self.log_cuts = 0  # times the log was cut or restarted (a slave following a new master)
        # a slave: topics its replicated units name that its topic table lacks (-> queue count seen)
        self.replicated_unknown_topics: dict[str, int] = {}
        self._offsets_replicated = False  # a slave: __consumer_offsets records arrived, not applied yet
        self._sync = config.flush_disk_type == "SYNC_FLUSH"
        self._in_memory_bytes = _physical_memory() * config.access_message_in_memory_max_ratio // 100
        # the master flavour this store takes when it leads (a controller may make a slave master)
        self.master_role = config.broker_role if config.broker_role != "SLAVE" else "ASYNC_MASTER"
        self.ha = HAService(self)  # replication: master service or slave client, by broker_role
        # a topic change wakes the HA writers, which send the topics document at once: without it
        # the document waited for the next write or haSyncMetadataInterval (1 s), and a slave
        # elected master within that second (ElectLeaders right after CreateTopics) never had the
        # topic — lost on every member once they copied the new master's table
        self.topic_config.change_listeners.append(self.ha.wake_writers)
        if broker_config is None:  # an embedded store (tests, tools): its HA listener takes any free port
            self.ha.listen_port = 0

    # ------------------------------------------------------------------ lifecycle
    @property
    def abort_path(self) -> str:
        return os.path.join(self.root, "abort")

    def start(self) -> None:
        if self.running:
            return
        try:
            os.makedirs(self.root, exist_ok=True)
            probe = os.path.join(self.root, ".write-probe")
            with open(probe, "wb") as f:
                f.write(b"x")
            os.unlink(probe)
        except OSError as exc:
            raise StoreError(f"data directory {self.root} is not writable: {exc.strerror or exc}") from None
        self._acquire_lock()
        if self._was_started:  # started again after shutdown: fresh file structures
            self.commitlog = CommitLog(self.fio, commitlog_dir(self.root), self.config.mapped_file_size_commit_log)
            self.index_service = IndexService(self.fio, os.path.join(self.root, "index"),
                                              self.config.max_hash_slot_num, self.config.max_index_num)
            self._cqs = {}
            self._queue_offsets = {}
        self._was_started = True
        try:
            self._load_and_recover()
        except BaseException:
            self._release_lock()
            raise
        self.fio.touch(self.abort_path)
        if self._sync:
            self._group_commit = GroupCommitService(self.commitlog)
            self._group_commit.start()
        else:
            self._flush_service = FlushRealTimeService(self.commitlog, self.config.flush_interval_commit_log)
            self._flush_service.start()
        self.dispatcher = Dispatcher(self, self.confirmed_offset)
        for cb, lazy in self._pending_listeners:
            self.dispatcher.add_listener(cb, lazy)
        self.dispatcher.start()
        self._stop_event.clear()
        self._wake_background.clear()
        self._retention_stopped = False
        self.disk.refresh(self.confirmed_offset)
        self._background = threading.Thread(target=self._background_loop, name="store-background", daemon=True)
        self._background.start()
        self._queue_files = QueueFilePreparer(self._prepare_queue_file, self._queue_count)
        self.running = True
        self.consumer_offsets.start(self)  # __consumer_offsets replayed before anyone reads offsets
        self.schedule.start()
        self.timer.start()
        self.ha.start()
        log.info("store_started", broker_role=self.config.broker_role, root=self.root, flush_disk_type=self.config.flush_disk_type,
                 last_exit_ok=self.last_exit_ok, commitlog_max_offset=self.commitlog.max_offset,
                 consume_queues=len(self._cqs))

    def shutdown(self) -> None:
        if not self.running:
            return
        self.ha.shutdown()
        self.timer.stop()
        self.schedule.stop()
        self.consumer_offsets.shutdown()  # RocketMQ consumers' last commits into the log
        self.running = False
        if self._queue_files is not None:
            self._queue_files.stop()
        self._stop_event.set()
        self._wake_background.set()
        if self._background is not None:
            self._background.join(timeout=30)
        if self.dispatcher is not None:
            self.dispatcher.stop()
        if self._group_commit is not None:
            self._group_commit.stop()
        if self._flush_service is not None:
            self._flush_service.stop()
        self.commitlog.flush()
        self._flush_logics_and_checkpoint(final=True)  # the producer snapshot at the very end: no scan at start
        try:
            self.consumer_offsets.checkpoint(force=True)
        except OSError:
            log.exception("config_persist_failed", path=str(self.consumer_offsets.path))
        for mgr in (self.topic_config, self.subscription_groups, self.min_offsets):
            try:
                mgr.persist()
            except OSError:
                log.exception("config_persist_failed", path=str(mgr.path))
        self.commitlog.close()
        with self._cq_lock:
            for cq in self._cqs.values():
                cq.mfq.close()
        self.index_service.close()
        if self.checkpoint is not None:
            self.checkpoint.close()
        self.fio.remove(self.abort_path)
        self._release_lock()
        log.info("store_stopped", root=self.root, commitlog_max_offset=self.commitlog.max_offset)

    def _acquire_lock(self) -> None:
        path = os.path.join(self.root, "lock")
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            os.close(fd)
            if exc.errno in (errno.EAGAIN, errno.EACCES, errno.EWOULDBLOCK):
                raise StoreLockedError(
                    f"data directory {self.root} is in use by another process (it holds {path}); "
                    "stop that process or choose another --data-dir") from None
            raise StoreError(f"cannot lock {path}: {exc.strerror}") from None
        try:
            os.ftruncate(fd, 0)
            os.write(fd, f"{os.getpid()}\n".encode())
        except OSError as exc:  # the pid is for people; a full disk must not stop the start
            log.warning("lock_file_pid_not_written", path=path, error=str(exc))
        self._lock_fd = fd

    def _release_lock(self) -> None:
        if self._lock_fd is not None:
            try:
                fcntl.flock(self._lock_fd, fcntl.LOCK_UN)
            finally:
                os.close(self._lock_fd)
                self._lock_fd = None

    # ------------------------------------------------------------------ load and recovery
    def _load_and_recover(self) -> None:
        for mgr in (self.topic_config, self.consumer_offsets, self.subscription_groups, self.min_offsets):
            mgr.load()
        self.last_exit_ok = not self.fio.exists(self.abort_path)
        self.commitlog.load()
        self._load_consume_queues()
        self.index_service.load()
        self.checkpoint = StoreCheckpoint(self.fio, checkpoint_path(self.root))
        self._recover()

    def _load_consume_queues(self) -> None:
        base = os.path.join(self.root, "consumequeue")
        self.fio.makedirs(base)
        for topic in self.fio.list_dir(base):
            for qid in self.fio.list_dir(os.path.join(base, topic)):
                if not qid.isdigit():
                    continue
                cq = ConsumeQueue(self.fio, base, topic, int(qid), self.config.mapped_file_size_consume_queue)
                cq.load()
                cq.recover(zero_tail=not self.last_exit_ok)
                self._cqs[(topic, int(qid))] = cq

    def _recover(self) -> None:
        cl = self.commitlog
        first = cl.mfq.first()
        cl_min = first.file_from_offset if first else 0
        last = cl.mfq.last()
        cl_end = last.end_offset if last else 0
        cp = self.checkpoint
        if cp is not None and cp.valid:
            start = min(cp.min_dispatch_offset, cp.physic_flushed_offset)
        else:
            start = cl_min
        if start < cl_min or start > cl_end:
            start = cl_min
        abnormal = not self.last_exit_ok
        check_crc = abnormal and self.config.check_crc_on_recover
        if not abnormal:
            index_from = max(self.index_service.end_phy_offset, start, 0)  # a clean stop flushed the index
        elif cp is not None and cp.valid:
            # entries after the index checkpoint may be lost or half written (power loss):
            # add them again; queries drop the duplicates a process kill leaves
            index_from = max(min(cp.index_flushed_offset, self.index_service.end_phy_offset), 0)
        else:
            index_from = 0
        begin = time.monotonic()
        progress = Progress("recovery_progress", max(0, cl_end - start), "bytes", phase="commitlog_scan",
                            rebuild_index_from=index_from)
        units = self._redispatch(start, check_crc, index_from, progress)
        end = cl.scan_end
        cl_end_clean = end if cp is not None and cp.valid and end == cp.physic_flushed_offset else -1
        if end == start and start > cl_min and not self._zero_at(start):
            # the checkpoint does not point at a unit: scan that whole segment instead
            seg = cl.mfq.find(start)
            start = seg.file_from_offset if seg else cl_min
            units = self._redispatch(start, check_crc, index_from, progress)
            end = cl.scan_end
        progress.finish()
        cl.truncate(end, zero=abnormal or end != cl_end_clean)
        for cq in self._cqs.values():
            cq.truncate_dirty(end)
        self._apply_min_offsets()
        self.correct_min_offsets()  # queue files may reach below segments retention deleted
        self._queue_offsets = {k: cq.max_offset for k, cq in self._cqs.items()}
        self.confirmed_offset = end
        log.info("store_recovered", abnormal=abnormal, scan_from=start, commitlog_end=end, units_scanned=units,
                 seconds=round(time.monotonic() - begin, 3))
        self.producer_state.recover(self.commitlog, end)
        if cp is not None:
            self._flush_logics_and_checkpoint()

    def _zero_at(self, offset: int) -> bool:
        f = self.commitlog.mfq.find(offset)
        if f is None:
            return True
        pos = offset - f.file_from_offset
        return f.segment.pread(pos, 8) == bytes(8)  # may be a hole: never read it through the mapping

    def _redispatch(self, start: int, check_crc: bool, index_from: int, progress: Progress | None = None) -> int:
        n = 0
        for offset, h, f in self.commitlog.scan(start, check_crc):
            if h is None:
                continue
            dispatch_for_recovery(self, offset, h, f.buf, index_from)
            n += 1
            if progress is not None and not n & 1023:
                progress.update(offset - start)
        return n

    def apply_min_offsets(self) -> None:
        """Raise queue min offsets to the persisted low watermarks (a slave applying its master's)."""
        with self._put_lock:
            self._apply_min_offsets()

    def _apply_min_offsets(self) -> None:
        for key, off in self.min_offsets.table.items():
            topic, _, qid = key.rpartition("@")
            cq = self._cqs.get((topic, int(qid))) if qid.isdigit() else None
            if cq is not None:
                cq.raise_min_offset(min(off, cq.max_offset))

    # ------------------------------------------------------------------ consume queues
    def find_consume_queue(self, topic: str, queue_id: int, create: bool = False) -> ConsumeQueue | None:
        cq = self._cqs.get((topic, queue_id))
        if cq is None and create:
            with self._cq_lock:
                cq = self._cqs.get((topic, queue_id))
                if cq is None:
                    cq = ConsumeQueue(self.fio, os.path.join(self.root, "consumequeue"), topic, queue_id,
                                      self.config.mapped_file_size_consume_queue)
                    self._cqs[(topic, queue_id)] = cq
        return cq

    def _queue_count(self, topic: str) -> int:
        tc = self.topic_config.get(topic)
        return max(tc.read_queue_nums, tc.write_queue_nums) if tc is not None else 0

    def _prepare_queue_file(self, topic: str, queue_id: int, trigger: ConsumeQueue) -> bool:
        """``QueueFilePreparer``'s thread: give a queue of ``topic`` that has no file its first one
        (units from offset 0, where a new queue starts). False once the queue that asked is no
        longer the store's (the topic was deleted: nothing of it may be created again). Under the
        queue-table lock, so a deletion cannot run between that check and the file."""
        key = (topic, queue_id)
        with self._cq_lock:
            if not self.running or self._cqs.get((topic, trigger.queue_id)) is not trigger:
                return False
            cq = self._cqs.get(key)
            if cq is not None and cq.mfq.files:
                return True
            if self._queue_offsets.get(key, 0) != 0:  # not a new queue: the put path decides
                return True
            if cq is None:
                cq = self.find_consume_queue(topic, queue_id, create=True)
            cq.prepare()
        return True

    def consume_queues(self) -> dict[tuple[str, int], ConsumeQueue]:
        return dict(self._cqs)

    @property
    def is_slave(self) -> bool:
        return self.config.broker_role == "SLAVE"

    def change_role(self, role: str, master_address: str | None = None, epoch: int | None = None) -> None:
        """Switch between master (ASYNC_MASTER / SYNC_MASTER) and SLAVE while running: a new
        master opens a new epoch (``epoch`` when a controller hands it out) at its log's end and
        delivers delayed and timer messages from where its copied progress says; a master
        stepping down stops accepting puts at once, stops delivering and follows
        ``master_address`` (or the NameServer's answer)."""
        if role not in ("ASYNC_MASTER", "SYNC_MASTER", "SLAVE"):
            raise ValueError(f"brokerRole must be ASYNC_MASTER, SYNC_MASTER or SLAVE, got {role!r}")
        was_slave = self.is_slave
        if role == self.config.broker_role:
            if role == "SLAVE" and master_address:
                self.ha.update_master_address(master_address)
            return
        if not was_slave and role != "SLAVE":  # between master flavours: only the wait changes
            self.config.broker_role = role
            return
        if role == "SLAVE":
            self.config.broker_role = role  # puts are refused from here on
            self.schedule.stop()
        with self._put_lock:  # no put in flight while the log changes hands
            pass
        self.ha.change_role(role, master_address, epoch)
        self.timer.follower = role == "SLAVE"
        if was_slave:
            self.schedule.start()
            self.consumer_offsets.catch_up()  # offsets replicated up to the new epoch, before commits land
        log.info("store_role_changed", role=role, commitlog_max_offset=self.confirmed_offset)
        for cb in list(self.role_listeners):
            try:
                cb(role, self.ha.master_epoch)
            except Exception:
                log.exception("role_listener_failed", role=role)

    def add_arrival_listener(self, cb: Callable[[str, int, int], None], lazy: bool = False) -> None:
        """``cb(topic, queue_id, max_offset)`` when a queue grew: called where the put (or, on a
        slave, the replicated append) happens, right after it, from that thread -- keep it
        cheap (long-poll wake-ups). ``lazy``: called from the dispatcher's rounds instead,
        once per queue per round (counters, which need no promptness)."""
        if self.dispatcher is not None:
            self.dispatcher.add_listener(cb, lazy)
        self._pending_listeners.append((cb, lazy))

    def remove_arrival_listener(self, cb: Callable[[str, int, int], None]) -> None:
        if self.dispatcher is not None:
            self.dispatcher.remove_listener(cb)
        self._pending_listeners = [x for x in self._pending_listeners if x[0] is not cb]

    def delete_topic(self, topic: str) -> None:
        if is_internal(topic):
            raise StoreError(f"{topic} is an internal topic: it holds state the store needs")
        with self._put_lock:
            with self._cq_lock:
                for key in [k for k in self._cqs if k[0] == topic]:
                    cq = self._cqs.pop(key)
                    cq.destroy()
                    self._queue_offsets.pop(key, None)
            shutil.rmtree(os.path.join(self.root, "consumequeue", topic), ignore_errors=True)
            self.producer_state.forget_topic(topic)
        with self.min_offsets.lock:
            for k in [k for k in self.min_offsets.table if k.rpartition("@")[0] == topic]:
                del self.min_offsets.table[k]
            self.min_offsets.persist()
        self.topic_config.delete(topic)
        metrics.forget_topic(topic)
        self.consumer_offsets.delete_topic(topic)  # tombstones in __consumer_offsets
        if self.running:
            # move the checkpoint past the topic's units, so crash recovery (which re-dispatches
            # from the checkpoint) cannot rebuild queues of the deleted topic
            self.dispatcher.wait_dispatched(self.confirmed_offset, 1.0)
            self.commitlog.flush()
            self._flush_logics_and_checkpoint()
        log.info("topic_deleted", topic=topic)

    def queue_ids(self, topic: str) -> list[int]:
        return sorted(q for (t, q) in self._cqs if t == topic)

    # ------------------------------------------------------------------ background work
    def _flush_logics_and_checkpoint(self, producer_snapshot: bool = True, final: bool = False,
                                     least_pages: int = 0) -> None:
        """Flush the consume queues and the index, then the checkpoint. ``least_pages`` > 0 (the
        background's passes between thorough ones): only queues with that many dirty pages, and
        the checkpoint's logics offset stays where the last flush of every queue put it."""
        with self._put_lock:
            logics_upto = self.confirmed_offset
            if producer_snapshot:
                self.producer_state.capture(logics_upto, self.get_min_offset_in_queue, force=final)
        thorough = True
        for cq in list(self._cqs.values()):
            try:
                thorough = cq.flush(least_pages) and thorough
            except ValueError:  # destroyed by delete_topic meanwhile
                pass
        index_upto = self.dispatcher.reput_offset if self.dispatcher is not None else logics_upto
        index_upto = min(index_upto, logics_upto)
        self.index_service.flush()
        try:
            self.producer_state.write(self.commitlog.flushed_where)  # never ahead of the flushed log
        except OSError as exc:
            log.warning("producer_snapshot_not_written", error=str(exc))
        cp = self.checkpoint
        if cp is None:
            return
        now = _now_ms()
        cp.physic_flushed_offset = self.commitlog.flushed_where
        if thorough:  # else recovery re-dispatches from the last offset every queue was flushed to
            cp.logics_flushed_offset = logics_upto
        cp.index_flushed_offset = index_upto
        cp.physic_msg_timestamp = cp.logics_msg_timestamp = cp.index_msg_timestamp = now
        cp.flush()

    def _background_loop(self) -> None:
        cq_interval = max(self.config.flush_interval_consume_queue, 10) / 1000.0
        now = time.monotonic()
        next_flush = now + cq_interval
        next_thorough = now + self.config.flush_consume_queue_thorough_interval / 1000.0
        next_offsets = now + self.config.flush_consumer_offset_interval / 1000.0
        next_state_checkpoint = now + self.config.state_checkpoint_interval / 1000.0
        next_producer_snapshot = 0.0
        next_clean = now + self.config.clean_resource_interval / 1000.0
        next_compaction = now + self.config.log_cleaner_backoff_ms / 1000.0
        next_disk = now + 1.0
        failing: dict[str, str] = {}  # what failed last round: the same failure is logged once
        while True:
            # the put path wakes this thread when the disk crosses diskSpaceCleanForciblyRatio
            self._wake_background.wait(max(0.0, min(next_flush, next_disk) - time.monotonic()))
            self._wake_background.clear()
            if self._stop_event.is_set():
                return
            now = time.monotonic()
            tasks = []
            if now >= next_flush:
                snapshot = now >= next_producer_snapshot
                if snapshot:
                    next_producer_snapshot = now + self.config.producer_state_snapshot_interval / 1000.0
                least_pages = self.config.flush_consume_queue_least_pages
                if now >= next_thorough:
                    least_pages, next_thorough = 0, now + self.config.flush_consume_queue_thorough_interval / 1000.0
                tasks.append(("flush", functools.partial(self._flush_logics_and_checkpoint, producer_snapshot=snapshot,
                                                         least_pages=least_pages)))
                next_flush = now + cq_interval
            if now >= next_disk or self.disk.clean_wanted.is_set():
                tasks.append(("disk", lambda: self.disk.refresh(self.confirmed_offset)))
                next_disk = now + 1.0
            if now >= next_offsets:
                tasks.append(("consumer_offsets", self.consumer_offsets.flush_dirty))
                next_offsets = now + self.config.flush_consumer_offset_interval / 1000.0
            if now >= next_state_checkpoint:
                tasks.append(("state_checkpoint", self.consumer_offsets.checkpoint))
                next_state_checkpoint = now + self.config.state_checkpoint_interval / 1000.0
            if now >= next_clean or self.disk.clean_wanted.is_set():
                tasks.append(("clean", self.clean_expired_files))
                next_clean = now + self.config.clean_resource_interval / 1000.0
            if now >= next_compaction:
                tasks.append(("compaction", self.compactor.clean))
                next_compaction = now + self.config.log_cleaner_backoff_ms / 1000.0
            for name, task in tasks:
                try:
                    task()
                except Exception as exc:
                    # a full disk or descriptor table fails the same way every second: one
                    # event when it starts (with the traceback), one when it stops
                    reason = f"{type(exc).__name__}: {exc}"
                    if failing.get(name) != reason:
                        log.exception("store_background_failed", task=name)
                        failing[name] = reason
                else:
                    if failing.pop(name, None) is not None:
                        log.info("store_background_recovered", task=name)


def _physical_memory() -> int:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return 8 << 30


