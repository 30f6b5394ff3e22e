"""A node component served from its own event loop in its own thread.

Everything on one event loop waits for whatever runs on it: a broker request that writes a
config file (fsync), a long store call, a burst of Kafka requests. RocketMQ runs the NameServer
as a process of its own, so a client's route query never waits behind broker work; in the
all-in-one node the NameServer gets its own loop and thread instead (``OwnLoop``). It shares
nothing with the other components but the interpreter: they reach it over TCP, as clients do.

``OwnLoop(component)`` is a component itself (``name``, ``port``, ``start``, ``stop``): ``start``
returns once the inner component listens (its start error, e.g. a port in use, is raised
here); ``stop`` stops it on its loop, then ends the thread.
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any


class OwnLoop:
    def __init__(self, component: Any, thread_name: str | None = None):
        self.component = component
        self.name = component.name
        self._thread_name = thread_name or f"{component.name}-loop"
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int | None:
        return getattr(self.component, "port", None)

    def __getattr__(self, item: str) -> Any:  # the inner component's other attributes
        return getattr(self.component, item)

    async def start(self) -> None:
        loop = asyncio.new_event_loop()
        ready = threading.Event()

        def run() -> None:
            asyncio.set_event_loop(loop)
            loop.call_soon(ready.set)
            loop.run_forever()
            loop.run_until_complete(loop.shutdown_asyncgens())
            loop.close()

        self._loop = loop
        self._thread = threading.Thread(target=run, name=self._thread_name, daemon=True)
        self._thread.start()
        ready.wait()
        try:
            await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(self.component.start(), loop))
        except BaseException:
            await self._end_thread()
            raise

    async def stop(self) -> None:
        if self._loop is None:
            return
        try:
            await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(self.component.stop(), self._loop))
        finally:
            await self._end_thread()

    async def _end_thread(self) -> None:
        loop, thread = self._loop, self._thread
        self._loop = self._thread = None
        if loop is None or thread is None:
            return

        def cancel_rest() -> None:
            for task in asyncio.all_tasks(loop):
                task.cancel()
            loop.call_soon(loop.stop)

        loop.call_soon_threadsafe(cancel_rest)
        await asyncio.get_running_loop().run_in_executor(None, thread.join, 10)
