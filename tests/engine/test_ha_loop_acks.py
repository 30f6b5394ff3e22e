"""A master that reads its slaves' ACKs on the node's event loop (``store.ha.loop_hook``, set by
the node through ``broker.replication``): SYNC_MASTER waits are answered there, a put that waits
for the slave inside the store call on the loop's own thread is still acknowledged (not timed
out), and a slave that goes away is seen as gone. Real stores over a real loopback HA port."""

from __future__ import annotations

import asyncio
import time

from broker.replication import Replication
from engine.config import BrokerConfig
from engine.message import Message
from engine.store import MessageStore, PutMessageStatus
from engine_support import small_config
from tests.support.node import free_port


async def _until(cond, what: str, timeout: float = 15.0) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.01)


def _msg(i: int) -> Message:
    return Message(topic="T", body=b"x" * 100 + str(i).encode(), queue_id=0)


async def _started_pair(tmp_path, **master) -> tuple[MessageStore, MessageStore]:
    """A SYNC_MASTER store whose ACKs the running loop reads, and its slave, both started."""
    m = MessageStore(small_config(tmp_path / "m", broker_role="SYNC_MASTER", sync_flush_timeout=3000, **master),
                     broker_config=BrokerConfig(ha_listen_port=free_port()))
    Replication(m).read_acks_on(asyncio.get_running_loop())
    await asyncio.to_thread(m.start)
    s = MessageStore(small_config(tmp_path / "s", broker_role="SLAVE", ha_master_address=f"127.0.0.1:{m.ha.port}"),
                     broker_config=BrokerConfig(broker_id=1, ha_listen_port=0))
    await asyncio.to_thread(s.start)
    return m, s


async def _same_bytes_on_the_slave(m: MessageStore, s: MessageStore, start: int) -> None:
    """The slave's commitlog from ``start`` to the master's end is the master's, byte for byte."""
    end = m.confirmed_offset
    await _until(lambda: s.commitlog.max_offset >= end, "the slave holds every byte")
    assert s.commitlog.read(start, end - start) == m.commitlog.read(start, end - start)


def test_sync_master_waits_are_answered_on_the_loop_and_a_lost_slave_is_noticed(tmp_path):
    async def scenario() -> None:
        m, s = await _started_pair(tmp_path)
        try:
            await _until(lambda: m.ha.in_sync_count() == 1, "the slave in sync")
            await _until(lambda: any(c.reads_on_loop for c in m.ha.connections()), "ACKs read on the loop")
            # waits registered and answered on the loop, many in flight at once
            ends = []
            for i in range(50):
                r = m.put_message(_msg(i), sync_replicas=False)
                assert r.ok
                ends.append(r.end_offset)
            outcomes = await asyncio.gather(*(asyncio.wrap_future(m.ha.wait_replicated(e, 1, 3.0)) for e in ends))
            assert all(status == "PUT_OK" for status, _ in outcomes), outcomes
            # a put that waits for the slave inside the call, on the loop's own thread: the loop
            # cannot read the ACK while blocked (FLUSH_SLAVE_TIMEOUT), unless the wait reads it itself
            for i in range(20):
                r = m.put_message(_msg(100 + i))
                assert r.status == PutMessageStatus.PUT_OK, (r.status, r.error)
            # PUT_OK under SYNC_MASTER: the slave's commitlog holds the bytes (it acknowledges once
            # they are written; indexing them, which moves its confirmed offset, may come after)
            assert s.commitlog.max_offset >= r.end_offset
            # the slave goes away: the master sees it gone and a SYNC_MASTER put is refused
            await asyncio.to_thread(s.shutdown)
            await _until(lambda: not m.ha.connections(), "the slave's connection closed")
            r = m.put_message(_msg(999))
            assert r.status == PutMessageStatus.SLAVE_NOT_AVAILABLE, r.status
        finally:
            await asyncio.to_thread(s.shutdown)
            await asyncio.to_thread(m.shutdown)

    asyncio.run(scenario())


