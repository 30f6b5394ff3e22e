"""``apache.rocketmq.v2.Message`` <-> engine messages (the proxy's GrpcConverter and
SendMessageActivity mappings; table in docs/design/grpc-proxy.md).

Send: system properties become RocketMQ's message properties (TAGS, KEYS, UNIQ_KEY,
SHARDING_KEY, TIMER_DELIVER_MS, TRAN_MSG); user properties are kept as they are, except names
RocketMQ reserves for itself, which are refused (ILLEGAL_MESSAGE_PROPERTY_KEY).
Receive: a stored message (``engine.message.MessageExt``) becomes a v2 Message with an MD5 body
digest, GZIP encoding for a compressed body, the message type read back from its properties,
and the POP receipt handle and delivery attempt.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

from google.protobuf.duration_pb2 import Duration
from google.protobuf.timestamp_pb2 import Timestamp

from engine.message import (
    COMPRESSED_FLAG, MessageExt, PROPERTY_BORN_HOST, PROPERTY_DLQ_ORIGIN_MESSAGE_ID, PROPERTY_DLQ_ORIGIN_TOPIC,
    PROPERTY_KEYS, PROPERTY_SHARDING_KEY, PROPERTY_TAGS, PROPERTY_TIMER_DELIVER_MS, PROPERTY_TRACE_CONTEXT,
    PROPERTY_TRANSACTION_PREPARED, PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX,
)

from .proto import definition_pb2 as pb

DELAY_PROPERTIES = ("DELAY", "TIMER_DELIVER_MS", "TIMER_DELAY_SEC", "TIMER_DELAY_MS")
# MessageConst.STRING_HASH_SET: names a client may not use as user properties
RESERVED_PROPERTIES = frozenset({
    "TRACE_ON", "MSG_REGION", "KEYS", "TAGS", "WAIT", "DELAY", "RETRY_TOPIC", "REAL_TOPIC", "REAL_QID", "TRAN_MSG",
    "PGROUP", "MIN_OFFSET", "MAX_OFFSET", "BUYER_ID", "ORIGIN_MESSAGE_ID", "TRANSFER_FLAG", "CORRECTION_FLAG",
    "MQ2_FLAG", "RECONSUME_TIME", "UNIQ_KEY", "MAX_RECONSUME_TIMES", "CONSUME_START_TIME", "POP_CK",
    "POP_CK_OFFSET", "1ST_POP_TIME", "TRANSACTION_PREPARED_QUEUE_OFFSET", "DUP_INFO", "EXTEND_UNIQ_INFO",
    "INSTANCE_ID", "CORRELATION_ID", "REPLY_TO_CLIENT", "TTL", "ARRIVE_TIME", "PUSH_REPLY_TIME", "CLUSTER",
    "MSG_TYPE", "INNER_MULTI_QUEUE_OFFSET", "TIMER_DELAY_MS", "TIMER_DELAY_SEC", "TIMER_DELIVER_MS",
    "__SHARDINGKEY", "TRANSACTION_CHECK_TIMES", "CHECK_IMMUNITY_TIME_IN_SECONDS", "__STARTDELIVERTIME",
    "TIMER_OUT_MS", "TIMER_DEL_UNIQKEY", "TIMER_ENQUEUE_MS", "TIMER_DEQUEUE_MS", "TIMER_ROLL_TIMES",
})


class ConvertError(ValueError):
    """A message the proxy refuses; ``code`` is the v2 Code to answer."""

    def __init__(self, code: int, message: str):
        super().__init__(message)
        self.code = code


@dataclass
class Outgoing:
    """A v2 message ready for the engine."""

    topic: str
    body: bytes
    tags: str | None
    keys: list[str] | None
    properties: dict[str, str]
    message_type: int
    message_group: str | None
    message_id: str
    delivery_ms: int | None
    born_timestamp: int | None
    compressed: bool


def millis(ts: Timestamp) -> int:
    return ts.seconds * 1000 + ts.nanos // 1_000_000


def duration_ms(d: Duration) -> int:
    return d.seconds * 1000 + d.nanos // 1_000_000


def timestamp(ms: int) -> Timestamp:
    return Timestamp(seconds=ms // 1000, nanos=(ms % 1000) * 1_000_000)


def from_v2(msg: pb.Message, max_body_size: int) -> Outgoing:
    topic = msg.topic.name
    sp = msg.system_properties
    if len(msg.body) > max_body_size:
        raise ConvertError(pb.Code.MESSAGE_BODY_TOO_LARGE,
                           f"message body size {len(msg.body)} exceeds the limit {max_body_size}")
    props: dict[str, str] = {}
    for name, value in msg.user_properties.items():
        if name in RESERVED_PROPERTIES:
            raise ConvertError(pb.Code.ILLEGAL_MESSAGE_PROPERTY_KEY, f"property {name!r} is reserved by RocketMQ")
        if not name or any(c in name + value for c in "\x01\x02"):
            raise ConvertError(pb.Code.ILLEGAL_MESSAGE_PROPERTY_KEY, f"property {name!r} has an illegal character")
        props[name] = value
    tag = sp.tag if sp.HasField("tag") else None
    if tag is not None and (not tag.strip() or "|" in tag):
        raise ConvertError(pb.Code.ILLEGAL_MESSAGE_TAG, f"tag {tag!r} is blank or contains '|'")
    keys = [k for k in sp.keys]
    if any(not k.strip() for k in keys):
        raise ConvertError(pb.Code.ILLEGAL_MESSAGE_KEY, "a message key is blank")
    if not sp.message_id:
        raise ConvertError(pb.Code.ILLEGAL_MESSAGE_ID, "the message id is missing")
    props[PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX] = sp.message_id
    mtype = sp.message_type or pb.MessageType.NORMAL
    group = sp.message_group if sp.HasField("message_group") else None
    delivery = millis(sp.delivery_timestamp) if sp.HasField("delivery_timestamp") else None
    if mtype == pb.MessageType.FIFO:
        if not group:
            raise ConvertError(pb.Code.ILLEGAL_MESSAGE_GROUP, "a FIFO message needs a message group")
        props[PROPERTY_SHARDING_KEY] = group
    elif group:
        raise ConvertError(pb.Code.MESSAGE_PROPERTY_CONFLICT_WITH_TYPE, "only FIFO messages carry a message group")
    if mtype == pb.MessageType.DELAY:
        if delivery is None:
            raise ConvertError(pb.Code.ILLEGAL_DELIVERY_TIME, "a DELAY message needs a delivery timestamp")
        props[PROPERTY_TIMER_DELIVER_MS] = str(delivery)
    elif delivery is not None:
        raise ConvertError(pb.Code.MESSAGE_PROPERTY_CONFLICT_WITH_TYPE, "only DELAY messages carry a delivery timestamp")
    if mtype == pb.MessageType.TRANSACTION:
        props[PROPERTY_TRANSACTION_PREPARED] = "true"
    if sp.HasField("trace_context"):
        props[PROPERTY_TRACE_CONTEXT] = sp.trace_context
    if sp.born_host:
        props[PROPERTY_BORN_HOST] = sp.born_host
    born = millis(sp.born_timestamp) if sp.HasField("born_timestamp") else None
    return Outgoing(topic, bytes(msg.body), tag, keys or None, props, mtype, group, sp.message_id, delivery, born,
                    sp.body_encoding == pb.Encoding.GZIP)


def _host(host) -> str:
    return f"{host[0]}:{host[1]}" if isinstance(host, tuple) else str(host or "")


def message_type(props: dict[str, str]) -> int:
    if props.get(PROPERTY_TRANSACTION_PREPARED) == "true":
        return pb.MessageType.TRANSACTION
    if any(p in props for p in DELAY_PROPERTIES):
        return pb.MessageType.DELAY
    if PROPERTY_SHARDING_KEY in props:
        return pb.MessageType.FIFO
    return pb.MessageType.NORMAL


def to_v2(ext: MessageExt, topic: str, receipt_handle: str | None = None, delivery_attempt: int | None = None,
          namespace: str = "") -> pb.Message:
    props = ext.properties
    sp = pb.SystemProperties(
        message_id=props.get(PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX) or ext.msg_id,
        body_digest=pb.Digest(type=pb.DigestType.MD5, checksum=hashlib.md5(ext.body).hexdigest().upper()),
        body_encoding=pb.Encoding.GZIP if ext.sys_flag & COMPRESSED_FLAG else pb.Encoding.IDENTITY,
        message_type=message_type(props),
        born_timestamp=timestamp(ext.born_timestamp),
        born_host=props.get(PROPERTY_BORN_HOST) or _host(ext.born_host),
        store_timestamp=timestamp(ext.store_timestamp),
        store_host=_host(ext.store_host),
        queue_id=ext.queue_id,
        queue_offset=ext.queue_offset,
        delivery_attempt=delivery_attempt if delivery_attempt is not None else ext.reconsume_times + 1,
    )
    tag = props.get(PROPERTY_TAGS)
    if tag is not None:
        sp.tag = tag
    keys = props.get(PROPERTY_KEYS)
    if keys:
        sp.keys.extend(k for k in keys.split(" ") if k)
    deliver = props.get("TIMER_OUT_MS") or props.get(PROPERTY_TIMER_DELIVER_MS)
    if deliver:
        try:
            sp.delivery_timestamp.CopyFrom(timestamp(int(deliver)))
        except ValueError:
            pass
    if PROPERTY_SHARDING_KEY in props:
        sp.message_group = props[PROPERTY_SHARDING_KEY]
    if receipt_handle:
        sp.receipt_handle = receipt_handle
    if PROPERTY_TRACE_CONTEXT in props:
        sp.trace_context = props[PROPERTY_TRACE_CONTEXT]
    if PROPERTY_DLQ_ORIGIN_TOPIC in props and PROPERTY_DLQ_ORIGIN_MESSAGE_ID in props:
        sp.dead_letter_queue.CopyFrom(pb.DeadLetterQueue(topic=props[PROPERTY_DLQ_ORIGIN_TOPIC],
                                                         message_id=props[PROPERTY_DLQ_ORIGIN_MESSAGE_ID]))
    user = {k: v for k, v in props.items() if k not in RESERVED_PROPERTIES and not k.startswith("__")}
    return pb.Message(topic=pb.Resource(name=topic, resource_namespace=namespace), user_properties=user,
                      system_properties=sp, body=ext.body)
