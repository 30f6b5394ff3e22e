"""Value types the broker and its processors share: a client's channel and a topic's JSON form.

They live apart from ``broker.py`` so that processors can use them without importing the broker
that registers those processors (no import circle between the broker and its processors).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from .transport import Connection


@dataclass
class ClientChannel:
    client_id: str
    conn: Connection
    language: int
    version: int
    last_update: float = field(default_factory=time.monotonic)


def topic_config_json(tc: Any) -> dict[str, Any]:
    return {"topicName": tc.topic_name, "readQueueNums": tc.read_queue_nums, "writeQueueNums": tc.write_queue_nums,
            "perm": tc.perm, "topicFilterType": tc.topic_filter_type, "topicSysFlag": tc.topic_sys_flag,
            "order": bool(tc.order), "attributes": dict(tc.attributes or {})}
