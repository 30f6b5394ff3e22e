"""The one put path: how a write reaches the store, flow control, the replication wait, and the
protocol-neutral status every gateway maps to its own codes.

Write scheduling (one rule for the three protocols): a write runs inline on the event loop when
it only copies into mapped memory — ASYNC_FLUSH (or the gateway's explicit ``inline`` choice),
the store does not itself wait for slaves in the call, and no other writer holds the commitlog
(``store.put_would_wait``: never wait on a lock on the loop). Otherwise it goes through the
node's one ``SendQueue``: a write that waited there longer than ``waitTimeMillsInSendQueue`` is
not run and comes back as ``PutStatus.SEND_QUEUE_BUSY`` (RocketMQ's BrokerFastFailure), which
each gateway answers with its own "busy, back off" code.

The replication wait (SYNC_MASTER, Kafka acks=all): the write is stored first with
``sync_replicas=False`` and the caller awaits ``wait_replicated`` afterwards, so requests on one
connection keep flowing while the slaves catch up.

``PutStatus`` is the outcome of a write in neither protocol's words; a gateway owns exactly one
table from it to its wire codes (gateway_kafka/apis/produce.py, gateway_native/processors/
common.py, gateway_grpc/service.py).
"""

from __future__ import annotations

import asyncio
import enum
import functools
from concurrent.futures import Future
from typing import Any, Callable

from broker.send_queue import SendQueue, SendQueueBusy


class PutStatus(enum.Enum):
    """What became of a write, protocol-neutral (the store's PutMessageStatus plus what the
    core itself decides: the disk is full, the send queue refused it)."""

    OK = "PUT_OK"
    FLUSH_DISK_TIMEOUT = "FLUSH_DISK_TIMEOUT"
    FLUSH_SLAVE_TIMEOUT = "FLUSH_SLAVE_TIMEOUT"
    SLAVE_NOT_AVAILABLE = "SLAVE_NOT_AVAILABLE"
    SERVICE_NOT_AVAILABLE = "SERVICE_NOT_AVAILABLE"
    DISK_FULL = "DISK_FULL"
    CREATE_MAPPED_FILE_FAILED = "CREATE_MAPPED_FILE_FAILED"
    MESSAGE_ILLEGAL = "MESSAGE_ILLEGAL"
    PROPERTIES_SIZE_EXCEEDED = "PROPERTIES_SIZE_EXCEEDED"
    OS_PAGE_CACHE_BUSY = "OS_PAGE_CACHE_BUSY"
    SEND_QUEUE_BUSY = "SEND_QUEUE_BUSY"
    UNKNOWN_ERROR = "UNKNOWN_ERROR"


_BY_NAME = {s.value: s for s in PutStatus}
# the store's own status objects (engine.store_types.PutMessageStatus) by identity
_BY_STATUS: dict[Any, PutStatus] = {}


def _learn_store_statuses() -> None:
    from engine.store_types import PutMessageStatus

    _BY_STATUS.update({st: _BY_NAME.get(st.name, PutStatus.UNKNOWN_ERROR) for st in PutMessageStatus})


_learn_store_statuses()


def put_status(result: Any) -> PutStatus:
    """The neutral status of a store ``PutMessageResult`` (or of a replication wait's status
    name): a full data disk is told apart from other SERVICE_NOT_AVAILABLE refusals."""
    known = _BY_STATUS.get(getattr(result, "status", None))  # every stored send: one lookup
    if known is not None and not getattr(result, "disk_full", False):
        return known
    if getattr(result, "disk_full", False):
        return PutStatus.DISK_FULL
    st = result if isinstance(result, str) else getattr(result, "status", result)
    name = st if isinstance(st, str) else getattr(st, "name", str(st))
    return _BY_NAME.get(name, PutStatus.UNKNOWN_ERROR)


