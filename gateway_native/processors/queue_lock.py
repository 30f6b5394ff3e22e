"""LOCK_BATCH_MQ (41) and UNLOCK_BATCH_MQ (42): broker-side queue locks for orderly consumers.

Bodies are RocketMQ's ``LockBatchRequestBody`` / ``UnlockBatchRequestBody`` JSON
(``consumerGroup``, ``clientId``, ``onlyThisBroker``, ``mqSet``: [{topic, brokerName, queueId}]);
the LOCK answer's body is ``LockBatchResponseBody`` (``lockOKMQSet``: the queues the client now
holds, renewed or newly taken). Locks live in ``engine.queue_lock.QueueLockManager`` with an
expiry of ``rebalanceLockMaxLiveTime`` ms (60 s; node setting ``rebalance_lock_max_live_time``).

Not implemented: ``onlyThisBroker=false`` forwarding to the other brokers of a broker-name
group (RocketMQ 5 proxies); every broker answers for its own queues only.
"""

from __future__ import annotations

import json
from typing import Any

from engine.queue_lock import QueueKey, QueueLockManager

from ..remoting.codes import RequestCode as RC, ResponseCode as R
from ..remoting.command import RemotingCommand, loads_json
from ..transport import Connection
from . import BROKER_PROCESSORS


def lock_manager(broker: Any) -> QueueLockManager:
    mgr = getattr(broker, "queue_locks", None)
    if mgr is None:
        mgr = broker.queue_locks = QueueLockManager(broker.config.extra_int("rebalance_lock_max_live_time", 60_000))
    return mgr


def _parse(cmd: RemotingCommand) -> tuple[str, str, list[QueueKey]]:
    try:
        body = loads_json(bytes(cmd.body) or b"{}", "lock request body")
        group, client_id = str(body["consumerGroup"]), str(body["clientId"])
        queues = [(str(q["topic"]), str(q["brokerName"]), int(q["queueId"])) for q in body.get("mqSet") or []]
    except (ValueError, KeyError, TypeError, UnicodeDecodeError) as exc:
        raise ValueError(f"bad lock request body (needs consumerGroup, clientId, mqSet[topic, brokerName, queueId]): {exc}") from None
    if not group or not client_id:
        raise ValueError("consumerGroup and clientId must not be empty")
    return group, client_id, queues


@BROKER_PROCESSORS.register(RC.LOCK_BATCH_MQ)
async def lock_batch(broker: Any, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
    try:
        group, client_id, queues = _parse(cmd)
    except ValueError as exc:
        return cmd.response(R.SYSTEM_ERROR, str(exc))
    held = lock_manager(broker).try_lock_batch(group, queues, client_id)
    body = {"lockOKMQSet": [{"topic": t, "brokerName": b, "queueId": q} for (t, b, q) in sorted(held)]}
    return cmd.response(R.SUCCESS, body=json.dumps(body, separators=(",", ":")).encode())


@BROKER_PROCESSORS.register(RC.UNLOCK_BATCH_MQ)
async def unlock_batch(broker: Any, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
    try:
        group, client_id, queues = _parse(cmd)
    except ValueError as exc:
        return cmd.response(R.SYSTEM_ERROR, str(exc))
    lock_manager(broker).unlock_batch(group, queues, client_id)
    return cmd.response(R.SUCCESS)
