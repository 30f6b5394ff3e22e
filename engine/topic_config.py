"""Topic configuration (RocketMQ's ``TopicConfigManager``), persisted in ``config/topics.json``.

Document: ``{"topicConfigTable": {name: TopicConfig-as-camelCase}, "dataVersion": {...}}``,
RocketMQ's own field names. Every change bumps ``data_version`` and persists atomically
(``ConfigManager``). The store itself does not require a topic to be configured to put into
it; the gateways decide about auto-creation.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .config_manager import ConfigManager, DataVersion

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
