"""Replication between two real stores over a real loopback HA connection (engine.ha).

The master and the slave are ``MessageStore`` instances on their own directories, connected
through the HA port exactly as two processes would be; what is checked is what a user of the
slave sees (the same bytes at the same offsets, consume queues, index, metadata) and what a
writer of the master is told (SYNC_MASTER statuses, replication waits).
"""

from __future__ import annotations

import time

import pytest

from engine import record_batch as rb
from engine.config import BrokerConfig
from engine.ha.epoch import EpochEntry, EpochFile, EpochFileError, consistent_point
from engine.message import Message, decode_message
from engine.store import MessageStore, PutMessageStatus
from engine.topic_config import TopicConfig
from engine_support import small_config
from tests.support.node import free_port


def wait_until(cond, timeout=15.0, what="condition"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return
        time.sleep(0.01)
    raise AssertionError(f"timed out waiting for {what}")


@pytest.fixture
def pair(tmp_path):
    """``pair(role=..., **cfg)`` -> (master, slave_factory); everything shut down afterwards."""
    stores: list[MessageStore] = []

    def master(role="SYNC_MASTER", **cfg):
        # a fixed HA port, so a restarted master is found where its slaves look for it
        m = MessageStore(small_config(tmp_path / "master", broker_role=role, **cfg),
                         broker_config=BrokerConfig(ha_listen_port=free_port()))
        stores.append(m)
        m.start()
        return m

    def slave(m, name="slave", broker_id=1, start=True, **cfg):
        s = MessageStore(small_config(tmp_path / name, broker_role="SLAVE", ha_master_address=f"127.0.0.1:{m.ha.port}",
                                      **cfg), broker_config=BrokerConfig(broker_id=broker_id, ha_listen_port=0))
        stores.append(s)
        if start:
            s.start()
        return s

    yield master, slave
    for s in reversed(stores):
        s.shutdown()


def caught_up(m, s):
    return s.confirmed_offset == m.confirmed_offset and s.ha.runtime_info().get("connected")


def commitlog_bytes(store, lo, hi):
    return store.commitlog.read(lo, hi - lo)


def msg(i, topic="T", queue_id=0, **kw):
    return Message(topic=topic, body=f"body-{i}".encode() * 3, keys=[f"k{i}"], tags="A" if i % 2 else "B",
                   queue_id=queue_id, **kw)


def test_slave_starting_empty_gets_every_byte_and_builds_its_own_queues(pair):
    master, slave = pair
    m = master(role="ASYNC_MASTER")
    for i in range(300):  # several 64 KiB segments with small units
        assert m.put_message(msg(i, queue_id=i % 3)).ok
    batch = rb.build_batch([rb.Record(i, 0, b"key-%d" % i, b"v%d" % i, []) for i in range(5)])
    kb = m.put_record_batch("K", 0, batch)
    assert kb.ok
    s = slave(m)
    wait_until(lambda: caught_up(m, s), what="slave caught up")
    assert s.commitlog.min_offset == m.commitlog.min_offset
    assert commitlog_bytes(s, m.commitlog.min_offset, m.confirmed_offset) == \
        commitlog_bytes(m, m.commitlog.min_offset, m.confirmed_offset)
    for q in range(3):
        assert s.get_max_offset_in_queue("T", q) == m.get_max_offset_in_queue("T", q) == 100
        got = s.get_message("g", "T", q, 0, 200)
        assert [decode_message(u).body for u in got.messages] == [decode_message(u).body for u in
                                                                  m.get_message("g", "T", q, 0, 200).messages]
    assert s.get_max_offset_in_queue("K", 0) == 5
    # the slave's own index finds keys, of native messages and of Kafka records
    assert [decode_message(u).body for u in s.query_message("T", "k7", 5, 0, 2**62).messages] == [b"body-7" * 3]
    assert len(s.query_message("K", "key-3", 5, 0, 2**62).messages) == 1
    # tag hashes in the slave's queue match the master's (filtering by tag works there)
    assert s.find_consume_queue("T", 1).read_units(0, 5) == m.find_consume_queue("T", 1).read_units(0, 5)


def test_slave_refuses_writes_and_says_why(pair):
    master, slave = pair
    m = master()
    s = slave(m)
    res = s.put_message(msg(1))
    assert res.status is PutMessageStatus.SERVICE_NOT_AVAILABLE and "slave" in res.error
    assert s.put_record_batch("K", 0, rb.build_batch([rb.Record(0, 0, None, b"x", [])])).status \
        is PutMessageStatus.SERVICE_NOT_AVAILABLE


def test_sync_master_answers_slave_not_available_without_a_slave_and_put_ok_with_one(pair):
    master, slave = pair
    m = master(role="SYNC_MASTER")
    res = m.put_message(msg(0))
    assert res.status is PutMessageStatus.SLAVE_NOT_AVAILABLE and res.stored
    assert m.get_max_offset_in_queue("T", 0) == 1  # stored on the master all the same
    s = slave(m)
    wait_until(lambda: m.ha.in_sync_count() == 1, what="slave in sync")
    for i in range(1, 50):
        r = m.put_message(msg(i))
        assert r.status is PutMessageStatus.PUT_OK, r.error
        # acknowledged => already on the slave, byte for byte
        assert s.commitlog.max_offset >= r.end_offset
        assert commitlog_bytes(s, r.commitlog_offset, r.end_offset) == commitlog_bytes(m, r.commitlog_offset, r.end_offset)


def test_stored_bytes_reach_the_slave_whole_and_in_order_when_several_writers_fill_the_socket(pair):
    """Each put sends its bytes to the slave itself when the connection is idle; a slave that
    stops reading for a moment fills the socket, and what a put could not send is finished by
    the writer. 18 MiB put against a slave held still, then SYNC_MASTER puts from four threads
    at once: every put succeeds and the slave ends with the master's bytes at the same offsets,
    on the same connection (a frame cut or sent out of order would make it reconnect and
    truncate)."""
    import os
    import threading

    import structlog

    master, slave = pair
    big = 32 << 20
    m = master(role="SYNC_MASTER", mapped_file_size_commit_log=big)
    s = slave(m, mapped_file_size_commit_log=big)
    m.topic_config.create_or_update(TopicConfig("Big", read_queue_nums=4, write_queue_nums=4))
    wait_until(lambda: m.ha.in_sync_count() == 1 and s.topic_config.get("Big") is not None, what="slave in sync")
    body = os.urandom(256 << 10)
    statuses: list = []

    def put_many(t: int, n: int, sync: bool) -> None:
        for i in range(n):
            r = m.put_message(Message(topic="Big", body=body[: (64 << 10) * (1 + (i + t) % 4) - 1024], queue_id=t,
                                      keys=[f"{t}-{i}"]), sync_replicas=sync)
            statuses.append(r.status)

    with structlog.testing.capture_logs() as logs:
        with s._put_lock:  # the slave's HA thread stops at its next append: the socket fills up
            put_many(0, 120, False)
        wait_until(lambda: caught_up(m, s), 30, what="slave caught up")
        threads = [threading.Thread(target=put_many, args=(t, 10, True)) for t in range(4)]
        for th in threads:
            th.start()
        for th in threads:
            th.join(30)
        wait_until(lambda: caught_up(m, s), 30, what="slave caught up again")
    assert len(statuses) == 160 and set(statuses) == {PutMessageStatus.PUT_OK}
    assert commitlog_bytes(s, 0, m.confirmed_offset) == commitlog_bytes(m, 0, m.confirmed_offset)
    events = [e["event"] for e in logs]
    assert "ha_slave_disconnected" not in events and "ha_slave_truncated" not in events, events
    assert s.ha.runtime_info()["truncatedBytes"] == 0
    assert [s.get_max_offset_in_queue("Big", q) for q in range(4)] == \
        [m.get_max_offset_in_queue("Big", q) for q in range(4)] == [130, 10, 10, 10]


def test_a_slave_held_still_does_not_hold_back_the_other_slaves(pair):
    """With two slaves, one that stops reading must not keep the other from getting new bytes
    at once: every connection is sent to (or its writer woken) on each put; and a new topic's
    document reaches both slaves at once. The writers' own timers are set to a minute here, so
    only the put path and the topic change can bring what is checked in time."""
    quiet = dict(ha_send_heartbeat_interval=60_000, ha_sync_metadata_interval=60_000,
                 ha_housekeeping_interval=120_000)
    master, slave = pair
    m = master(role="ASYNC_MASTER", **quiet)
    s1 = slave(m, name="slave1", broker_id=1, **quiet)
    s2 = slave(m, name="slave2", broker_id=2, **quiet)
    m.topic_config.create_or_update(TopicConfig("T", read_queue_nums=1, write_queue_nums=1))
    # a topic's document reaches each slave at once, also one whose writer started after the
    # document was last encoded for another connection
    wait_until(lambda: len(m.ha.connections()) == 2 and all(c.state == "TRANSFER" for c in m.ha.connections())
               and s1.topic_config.get("T") is not None and s2.topic_config.get("T") is not None,
               what="both slaves streaming, with the topic")
    held = s1 if m.ha.connections()[0].broker_id == 1 else s2  # the slave the master serves first
    other = s2 if held is s1 else s1
    with held._put_lock:  # its HA thread stops at its next append: its bytes stay unacknowledged
        for i in range(20):
            assert m.put_message(msg(i)).ok
            time.sleep(0.01)
        wait_until(lambda: other.confirmed_offset == m.confirmed_offset, 10, what="the other slave has every put")
    wait_until(lambda: caught_up(m, held), what="the held slave catches up once let go")


def test_replication_wait_times_out_and_min_replicas_is_enforced(pair):
    master, slave = pair
    m = master(role="ASYNC_MASTER")
    s = slave(m)
    wait_until(lambda: m.ha.in_sync_count() == 1, what="slave in sync")
    r = m.put_message(msg(1))
    assert m.ha.wait_replicated(r.end_offset, 1, 5).result(10)[0] == "PUT_OK"
    assert m.ha.wait_replicated(r.end_offset, 2, 5).result(10)[0] == "SLAVE_NOT_AVAILABLE"
    # an offset the master has not even written yet cannot be acknowledged: times out
    status, error = m.ha.wait_replicated(m.confirmed_offset + 10_000, 1, 0.3).result(10)
    assert status == "FLUSH_SLAVE_TIMEOUT" and "did not acknowledge" in error
    # Kafka's acks=all with min.insync.replicas=1 and no slave in sync: the master alone
    s.shutdown()
    wait_until(lambda: m.ha.in_sync_count() == 0, what="slave gone")
    assert m.ha.wait_replicated(m.confirmed_offset, 0, 1).result(10)[0] == "PUT_OK"


def test_many_waits_in_flight_each_get_their_own_outcome(pair):
    """Waits pile up as with hundreds of sends in flight: each completes when the slave's ACK
    covers its own offset, a short deadline among long ones times out alone, and
    a wait needing more slaves than are in sync is refused at once, wherever it stands."""
    master, slave = pair
    m = master(role="ASYNC_MASTER")
    slave(m)
    wait_until(lambda: m.ha.in_sync_count() == 1, what="slave in sync")
    far = m.confirmed_offset + 10_000_000
    never_long = m.ha.wait_replicated(far, 1, 30)
    never_short = m.ha.wait_replicated(far + 1, 1, 0.3)
    ends = [m.put_message(msg(i)).end_offset for i in range(50)]
    waits = [m.ha.wait_replicated(e, 1, 30) for e in reversed(ends)]  # registered out of log order
    too_many = m.ha.wait_replicated(ends[0], 2, 30)
    assert too_many.result(5)[0] == "SLAVE_NOT_AVAILABLE"
    # also when it ends past every wait still pending (registered behind them, in log order)
    assert m.ha.wait_replicated(far + 2, 2, 30).result(5)[0] == "SLAVE_NOT_AVAILABLE"
    assert [w.result(10) for w in waits] == [("PUT_OK", None)] * 50
    status, error = never_short.result(10)
    assert status == "FLUSH_SLAVE_TIMEOUT" and f"offset {far + 1}" in error
    assert not never_long.done()  # its own deadline is far away
    later = m.put_message(msg(99)).end_offset
    assert m.ha.wait_replicated(later, 1, 30).result(10) == ("PUT_OK", None)
    assert not never_long.done()


def test_slave_down_for_a_while_catches_up_from_where_it_stopped(pair):
    master, slave = pair
    m = master(role="ASYNC_MASTER")
    s = slave(m)
    for i in range(50):
        m.put_message(msg(i))
    wait_until(lambda: caught_up(m, s), what="first catch-up")
    s.shutdown()
    for i in range(50, 400):
        m.put_message(msg(i))
    s.start()
    wait_until(lambda: caught_up(m, s), what="catch-up after restart")
    assert s.get_max_offset_in_queue("T", 0) == 400
    assert commitlog_bytes(s, 0, m.confirmed_offset) == commitlog_bytes(m, 0, m.confirmed_offset)
    assert [e.epoch for e in s.ha.epochs.all()] == [e.epoch for e in m.ha.epochs.all()]


def test_metadata_reaches_the_slave(pair):
    master, slave = pair
    m = master(role="ASYNC_MASTER", ha_sync_metadata_interval=50)
    s = slave(m, ha_sync_metadata_interval=50)
    m.topic_config.create_or_update(TopicConfig("Orders", read_queue_nums=4, write_queue_nums=4))
    m.consumer_offsets.commit("g1", "Orders", 2, 17)
    m.schedule.offsets.table[3] = 9
    m.put_message(msg(1, topic="Orders"))
    m.delete_records("Orders", 0, 1)
    wait_until(lambda: s.topic_config.get("Orders") is not None and s.consumer_offsets.query("g1", "Orders", 2) == 17
               and s.schedule.offsets.table.get(3) == 9 and s.get_min_offset_in_queue("Orders", 0) == 1,
               what="metadata on the slave")
    assert s.topic_config.get("Orders").read_queue_nums == 4
    # a commit made on the slave alone (master down) stays until the master has that key
    s.consumer_offsets.commit("g2", "Orders", 0, 5)
    m.consumer_offsets.commit("g1", "Orders", 2, 18)
    wait_until(lambda: s.consumer_offsets.query("g1", "Orders", 2) == 18, what="offset update")
    assert s.consumer_offsets.query("g2", "Orders", 0) == 5


def test_master_restarted_shorter_makes_the_slave_truncate_to_the_epoch_boundary(pair, tmp_path):
    """The master lost the tail of its log (restored from an older copy) and wrote new messages
    at the same offsets: the slave notices by the epochs, drops its diverged tail and follows."""
    import shutil

    master, slave = pair
    m = master(role="ASYNC_MASTER")
    s = slave(m)
    for i in range(20):
        m.put_message(msg(i))
    wait_until(lambda: caught_up(m, s), what="catch-up")
    m.shutdown()
    shutil.copytree(tmp_path / "master", tmp_path / "older")  # the copy the master will come back from
    m.start()
    for i in range(20, 40):
        m.put_message(msg(i))
    wait_until(lambda: caught_up(m, s), what="slave has 40")
    diverged_end = s.confirmed_offset
    m.shutdown()
    s.shutdown()
    shutil.rmtree(tmp_path / "master")
    shutil.copytree(tmp_path / "older", tmp_path / "master")
    m.start()  # back with 20 messages: a new epoch opens at its shorter end
    for i in range(100, 105):
        m.put_message(msg(i))
    s.start()
    wait_until(lambda: caught_up(m, s), what="slave follows the shorter master")
    assert s.ha.truncated_bytes > 0 and s.confirmed_offset < diverged_end
    assert commitlog_bytes(s, 0, m.confirmed_offset) == commitlog_bytes(m, 0, m.confirmed_offset)
    bodies = [decode_message(u).body for u in s.get_message("g", "T", 0, 0, 100).messages]
    assert bodies == [f"body-{i}".encode() * 3 for i in list(range(20)) + list(range(100, 105))]


def test_unrelated_logs_are_refused_and_nothing_is_deleted(pair):
    master, slave = pair
    m = master(role="ASYNC_MASTER")
    m.put_message(msg(1))
    other = slave(m, name="other", start=False)
    other.config.broker_role = "ASYNC_MASTER"  # it was a master of its own first
    other.broker_config.broker_id = 0
    other.start()
    other.put_message(msg(2))
    end = other.confirmed_offset
    other.shutdown()
    other.config.broker_role = "SLAVE"
    other.broker_config.broker_id = 1
    other.start()
    wait_until(lambda: "shares no epoch" in (other.ha.runtime_info().get("lastError") or ""), what="refusal")
    assert other.confirmed_offset == end
    assert decode_message(other.get_message("g", "T", 0, 0, 1).messages[0]).body == msg(2).body


def test_mismatched_segment_size_is_refused(pair):
    master, slave = pair
    m = master(role="ASYNC_MASTER")
    s = slave(m, mapped_file_size_commit_log=128 * 1024)
    wait_until(lambda: "mappedFileSizeCommitLog differs" in (s.ha.runtime_info().get("lastError") or ""),
               what="refusal")
    # the master closes the refused connection (the slave may read the refusal first)
    wait_until(lambda: m.ha.runtime_info()["haConnections"] == 0, what="refused connection closed")


def test_kafka_transactions_are_followed_on_the_slave(pair):
    master, slave = pair
    m = master(role="ASYNC_MASTER")
    s = slave(m)
    from engine import txn_index

    pid = 7
    data = rb.build_batch([rb.Record(0, 0, None, b"t1", [])], producer_id=pid, producer_epoch=0, base_sequence=0,
                          is_transactional=True)
    r = m.put_record_batch("Tx", 0, data)  # the store's producer state opens the transaction
    assert r.ok and txn_index.for_store(m).last_stable_offset("Tx", 0, 1) == 0
    wait_until(lambda: s.get_max_offset_in_queue("Tx", 0) == 1, what="data on slave")
    assert txn_index.for_store(s).last_stable_offset("Tx", 0, 1) == 0  # open on the slave too
    marker = rb.build_control_batch(rb.CONTROL_TYPE_ABORT, producer_id=pid, producer_epoch=0)
    mr = m.put_record_batch("Tx", 0, marker, delay_headers=False)
    wait_until(lambda: s.get_max_offset_in_queue("Tx", 0) == 2, what="marker on slave")
    idx = txn_index.for_store(s)
    assert idx.last_stable_offset("Tx", 0, 2) == 2
    assert idx.is_aborted("Tx", 0, pid, 0) and mr.queue_offset == 1


def test_epoch_file_round_trip_and_damage_is_reported(tmp_path):
    f = EpochFile(tmp_path / "epoch")
    f.load()
    assert f.open_epoch(0).epoch == 1
    f.open_epoch(100)
    f.open_epoch(100)  # no bytes in epoch 2: replaced
    assert [(e.epoch, e.start_offset) for e in f.all()] == [(1, 0), (3, 100)]
    g = EpochFile(tmp_path / "epoch")
    g.load()
    assert g.all() == f.all()
    raw = (tmp_path / "epoch").read_bytes()
    (tmp_path / "epoch").write_bytes(raw.replace(b"\n3 100 ", b"\n3 101 "))
    with pytest.raises(EpochFileError, match="CRC"):
        EpochFile(tmp_path / "epoch").load()


def test_consistent_point():
    m = [EpochEntry(1, 0, 10), EpochEntry(2, 500, 20)]
    assert consistent_point(m, 900, [EpochEntry(1, 0, 10)], 400) == 400  # behind: continue at its end
    assert consistent_point(m, 900, [EpochEntry(1, 0, 10)], 700) == 500  # diverged after epoch 1
    assert consistent_point(m, 900, [EpochEntry(1, 0, 10), EpochEntry(2, 500, 20)], 1000) == 900  # ahead
    # the same epoch number and start opened by another master (restored copy): not the same epoch
    assert consistent_point(m, 900, [EpochEntry(1, 0, 10), EpochEntry(2, 500, 21)], 1000) == 500
    assert consistent_point(m, 900, [EpochEntry(5, 0, 10)], 100) is None  # unrelated


def test_slave_knows_every_topic_it_holds_messages_of(pair):
    """A topic the master's topics document has not described yet (here: never configured at
    all) is recorded by the slave from the log, so its messages can be consumed there."""
    master, slave = pair
    m = master(role="ASYNC_MASTER")
    s = slave(m)
    assert m.topic_config.get("NoConfig") is None
    m.put_message(msg(1, topic="NoConfig", queue_id=11))
    wait_until(lambda: s.topic_config.get("NoConfig") is not None, what="topic learned from the log")
    assert s.topic_config.get("NoConfig").read_queue_nums == 12
    assert s.get_max_offset_in_queue("NoConfig", 11) == 1


def test_slave_far_behind_the_masters_retention_starts_over_at_its_oldest_segment(pair):
    master, slave = pair
    m = master(role="ASYNC_MASTER", file_reserved_time=0)
    s = slave(m, file_reserved_time=0)
    for i in range(20):
        m.put_message(msg(i))
    wait_until(lambda: caught_up(m, s), what="first catch-up")
    s.shutdown()
    for i in range(20, 700):  # several 64 KiB segments
        m.put_message(msg(i))
    while m.clean_expired_files(force=True):  # retention drops all but the last segments
        pass
    assert m.commitlog.min_offset > s.confirmed_offset
    s.start()
    wait_until(lambda: caught_up(m, s), what="catch-up after the gap")
    assert s.commitlog.min_offset == m.commitlog.min_offset
    lo = m.commitlog.min_offset
    assert commitlog_bytes(s, lo, m.confirmed_offset) == commitlog_bytes(m, lo, m.confirmed_offset)
    # queue offsets keep their meaning: what is still in the log is read at the master's offsets
    q_lo = m.get_min_offset_in_queue("T", 0)
    wait_until(lambda: s.get_min_offset_in_queue("T", 0) == q_lo, what="queue start moved on the slave")
    assert s.get_max_offset_in_queue("T", 0) == 700
    assert decode_message(s.get_message("g", "T", 0, q_lo, 1).messages[0]).body == msg(q_lo).body


def test_timer_messages_are_delivered_by_the_master_only(pair):
    """The slave files replicated timer messages into its own wheel (for a later promotion) but
    never delivers them: the delivered copy arrives once, by replication."""
    master, slave = pair
    m = master(role="ASYNC_MASTER")
    s = slave(m)
    due = int(time.time() * 1000) + 2500
    assert m.put_message(Message(topic="Later", body=b"timer", properties={"TIMER_DELIVER_MS": str(due)})).ok
    wait_until(lambda: m.get_max_offset_in_queue("Later", 0) == 1, timeout=20, what="delivered on the master")
    wait_until(lambda: s.get_max_offset_in_queue("Later", 0) == 1, what="delivered copy on the slave")
    wait_until(lambda: s.timer.checkpoint.enqueue_offset == 1, what="the slave's wheel has the timer message")
    assert caught_up(m, s)
    assert s.get_max_offset_in_queue("Later", 0) == 1  # not delivered a second time by the slave


def test_bad_bytes_on_the_ha_port_close_only_that_connection(pair):
    import socket
    import struct

    master, slave = pair
    m = master(role="SYNC_MASTER")
    s = slave(m)
    wait_until(lambda: m.ha.in_sync_count() == 1, what="slave in sync")
    garbage = socket.create_connection(("127.0.0.1", m.ha.port))
    garbage.sendall(b"GET / HTTP/1.1\r\n\r\n")  # not a frame: its size field is absurd
    huge = socket.create_connection(("127.0.0.1", m.ha.port))
    huge.sendall(struct.pack(">iB", 1 << 30, 1))  # a frame announced as 1 GiB: refused before buffering
    ack_first = socket.create_connection(("127.0.0.1", m.ha.port))
    ack_first.sendall(struct.pack(">iBq", 9, 3, 0))  # ACK before any handshake
    for sock in (garbage, huge, ack_first):
        sock.settimeout(10)
        assert sock.recv(100) == b""  # the master closed it
        sock.close()
    r = m.put_message(msg(1))  # the real slave was not disturbed
    assert r.status is PutMessageStatus.PUT_OK
    assert s.commitlog.max_offset >= r.end_offset


def test_roles_change_at_run_time_and_the_old_master_follows_the_new_one(pair, tmp_path):
    """A manual switch (what failover will automate): the slave becomes master with a new epoch,
    the old master, started again as a slave of it, drops the tail it wrote alone and follows."""
    master, slave = pair
    a = master(role="SYNC_MASTER")
    b = slave(a)
    wait_until(lambda: a.ha.in_sync_count() == 1, what="slave in sync")
    for i in range(10):
        assert a.put_message(msg(i)).ok
    a.shutdown()  # the master goes away
    b.broker_config.ha_listen_port = free_port()
    b.change_role("SYNC_MASTER")
    assert b.ha.master_epoch == a.ha.master_epoch + 1
    assert b.put_message(msg(100)).status is PutMessageStatus.SLAVE_NOT_AVAILABLE  # no slave of its own yet
    # the old master comes back as a slave of b; it had written one message b never got
    a.start()
    lonely = a.put_message(msg(99))
    assert lonely.stored
    a.change_role("SLAVE", master_address=f"127.0.0.1:{b.ha.port}")
    assert a.put_message(msg(98)).status is PutMessageStatus.SERVICE_NOT_AVAILABLE
    wait_until(lambda: b.ha.in_sync_count() == 1, what="the old master in sync with the new one")
    assert a.ha.truncated_bytes > 0  # its lone message is gone
    r = b.put_message(msg(101))
    assert r.status is PutMessageStatus.PUT_OK
    # acknowledged once in the slave's commitlog; its queue is built right after
    wait_until(lambda: a.get_max_offset_in_queue("T", 0) == 12, what="the old master's queue caught up")
    bodies = [decode_message(u).body for u in a.get_message("g", "T", 0, 0, 50).messages]
    assert bodies == [msg(i).body for i in list(range(10)) + [100, 101]]
    assert commitlog_bytes(a, 0, b.confirmed_offset) == commitlog_bytes(b, 0, b.confirmed_offset)


def _record_at(store, topic, offset):
    """(key, value) of the record at ``offset`` as a reader of the queue gets it, or None."""
    from engine.message import UnitHeader

    res = store.get_message("g", topic, 0, offset, 1)
    for data in res.messages:
        h = UnitHeader(data, 0)
        header, records = rb.decode_batch(memoryview(data)[h.body_pos:h.body_pos + h.body_len])
        for r in records:
            if header.base_offset + r.offset_delta == offset:
                return r.key, r.value
    return None


def test_compacted_topic_on_the_slave_follows_the_masters_copies(pair):
    """Retention deletes every old segment on both sides; the latest record of each key of a
    compacted topic stays at its offset on the master (copied forward) and on the slave (which
    keeps its segments until the master's copies have arrived, then lets them go too)."""
    master, slave = pair
    m = master(role="ASYNC_MASTER", file_reserved_time=0, ha_sync_metadata_interval=50)
    s = slave(m, file_reserved_time=0, ha_sync_metadata_interval=50)
    for store in (m, s):
        store.topic_config.create_or_update(TopicConfig("C", attributes={"cleanup.policy": "compact"}))
    pad = b"." * 3000
    latest = {}
    for r in range(4):
        for k in range(5):
            key, value = b"k%d" % k, b"v%d-%d" % (k, r) + pad
            res = m.put_record_batch("C", 0, rb.build_batch([rb.Record(0, 0, key, value, [])]))
            latest[key] = (res.queue_offset, value)
    originals_end = m.confirmed_offset
    for i in range(60):  # roll the log well past the compacted records
        m.put_message(Message(topic="F", body=b"f" * 3000))
    wait_until(lambda: caught_up(m, s), what="slave caught up")
    s.clean_expired_files(force=True)  # the slave goes first: nothing of C may go yet
    assert all(_record_at(s, "C", off) == (key, value) for key, (off, value) in latest.items())
    while m.clean_expired_files(force=True):
        pass
    assert m.commitlog.min_offset > originals_end  # the original records are gone on the master
    wait_until(lambda: caught_up(m, s), what="slave has the copies")
    while s.clean_expired_files(force=True):
        pass
    assert s.commitlog.min_offset > originals_end
    for store in (m, s):
        assert {key: _record_at(store, "C", off) for key, (off, _) in latest.items()} == \
            {key: (key, value) for key, (_, value) in latest.items()}
        assert store.get_min_offset_in_queue("C", 0) == 0  # log start of a compacted partition stays
        assert store.get_max_offset_in_queue("C", 0) == 20


def test_the_cleaners_removals_reach_the_slave(pair):
    """The master's cleaner removes superseded records from what its compacted queue serves; the
    slave, which never cleans, serves the same: the dead list is in the log it replicates."""
    master, slave = pair
    m = master(role="ASYNC_MASTER", ha_sync_metadata_interval=50, log_cleaner_backoff_ms=3_600_000)
    s = slave(m, ha_sync_metadata_interval=50, log_cleaner_backoff_ms=3_600_000)
    attrs = {"cleanup.policy": "compact", "segment.bytes": "2000", "min.cleanable.dirty.ratio": "0.01"}
    for store in (m, s):
        store.topic_config.create_or_update(TopicConfig("C", attributes=attrs))
    latest = {}
    for r in range(4):
        for k in range(5):
            key, value = b"k%d" % k, b"v%d-%d" % (k, r) + b"." * 300
            res = m.put_record_batch("C", 0, rb.build_batch([rb.Record(0, 0, key, value, [])]))
            latest[key] = (res.queue_offset, value)
    for i in range(10):  # the tail rolls the Kafka segments holding the records above
        m.put_record_batch("C", 0, rb.build_batch([rb.Record(0, 0, b"tail", b"t" * 300, [])]))
    assert m.compactor.clean() >= 15
    wait_until(lambda: caught_up(m, s), what="slave has the dead list")
    for store in (m, s):
        served = {off for off in range(20) if _record_at(store, "C", off) is not None}
        assert served == {off for off, _ in latest.values()}, (store is m, sorted(served))
        assert all(_record_at(store, "C", off) == (key, value) for key, (off, value) in latest.items())


def test_long_polls_wake_on_the_sync_master_once_replicated_and_on_the_slave_as_units_arrive(pair):
    """Arrival listeners (long-poll wake-ups): a SYNC_MASTER put holds its arrival until the
    slave acknowledged it, and has told it when the put returns; the slave tells its own
    listeners as the replicated units become readable there."""
    master, slave = pair
    m = master(role="SYNC_MASTER")
    s = slave(m)
    wait_until(lambda: m.ha.in_sync_count() == 1, what="slave in sync")
    on_master: dict = {}
    on_slave: dict = {}
    m.add_arrival_listener(lambda t, q, mx: on_master.__setitem__((t, q), max(mx, on_master.get((t, q), 0))))
    s.add_arrival_listener(lambda t, q, mx: on_slave.__setitem__((t, q), max(mx, on_slave.get((t, q), 0))))
    for i in range(20):
        r = m.put_message(msg(i, queue_id=i % 2))
        assert r.status is PutMessageStatus.PUT_OK, r.error
        assert on_master[("T", i % 2)] == i // 2 + 1
    wait_until(lambda: on_slave.get(("T", 0)) == 10 and on_slave.get(("T", 1)) == 10, what="slave arrivals")
    assert s.get_max_offset_in_queue("T", 1) == 10