class PutPath:
    """The node's writes: one per node, shared by every gateway (it holds the send queue).

    ``run(fn, *args, **kwargs)`` runs the store write ``fn`` as the scheduling rule above says and
    returns what it returned; a write the send queue refused raises ``SendQueueBusy`` (use
    ``put`` to get it as a status instead).
    """

    def __init__(self, store: Any, send_queue: SendQueue):
        self.store = store
        self.send_queue = send_queue

    @classmethod
    def for_gateway(cls, store: Any, config: Any, put_path: "PutPath | None") -> tuple["PutPath", bool]:
        """The node's put path when given, else one of the gateway's own (a gateway started
        alone, as tests do): (path, the gateway owns and stops it)."""
        if put_path is not None:
            return put_path, False
        return cls(store, SendQueue.from_config(config.broker)), True

    def shutdown(self) -> None:
        self.send_queue.shutdown()

    def may_run_inline(self, store_waits_for_replicas: bool, inline: bool | None = None) -> bool:
        """True when a write only copies into mapped memory now (no flush, no slave, no other
        writer to wait for)."""
        store = self.store
        if inline is None:
            inline = store.config.flush_disk_type == "ASYNC_FLUSH"
        return inline and not (store_waits_for_replicas and store.config.broker_role == "SYNC_MASTER") \
            and not store.put_would_wait

    async def run(self, fn: Callable[..., Any], *args: Any, inline: bool | None = None, fast_failure: bool = True,
                  **kwargs: Any) -> Any:
        """Run the write ``fn(*args, **kwargs)``. The store waits for slaves inside the call unless
        ``sync_replicas=False`` is passed (the caller then waits with ``wait_replicated``).
        ``inline`` overrides the flush-type half of the rule (Kafka's ``kafka_direct_put``);
        ``fast_failure=False``: a write that must not be refused for waiting in the queue."""
        if self.may_run_inline(kwargs.get("sync_replicas") is not False, inline):
            return fn(*args, **kwargs)
        call = functools.partial(fn, *args, **kwargs) if kwargs else functools.partial(fn, *args)
        return await self.send_queue.run(call, fast_failure=fast_failure)

    async def put(self, fn: Callable[..., Any], *args: Any, inline: bool | None = None,
                  **kwargs: Any) -> tuple[PutStatus, Any]:
        """``run``, with a refusal of the send queue as ``(SEND_QUEUE_BUSY, SendQueueBusy)``;
        otherwise ``(put_status(result), result)``."""
        try:
            result = await self.run(fn, *args, inline=inline, **kwargs)
        except SendQueueBusy as busy:
            return PutStatus.SEND_QUEUE_BUSY, busy
        return put_status(result), result

    # -- replication -------------------------------------------------------------------------
    def min_sync_slaves(self) -> int:
        """Slaves a SYNC_MASTER put waits for (minInSyncReplicas less the master; engine.ha)."""
        return self.store.ha.min_sync_slaves()

    def in_sync_refusal(self) -> str | None:
        """Why a SYNC_MASTER put is refused before it is stored (the SyncStateSet is below
        minInSyncReplicas), or None."""
        return self.store.ha.in_sync_refusal()

    def wait_replicated(self, end_offset: int, min_replicas: int, timeout_s: float) -> Future:
        """A future of ``(status name, error)`` once every in-sync slave acknowledged
        ``end_offset`` and at least ``min_replicas`` did (see engine.ha)."""
        return self.store.ha.wait_replicated(end_offset, min_replicas, timeout_s)

    async def replicated(self, end_offset: int, min_replicas: int, timeout_s: float,
                         waiting: Future | None = None) -> tuple[PutStatus, str | None]:
        """Await the replication of a stored write: ``(OK, None)``, or SLAVE_NOT_AVAILABLE (too
        few in sync) / FLUSH_SLAVE_TIMEOUT with the reason. The dispatcher is woken after, so
        what the slaves now hold is visible to readers without waiting for its next turn."""
        if waiting is None:
            waiting = self.wait_replicated(end_offset, min_replicas, timeout_s)
        status, error = await asyncio.wrap_future(waiting)
        self.store.ha.wake_dispatcher()
        return put_status(status), error
