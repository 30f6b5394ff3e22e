"""The long poll's wake-up (``broker.read_path.Wakeup``) on a real event loop: an arrival
registered while the read looks is never lost, the wait ends in the loop turn after the
arrival, and it ends at its timeout (False) when nothing arrives."""

from __future__ import annotations

import asyncio

from broker.read_path import ArrivalHub, Wakeup


def _registered() -> tuple[asyncio.AbstractEventLoop, ArrivalHub, Wakeup]:
    """On the running loop: a hub and a cleared wake-up registered for queue ("t", 0)."""
    loop = asyncio.get_running_loop()
    hub = ArrivalHub(loop)
    w = Wakeup(loop)
    hub.register([("t", 0)], w)
    w.clear()
    return loop, hub, w


def test_an_arrival_while_the_read_looks_ends_the_next_wait_at_once():
    async def main():
        loop, hub, w = _registered()
        hub.on_arrival("t", 0, 1)  # arrives after the look, before the wait
        t0 = loop.time()
        assert await w.wait(30) is True
        assert loop.time() - t0 < 5
        hub.unregister([("t", 0)], w)
        assert not hub.waiters
    asyncio.run(main())


def test_an_arrival_during_the_wait_wakes_it_and_silence_times_it_out():
    async def main():
        loop, hub, w = _registered()
        waiting = asyncio.ensure_future(w.wait(30))
        await asyncio.sleep(0)
        hub.on_arrival("t", 1, 5)  # another queue: not this waiter
        await asyncio.sleep(0.05)
        assert not waiting.done()
        hub.on_arrival("t", 0, 5)
        await asyncio.sleep(0)  # the loop turn after the arrival
        await asyncio.sleep(0)
        assert waiting.done() and waiting.result() is True
        w.clear()
        t0 = loop.time()
        assert await w.wait(0.05) is False
        assert loop.time() - t0 >= 0.04
        # a cancelled wait (the connection went away) leaves nothing behind: the next one works
        cancelled = asyncio.ensure_future(w.wait(30))
        await asyncio.sleep(0)
        cancelled.cancel()
        await asyncio.gather(cancelled, return_exceptions=True)
        hub.on_arrival("t", 0, 6)
        assert await w.wait(30) is True
    asyncio.run(main())
