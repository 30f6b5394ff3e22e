"""Consumer group settings (RocketMQ's ``SubscriptionGroupManager``), ``config/subscriptionGroup.json``.

Document: ``{"subscriptionGroupTable": {group: SubscriptionGroupConfig-as-camelCase},
"dataVersion": {...}}``. Changes persist atomically at once (they are rare).
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

from .config_manager import ConfigManager, DataVersion


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(p.title() for p in rest)


@dataclass
class SubscriptionGroupConfig:
    group_name: str
    consume_enable: bool = True
    consume_from_min_enable: bool = True
    consume_broadcast_enable: bool = True
    consume_message_orderly: bool = False
    retry_queue_nums: int = 1
    retry_max_times: int = 16
    broker_id: int = 0
    which_broker_when_consume_slowly: int = 1
    notify_consumer_ids_changed_enable: bool = True
    group_sys_flag: int = 0
    consume_timeout_minute: int = 15

    def to_json(self) -> dict[str, Any]:
        return {_camel(f.name): getattr(self, f.name) for f in fields(self)}

    @classmethod
    def from_json(cls, doc: dict[str, Any]) -> "SubscriptionGroupConfig":
        kwargs = {}
        for f in fields(cls):
            key = _camel(f.name)
            if key in doc:
                kwargs[f.name] = doc[key]
        return cls(**kwargs)


class SubscriptionGroupManager(ConfigManager):
    file_name = "subscriptionGroup.json"

    def __init__(self, config_dir, auto_create: bool = True):
        super().__init__(config_dir)
        self.table: dict[str, SubscriptionGroupConfig] = {}
        self.data_version = DataVersion()
        self.auto_create = auto_create

    def get(self, group: str) -> SubscriptionGroupConfig | None:
        return self.table.get(group)

    def find_or_create(self, group: str) -> SubscriptionGroupConfig | None:
        cfg = self.table.get(group)
        if cfg is None and self.auto_create:
            cfg = SubscriptionGroupConfig(group_name=group)
            self.create_or_update(cfg)
        return cfg

    def all(self) -> dict[str, SubscriptionGroupConfig]:
        return dict(self.table)

    def create_or_update(self, config: SubscriptionGroupConfig) -> None:
        with self.lock:
            self.table[config.group_name] = config
            self.data_version.next()
            self.persist()

    def delete(self, group: str) -> bool:
        with self.lock:
            if self.table.pop(group, None) is None:
                return False
            self.data_version.next()
            self.persist()
            return True

    def encode(self) -> dict[str, Any]:
        return {"subscriptionGroupTable": {k: v.to_json() for k, v in self.table.items()},
                "dataVersion": self.data_version.to_json()}

    def decode(self, doc: dict[str, Any]) -> None:
        self.table = {k: SubscriptionGroupConfig.from_json(v) for k, v in (doc.get("subscriptionGroupTable") or {}).items()}
        self.data_version.load(doc.get("dataVersion"))
