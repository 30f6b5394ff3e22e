"""The send queue: store writes that may wait on the disk, run by a few threads, with RocketMQ's
fast failure ("流量控制": a send that waited in the queue too long is refused, not run).

RocketMQ runs sends on ``sendMessageThreadPoolNums`` threads fed by a queue; its
BrokerFastFailure looks at the queue every 10 ms and answers every send that has waited
longer than ``waitTimeMillsInSendQueue`` (200 ms) with SYSTEM_BUSY
``[TIMEOUT_CLEAN_QUEUE]broker busy, start flow control for a while, period in queue: Nms, size
of queue: M`` so the client backs off or tries another broker. Here the check happens when a
thread takes the write: if it waited longer than the limit, it is not run and ``run`` raises
``SendQueueBusy`` (same outcome, no scanning thread). Together with the store's
``osPageCacheBusyTimeOutMills`` (a put finding the commitlog locked for too long is refused),
a stalled disk slows producers down instead of piling up requests without bound: at most
``threads`` writes wait on the disk, and the rest are answered within the limit.

Protocol-neutral: the native broker answers ``SendQueueBusy`` with SYSTEM_BUSY and the remark
above, the Kafka listener with a retriable error and ``throttle_time_ms``. One queue serves a
whole node (both protocols write one store), as RocketMQ has one per broker.
"""

from __future__ import annotations

import asyncio
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable

import structlog

log = structlog.get_logger("rockafka.broker.send_queue")


class SendQueueBusy(Exception):
    """A write waited longer than waitTimeMillsInSendQueue and was not run."""

    def __init__(self, waited_ms: int, queued: int):
        self.waited_ms = waited_ms
        self.queued = queued
        super().__init__(f"[TIMEOUT_CLEAN_QUEUE]broker busy, start flow control for a while, period in queue: "
                         f"{waited_ms}ms, size of queue: {queued}")


class SendQueue:
    def __init__(self, threads: int = 4, wait_time_mills: int = 200, fast_failure: bool = True,
                 name: str = "send"):
        self.threads = threads
        self.wait_s = wait_time_mills / 1000.0
        self.fast_failure = fast_failure
        self.executor = ThreadPoolExecutor(max_workers=threads, thread_name_prefix=f"{name}-queue")
        self.queued = 0  # submitted, not yet taken by a thread
        self._lock = threading.Lock()
        self.refused = 0  # counter: writes refused after waiting too long
        self._last_log = 0.0

    @classmethod
    def from_config(cls, broker_config: Any) -> "SendQueue":
        return cls(broker_config.send_message_thread_pool_nums, broker_config.wait_time_mills_in_send_queue,
                   broker_config.broker_fast_failure_enable)

    async def run(self, fn: Callable[..., Any], *args: Any, fast_failure: bool = True) -> Any:
        """Run ``fn(*args)`` on a queue thread; ``fast_failure=False`` for a write that must not be
        refused for waiting (a coordinator's state record), which only queues."""
        submitted = time.monotonic()
        with self._lock:
            self.queued += 1
        state = {"taken": False}

        def job() -> Any:
            with self._lock:
                if state["taken"]:  # given up by the caller meanwhile
                    return None
                state["taken"] = True
                self.queued -= 1
                queued = self.queued
            waited = time.monotonic() - submitted
            if fast_failure and self.fast_failure and waited > self.wait_s:
                return SendQueueBusy(int(waited * 1000), queued)
            return fn(*args)

        try:
            result = await asyncio.get_running_loop().run_in_executor(self.executor, job)
        except BaseException:
            with self._lock:
                if not state["taken"]:  # cancelled before a thread took it: it will not run
                    state["taken"] = True
                    self.queued -= 1
            raise
        if isinstance(result, SendQueueBusy):
            self.refused += 1
            now = time.monotonic()
            if now - self._last_log >= 1.0:
                self._last_log = now
                log.warning("send_queue_busy", waited_ms=result.waited_ms, queued=result.queued, refused=self.refused,
                            wait_time_mills_in_send_queue=int(self.wait_s * 1000))
            raise result
        return result

    def shutdown(self) -> None:
        self.executor.shutdown(wait=True)
