"""Committed consumer offsets (RocketMQ's ``ConsumerOffsetManager``), ``config/consumerOffset.json``.

Keyed ``topic@group`` -> {queueId: offset}, as RocketMQ stores them; Kafka groups share the
table (a Kafka partition is a queue id). Kafka's optional commit metadata is kept beside it in
``metadataTable``. Commits change memory at once and are persisted by the store's periodic
flush (every 5 s, RocketMQ's ``flushConsumerOffsetInterval``) and at shutdown, because an fsync
per commit would throttle every consumer; a crash can lose the last few seconds of commits, as
in RocketMQ.
"""

from __future__ import annotations

from typing import Any

from .config_manager import ConfigManager, DataVersion

TOPIC_GROUP_SEPARATOR = "@"


class ConsumerOffsetManager(ConfigManager):
    file_name = "consumerOffset.json"

    def __init__(self, config_dir):
        super().__init__(config_dir)
        self.offset_table: dict[str, dict[int, int]] = {}
        self.metadata_table: dict[str, dict[int, str]] = {}
        self.data_version = DataVersion()

    @staticmethod
    def _key(group: str, topic: str) -> str:
        return f"{topic}{TOPIC_GROUP_SEPARATOR}{group}"

    @staticmethod
    def _split(key: str) -> tuple[str, str]:
        topic, _, group = key.rpartition(TOPIC_GROUP_SEPARATOR)
        return topic, group

    def commit(self, group: str, topic: str, queue_id: int, offset: int, metadata: str | None = None) -> None:
        key = self._key(group, topic)
        with self.lock:
            self.offset_table.setdefault(key, {})[int(queue_id)] = int(offset)
            if metadata is not None:
                self.metadata_table.setdefault(key, {})[int(queue_id)] = metadata
            else:
                self.metadata_table.get(key, {}).pop(int(queue_id), None)
            self.mark_dirty()

    def query(self, group: str, topic: str, queue_id: int) -> int:
        return self.offset_table.get(self._key(group, topic), {}).get(int(queue_id), -1)

    def query_metadata(self, group: str, topic: str, queue_id: int) -> str | None:
        return self.metadata_table.get(self._key(group, topic), {}).get(int(queue_id))

    def offsets_of(self, group: str) -> dict[tuple[str, int], int]:
        out: dict[tuple[str, int], int] = {}
        with self.lock:
            for key, queues in self.offset_table.items():
                topic, g = self._split(key)
                if g == group:
                    for qid, off in queues.items():
                        out[(topic, qid)] = off
        return out

    def groups(self) -> set[str]:
        with self.lock:
            return {self._split(k)[1] for k in self.offset_table}

    def groups_of_topic(self, topic: str) -> set[str]:
        with self.lock:
            return {g for k in self.offset_table for t, g in [self._split(k)] if t == topic}

    def delete_group(self, group: str) -> None:
        with self.lock:
            for key in [k for k in self.offset_table if self._split(k)[1] == group]:
                self.offset_table.pop(key, None)
                self.metadata_table.pop(key, None)
            self.mark_dirty()

    def delete_topic(self, topic: str) -> None:
        with self.lock:
            for key in [k for k in self.offset_table if self._split(k)[0] == topic]:
                self.offset_table.pop(key, None)
                self.metadata_table.pop(key, None)
            self.mark_dirty()

    def delete(self, group: str, topic: str, queue_id: int) -> None:
        key = self._key(group, topic)
        with self.lock:
            self.offset_table.get(key, {}).pop(int(queue_id), None)
            self.metadata_table.get(key, {}).pop(int(queue_id), None)
            if key in self.offset_table and not self.offset_table[key]:
                del self.offset_table[key]
            self.mark_dirty()

    def encode(self) -> dict[str, Any]:
        return {
            "offsetTable": {k: {str(q): o for q, o in v.items()} for k, v in self.offset_table.items()},
            "metadataTable": {k: {str(q): m for q, m in v.items()} for k, v in self.metadata_table.items() if v},
            "dataVersion": self.data_version.to_json(),
        }

    def decode(self, doc: dict[str, Any]) -> None:
        self.offset_table = {k: {int(q): int(o) for q, o in v.items()} for k, v in (doc.get("offsetTable") or {}).items()}
        self.metadata_table = {k: {int(q): str(m) for q, m in v.items()} for k, v in (doc.get("metadataTable") or {}).items()}
        self.data_version.load(doc.get("dataVersion"))
