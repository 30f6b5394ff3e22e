"""The transaction coordinator's state writes ride out a busy commitlog: a write the store
refuses for a passing reason (OS_PAGE_CACHE_BUSY while another put holds the commitlog past the
busy window) is retried until the store takes it, instead of answering the client an error
(``txn_state_not_stored``). A real store with a disk that stops taking writes for a while."""

from __future__ import annotations

import asyncio
import functools
import threading
import time
from types import SimpleNamespace

from engine.message import Message
from engine.store import MessageStore, PutMessageStatus
from gateway_kafka.txn_coordinator import TransactionCoordinator
from tests.engine.engine_support import small_config
from tests.engine.test_flow_control import StallingIO


def test_a_state_write_refused_while_the_commitlog_is_busy_is_retried_until_stored(tmp_path):
    fio = StallingIO()
    store = MessageStore(small_config(tmp_path / "store", os_page_cache_busy_time_out_mills=100), file_io=fio)
    store.start()
    try:
        assert store.put_message(Message("T", b"before")).ok
        fio.stalled.clear()  # the next commitlog write blocks: its put holds the lock
        stuck = threading.Thread(target=lambda: store.put_message(Message("T", b"stuck")))
        stuck.start()
        assert fio.entered.wait(10)
        # the stall outlasts a put's whole wait (2.5 busy windows): a plain put is refused now
        assert store.put_message(Message("T", b"refused")).status is PutMessageStatus.OS_PAGE_CACHE_BUSY
        threading.Timer(1.0, fio.stalled.set).start()  # ... and the disk comes back a while later

        async def write() -> object:
            loop = asyncio.get_running_loop()

            async def put(fn, *args, **kwargs):
                return await loop.run_in_executor(None, functools.partial(fn, *args, **kwargs))
            coordinator = TransactionCoordinator.__new__(TransactionCoordinator)  # only its write path
            coordinator.gw = SimpleNamespace(put=put)
            return await coordinator._put(store.put_message, Message("T", b"state"))

        began = time.monotonic()
        res = asyncio.run(write())
        assert res.ok, res.status
        assert time.monotonic() - began < 30
        stuck.join(10)
        got = store.get_message("g", "T", 0, 0, 10)
        assert got.message_count == 3  # before, stuck, state
    finally:
        fio.stalled.set()
        store.shutdown()
