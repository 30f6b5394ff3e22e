"""SDK value types: Message, MessageQueue, SendResult, statuses, and errors.

A ``Message`` is what a producer sends (topic, body, tags, keys, user properties, delay level);
a consumed message is ``gateway_native.remoting.message_codec.MessageClientExt`` (decoded stored unit).
``MessageQueue`` orders by (topic, broker name, queue id), the order rebalancing sorts queues in.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from engine.message import PROPERTY_DELAY_TIME_LEVEL, PROPERTY_KEYS, PROPERTY_TAGS

from ..remoting.message_codec import MessageClientExt

__all__ = ["Message", "MessageClientExt", "MessageQueue", "SendResult", "SendStatus", "ConsumeStatus", "MQClientError",
           "MQBrokerError", "MessageSelector"]


class MQClientError(Exception):
    """A client-side failure (no route, timeout, bad argument); the message says what to fix."""


class MQBrokerError(MQClientError):
    """The broker answered with an error ``code`` and ``remark``."""

    def __init__(self, code: int, remark: str | None, addr: str | None = None):
        super().__init__(f"broker {addr or ''} answered code {code}: {remark or ''}".strip())
        self.code = code
        self.remark = remark
        self.addr = addr


@dataclass
class Message:
    topic: str
    body: bytes
    tags: str | None = None
    keys: list[str] | str | None = None
    properties: dict[str, str] = field(default_factory=dict)
    flag: int = 0
    delay_level: int = 0
    wait_store_msg_ok: bool = True
    # RocketMQ 5 timer message: absolute delivery time in ms (TIMER_DELIVER_MS); 0 = none
    deliver_time_ms: int = 0

    def all_properties(self) -> dict[str, str]:
        props = dict(self.properties)
        if self.tags:
            props[PROPERTY_TAGS] = self.tags
        if self.keys:
            props[PROPERTY_KEYS] = self.keys if isinstance(self.keys, str) else " ".join(self.keys)
        if self.delay_level > 0:
            props[PROPERTY_DELAY_TIME_LEVEL] = str(self.delay_level)
        if self.deliver_time_ms > 0:
            props["TIMER_DELIVER_MS"] = str(self.deliver_time_ms)
        if not self.wait_store_msg_ok:
            props["WAIT"] = "false"
        return props

    def put_user_property(self, name: str, value: str) -> None:
        self.properties[name] = str(value)


@dataclass(frozen=True, order=True)
class MessageQueue:
    topic: str
    broker_name: str
    queue_id: int

    def __str__(self) -> str:
        return f"MessageQueue [topic={self.topic}, brokerName={self.broker_name}, queueId={self.queue_id}]"


class SendStatus(enum.Enum):
    SEND_OK = "SEND_OK"
    FLUSH_DISK_TIMEOUT = "FLUSH_DISK_TIMEOUT"
    FLUSH_SLAVE_TIMEOUT = "FLUSH_SLAVE_TIMEOUT"
    SLAVE_NOT_AVAILABLE = "SLAVE_NOT_AVAILABLE"


@dataclass
class SendResult:
    status: SendStatus
    msg_id: str
    offset_msg_id: str
    message_queue: MessageQueue
    queue_offset: int
    region_id: str | None = None
    transaction_id: str | None = None


class ConsumeStatus(enum.Enum):
    CONSUME_SUCCESS = "CONSUME_SUCCESS"
    RECONSUME_LATER = "RECONSUME_LATER"


@dataclass(frozen=True)
class MessageSelector:
    """A subscription expression: ``MessageSelector.by_tag("A || B")`` or ``by_sql("a > 1")``."""

    expression_type: str
    expression: str

    @classmethod
    def by_tag(cls, expression: str = "*") -> "MessageSelector":
        return cls("TAG", expression or "*")

    @classmethod
    def by_sql(cls, expression: str) -> "MessageSelector":
        return cls("SQL92", expression)
