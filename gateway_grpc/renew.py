"""Automatic renewal of invisible time for PushConsumer receives (RocketMQ proxy's
``DefaultReceiptHandleManager``).

A PushConsumer receives with ``auto_renew = true`` and no invisible duration: the proxy hides the
message for ``defaultInvisibleTimeMills`` (60 s) and, while the client is connected and has not
acknowledged it, extends that by ``renewSliceTimeMillis`` (60 s) whenever fewer than
``renewAheadTimeMillis`` (10 s) remain, for at most ``renewMaxTimeMillis`` (3 h) after the
receive. So a listener slower than the invisible time does not see its message again; a crashed
client's messages become visible again within one slice.

Owns: per handed-out receipt handle (keyed by client id, group, topic and the handle the client
holds) the handle currently valid in ``engine.pop`` and when it expires. ``current`` maps what
the client sends back (ack, change invisible duration, dead-letter) to the live handle and
forgets the entry; a client's session ending forgets all of its entries. The renew loop runs
every second on the event loop; the engine calls go through the gateway's executor.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from typing import Any

import structlog

from engine.pop import PopError

log = structlog.get_logger("rockafka.grpc.renew")

Key = tuple[str, str, str, str]  # client id, group, topic, the receipt handle the client holds


@dataclass
class _Entry:
    handle: str          # the live handle in engine.pop
    expires_ms: int
    received_ms: int
    renewing: asyncio.Event | None = None  # set while a renewal is under way; cleared -> done


class ReceiptRenewer:
    def __init__(self, gw: Any, *, invisible_ms: int = 60_000, slice_ms: int = 60_000, ahead_ms: int = 10_000,
                 max_ms: int = 3 * 3600 * 1000, period_s: float = 1.0):
        self.gw = gw
        self.invisible_ms, self.slice_ms, self.ahead_ms, self.max_ms = invisible_ms, slice_ms, ahead_ms, max_ms
        self.period_s = period_s
        self._entries: dict[Key, _Entry] = {}
        self._task: asyncio.Task[None] | None = None

    @classmethod
    def from_config(cls, gw: Any, config: Any) -> "ReceiptRenewer":
        return cls(gw, invisible_ms=config.extra_int("default_invisible_time_mills", 60_000),
                   slice_ms=config.extra_int("renew_slice_time_millis", 60_000),
                   ahead_ms=config.extra_int("renew_ahead_time_millis", 10_000),
                   max_ms=config.extra_int("renew_max_time_millis", 3 * 3600 * 1000))

    def start(self) -> None:
        self._task = asyncio.ensure_future(self._loop())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except asyncio.CancelledError:
                pass
            self._task = None

    def add(self, client_id: str, group: str, topic: str, handle: str, now_ms: int) -> None:
        self._entries[(client_id, group, topic, handle)] = _Entry(handle, now_ms + self.invisible_ms, now_ms)

    async def current(self, client_id: str, group: str, topic: str, handle: str) -> str:
        """The live handle for what the client holds (the same when it was never renewed); waits
        for a renewal under way, so an ack never races a change of handle."""
        e = self._entries.pop((client_id, group, topic, handle), None)
        if e is None:
            return handle
        if e.renewing is not None:
            await e.renewing.wait()
        return e.handle

    def forget_client(self, client_id: str) -> None:
        for k in [k for k in self._entries if k[0] == client_id]:
            del self._entries[k]

    @property
    def tracked(self) -> int:
        return len(self._entries)

    async def _loop(self) -> None:
        while True:
            await asyncio.sleep(self.period_s)
            try:
                await self.renew_due()
            except Exception:
                log.exception("renew_failed")

    async def renew_due(self) -> None:
        now = int(time.time() * 1000)
        for key, e in list(self._entries.items()):
            if e.expires_ms - now > self.ahead_ms:
                continue
            if key not in self._entries:  # acked meanwhile
                continue
            if now - e.received_ms >= self.max_ms or key[0] not in self.gw.sessions:
                del self._entries[key]  # given up, or the client is gone: let it become visible again
                continue
            client_id, group, topic, _ = key
            e.renewing = asyncio.Event()
            try:
                new = await self.gw.blocking(self.gw.pop.change_invisible, group, topic, e.handle, self.slice_ms)
            except PopError as exc:  # acked through another path, or already revived
                log.info("renew_skipped", group=group, topic=topic, reason=str(exc))
                self._entries.pop(key, None)
            else:
                e.handle, e.expires_ms = new, int(time.time() * 1000) + self.slice_ms
            finally:
                e.renewing.set()
                e.renewing = None
