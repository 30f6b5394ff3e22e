"""The data source's columns, its options, and one message as one row.

Columns (the same record seen both ways: as RocketMQ stores it and as a Kafka consumer reads it)::

    topic string, broker string, queue int, offset long, message_id string (UNIQ_KEY),
    offset_message_id string (store host + commitlog offset), key string (first of KEYS),
    keys array<string>, tags string, properties map<string,string>, body binary,
    born_timestamp, store_timestamp, delivery_timestamp timestamp (TIMER_DELIVER_MS when the
    message was scheduled), reconsume_times int,
    kafka_key binary, kafka_headers array<struct<key string, value binary>>, kafka_offset long
    [props struct<...>]  only with option ``properties.fields`` ("color,amount:long,price:double")

``props`` exposes chosen properties as typed struct fields, because Spark pushes predicates on
struct fields (``props.color = 'red'``) to a data source but not on map values; those become the
SQL92 filter the broker evaluates.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

from pyspark.sql.types import (
    ArrayType, BinaryType, DoubleType, IntegerType, LongType, MapType, StringType, StructField, StructType,
    TimestampType,
)

BASE_FIELDS = [
    StructField("topic", StringType(), False),
    StructField("broker", StringType(), False),
    StructField("queue", IntegerType(), False),
    StructField("offset", LongType(), False),
    StructField("message_id", StringType(), True),
    StructField("offset_message_id", StringType(), True),
    StructField("key", StringType(), True),
    StructField("keys", ArrayType(StringType(), False), False),
    StructField("tags", StringType(), True),
    StructField("properties", MapType(StringType(), StringType(), True), False),
    StructField("body", BinaryType(), False),
    StructField("born_timestamp", TimestampType(), False),
    StructField("store_timestamp", TimestampType(), False),
    StructField("delivery_timestamp", TimestampType(), True),
    StructField("reconsume_times", IntegerType(), False),
    StructField("kafka_key", BinaryType(), True),
    StructField("kafka_headers", ArrayType(StructType([StructField("key", StringType(), False),
                                                       StructField("value", BinaryType(), True)]), False), False),
    StructField("kafka_offset", LongType(), False),
]
_PROP_TYPES = {"string": StringType(), "long": LongType(), "double": DoubleType()}
_CLIENT_STAMPED = ("MIN_OFFSET", "MAX_OFFSET")  # added by the SDK to every pulled message, not stored


class OptionError(ValueError):
    pass


def parse_prop_fields(text: str | None) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in (text or "").split(","):
        item = item.strip()
        if not item:
            continue
        name, _, kind = item.partition(":")
        kind = (kind or "string").strip().lower()
        if kind not in _PROP_TYPES:
            raise OptionError(f"properties.fields: type of {name!r} must be string, long or double, got {kind!r}")
        out[name.strip()] = kind
    return out


@dataclass(frozen=True)
class Options:
    namesrv: str
    topic: str
    group: str
    tags: str
    sql: str
    prop_fields: dict[str, str]
    starting_offsets: str
    stream_starting_offsets: str
    ending_offsets: str
    max_offsets_per_partition: int
    max_messages_per_trigger: int
    commit_offsets: bool
    timeout_ms: int
    transactional: bool
    producer_group: str

    @classmethod
    def parse(cls, options: dict[str, str], need_topic: bool = True) -> "Options":
        o = {k.lower(): v for k, v in options.items()}
        namesrv = o.get("namesrv", "")
        if not namesrv:
            raise OptionError("option 'namesrv' is required: the NameServer address, host:port[;host:port]")
        topic = o.get("topic", "")
        if need_topic and not topic:
            raise OptionError("option 'topic' is required to read")

        def number(name: str, default: int) -> int:
            try:
                return int(o.get(name.lower(), default))
            except ValueError:
                raise OptionError(f"option {name!r} must be an integer, got {o[name.lower()]!r}") from None

        for name in ("startingoffsets", "endingoffsets"):
            value = o.get(name)
            if value is not None and value not in ("earliest", "latest", "group") and not value.lstrip("-").isdigit():
                raise OptionError(f"option {name!r} must be earliest, latest, group or an offset, got {value!r}")
        return cls(namesrv=namesrv, topic=topic, group=o.get("group", ""), tags=o.get("tags", ""), sql=o.get("sql", ""),
                   prop_fields=parse_prop_fields(o.get("properties.fields")),
                   starting_offsets=o.get("startingoffsets", "earliest"),
                   stream_starting_offsets=o.get("startingoffsets", "latest"),
                   ending_offsets=o.get("endingoffsets", "latest"),
                   max_offsets_per_partition=number("maxOffsetsPerPartition", 100_000),
                   max_messages_per_trigger=number("maxMessagesPerTrigger", 0),
                   commit_offsets=o.get("commitoffsets", "true").lower() == "true",
                   timeout_ms=number("timeoutMs", 10_000),
                   transactional=o.get("transactional", "false").lower() == "true",
                   producer_group=o.get("producergroup", f"rockafka-spark-producer-{topic or 'any'}"))

    def group_or(self, default: str) -> str:
        return self.group or default


def schema(prop_fields: dict[str, str]) -> StructType:
    fields = list(BASE_FIELDS)
    if prop_fields:
        fields.append(StructField("props", StructType(
            [StructField(n, _PROP_TYPES[k], True) for n, k in prop_fields.items()]), False))
    return StructType(fields)


def _ts(ms: int) -> datetime:
    return datetime.fromtimestamp(ms / 1000, tz=timezone.utc)


def _typed(value: str | None, kind: str) -> Any:
    if value is None or kind == "string":
        return value
    try:
        return int(value) if kind == "long" else float(value)
    except ValueError:
        return None


def message_row(m: Any, prop_fields: dict[str, str]) -> tuple:
    from engine.batch_convert import message_headers

    props = {k: v for k, v in m.properties.items() if k not in _CLIENT_STAMPED}
    keys = m.keys
    deliver = props.get("TIMER_DELIVER_MS")
    kafka_key, headers = message_headers(props)
    row = (m.topic, m.broker_name, m.queue_id, m.queue_offset, m.msg_id, m.offset_msg_id or None,
           keys[0] if keys else None, keys, m.tags, props, bytes(m.body), _ts(m.born_timestamp),
           _ts(m.store_timestamp), _ts(int(deliver)) if deliver and deliver.isdigit() else None,
           m.reconsume_times, kafka_key, [(k, v) for k, v in headers], m.queue_offset)
    if prop_fields:
        row += (tuple(_typed(props.get(n), k) for n, k in prop_fields.items()),)
    return row
