"""The pull kernel both consumers share (RocketMQ's ``PullAPIWrapper``).

Sends PULL_MESSAGE with the subscription in the request (SUBSCRIPTION flag), optionally the
COMMIT_OFFSET flag and long polling (SUSPEND flag + ``suspendTimeoutMillis``), decodes the body
into ``MessageClientExt``s, drops those whose tag the subscription does not list (the broker filters
by tag hash only), and stamps MIN_OFFSET / MAX_OFFSET as the Java client does. The broker id
the broker suggests is remembered per queue for the next pull; a caller that knows better (that
member is down) names the address itself with ``addr``.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any
from engine.message import PROPERTY_MAX_OFFSET, PROPERTY_MIN_OFFSET

from ..remoting.codes import (
    PULL_FLAG_COMMIT_OFFSET, PULL_FLAG_SUBSCRIPTION, PULL_FLAG_SUSPEND, RequestCode as RC, ResponseCode as R,
)
from ..remoting.message_codec import MessageClientExt, decode_units
from ..remoting.subscription import SubscriptionData
from .message import MessageQueue, MQBrokerError, MQClientError


class PullStatus(enum.Enum):
    FOUND = "FOUND"
    NO_NEW_MSG = "NO_NEW_MSG"
    NO_MATCHED_MSG = "NO_MATCHED_MSG"
    OFFSET_ILLEGAL = "OFFSET_ILLEGAL"


@dataclass
class PullResult:
    status: PullStatus
    next_begin_offset: int
    min_offset: int
    max_offset: int
    messages: list[MessageClientExt] = field(default_factory=list)


_CODES = {R.SUCCESS: PullStatus.FOUND, R.PULL_NOT_FOUND: PullStatus.NO_NEW_MSG,
          R.PULL_RETRY_IMMEDIATELY: PullStatus.NO_MATCHED_MSG, R.PULL_OFFSET_MOVED: PullStatus.OFFSET_ILLEGAL}


class PullAPI:
    def __init__(self, runtime: Any, group: str):
        self.runtime = runtime
        self.group = group
        self._suggest: dict[MessageQueue, int] = {}

    def suggested(self, mq: MessageQueue) -> int:
        """The brokerId the last pull of ``mq`` was told to use next (0, the master, at first)."""
        return self._suggest.get(mq, 0)

    async def pull(self, mq: MessageQueue, sub: SubscriptionData, offset: int, max_nums: int, *,
                   commit_offset: int = -1, suspend_ms: int = 0, timeout_ms: int = 30_000,
                   addr: str | None = None) -> PullResult:
        broker_id = self._suggest.get(mq, 0)
        addr = addr or self.runtime.broker_addr_in_subscribe(mq.broker_name, broker_id)
        if addr is None:
            await self.runtime.update_route(mq.topic)
            addr = self.runtime.broker_addr_in_subscribe(mq.broker_name, broker_id)
            if addr is None:
                raise MQClientError(f"The broker[{mq.broker_name}] not exist")
        sys_flag = PULL_FLAG_SUBSCRIPTION
        if commit_offset >= 0:
            sys_flag |= PULL_FLAG_COMMIT_OFFSET
        if suspend_ms > 0:
            sys_flag |= PULL_FLAG_SUSPEND
        fields = {"consumerGroup": self.group, "topic": mq.topic, "queueId": mq.queue_id, "queueOffset": offset,
                  "maxMsgNums": max_nums, "sysFlag": sys_flag, "commitOffset": max(commit_offset, 0),
                  "suspendTimeoutMillis": suspend_ms, "subscription": sub.sub_string, "subVersion": sub.sub_version,
                  "expressionType": sub.expression_type}
        resp = await self.runtime.invoke(addr, self.runtime.request(RC.PULL_MESSAGE, fields), timeout_ms / 1000)
        status = _CODES.get(resp.code)
        if status is None:
            raise MQBrokerError(resp.code, resp.remark, addr)
        self._suggest[mq] = int(resp.get_int("suggestWhichBrokerId", 0) or 0)
        result = PullResult(status, int(resp.get_int("nextBeginOffset", offset)), int(resp.get_int("minOffset", 0)),
                            int(resp.get_int("maxOffset", 0)))
        if status == PullStatus.FOUND and resp.body:
            msgs = decode_units(bytes(resp.body))
            if sub.expression_type == "TAG" and not sub.is_all:  # SQL92 was evaluated exactly at the broker
                msgs = [m for m in msgs if sub.matches_properties(m.properties)]
            for m in msgs:
                m.properties[PROPERTY_MIN_OFFSET] = str(result.min_offset)
                m.properties[PROPERTY_MAX_OFFSET] = str(result.max_offset)
                m.broker_name = mq.broker_name
            result.messages = msgs
        return result
