"""The POP service's vocabulary: its system topics and modes, receipt handles, checkpoints and
the results of a pop (RocketMQ's PopCheckPoint / ExtraInfo). Kept apart from engine/pop.py so
the service's parts (pop_share) use them without importing the service."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any

from .message import MessageExt


REVIVE_TOPIC_PREFIX = "rmq_sys_REVIVE_LOG_"
REVIVE_GROUP = "CID_RMQ_SYS_REVIVE"
REVIVE_QUEUE_ID = 0
RETRY_PREFIX = "%RETRY%"
DLQ_PREFIX = "%DLQ%"
TOPIC_TYPE_NORMAL = "0"
TOPIC_TYPE_RETRY = "1"
INIT_MODE_MIN = 0  # RocketMQ ConsumeInitMode.MIN: a new group starts at the queue's first message
INIT_MODE_MAX = 1  # MAX: at the end, unless the queue still holds its message 0 (RocketMQ checks the page cache)
_MAX_INVISIBLE_MS = 12 * 3600 * 1000  # RocketMQ's proxy limit on invisible durations


def pop_retry_topic(group: str, topic: str) -> str:
    """RocketMQ's V1 POP retry topic (``KeyBuilder.buildPopRetryTopicV1``)."""
    return f"{RETRY_PREFIX}{group}_{topic}"


class PopError(Exception):
    """A request that cannot be applied; ``code`` is one of the ``AckStatus`` names."""

    def __init__(self, code: str, message: str):
        super().__init__(message)
        self.code = code


class AckStatus(enum.Enum):
    OK = "OK"
    NO_SUCH_CHECKPOINT = "NO_SUCH_CHECKPOINT"  # unknown, finished, expired or already revived
    BAD_HANDLE = "BAD_HANDLE"


@dataclass(frozen=True)
class Handle:
    start_offset: int
    pop_time: int
    invisible_ms: int
    revive_qid: int
    topic_type: str
    broker_name: str
    queue_id: int
    queue_offset: int
    commitlog_offset: int = -1

    def encode(self) -> str:
        return (f"{self.start_offset} {self.pop_time} {self.invisible_ms} {self.revive_qid} {self.topic_type} "
                f"{self.broker_name} {self.queue_id} {self.queue_offset} {self.commitlog_offset}")

    @classmethod
    def parse(cls, text: str) -> "Handle":
        parts = (text or "").split(" ")
        if len(parts) < 8:
            raise PopError(AckStatus.BAD_HANDLE.value, f"receipt handle {text!r} has {len(parts)} fields, expected 8 or 9")
        try:
            return cls(int(parts[0]), int(parts[1]), int(parts[2]), int(parts[3]), parts[4], parts[5], int(parts[6]),
                       int(parts[7]), int(parts[8]) if len(parts) > 8 else -1)
        except ValueError:
            raise PopError(AckStatus.BAD_HANDLE.value, f"receipt handle {text!r} is not well formed") from None

    @property
    def revive_at(self) -> int:
        return self.pop_time + self.invisible_ms

    def real_topic(self, group: str, topic: str) -> str:
        return pop_retry_topic(group, topic) if self.topic_type == TOPIC_TYPE_RETRY and not topic.startswith(RETRY_PREFIX) else topic


CkKey = tuple[str, str, int, int, int]  # group, real topic, queue id, start offset, pop time


@dataclass
class Checkpoint:
    group: str
    topic: str  # the topic read: the subscribed topic or its POP retry topic
    queue_id: int
    start_offset: int
    pop_time: int
    invisible_ms: int
    offsets: list[int]
    next_offset: int
    orderly: bool = False
    max_attempts: int = 17
    log_offset: int = -1  # revive-log queue offset of the CK record
    remaining: set[int] = field(default_factory=set)
    share: bool = False  # a Kafka share group's acquisition (records stay at their offsets)
    member: str = ""  # share: the member that holds the acquisition lock
    dlq_topic: str = ""  # share: where rejected / exhausted records go ("" = %DLQ%<group>)
    redelivery_level: int = 0  # share: delay level of the first redelivery (0: at once)

    @property
    def key(self) -> CkKey:
        return (self.group, self.topic, self.queue_id, self.start_offset, self.pop_time)

    @property
    def revive_at(self) -> int:
        return self.pop_time + self.invisible_ms

    def to_json(self) -> dict[str, Any]:
        doc = {"g": self.group, "t": self.topic, "q": self.queue_id, "so": self.start_offset, "pt": self.pop_time,
               "it": self.invisible_ms, "os": self.offsets, "no": self.next_offset, "o": int(self.orderly),
               "ma": self.max_attempts}
        if self.share:
            doc.update(s=1, m=self.member, dq=self.dlq_topic)
            if self.redelivery_level:
                doc["rd"] = self.redelivery_level
        return doc

    @classmethod
    def from_json(cls, d: dict[str, Any], log_offset: int) -> "Checkpoint":
        ck = cls(str(d["g"]), str(d["t"]), int(d["q"]), int(d["so"]), int(d["pt"]), int(d["it"]),
                 [int(o) for o in d["os"]], int(d.get("no", -1)), bool(d.get("o")), int(d.get("ma", 17)), log_offset,
                 share=bool(d.get("s")), member=str(d.get("m", "")), dlq_topic=str(d.get("dq", "")),
                 redelivery_level=int(d.get("rd", 0)))
        ck.remaining = set(ck.offsets)
        return ck


@dataclass
class PoppedMessage:
    """One message handed out: as stored (``unit`` bytes, decoded ``message``), the topic the
    consumer subscribed to, its handle and its delivery attempt (1 = first delivery)."""

    unit: bytes
    message: MessageExt
    topic: str
    handle: str
    delivery_attempt: int


@dataclass
class QueueRead:
    """What one pop read from one queue (the remoting response's startOffsetInfo / msgOffsetInfo)."""

    topic: str
    queue_id: int
    start_offset: int
    offsets: list[int]
    retry: bool


@dataclass
class PopResult:
    messages: list[PoppedMessage]
    pop_time: int
    invisible_ms: int
    reads: list[QueueRead] = field(default_factory=list)
    rest_num: int = 0
    revive_qid: int = REVIVE_QUEUE_ID

    @property
    def found(self) -> bool:
        return bool(self.messages)
