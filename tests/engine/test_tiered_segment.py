"""Remote segments (engine/tiered/segment.py): one queue's stored units built into ``.log`` and
``.idx``, uploaded to a real S3 server (s3proxy) and read back by offset: the same bytes the
local store serves, from any offset, a Kafka batch never split."""

from __future__ import annotations

import asyncio

import pytest

from engine.record_batch import Record, build_batch
from engine.tiered.object_store import S3ObjectStore
from engine.tiered.segment import SegmentIndex, build_segment, read_units
from tests.support.s3_server import ACCESS_KEY, SECRET_KEY, S3Server


@pytest.fixture(scope="module")
def s3(tmp_path_factory):
    with S3Server(tmp_path_factory.mktemp("s3")) as server:
        yield server


def batch(first, n):
    return build_batch([Record(i, i, b"k%d" % (first + i), b"value-%d-" % (first + i) + b"x" * 200, [])
                        for i in range(n)])


def test_segments_read_back_from_the_object_store_byte_for_byte(make_store, s3):
    store = make_store()
    offset = 0
    for n in (1, 5, 3, 8, 1, 2, 6):                      # batches of the tiered partition ...
        store.put_record_batch("orders", 0, batch(offset, n))
        store.put_record_batch("other", 0, batch(0, 2))    # ... interleaved with another topic's
        offset += n
    end = offset
    s3.make_bucket("segments")
    objects = S3ObjectStore(endpoint=s3.endpoint, bucket="segments", access_key=ACCESS_KEY,
                            secret_key=SECRET_KEY, op_timeout_s=20.0)
    local_units = []
    o = 0
    while o < end:
        res = store.get_message("", "orders", 0, o, 1)
        local_units.append((o, bytes(res.messages[0])))
        o = res.next_begin_offset

    async def scenario():
        segs, base = [], 0
        while True:   # small segments: several, each of whole batches
            built = build_segment(store, "orders", 0, base, max_bytes=2500)
            if built is None:
                break
            assert built.base == base and built.end > base
            await objects.put(f"orders/0/{base:020d}.log", built.log)
            await objects.put(f"orders/0/{base:020d}.idx", built.idx)
            segs.append(built)
            base = built.end
        assert len(segs) > 2 and segs[-1].end == end
        remote_units = []
        for seg in segs:
            index = SegmentIndex.parse(await objects.get(f"orders/0/{seg.base:020d}.idx"))
            o = seg.base
            while o < seg.end:
                units = await read_units(objects, f"orders/0/{seg.base:020d}.log", index, o, 1)
                remote_units.append((o, bytes(units[0])))
                o = index.offsets[index.first_unit(o)] + index.counts[index.first_unit(o)]
        assert remote_units == local_units                  # every unit, same bytes, same order
        # an offset inside a batch reads the whole batch holding it, as locally
        seg = segs[1]
        index = SegmentIndex.parse(seg.idx)
        inner = next(off for off, c in zip(index.offsets, index.counts) if c > 1) + 1
        remote = await read_units(objects, f"orders/0/{seg.base:020d}.log", index, inner, 10**6)
        local = store.get_message("", "orders", 0, inner, 10**6, max_bytes=sum(map(len, remote)))
        assert [bytes(u) for u in remote] == [bytes(m) for m in local.messages][:len(remote)]
        await objects.close()
    asyncio.run(scenario())


def test_only_closed_data_is_built(make_store):
    store = make_store()
    store.put_record_batch("orders", 0, batch(0, 3))
    store.put_record_batch("orders", 0, batch(3, 3))
    unit = store.get_message("", "orders", 0, 0, 1).units[0]
    limit = unit.commitlog_offset + unit.size           # the first batch is closed, the second not
    built = build_segment(store, "orders", 0, 0, max_bytes=10**6, commitlog_limit=limit)
    assert (built.base, built.end, built.commitlog_end) == (0, 3, limit)
    assert build_segment(store, "orders", 0, 0, max_bytes=10**6, commitlog_limit=0) is None