def test_a_slave_reconnecting_after_the_masters_loop_read_its_acks_streams_again(tmp_path):
    async def scenario() -> None:
        port = free_port()
        m = MessageStore(small_config(tmp_path / "m", broker_role="SYNC_MASTER", sync_flush_timeout=3000),
                         broker_config=BrokerConfig(ha_listen_port=port))
        Replication(m).read_acks_on(asyncio.get_running_loop())
        await asyncio.to_thread(m.start)
        slaves = []
        try:
            for round_ in range(2):
                s = MessageStore(small_config(tmp_path / "s", broker_role="SLAVE", ha_master_address=f"127.0.0.1:{port}"),
                                 broker_config=BrokerConfig(broker_id=1, ha_listen_port=0))
                slaves.append(s)
                await asyncio.to_thread(s.start)
                await _until(lambda: any(c.reads_on_loop and m.ha.is_in_sync(c, time.monotonic())
                                         for c in m.ha.connections()), f"slave in sync, round {round_}")
                r = m.put_message(_msg(round_), sync_replicas=False)
                status, error = await asyncio.wrap_future(m.ha.wait_replicated(r.end_offset, 1, 3.0))
                assert status == "PUT_OK", error
                await asyncio.to_thread(s.shutdown)
                await _until(lambda: not m.ha.connections(), f"connection closed, round {round_}")
        finally:
            for s in slaves:
                await asyncio.to_thread(s.shutdown)
            await asyncio.to_thread(m.shutdown)

    asyncio.run(scenario())


def test_puts_made_while_frames_are_unacknowledged_reach_the_slave_byte_for_byte(tmp_path):
    """Puts on the loop, one after another without yielding, so none of the slave's ACKs is read
    in between: the first few send their own frames with earlier ones still unacknowledged, the
    rest are left to the writer. Whichever thread sent what, the slave's commitlog is the
    master's, byte for byte, and every message is acknowledged."""
    async def scenario() -> None:
        m, s = await _started_pair(tmp_path)
        try:
            await _until(lambda: any(c.reads_on_loop and m.ha.is_in_sync(c, time.monotonic())
                                     for c in m.ha.connections()), "the slave in sync, ACKs read on the loop")
            start = m.confirmed_offset
            waits = []
            for round_ in range(5):
                for i in range(40):  # one burst: no ACK is read until the loop runs again
                    r = m.put_message(_msg(round_ * 100 + i), sync_replicas=False)
                    assert r.ok, r.status
                    waits.append(m.ha.wait_replicated(r.end_offset, 1, 3.0))
                await asyncio.sleep(0)  # the loop reads what ACKs arrived meanwhile
            outcomes = await asyncio.gather(*(asyncio.wrap_future(w) for w in waits))
            assert all(status == "PUT_OK" for status, _ in outcomes), outcomes
            await _same_bytes_on_the_slave(m, s, start)
        finally:
            await asyncio.to_thread(s.shutdown)
            await asyncio.to_thread(m.shutdown)

    asyncio.run(scenario())


def test_a_request_batchs_puts_reach_the_slave_in_one_push_and_a_blocking_put_is_not_held(tmp_path):
    """A gateway handling requests received together tells each put whether more follow in the
    same loop step: the batch's last put pushes them all; a batch that ends without such a put
    is pushed at the loop's next turn. Every message is acknowledged and on the slave byte for
    byte; a put that waits for the slave inside the call in the middle of a batch pushes first
    (else it would wait for a push that only its own return lets happen)."""
    async def scenario() -> None:
        # the master's writer thread stays quiet (no heartbeat, no metadata round) during the
        # test: only pushes move the bytes, as between a node's busy turns
        m, s = await _started_pair(tmp_path, ha_send_heartbeat_interval=60_000, ha_sync_metadata_interval=60_000)
        try:
            await _until(lambda: any(c.reads_on_loop and m.ha.is_in_sync(c, time.monotonic())
                                     for c in m.ha.connections()), "the slave in sync, ACKs read on the loop")
            start = m.confirmed_offset
            waits = []
            for round_ in range(4):
                last = 29 if round_ % 2 else None  # odd rounds end with a put, even ones without
                for i in range(30):  # the requests of one read
                    m.ha.batch_pushes(i != last)
                    r = m.put_message(_msg(round_ * 100 + i), sync_replicas=False)
                    assert r.ok, r.status
                    waits.append(m.ha.wait_replicated(r.end_offset, 1, 3.0))
                await asyncio.sleep(0)
            outcomes = await asyncio.gather(*(asyncio.wrap_future(w) for w in waits))
            assert all(status == "PUT_OK" for status, _ in outcomes), outcomes
            # more to come, then a put that waits for the slave inside the call, in the same step
            m.ha.batch_pushes(True)
            assert m.put_message(_msg(500), sync_replicas=False).ok
            m.ha.batch_pushes(True)
            r = m.put_message(_msg(501))
            assert r.status == PutMessageStatus.PUT_OK, (r.status, r.error)
            await _same_bytes_on_the_slave(m, s, start)
        finally:
            await asyncio.to_thread(s.shutdown)
            await asyncio.to_thread(m.shutdown)

    asyncio.run(scenario())
