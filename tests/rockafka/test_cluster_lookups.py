"""Looking up a name this node's Kafka view does not list (``RemoteGroups.look_up``): clients
asking for unknown topics at the same time share one NameServer refresh, and refreshes are
spaced, so a client polling a topic that does not exist cannot load the NameServer. The
refresh here is a counter: what is checked is how often the node would ask, not the NameServer
(the end-to-end case, a real stale node and a real NameServer, is in test_cluster_growth.py)."""

from __future__ import annotations

import asyncio

from rockafka.cluster_ops import LOOKUP_MIN_S, RemoteGroups


def test_concurrent_lookups_share_one_refresh_and_later_ones_are_spaced():
    calls: list[float] = []

    async def refresh() -> None:
        calls.append(asyncio.get_running_loop().time())
        await asyncio.sleep(0.05)

    async def run() -> None:
        groups = RemoteGroups(broker=None, refresh_view=refresh)
        await asyncio.gather(*(groups.look_up() for _ in range(20)))
        assert len(calls) == 1  # twenty clients at once: one refresh, all waited for it
        await groups.look_up()
        assert len(calls) == 1  # right after it ended: not repeated
        await asyncio.sleep(LOOKUP_MIN_S + 0.05)
        await groups.look_up()
        assert len(calls) == 2

    asyncio.run(run())


def test_a_failed_refresh_reaches_every_caller_and_does_not_stop_the_next():
    attempts = []

    async def refresh() -> None:
        attempts.append(1)
        await asyncio.sleep(0.01)
        if len(attempts) == 1:
            raise OSError("no NameServer answered")

    async def run() -> None:
        groups = RemoteGroups(broker=None, refresh_view=refresh)
        results = await asyncio.gather(groups.look_up(), groups.look_up(), return_exceptions=True)
        assert [type(r) for r in results] == [OSError, OSError]
        await asyncio.sleep(LOOKUP_MIN_S + 0.05)
        await groups.look_up()  # the next one runs and succeeds
        assert len(attempts) == 2

    asyncio.run(run())


def test_a_caller_that_goes_away_does_not_cancel_the_refresh_for_the_others():
    done = []

    async def refresh() -> None:
        await asyncio.sleep(0.05)
        done.append(1)

    async def run() -> None:
        groups = RemoteGroups(broker=None, refresh_view=refresh)
        first = asyncio.ensure_future(groups.look_up())
        second = asyncio.ensure_future(groups.look_up())
        await asyncio.sleep(0.01)
        first.cancel()  # e.g. its connection closed
        await second
        assert done == [1]

    asyncio.run(run())
