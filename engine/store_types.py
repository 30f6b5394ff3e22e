"""The store facade's result types (put and get statuses and results) and the small helpers on
stored units that the store's parts share. Kept apart from engine/store.py so the parts
(store_puts, store_reads, store_replica, retention, batch_delay) import them without importing
the store."""

from __future__ import annotations

import enum
import struct
import time
from dataclasses import dataclass, field

from .message import tags_code


_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_MAX_QUEUE_ID = 65535


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


# How many osPageCacheBusyTimeOutMills windows a put waits for the put lock (``_lock_for_put``).
PUT_LOCK_MAX_WAIT_FACTOR = 2.5

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


def _now_ms() -> int:
    return int(time.time() * 1000)


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
