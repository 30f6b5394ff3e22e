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

import enum
import functools
import errno
import fcntl
import ipaddress
import os
import re
import shutil
import struct
import threading
import time
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, Callable

import structlog

from . import batch_delay, metrics, record_batch
from .checkpoint import StoreCheckpoint, checkpoint_path
from .commitlog import CommitLog, FlushRealTimeService, GroupCommitService, commitlog_dir
from .compaction import Compactor, policy_of
from .config import BrokerConfig, MessageStoreConfig
from .config_manager import ConfigManager
from .consume_queue import ConsumeQueue, QueueFilePreparer
from .consumer_offset import ConsumerOffsetManager
from .disk_space import DiskSpace, is_disk_full
from .dispatcher import Dispatcher, batch_record_count, dispatch_for_recovery, record_keys
from .errors import StoreError, StoreLockedError
from .progress import Progress
from .file_io import FileIO, MmapFileIO
from .ha import HAService
from .index_file import IndexService
from .producer_state import ProducerStateTable
from .state_log import CONSUMER_OFFSETS, INTERNAL_TOPICS, is_internal
from .message import (INNER_BATCH_FLAG, Message, MessageExt, MessageFormatError,
                      PROPERTY_DELAY_TIME_LEVEL, PROPERTY_TAGS, UnitHeader, body_crc, decode_message, decode_message_id, encode_properties,
                      encode_unit, parse_host, patch_unit, tags_code)
from .schedule_message import ScheduleMessageService
from .subscription_group import SubscriptionGroupManager
from .timer_message import TIMER_PROPERTIES, TimerMessageError, TimerMessageStore
from .topic_config import TOPIC_RETENTION_BYTES, TOPIC_RETENTION_MS, TopicConfigManager

log = structlog.get_logger("rockafka.engine.store")

TOPIC_PATTERN = re.compile(r"^[%|a-zA-Z0-9_.-]+$")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_MAX_QUEUE_ID = 65535
_BATCH_ATTR_LOW = 22  # low byte of a Kafka RecordBatch's attributes (engine.record_batch layout)
_TXN_FLAG = 0x10  # attributes bit: transactional batch (data or marker)


class PutMessageStatus(enum.Enum):
    PUT_OK = "PUT_OK"
    FLUSH_DISK_TIMEOUT = "FLUSH_DISK_TIMEOUT"
    FLUSH_SLAVE_TIMEOUT = "FLUSH_SLAVE_TIMEOUT"
    SLAVE_NOT_AVAILABLE = "SLAVE_NOT_AVAILABLE"
    SERVICE_NOT_AVAILABLE = "SERVICE_NOT_AVAILABLE"
    CREATE_MAPPED_FILE_FAILED = "CREATE_MAPPED_FILE_FAILED"
    MESSAGE_ILLEGAL = "MESSAGE_ILLEGAL"
    PROPERTIES_SIZE_EXCEEDED = "PROPERTIES_SIZE_EXCEEDED"
    OS_PAGE_CACHE_BUSY = "OS_PAGE_CACHE_BUSY"
    UNKNOWN_ERROR = "UNKNOWN_ERROR"


# Stored (and readable) even though the status is not PUT_OK, as in RocketMQ.
_STORED = {PutMessageStatus.PUT_OK, PutMessageStatus.FLUSH_DISK_TIMEOUT, PutMessageStatus.FLUSH_SLAVE_TIMEOUT,
           PutMessageStatus.SLAVE_NOT_AVAILABLE}


@dataclass
class PutMessageResult:
    status: PutMessageStatus
    msg_id: str = ""
    queue_offset: int = -1
    commitlog_offset: int = -1
    wrote_bytes: int = 0
    record_count: int = 0
    store_timestamp: int = 0
    error: str | None = None
    end_offset: int = -1  # commitlog offset just past the last unit written (what replication must cover)
    disk_full: bool = False  # SERVICE_NOT_AVAILABLE because the data disk is full

    @property
    def ok(self) -> bool:
        return self.status is PutMessageStatus.PUT_OK

    @property
    def stored(self) -> bool:
        """The message is in the store (PUT_OK, or stored but not yet flushed/replicated)."""
        return self.status in _STORED


class GetMessageStatus(enum.Enum):
    FOUND = "FOUND"
    NO_MATCHED_MESSAGE = "NO_MATCHED_MESSAGE"
    MESSAGE_WAS_REMOVING = "MESSAGE_WAS_REMOVING"
    OFFSET_FOUND_NULL = "OFFSET_FOUND_NULL"
    OFFSET_OVERFLOW_BADLY = "OFFSET_OVERFLOW_BADLY"
    OFFSET_OVERFLOW_ONE = "OFFSET_OVERFLOW_ONE"
    OFFSET_TOO_SMALL = "OFFSET_TOO_SMALL"
    NO_MATCHED_LOGIC_QUEUE = "NO_MATCHED_LOGIC_QUEUE"
    NO_MESSAGE_IN_QUEUE = "NO_MESSAGE_IN_QUEUE"


@dataclass(slots=True)
class UnitRef:
    queue_offset: int  # first logical offset the unit holds
    record_count: int  # 1, or N for a batch unit
    commitlog_offset: int
    size: int
    tags_code: int
    store_timestamp: int
    is_batch: bool = False


@dataclass
class GetMessageResult:
    status: GetMessageStatus
    messages: list[bytes] = field(default_factory=list)
    units: list[UnitRef] = field(default_factory=list)
    next_begin_offset: int = 0
    min_offset: int = 0
    max_offset: int = 0
    suggest_pulling_from_slave: bool = False
    buffer_total_size: int = 0

    @property
    def message_count(self) -> int:
        return len(self.messages)


@dataclass
class QueryMessageResult:
    messages: list[bytes] = field(default_factory=list)
    index_last_update_timestamp: int = 0
    index_last_update_phyoffset: int = 0


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


def _now_ms() -> int:
    return int(time.time() * 1000)


def _store_host(broker_config: BrokerConfig | None) -> tuple[str, int]:
    if broker_config is None:
        return ("127.0.0.1", 10911)
    ip = broker_config.broker_ip1 or "127.0.0.1"
    try:
        ipaddress.ip_address(ip)
    except ValueError:
        ip = "127.0.0.1"
    return (ip, broker_config.listen_port)


