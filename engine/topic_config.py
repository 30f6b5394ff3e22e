"""Topic configuration (RocketMQ's ``TopicConfigManager``), persisted in ``config/topics.json``.

Document: ``{"topicConfigTable": {name: TopicConfig-as-camelCase}, "dataVersion": {...}}``,
RocketMQ's own field names. Every change bumps ``data_version`` and persists atomically
(``ConfigManager``). The store itself does not require a topic to be configured to put into
it; the gateways decide about auto-creation.

Topic names: one rule for every protocol, ``topic_name_error`` (the store, the Kafka gateway,
the remoting processors and the gRPC front all ask it, each answering with its protocol's
error code and this text). A legal name is 1 to ``maxTopicLength`` (default 249, Kafka's
limit) characters from ``[a-zA-Z0-9._-]`` (Kafka's set) plus ``%`` and ``|`` (RocketMQ's,
used by its own topics: ``%RETRY%<group>``, ``%DLQ%<group>``), and neither ``.`` nor ``..``.
Names within ``[a-zA-Z0-9_-]`` and 127 characters are portable to every client: Kafka clients
refuse ``%`` and ``|`` themselves, the RocketMQ Java client refuses ``.`` and longer names.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from .config_manager import ConfigManager, DataVersion

TOPIC_NAME_CHARS = re.compile(r"^[%|a-zA-Z0-9._-]+$")
MAX_TOPIC_LENGTH = 249  # MessageStoreConfig.max_topic_length's default
PORTABLE_TOPIC_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,127}$")  # every Kafka and RocketMQ client


def topic_name_error(name: str | None, max_length: int = MAX_TOPIC_LENGTH) -> str | None:
    """Why ``name`` is not a legal topic name (one sentence), or None when it is."""
    if not name:
        return "illegal topic name: it is empty"
    if name in (".", ".."):
        return f"illegal topic name {name!r}: '.' and '..' are not topic names"
    if len(name) > max_length:
        return f"illegal topic name: it is {len(name)} characters, longer than maxTopicLength {max_length}"
    if not TOPIC_NAME_CHARS.match(name):
        return (f"illegal topic name {name!r}: it has characters other than ASCII letters, digits, "
                "'.', '_', '-', '%' and '|'")
    return None


PERM_PRIORITY = 0x8
PERM_READ = 0x4
PERM_WRITE = 0x2
PERM_INHERIT = 0x1


# Topic attribute read by the engine: time retention of one topic, in ms (the Kafka config of
# the same name; -1 or absent: only the store-wide fileReservedTime applies).
TOPIC_RETENTION_MS = "retention.ms"
TOPIC_RETENTION_BYTES = "retention.bytes"   # per partition, as Kafka


@dataclass
class TopicConfig:
    topic_name: str
    read_queue_nums: int = 8
    write_queue_nums: int = 8
    perm: int = PERM_READ | PERM_WRITE
    topic_filter_type: str = "SINGLE_TAG"
    topic_sys_flag: int = 0
    order: bool = False
    attributes: dict[str, str] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "topicName": self.topic_name, "readQueueNums": self.read_queue_nums,
            "writeQueueNums": self.write_queue_nums, "perm": self.perm,
            "topicFilterType": self.topic_filter_type, "topicSysFlag": self.topic_sys_flag,
            "order": self.order, "attributes": dict(self.attributes),
        }

    @classmethod
    def from_json(cls, doc: dict[str, Any]) -> "TopicConfig":
        return cls(
            topic_name=doc["topicName"], read_queue_nums=int(doc.get("readQueueNums", 8)),
            write_queue_nums=int(doc.get("writeQueueNums", 8)), perm=int(doc.get("perm", 6)),
            topic_filter_type=doc.get("topicFilterType", "SINGLE_TAG"),
            topic_sys_flag=int(doc.get("topicSysFlag", 0)), order=bool(doc.get("order", False)),
            attributes={str(k): str(v) for k, v in (doc.get("attributes") or {}).items()},
        )


class TopicConfigManager(ConfigManager):
    file_name = "topics.json"

    def __init__(self, config_dir):
        super().__init__(config_dir)
        self.table: dict[str, TopicConfig] = {}
        self.data_version = DataVersion()
        # called (from the changing thread) after a topic is created, changed or deleted, so a
        # broker re-registers with its NameServers at once rather than at its next poll
        self.change_listeners: list = []

    def get(self, topic: str) -> TopicConfig | None:
        return self.table.get(topic)

    def all(self) -> dict[str, TopicConfig]:
        return dict(self.table)

    def create_or_update(self, config: TopicConfig) -> None:
        with self.lock:
            self.table[config.topic_name] = config
            self.data_version.next()
            self.persist()
        self._changed()

    def delete(self, topic: str) -> bool:
        with self.lock:
            if self.table.pop(topic, None) is None:
                return False
            self.data_version.next()
            self.persist()
        self._changed()
        return True

    def _changed(self) -> None:
        for cb in list(self.change_listeners):
            cb()

    def encode(self) -> dict[str, Any]:
        return {"topicConfigTable": {k: v.to_json() for k, v in self.table.items()},
                "dataVersion": self.data_version.to_json()}

    def decode(self, doc: dict[str, Any]) -> None:
        self.table = {k: TopicConfig.from_json(v) for k, v in (doc.get("topicConfigTable") or {}).items()}
        self.data_version.load(doc.get("dataVersion"))
