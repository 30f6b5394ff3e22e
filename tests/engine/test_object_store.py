"""The remote tier's object store (engine/tiered/object_store.py).

The S3 client against a stopped endpoint, and the fault tests through the in-memory double,
whose slowness, refusal and silence the bounding layer under test must turn into clear,
bounded errors. (Round trips against a running S3 server are not here yet.)
"""

from __future__ import annotations

import asyncio
import socket
import time

import pytest

from engine.tiered.object_store import (ChecksumMismatch, ObjectNotFound, ObjectStoreTimeout,
                                        ObjectStoreUnavailable, S3ObjectStore)
from tests.support.fault_object_store import FaultObjectStore


def run(coro):
    return asyncio.run(coro)


# -- the S3 client, nothing listening ------------------------------------------------------

def test_stopped_server_is_a_clear_bounded_error(tmp_path):
    with socket.socket() as sock:  # a loopback port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    store = S3ObjectStore(endpoint=f"http://127.0.0.1:{port}", bucket="b", access_key="k",
                          secret_key="s", op_timeout_s=5.0, max_retries=1)

    async def scenario():
        with pytest.raises((ObjectStoreUnavailable, ObjectStoreTimeout)) as err:
            await store.put("k", b"x")
        assert "put" in str(err.value) and "'k'" in str(err.value)
    run(scenario())


# -- faults, through the double ------------------------------------------------------------

def test_hung_store_times_out_every_operation():
    store = FaultObjectStore(op_timeout_s=0.3)

    async def scenario():
        await store.put("k", b"abc")
        store.hang = True
        for op in (store.put("k", b"x"), store.get("k"), store.get_range("k", 0, 1),
                   store.head("k"), store.list(""), store.delete("k")):
            with pytest.raises(ObjectStoreTimeout, match="no answer within 0.3s"):
                await op
        store.hang = False
        assert await store.get("k") == b"abc"  # nothing was changed by the timed-out calls
    deadline = time.monotonic() + 30
    run(scenario())
    assert time.monotonic() < deadline


def test_slow_store_within_deadline_answers_beyond_it_times_out():
    store = FaultObjectStore(op_timeout_s=1.0)

    async def scenario():
        store.delay_s = 0.05
        put = await store.put("k", b"payload")
        assert await store.get("k", expected_crc32c=put.crc32c) == b"payload"
        store.delay_s = 5.0
        with pytest.raises(ObjectStoreTimeout):
            await store.get("k")
    run(scenario())


def test_down_store_is_unavailable_and_recovers():
    store = FaultObjectStore(op_timeout_s=5.0)

    async def scenario():
        store.down = True
        with pytest.raises(ObjectStoreUnavailable, match="connection refused"):
            await store.put("k", b"v")
        store.down = False
        await store.put("k", b"v")
        assert await store.get("k") == b"v"
    run(scenario())


def test_corrupted_read_is_refused_not_served():
    store = FaultObjectStore(op_timeout_s=5.0)

    async def scenario():
        await store.put("k", b"segment bytes")
        store.corrupt_reads = True
        with pytest.raises(ChecksumMismatch, match="stored"):
            await store.get("k")
    run(scenario())


def test_short_range_answer_is_an_error():
    store = FaultObjectStore(op_timeout_s=5.0)

    async def scenario():
        await store.put("k", b"0123456789")
        with pytest.raises(ObjectStoreUnavailable, match="asked 5 bytes"):
            await store.get_range("k", 8, 13)  # the object ends at 10
        with pytest.raises(ValueError):
            await store.get_range("k", 4, 4)
    run(scenario())