class MessageStore:
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
        self._pending_listeners: list[Callable[[str, int, int], None]] = []
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
        for cb in self._pending_listeners:
            self.dispatcher.add_listener(cb)
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

    # ------------------------------------------------------------------ validation
    def _check_topic(self, topic: str) -> str | None:
        if not topic:
            return "topic name is empty"
        if len(topic.encode("utf-8")) > self.config.max_topic_length:
            return f"topic name is {len(topic)} characters, longer than maxTopicLength {self.config.max_topic_length}"
        if not TOPIC_PATTERN.match(topic):
            return f"topic name {topic!r} has characters outside [%|a-zA-Z0-9_.-]"
        return None

    def _refuse(self, status: PutMessageStatus, error: str) -> PutMessageResult:
        return PutMessageResult(status=status, error=error)

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

    def _check_writable(self, topic: str | None = None) -> PutMessageResult | None:
        """Why a put must be refused now, or None. Records of the internal state topics
        (coordinator state: offsets, group and transaction records, a few hundred bytes each)
        are not held to diskSpaceWarningLevelRatio, only to the space really left (reserved
        before writing), so consumer groups keep working while a full disk refuses messages."""
        if not self.running:
            return self._refuse(PutMessageStatus.SERVICE_NOT_AVAILABLE, "message store is not running")
        if self.is_slave:
            return self._refuse(PutMessageStatus.SERVICE_NOT_AVAILABLE,
                                "this broker is a slave (brokerRole=SLAVE): its log is written by replication only; "
                                "write to the master of the group")
        if not self.ha.lease_valid():
            return self._refuse(PutMessageStatus.SERVICE_NOT_AVAILABLE,
                                "master lease expired: the failover controller has not confirmed this broker as "
                                "master recently (cut off, or another broker was elected); write to the current master")
        if topic not in INTERNAL_TOPICS and not self.disk.writable(self.confirmed_offset):
            return self._refuse_disk_full()
        return None

    def _refuse_disk_full(self) -> PutMessageResult:
        self.disk.puts_refused += 1
        return PutMessageResult(status=PutMessageStatus.SERVICE_NOT_AVAILABLE, error=self.disk.refuse_message(),
                                disk_full=True)

    @property
    def disk_full(self) -> bool:
        return self.disk.full

    def is_os_page_cache_busy(self) -> bool:
        """A put has held the commitlog lock longer than osPageCacheBusyTimeOutMills (RocketMQ's check)."""
        begin = self._begin_time_in_lock
        return bool(begin) and time.monotonic() - begin > self.config.os_page_cache_busy_time_out_mills / 1000.0

    @property
    def put_would_wait(self) -> bool:
        """Another put holds the commitlog now: a caller that must not block (an event loop)
        hands its put to a thread instead."""
        return self._put_lock.locked()

    def _lock_for_put(self) -> bool:
        """Take the put lock, waiting at most osPageCacheBusyTimeOutMills; False = busy."""
        lock = self._put_lock
        if not lock.acquire(False):
            limit = self.config.os_page_cache_busy_time_out_mills / 1000.0
            begin = self._begin_time_in_lock
            held = time.monotonic() - begin if begin else 0.0
            if held > limit or not lock.acquire(timeout=limit - held):
                return False
        self._begin_time_in_lock = time.monotonic()
        return True

    def _unlock_for_put(self) -> None:
        self._begin_time_in_lock = 0.0
        self._put_lock.release()

    def _topic_bytes(self, topic: str) -> tuple[bytes | None, str | None]:
        cached = self._topic_cache.get(topic)
        if cached is None:
            err = self._check_topic(topic)
            cached = (None if err else topic.encode("utf-8"), err)
            if len(self._topic_cache) > 10_000:
                self._topic_cache.clear()
            self._topic_cache[topic] = cached
        return cached

    def _encode(self, msg: Message, sys_flag: int | None = None, crc: int | None = None,
                max_size: int | None = None) -> tuple[bytearray | None, PutMessageResult | None, int]:
        if not isinstance(msg.topic, str):
            return None, self._refuse(PutMessageStatus.MESSAGE_ILLEGAL, f"topic must be a string, not {type(msg.topic).__name__}"), 0
        topic_bytes, err = self._topic_bytes(msg.topic)
        if err:
            return None, self._refuse(PutMessageStatus.MESSAGE_ILLEGAL, err), 0
        if not isinstance(msg.queue_id, int) or not 0 <= msg.queue_id <= _MAX_QUEUE_ID:
            return None, self._refuse(PutMessageStatus.MESSAGE_ILLEGAL, f"queue id {msg.queue_id!r} is outside 0..{_MAX_QUEUE_ID}"), 0
        body = msg.body
        if not isinstance(body, (bytes, bytearray)):
            if not isinstance(body, memoryview):
                return None, self._refuse(PutMessageStatus.MESSAGE_ILLEGAL, f"message body must be bytes, not {type(body).__name__}"), 0
            body = bytes(body)
        limit = self.config.max_message_size if max_size is None else max_size
        if len(body) > limit:
            what = f"maxMessageSize {limit}" if max_size is None else f"the topic's limit {limit}"
            return None, self._refuse(PutMessageStatus.MESSAGE_ILLEGAL,
                                      f"message body is {len(body)} bytes, more than {what}"), 0
        if msg.properties or msg.tags or msg.keys:
            all_props = msg.all_properties()
            try:
                props = encode_properties(all_props)
            except UnicodeEncodeError as exc:
                return None, self._refuse(PutMessageStatus.MESSAGE_ILLEGAL, f"properties are not encodable as UTF-8: {exc}"), 0
            if props.count(b"\x01") != len(all_props) or props.count(b"\x02") != len(all_props):
                return None, self._refuse(PutMessageStatus.MESSAGE_ILLEGAL,
                                          "a property name or value contains \\x01 or \\x02, the properties separators"), 0
        else:
            props = b""
        if len(props) > self.config.max_properties_length or len(props) > 32767:
            return None, self._refuse(PutMessageStatus.PROPERTIES_SIZE_EXCEEDED,
                                      f"properties are {len(props)} bytes, more than the limit {min(self.config.max_properties_length, 32767)}"), 0
        try:
            unit = encode_unit(
                topic=topic_bytes, body=body, props=props, queue_id=msg.queue_id, flag=msg.flag,
                sys_flag=msg.sys_flag if sys_flag is None else sys_flag,
                born_timestamp=_now_ms() if msg.born_timestamp is None else msg.born_timestamp,
                born_host=parse_host(msg.born_host),
                store_host=parse_host(msg.store_host) if msg.store_host is not None else self.store_host,
                reconsume_times=msg.reconsume_times, prepared_transaction_offset=msg.prepared_transaction_offset,
                crc=crc)
        except (ValueError, struct.error) as exc:
            return None, self._refuse(PutMessageStatus.MESSAGE_ILLEGAL, f"message cannot be encoded: {exc}"), 0
        if not self.commitlog.fits_in_segment(len(unit)):
            return None, self._refuse(PutMessageStatus.MESSAGE_ILLEGAL,
                                      f"message unit is {len(unit)} bytes, larger than a commitlog segment "
                                      f"(mappedFileSizeCommitLog {self.config.mapped_file_size_commit_log})"), 0
        return unit, None, tags_code(msg.tags)

    # ------------------------------------------------------------------ writes
    def put_message(self, msg: Message, sync_replicas: bool | None = None) -> PutMessageResult:
        """Store one message. ``sync_replicas`` as in ``put_record_batch`` (None: SYNC_MASTER
        waits for the slaves here; False: the caller waits with ``ha.wait_replicated``)."""
        refused = self._check_writable()
        if refused:
            return refused
        staged_tcode = None
        props = msg.properties
        if props and (PROPERTY_DELAY_TIME_LEVEL in props or any(k in props for k in TIMER_PROPERTIES)):
            # RocketMQ's put path: a delayed message is stored in its staging topic, with the
            # delivery time as its consume-queue tags code; half and rollback messages never are
            if msg.sys_flag & 0xC not in (0x4, 0xC):
                try:
                    staged = self.schedule.rewrite(msg) or self.timer.rewrite(msg)
                except TimerMessageError as exc:
                    return self._refuse(PutMessageStatus.MESSAGE_ILLEGAL, str(exc))
                if staged is not None:
                    msg, staged_tcode = staged
        unit, refused, tcode = self._encode(msg)
        if refused:
            return refused
        if staged_tcode is not None:
            tcode = staged_tcode
        return self._append(msg.topic, msg.queue_id, [(unit, tcode, 1)], wait=self._wants_wait(msg),
                            sync_replicas=sync_replicas)

    def put_messages(self, msgs: list[Message], sync_replicas: bool | None = None) -> PutMessageResult:
        """RocketMQ batch: one unit per message, same topic and queue, contiguous offsets."""
        refused = self._check_writable()
        if refused:
            return refused
        if not msgs:
            return self._refuse(PutMessageStatus.MESSAGE_ILLEGAL, "empty message batch")
        topic, qid = msgs[0].topic, msgs[0].queue_id
        encoded = []
        total = 0
        for m in msgs:
            if m.topic != topic or m.queue_id != qid:
                return self._refuse(PutMessageStatus.MESSAGE_ILLEGAL, "all messages of a batch must have the same topic and queue id")
            unit, refused, tcode = self._encode(m)
            if refused:
                return refused
            total += len(unit)
            encoded.append((unit, tcode, 1))
        if total > self.config.max_message_size:
            return self._refuse(PutMessageStatus.MESSAGE_ILLEGAL,
                                f"batch is {total} bytes, more than maxMessageSize {self.config.max_message_size}")
        return self._append(topic, qid, encoded, wait=self._wants_wait(msgs[0]), sync_replicas=sync_replicas)

    def put_record_batch(self, topic: str, queue_id: int, batch, *, born_host=None, store_host=None,
                         properties: dict | None = None, delay_headers: bool = True,
                         sync_replicas: bool | None = None, max_size: int | None = None) -> PutMessageResult:
        """Store one Kafka RecordBatch v2 as one INNER_BATCH unit with N queue offsets.

        Records with a delay header (``rmq.delay.level`` / ``rmq.deliver.ms``) are split off and
        staged (``engine.batch_delay``) unless ``delay_headers`` is False. ``sync_replicas``:
        None waits for the slaves as ``brokerRole`` says (SYNC_MASTER), False never (the caller
        waits itself with ``ha.wait_replicated``, e.g. Kafka's acks), True always. ``max_size``
        replaces maxMessageSize as the largest batch taken (a Kafka topic's max.message.bytes)."""
        refused = self._check_writable(topic)
        if refused:
            return refused
        try:
            header = record_batch.validate_batch(batch)  # header fields and CRC-32C; records untouched
        except (ValueError, struct.error) as exc:
            return self._refuse(PutMessageStatus.MESSAGE_ILLEGAL, f"invalid record batch: {exc}")
        if delay_headers and self.config.kafka_delay_headers_enable and batch_delay.may_have_delay_headers(batch, header):
            return batch_delay.put_split_batch(self, topic, queue_id, batch, born_host=born_host,
                                               store_host=store_host, properties=properties, max_size=max_size,
                                               sync_replicas=sync_replicas)
        unit, refused = self._batch_unit(topic, queue_id, batch, header, born_host, store_host, properties, max_size)
        if refused:
            return refused
        return self._append(topic, queue_id, [unit], wait=True, batch=True, headers=[header],
                            sync_replicas=sync_replicas)

    def put_record_batches(self, topic: str, queue_id: int, batches: list[bytes], *, born_host=None,
                           store_host=None, properties: dict | None = None, max_size: int | None = None,
                           producer_batch=None, sync_replicas: bool | None = None) -> PutMessageResult:
        """Store several record batches at consecutive offsets of one queue, all or none (one
        unit each; no delay-header split). The result's queue offset is the first batch's.
        ``producer_batch``: the header of the one producer batch these parts came from (a batch
        split around delayed records), recorded in the producer state as that batch, so its
        retry is recognised whole."""
        refused = self._check_writable(topic)
        if refused:
            return refused
        units = []
        headers = []
        for batch in batches:
            try:
                header = record_batch.validate_batch(batch)
            except (ValueError, struct.error) as exc:
                return self._refuse(PutMessageStatus.MESSAGE_ILLEGAL, f"invalid record batch: {exc}")
            unit, refused = self._batch_unit(topic, queue_id, batch, header, born_host, store_host, properties,
                                             max_size)
            if refused:
                return refused
            units.append(unit)
            headers.append(header)
        if producer_batch is not None and producer_batch.producer_id >= 0:
            headers = [producer_batch] + [None] * (len(units) - 1)
        return self._append(topic, queue_id, units, wait=True, batch=True, headers=headers,
                            sync_replicas=sync_replicas)

    def _batch_unit(self, topic: str, queue_id: int, batch, header, born_host, store_host, properties: dict | None,
                    max_size: int | None = None) -> tuple[tuple[bytearray, int, int] | None, PutMessageResult | None]:
        count = header.last_offset_delta + 1
        if count <= 0:
            return None, self._refuse(PutMessageStatus.MESSAGE_ILLEGAL,
                                      f"record batch has lastOffsetDelta {header.last_offset_delta}")
        msg = Message(topic=topic, body=batch, properties=properties, queue_id=queue_id, born_host=born_host,
                      store_host=store_host, born_timestamp=header.max_timestamp if header.max_timestamp > 0 else None)
        unit, refused, _ = self._encode(msg, sys_flag=INNER_BATCH_FLAG, crc=0,  # BODYCRC set once offsets are known
                                        max_size=max_size)
        if refused:
            return None, refused
        return (unit, tags_code((properties or {}).get(PROPERTY_TAGS)), count), None

    @staticmethod
    def _wants_wait(msg: Message) -> bool:
        return not (msg.properties and msg.properties.get("WAIT") == "false")

    def _append(self, topic: str, queue_id: int, units: list[tuple[bytearray, int, int]], wait: bool,
                batch: bool = False, headers: list | None = None,
                sync_replicas: bool | None = None) -> PutMessageResult:
        started = metrics.now()
        key = (topic, queue_id)
        cl = self.commitlog
        first_phy = -1
        first_qoff = -1
        ids = []
        records = 0
        wrote = 0
        if batch:
            unit = units[0][0]
            guess = self._queue_offsets.get(key, 0)
            body_pos = _body_pos(unit)
            record_batch.set_base_offset(memoryview(unit)[body_pos:], guess)
            if self.broker_config.enable_controller_mode:  # as Kafka brokers stamp the leader epoch
                for u, _t, _c in units:
                    record_batch.set_partition_leader_epoch(memoryview(u)[_body_pos(u):], self.ha.master_epoch)
            _I32.pack_into(unit, 8, body_crc(memoryview(unit)[body_pos:len(unit) - _tail_len(unit, body_pos)]))
        if not self._lock_for_put():
            self.page_cache_busy_refused += 1
            return self._refuse(PutMessageStatus.OS_PAGE_CACHE_BUSY,
                                f"[PC_SYNCHRONIZED]broker busy, start flow control for a while: the commitlog has been "
                                f"locked by another put for more than osPageCacheBusyTimeOutMills "
                                f"{self.config.os_page_cache_busy_time_out_mills} ms")
        try:
            if not self.running:
                return self._refuse(PutMessageStatus.SERVICE_NOT_AVAILABLE, "message store is not running")
            cq = self.find_consume_queue(topic, queue_id, create=True)
            if not cq.mfq.files and self._queue_files is not None:  # a new queue: its topic's others
                self._queue_files.request(topic, queue_id, cq)   # get their files off this path
            qoff = self._queue_offsets.get(key)
            if qoff is None:
                qoff = cq.max_offset
            now = _now_ms()
            if now < self._last_store_ts:  # wall clock stepped back: keep store times ordered,
                now = self._last_store_ts  # time search (binary) relies on it
            self._last_store_ts = now
            if len(units) > 1:
                # several units are stored all or none: reserve their space (and their queue
                # units') in one segment first, so a full disk refuses before the first is written
                total = sum(len(u[0]) for u in units)
                if cl.fits_in_segment(total):
                    try:
                        f = cl.segment_for(total)
                        f.segment.reserve(f.wrote_position, total)
                        cq.reserve(qoff, sum(u[2] for u in units))
                    except OSError as exc:
                        return self._refuse_write_error(exc, cl.mfq.store_path)
            for n, (unit, tcode, count) in enumerate(units):
                size = len(unit)
                try:
                    f = cl.segment_for(size)
                except OSError as exc:
                    return self._refuse_write_error(exc, cl.mfq.store_path)
                phy = f.file_from_offset + f.wrote_position
                patch_unit(unit, qoff, phy, now)
                if batch and (n or qoff != guess):  # only the first was patched ahead, with a guess
                    body_pos = _body_pos(unit)
                    record_batch.set_base_offset(memoryview(unit)[body_pos:], qoff)
                    _I32.pack_into(unit, 8, body_crc(memoryview(unit)[body_pos:len(unit) - _tail_len(unit, body_pos)]))
                pos = f.wrote_position
                try:
                    cl.write_unit(f, unit)
                except OSError as exc:  # no space could be reserved: nothing was written
                    return self._refuse_write_error(exc, cl.mfq.store_path)
                try:
                    cq.put(qoff, phy, size, tcode, count)
                except OSError as exc:
                    # undo the unit so the log and the queue stay consistent
                    f.write_at(pos, bytes(size))
                    f.wrote_position = pos
                    cq.mfq.truncate_dirty(qoff * 20)
                    return self._refuse_write_error(exc, f"consume queue {topic}/{queue_id}")
                if headers is not None and headers[n] is not None and headers[n].producer_id >= 0:
                    body_pos = _body_pos(unit)
                    self.producer_state.apply(topic, queue_id, headers[n], qoff, now,
                                              memoryview(unit)[body_pos:len(unit) - _tail_len(unit, body_pos)])
                if first_phy < 0:
                    first_phy, first_qoff = phy, qoff
                ids.append(_unit_msg_id(unit, phy))
                qoff += count
                records += count
                wrote += size
                self._queue_offsets[key] = qoff
                self.confirmed_offset = phy + size
            end = self.confirmed_offset
        finally:
            self._unlock_for_put()
        # the slaves first: a SYNC_MASTER send waits for them, not for the index (whose wake is
        # then left to whoever completes the wait, see HAService.wake_dispatcher)
        sent_to_slaves = self.ha.notify_append()
        if topic not in INTERNAL_TOPICS and not (sent_to_slaves and self.config.broker_role == "SYNC_MASTER"):
            self.dispatcher.wake()  # state records: the dispatcher's next round (<= 1 s) will do
        metrics.STORE_APPEND_SECONDS.observe(metrics.now() - started)
        status = PutMessageStatus.PUT_OK
        error = None
        if self._sync and wait:
            if not self._group_commit.wait_flushed(end, self.config.sync_flush_timeout / 1000.0):
                status = PutMessageStatus.FLUSH_DISK_TIMEOUT
                error = f"flush to disk did not finish within syncFlushTimeout {self.config.sync_flush_timeout} ms"
                log.warning("flush_disk_timeout", topic=topic, queue_id=queue_id, offset=end)
        if status is PutMessageStatus.PUT_OK and wait and (
                sync_replicas or (sync_replicas is None and self.config.broker_role == "SYNC_MASTER")):
            name, error = self.ha.wait_replicated_blocking(end, self.ha.min_sync_slaves(),
                                                          self.config.sync_flush_timeout / 1000.0)
            self.ha.wake_dispatcher()
            status = PutMessageStatus[name]
        return PutMessageResult(status=status, msg_id=",".join(ids), queue_offset=first_qoff,
                                commitlog_offset=first_phy, wrote_bytes=wrote, record_count=records,
                                store_timestamp=now, error=error, end_offset=end)

    # ------------------------------------------------------------------ replication (slave side)
    def append_replicated(self, offset: int, data, visible: bool = True) -> int:
        """A slave writes bytes of its master's commitlog at the master's offset ``offset`` (which
        must be where its own log ends), then (``visible``; else ``make_replicated_visible``
        later) makes every complete unit visible: consume-queue units, the Kafka transaction
        index, ``confirmed_offset`` (the dispatcher then indexes them and wakes long polls). Bytes
        of a unit cut off at the end wait for the rest. Returns the new end of the log (what the
        slave acknowledges: the bytes are in its commitlog). Raises ``ReplicationError`` when the
        bytes do not continue the log."""
        from .ha.errors import ReplicationError

        cl = self.commitlog
        n = len(data)
        new_first = False
        with self._put_lock:
            end = cl.max_offset if cl.mfq.last() is not None else offset
            if offset != end:
                raise ReplicationError(f"data at offset {offset} does not continue the log, which ends at {end}")
            pos = 0
            while pos < n:
                f = cl.mfq.last()
                at = offset + pos
                if f is None or f.is_full:
                    if at % cl.file_size:
                        raise ReplicationError(f"a new commitlog segment cannot start at {at} "
                                               f"(not a multiple of mappedFileSizeCommitLog {cl.file_size})")
                    f = cl.mfq.create(at)
                    if len(cl.mfq.files) == 1:
                        new_first = True
                k = min(f.remaining, n - pos)
                f.write_at(f.wrote_position, data[pos:pos + k] if (pos or k < n) else data)
                f.wrote_position += k
                pos += k
            new_end = cl.max_offset
        if new_first:  # queue units older than the log's new start expire now
            self.correct_min_offsets()
        if visible:
            self.make_replicated_visible()
        return new_end

    def make_replicated_visible(self) -> None:
        """A slave: consume-queue units (and the rest) for the complete replicated units; the
        consumer offset table follows the ``__consumer_offsets`` records among them."""
        with self._put_lock:
            self._dispatch_replicated()
            follow, self._offsets_replicated = self._offsets_replicated, False
        self.dispatcher.wake()
        if follow:
            self.consumer_offsets.catch_up()

    def _dispatch_replicated(self) -> None:
        """Under the put lock: consume-queue units for the complete units past ``confirmed_offset``."""
        from .compaction import dispatch_copy, is_copy
        from .dispatcher import queue_tags_code
        from .ha.errors import ReplicationError
        from .message import BLANK_MAGIC_CODE, MAGIC_CODE_V1, MAGIC_CODE_V2

        cl = self.commitlog
        off = self.confirmed_offset
        while True:
            f = cl.mfq.find(off)
            if f is None:
                first = cl.mfq.first()
                if first is not None and off < first.file_from_offset:  # the log was restarted further on
                    off = first.file_from_offset
                    continue
                break
            pos = off - f.file_from_offset
            written = f.wrote_position
            if pos + 8 > written:
                break
            total, magic = struct.unpack_from(">ii", f.buf, pos)
            if magic == BLANK_MAGIC_CODE:
                if total != f.file_size - pos:
                    raise ReplicationError(f"BLANK unit at {off} of size {total} does not end its segment")
                if written < f.file_size:
                    break
                off = f.end_offset
                continue
            if magic not in (MAGIC_CODE_V1, MAGIC_CODE_V2) or total <= 0:
                raise ReplicationError(f"no unit at commitlog offset {off} (magic {magic & 0xFFFFFFFF:#x})")
            if pos + total > written:
                break
            try:
                h = UnitHeader(f.buf, pos)
            except (MessageFormatError, struct.error, IndexError) as exc:
                raise ReplicationError(f"unit at {off} is malformed: {exc}") from None
            if h.physical_offset != off:
                raise ReplicationError(f"unit at {off} says it is at {h.physical_offset}")
            is_batch = h.sys_flag & INNER_BATCH_FLAG
            count = batch_record_count(f.buf, h.body_pos) if is_batch else 1
            props = h.properties(f.buf) if h.props_len else {}
            if props and is_copy(props):  # a compacted record copied forward: repoints, adds nothing
                dispatch_copy(self, h, off, queue_tags_code(self, h, props))
                off += total
                self.confirmed_offset = off
                continue
            cq = self.find_consume_queue(h.topic, h.queue_id, create=True)
            cq.put(h.queue_offset, off, total, queue_tags_code(self, h, props) if props else 0, count)
            if h.topic not in self.topic_config.table:
                seen = self.replicated_unknown_topics
                seen[h.topic] = max(seen.get(h.topic, 0), h.queue_id + 1)
            self._queue_offsets[(h.topic, h.queue_id)] = h.queue_offset + count
            if is_batch:  # idempotence and transactions follow the log, as on the master's put path
                self.producer_state.apply_stored(f.buf, h)
            if h.topic == CONSUMER_OFFSETS:
                self._offsets_replicated = True
            off += total
            self.confirmed_offset = off

    def truncate_log(self, offset: int) -> int:
        """A slave cuts its log at ``offset`` (its master's log differs from there): commitlog,
        consume queues and the Kafka transaction index drop everything at or past it. Returns
        how many commitlog bytes were dropped."""
        cl = self.commitlog
        with self._put_lock:
            old_end = cl.max_offset
            if offset >= old_end:
                return 0
            if self.dispatcher is not None:
                self.dispatcher.rewind(offset)
            cl.truncate(offset, zero=True)
            with self._cq_lock:
                for cq in self._cqs.values():
                    cq.truncate_dirty(offset)
                self._queue_offsets = {k: cq.max_offset for k, cq in self._cqs.items()}
            self.confirmed_offset = min(self.confirmed_offset, offset)
            # idempotence and transaction state as of the new end: from the snapshot when it is
            # not past the cut, else from the whole log
            self.producer_state.recover(cl, offset)
            self.log_cuts += 1
        self.consumer_offsets.rebuild()  # offsets whose records were cut go back to what the log says
        if self.checkpoint is not None:
            self._flush_logics_and_checkpoint()
        log.warning("commitlog_truncated", offset=offset, dropped_bytes=old_end - offset)
        return old_end - offset

    def restart_log_at(self, offset: int) -> None:
        """A slave whose log ends before its master's oldest segment: the commitlog is dropped and
        continues at ``offset`` (a segment start). Consume queues keep their offsets; their units
        pointing at dropped bytes expire as after retention."""
        cl = self.commitlog
        with self._put_lock:
            with cl.mfq.lock:
                for f in list(cl.mfq.files):
                    f.destroy()
                cl.mfq.files = []
                cl.mfq._starts = []
                cl.mfq.flushed_where = offset
            self.confirmed_offset = offset
            self.log_cuts += 1
        log.warning("commitlog_restarted", offset=offset)

    def _refuse_write_error(self, exc: OSError, where: str) -> PutMessageResult:
        if is_disk_full(exc):
            self.disk.out_of_space(self.confirmed_offset)
            return self._refuse_disk_full()
        return self._refuse(PutMessageStatus.CREATE_MAPPED_FILE_FAILED,
                            f"cannot write to {where}: {exc.strerror or exc}")

    # ------------------------------------------------------------------ reads
    def get_max_offset_in_queue(self, topic: str, queue_id: int) -> int:
        cq = self._cqs.get((topic, queue_id))
        return cq.max_offset if cq else 0

    def get_min_offset_in_queue(self, topic: str, queue_id: int) -> int:
        cq = self._cqs.get((topic, queue_id))
        if cq is None:
            return 0
        return min(cq.min_offset, cq.max_offset)

    def get_message(self, group: str, topic: str, queue_id: int, offset: int, max_msgs: int,
                    message_filter=None, max_bytes: int | None = None, head: int = 0) -> GetMessageResult:
        """Units from ``offset`` on. ``head`` > 0 (without a filter): each message is only the
        first ``head`` bytes of its unit (header and batch header, enough to serve it from the
        file with ``CommitLog.file_run``); the refs carry where the whole unit is."""
        cq = self._cqs.get((topic, queue_id))
        if cq is None:  # as RocketMQ, whose findConsumeQueue creates the (empty) queue
            return GetMessageResult(GetMessageStatus.NO_MESSAGE_IN_QUEUE, next_begin_offset=0)
        min_off, max_off = min(cq.min_offset, cq.max_offset), cq.max_offset
        res = GetMessageResult(GetMessageStatus.NO_MESSAGE_IN_QUEUE, min_offset=min_off, max_offset=max_off)
        if max_off == 0:
            res.next_begin_offset = 0
            return res
        if offset < min_off:
            res.status, res.next_begin_offset = GetMessageStatus.OFFSET_TOO_SMALL, min_off
            return res
        if offset == max_off:
            res.status, res.next_begin_offset = GetMessageStatus.OFFSET_OVERFLOW_ONE, offset
            return res
        if offset > max_off:
            res.status, res.next_begin_offset = GetMessageStatus.OFFSET_OVERFLOW_BADLY, max_off
            return res
        max_msgs = max(1, max_msgs)
        cl = self.commitlog
        cl_min = cl.min_offset
        index = offset
        records = 0
        total_bytes = 0
        filtered = False
        messages, refs = res.messages, res.units
        # Units to read ahead: few at first, since a Kafka batch's records share one unit and
        # the walk then jumps past the rest (a 1,000-record batch would waste 511 of 512 units);
        # more while units follow one another (one message per unit; a native pull asks 32).
        ahead = 32
        while index < max_off and records < max_msgs:
            chunk_start = index
            chunk = cq.read_units(index, min(max(max_msgs - records, 16), ahead))
            if not chunk:
                break
            stop = False
            n_chunk = len(chunk)
            ahead = min(512, ahead * 4)
            while True:
                i = index - chunk_start  # jumps over the further records of a batch unit
                if i >= n_chunk:
                    break
                cur = index
                phy, size, tcode = chunk[i]
                if size <= 0 or phy < cl_min:
                    index = cur + 1
                    continue
                if message_filter is not None and not message_filter.is_matched_by_consume_queue(tcode):
                    filtered = True
                    index = cur + 1
                    continue
                if max_bytes is not None and messages and total_bytes + size > max_bytes:
                    stop = True
                    break
                data = cl.read(phy, size if not head or message_filter is not None or size <= head else head)
                if data is None:
                    index = cur + 1
                    continue
                sys_flag = _I32.unpack_from(data, 36)[0]
                if sys_flag & INNER_BATCH_FLAG:
                    base = _I64.unpack_from(data, 20)[0]
                    n = batch_record_count(data, _body_pos(data))
                else:
                    base, n = cur, 1
                index = max(cur + 1, base + n)
                if index - chunk_start > n_chunk:
                    ahead = 32  # jumped past the chunk: the next read starts small again
                if message_filter is not None and not message_filter.is_matched_by_commit_log(data):
                    filtered = True
                    continue
                ts = _I64.unpack_from(data, 48 + (20 if sys_flag & 0x10 else 8))[0]
                messages.append(data)
                refs.append(UnitRef(base, n, phy, size, tcode, ts, bool(sys_flag & INNER_BATCH_FLAG)))
                total_bytes += size
                records += index - cur
                if records >= max_msgs:
                    stop = True
                    break
            if stop:
                break
        res.next_begin_offset = min(index, max_off) if index > offset else offset
        res.buffer_total_size = total_bytes
        if refs:
            # RocketMQ's rule: a reader further behind the log's end than accessMessageInMemoryMaxRatio
            # of RAM reads what the page cache no longer holds; a slave should serve it instead
            res.suggest_pulling_from_slave = self.confirmed_offset - refs[-1].commitlog_offset > self._in_memory_bytes
        if messages:
            res.status = GetMessageStatus.FOUND
        elif filtered:
            res.status = GetMessageStatus.NO_MATCHED_MESSAGE
        else:
            res.status = GetMessageStatus.OFFSET_FOUND_NULL
        return res

    def _unit_store_timestamp(self, phy: int, size: int) -> int:
        data = self.commitlog.read(phy, min(size, 96))
        if data is None:
            return -1
        sys_flag = _I32.unpack_from(data, 36)[0]
        return _I64.unpack_from(data, 48 + (20 if sys_flag & 0x10 else 8))[0]

    def get_message_store_timestamp(self, topic: str, queue_id: int, offset: int) -> int:
        cq = self._cqs.get((topic, queue_id))
        u = cq.unit(offset) if cq else None
        return -1 if u is None else self._unit_store_timestamp(u[0], u[1])

    def get_earliest_message_time(self, topic: str, queue_id: int) -> int:
        cq = self._cqs.get((topic, queue_id))
        if cq is None or cq.max_offset <= cq.min_offset:
            return -1
        return self.get_message_store_timestamp(topic, queue_id, cq.min_offset)

    def get_offset_in_queue_by_time(self, topic: str, queue_id: int, timestamp_ms: int) -> int:
        """First offset whose store timestamp >= ``timestamp_ms``; the max offset when none."""
        cq = self._cqs.get((topic, queue_id))
        if cq is None:
            return 0
        lo, hi = min(cq.min_offset, cq.max_offset), cq.max_offset
        while lo < hi:
            mid = (lo + hi) // 2
            u = cq.unit(mid)
            ts = self._unit_store_timestamp(u[0], u[1]) if u else -1
            if ts < 0:  # unreadable (deleted meanwhile): look later
                lo = mid + 1
            elif ts < timestamp_ms:
                lo = mid + 1
            else:
                hi = mid
        return lo

    def look_message_by_offset(self, commitlog_offset: int, size: int | None = None) -> MessageExt | None:
        data = self.commitlog.read(commitlog_offset, size) if size else self.commitlog.read_unit(commitlog_offset)
        if data is None:
            return None
        try:
            return decode_message(data)
        except MessageFormatError:
            return None

    def look_message_by_id(self, msg_id: str) -> MessageExt | None:
        try:
            _host, offset = decode_message_id(msg_id)
        except MessageFormatError:
            return None
        return self.look_message_by_offset(offset)

    def query_message(self, topic: str, key: str, max_num: int, begin_ts: int, end_ts: int) -> QueryMessageResult:
        """Messages with ``key`` (KEYS, UNIQ_KEY or a Kafka record key), newest first.

        Read-your-writes: waits (up to 1 s) for the index to cover every put that returned
        before the call, since the dispatcher builds the index just behind the put path."""
        if self.dispatcher is not None and self.running:
            self.dispatcher.wait_dispatched(self.confirmed_offset, 1.0)
        res = QueryMessageResult(index_last_update_phyoffset=self.index_service.end_phy_offset)
        files = self.index_service.files
        if files:
            res.index_last_update_timestamp = files[-1].end_timestamp
        for phy in self.index_service.query(topic, key, max(max_num, 1) * 2, begin_ts, end_ts):
            if len(res.messages) >= max_num:
                break
            data = self.commitlog.read_unit(phy)
            if data is None:
                continue
            try:
                h = UnitHeader(data, 0)
            except MessageFormatError:
                continue
            if h.topic != topic or h.physical_offset != phy:
                continue
            # the index matches hashes only: check the key itself (Java hashes collide easily)
            props = h.properties(data)
            if key not in (props.get("KEYS") or "").split(" ") and props.get("UNIQ_KEY") != key:
                if not (h.sys_flag & INNER_BATCH_FLAG and key in record_keys(data, h.body_pos, h.body_len)):
                    continue
            res.messages.append(data)
        return res

    # ------------------------------------------------------------------ admin
    def queue_offset_at(self, topic: str, queue_id: int, commitlog_offset: int) -> int:
        """The first logical offset of the queue whose unit lies at or after ``commitlog_offset``
        (the queue's max offset when none does)."""
        cq = self._cqs.get((topic, queue_id))
        if cq is None:
            return 0
        lo, hi = cq.min_offset, cq.max_offset
        while lo < hi:
            mid = (lo + hi) // 2
            unit = cq.unit(mid)
            if unit is None or unit[0] >= commitlog_offset:
                hi = mid
            else:
                lo = mid + 1
        return lo

    def epoch_end_offset(self, topic: str, queue_id: int, epoch: int) -> tuple[int, int]:
        """(epoch, end offset) for a follower or consumer that last saw ``epoch`` (Kafka's
        OffsetForLeaderEpoch on the epoch file): the newest epoch <= ``epoch`` this log holds
        and the queue offset where it ends — the queue's max offset for the current epoch;
        (-1, -1) when the log holds no epoch that old."""
        entries = self.ha.epochs.all()
        older = [i for i, e in enumerate(entries) if e.epoch <= epoch]
        if not older:
            return -1, -1
        i = older[-1]
        if i + 1 >= len(entries):
            return entries[i].epoch, self.get_max_offset_in_queue(topic, queue_id)
        return entries[i].epoch, self.queue_offset_at(topic, queue_id, entries[i + 1].start_offset)

    def delete_records(self, topic: str, queue_id: int, before_offset: int) -> int:
        cq = self._cqs.get((topic, queue_id))
        if cq is None:
            return 0
        target = max(min(before_offset, cq.max_offset), 0)
        with self._put_lock:
            cq.raise_min_offset(target)
            new_min = cq.min_offset
        with self.min_offsets.lock:  # the fsync happens outside the put lock
            self.min_offsets.table[f"{topic}@{queue_id}"] = max(new_min, self.min_offsets.table.get(f"{topic}@{queue_id}", 0))
            self.min_offsets.persist()
        log.info("records_deleted", topic=topic, queue_id=queue_id, low_watermark=new_min)
        return new_min

    def add_arrival_listener(self, cb: Callable[[str, int, int], None]) -> None:
        if self.dispatcher is not None:
            self.dispatcher.add_listener(cb)
        self._pending_listeners.append(cb)

    def remove_arrival_listener(self, cb: Callable[[str, int, int], None]) -> None:
        if self.dispatcher is not None:
            self.dispatcher.remove_listener(cb)
        self._pending_listeners = [x for x in self._pending_listeners if x is not cb]

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
    def _flush_logics_and_checkpoint(self, producer_snapshot: bool = True, final: bool = False) -> None:
        with self._put_lock:
            logics_upto = self.confirmed_offset
            if producer_snapshot:
                self.producer_state.capture(logics_upto, self.get_min_offset_in_queue, force=final)
        for cq in list(self._cqs.values()):
            try:
                cq.flush()
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
        cp.logics_flushed_offset = logics_upto
        cp.index_flushed_offset = index_upto
        cp.physic_msg_timestamp = cp.logics_msg_timestamp = cp.index_msg_timestamp = now
        cp.flush()

    def _background_loop(self) -> None:
        cq_interval = max(self.config.flush_interval_consume_queue, 10) / 1000.0
        now = time.monotonic()
        next_flush = now + cq_interval
        next_offsets = now + self.config.flush_consumer_offset_interval / 1000.0
        next_state_checkpoint = now + self.config.state_checkpoint_interval / 1000.0
        next_producer_snapshot = 0.0
        next_clean = now + self.config.clean_resource_interval / 1000.0
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
                tasks.append(("flush", functools.partial(self._flush_logics_and_checkpoint, producer_snapshot=snapshot)))
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

    def disk_used_ratio(self) -> float:
        return self.disk.ratio if self.disk.total else self.disk.refresh(self.confirmed_offset)

    def stop_retention(self) -> None:
        """No retention pass runs from now until the next start (one under way finishes first).
        A shutdown calls it before the owners of retention guards stop: with their guards gone a
        pass could delete segments their replay at the next start still reads."""
        with self._clean_lock:
            self._retention_stopped = True

    def clean_expired_files(self, force: bool = False, now_ms: float | None = None) -> int:
        with self._clean_lock:
            if self._retention_stopped:
                return 0
            return self._clean_expired_files(force, now_ms)

    def _clean_expired_files(self, force: bool = False, now_ms: float | None = None) -> int:
        """Retention pass (RocketMQ's CleanCommitLogService + CleanConsumeQueueService).

        Expired commitlog segments (older than fileReservedTime) go when the hour is in
        deleteWhen, when disk usage is above diskMaxUsedSpaceRatio, or when ``force``; above
        diskSpaceCleanForciblyRatio the oldest segments go even unexpired. Consume queues and
        index files then drop what points below the new commitlog minimum, and queue min
        offsets move forward.
        """
        cfg = self.config
        disk = self.disk
        disk.clean_wanted.clear()
        ratio = disk.refresh(self.confirmed_offset)
        hours = {h.strip() for h in cfg.delete_when.split(";") if h.strip()}
        hour_now = datetime.now().strftime("%H")
        time_ok = hour_now in hours or str(int(hour_now)) in hours
        space_pressure = ratio > cfg.disk_max_used_space_ratio
        deleted = []
        # compacted topics: their live records below ``cut`` are copied forward first, and this
        # pass deletes nothing past ``cut`` (records written meanwhile were not looked at)
        cut = self._retention_cut(force or time_ok or space_pressure, now_ms) if self.compactor.active() else None
        if cut is not None:
            self.compactor.before_retention(cut, now_ms)
        if force or time_ok or space_pressure:
            deletable = self._segments_below_guards(cut)
            if deletable:
                deleted = self.commitlog.mfq.delete_expired_by_time(cfg.file_reserved_time * 3600 * 1000, now_ms,
                                                                    max_files=min(10, deletable))
            disk.segments_deleted_expired += len(deleted)
        if deleted:
            log.info("commitlog_segments_deleted", count=len(deleted), first=deleted[0].path,
                     new_min_offset=self.commitlog.min_offset, disk_used_percent=round(ratio, 1))
            ratio = disk.refresh(self.confirmed_offset)
        forced = 0
        # above diskSpaceCleanForciblyRatio: the oldest segments go, expired or not, one at a
        # time until usage is below it again (at most 10 a pass; never the segment written now,
        # never one whose bytes a state checkpoint still replays: the consumer offsets'
        # checkpoint is taken first, so only state changed since it holds segments back)
        if disk.forcibly and not self._segments_below_guards():
            self.consumer_offsets.checkpoint()
        while disk.forcibly and forced < 10:
            if self.compactor.active() and self.commitlog.mfq.files:
                first_end = self.commitlog.mfq.files[0].end_offset
                if cut is None or first_end > cut:
                    cut = first_end
                    self.compactor.before_retention(cut, now_ms)
            if not self._segments_below_guards(cut):
                break
            gone = self.commitlog.mfq.delete_first(1)
            if not gone:
                break
            forced += 1
            disk.segments_deleted_forcibly += 1
            before = disk.ratio
            self.correct_min_offsets()  # queue files pointing into it go too, before looking again
            disk.refresh(self.confirmed_offset)
            log.warning("commitlog_segment_deleted_forcibly", path=gone[0].path,
                        new_min_offset=self.commitlog.min_offset, disk_used_percent_before=round(before, 1),
                        disk_used_percent=round(disk.ratio, 1), clean_forcibly_ratio=cfg.disk_space_clean_forcibly_ratio)
        if forced == 10 and disk.forcibly:
            disk.clean_wanted.set()  # more next round, right away
            self._wake_background.set()
        else:  # done, or nothing left to delete: the next look above the ratio asks again
            disk.clean_wanted.clear()
        self.correct_min_offsets()
        self.apply_topic_retention(now_ms)
        return len(deleted) + forced

    def _retention_cut(self, expired_may_go: bool, now_ms: float | None) -> int | None:
        """The end of the segments this pass may delete (None: none): the expired ones when they
        may go, at least the first one under forcible cleaning."""
        files = self.commitlog.mfq.files[:-1][:10]
        now = time.time() * 1000 if now_ms is None else now_ms
        reserved = self.config.file_reserved_time * 3600 * 1000
        cut = None
        if expired_may_go:
            for f in files:
                if f.mtime() * 1000 + reserved > now:
                    break
                cut = f.end_offset
        if self.disk.forcibly and files:
            cut = max(cut or 0, files[0].end_offset)
        return cut

    # -- what state in the log still needs (engine/state_log.py) ------------------------------
    def add_retention_guard(self, needed: Callable[[], int | None]) -> None:
        """``needed()`` returns the lowest commitlog offset its owner's replay still reads (None:
        nothing); retention never deletes a segment holding bytes at or past it."""
        if needed not in self._retention_guards:  # a store started again keeps one guard per owner
            self._retention_guards.append(needed)

    def remove_retention_guard(self, needed: Callable[[], int | None]) -> None:
        self._retention_guards = [g for g in self._retention_guards if g is not needed]

    def _segments_below_guards(self, limit: int | None = None) -> int:
        """How many of the oldest segments retention may delete (never the last one, none past
        commitlog offset ``limit``)."""
        floor = limit
        for needed in list(self._retention_guards):
            try:
                offset = needed()
            except Exception:  # noqa: BLE001 - a broken guard keeps everything
                log.exception("retention_guard_failed")
                return 0
            if offset is not None and (floor is None or offset < floor):
                floor = offset
        files = self.commitlog.mfq.files[:-1]
        if floor is None:
            return len(files)
        return sum(1 for f in files if f.end_offset <= floor)

    def apply_topic_retention(self, now_ms: float | None = None) -> int:
        """Per-topic retention: a topic whose attributes set ``retention.ms`` (the Kafka config
        of that name, >= 0) stops serving records stored longer ago than that; one that sets
        ``retention.bytes`` (>= 0) keeps per partition only the newest records whose stored
        batches fit in that many bytes.

        The commitlog is shared by every topic, so nothing is deleted here: each queue's min
        (log start) offset moves to its first record stored at or after now - retention.ms, as
        DeleteRecords does, and the commitlog space goes with the store-wide retention. Returns
        the number of queues whose start moved.
        """
        now = time.time() * 1000 if now_ms is None else now_ms
        retention_of: dict[str, tuple[int, int]] = {}   # topic -> (retention.ms, retention.bytes)
        for topic, tc in list(self.topic_config.all().items()):
            try:
                retention = int(tc.attributes.get(TOPIC_RETENTION_MS, -1))
                max_bytes = int(tc.attributes.get(TOPIC_RETENTION_BYTES, -1))
            except ValueError:
                continue
            if (retention >= 0 or max_bytes >= 0) and policy_of(tc.attributes) != {"compact"}:  # compact: kept
                retention_of[topic] = (retention, max_bytes)
        moved: dict[str, int] = {}
        if not retention_of:
            return 0
        queues = list(self._cqs.items())
        progress = Progress("retention_progress", len(queues), "queues", phase="topic_retention")
        for n, ((topic, queue_id), cq) in enumerate(queues, 1):
            progress.update(n)
            limits = retention_of.get(topic)
            if limits is None or cq.min_offset >= cq.max_offset:
                continue
            retention, max_bytes = limits
            target = cq.min_offset
            if retention >= 0:
                target = self.get_offset_in_queue_by_time(topic, queue_id, int(now - retention))
            if max_bytes >= 0:   # per partition, as Kafka: the newest records that fit stay
                target = max(target, cq.start_keeping_bytes(max_bytes))
            if target <= cq.min_offset:
                continue
            with self._put_lock:
                cq.raise_min_offset(min(target, cq.max_offset))
                moved[f"{topic}@{queue_id}"] = cq.min_offset
        progress.finish()
        if moved:
            with self.min_offsets.lock:
                for key, low in moved.items():
                    self.min_offsets.table[key] = max(low, self.min_offsets.table.get(key, 0))
                self.min_offsets.persist()
            log.info("topic_retention_applied", queues=len(moved),
                     topics=sorted({k.rsplit("@", 1)[0] for k in moved}))
        return len(moved)

    def correct_min_offsets(self) -> None:
        self.compactor.mark_queues()
        cl_min = self.commitlog.min_offset
        queues = list(self._cqs.values())
        progress = Progress("retention_progress", len(queues), "queues", phase="consume_queues",
                            commitlog_min_offset=cl_min)
        for n, cq in enumerate(queues, 1):
            try:
                cq.delete_expired(cl_min)
            except ValueError:
                pass
            progress.update(n)
        progress.finish()
        self.index_service.delete_below(cl_min)


def _physical_memory() -> int:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return 8 << 30


def _body_pos(unit) -> int:
    sys_flag = _I32.unpack_from(unit, 36)[0]
    return 72 + (20 if sys_flag & 0x10 else 8) + (20 if sys_flag & 0x20 else 8)


def _tail_len(unit, body_pos: int) -> int:
    body_len = _I32.unpack_from(unit, body_pos - 4)[0]
    return len(unit) - body_pos - body_len


def _unit_msg_id(unit, phy: int) -> str:
    """Message id straight from the unit's store host bytes: host(4|16) + port(4) + offset(8)."""
    low = unit[39]  # low byte of SYSFLAG
    pos = 64 if not low & 0x10 else 76  # after bornHost(8|20) and storeTimestamp(8)
    n = 8 if not low & 0x20 else 20
    return unit[pos:pos + n].hex().upper() + "%016X" % phy
